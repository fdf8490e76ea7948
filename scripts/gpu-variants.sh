#!/usr/bin/env bash
# Times kernel variants side by side in one device call, on the GPU machine from the repository
# root (docs/kernel-notes.md "How kernel variants are compared"):
#
#   scripts/gpu-variants.sh PACK [PACK ...]
#
# PACK comes from scripts/kernel-variants.sh (a tar file, xz or gzip); several packs' variants run
# as one list, in the packs' order. Each round runs `tpgraph bench --no-limits` of every variant in
# that order (ROUNDS rounds, default 2: the variants alternate, so the clocks' drift falls on all of
# them) and prints its wall time; then every variant but the first runs the kernel GPU tests
# (`[kernels]~[full]`, where the pack holds them) and `tpgraph check` unless CHECKS=0. TOKENS
# (default 4096) and BENCH_ARGS go to bench. Logs and bench JSON go to $OUT (default ./out); the
# last lines printed are one row per variant and round: the GEMMs' medians in the chain (steady
# between calls, what ranks close variants), the 3 GEMMs back to back and the chain (both move with
# the clocks); then, per variant and token count, gate + up + down averaged over the rounds, with
# the rounds' range and the ratio to the first variant. Every run is stopped after LIMIT seconds
# (default 150): a variant that hangs costs its own runs, not the device call. VARIANTS ("base c2
# t1") runs only those, in that order (the first is the one the others are held against and the
# checks skip).
set -uo pipefail
[ $# -ge 1 ] || { sed -n '2,19p' "$0" >&2; exit 2; }
OUT=${OUT:-out}
ROUNDS=${ROUNDS:-2}
LIMIT=${LIMIT:-150}
TOKENS=${TOKENS:-4096}
mkdir -p "$OUT"
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
# Each pack into its own folder, then its variants beside the others' (a name two packs hold is
# refused). tar reads xz and gzip alike where xz is installed; Python's tarfile where it is not.
: >"$dir/variants.tsv"
for pack in "$@"; do
  part=$(mktemp -d -p "$dir")
  tar xf "$pack" -C "$part" 2>/dev/null || python3 -c '
import sys, tarfile
with tarfile.open(sys.argv[1]) as pack:
    pack.extractall(sys.argv[2], **({"filter": "data"} if hasattr(tarfile, "data_filter") else {}))' "$pack" "$part" ||
    { echo "gpu-variants: cannot unpack $pack" >&2; exit 2; }
  while IFS=$'\t' read -r name spec; do
    [ -e "$dir/$name" ] && { echo "gpu-variants: two packs hold a variant '$name'" >&2; exit 2; }
    mv "$part/$name" "$dir/$name"
    printf '%s\t%s\n' "$name" "$spec" >>"$dir/variants.tsv"
  done <"$part/variants.tsv"
done
mapfile -t names < <(cut -f1 "$dir/variants.tsv")
if [ -n "${VARIANTS:-}" ]; then
  read -r -a picked <<<"$VARIANTS"
  for name in "${picked[@]}"; do
    [ -x "$dir/$name/tpgraph" ] || { echo "gpu-variants: no variant '$name' in $* (they hold: ${names[*]})" >&2; exit 2; }
  done
  names=("${picked[@]}")
fi
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,temperature.gpu,power.draw --format=csv,noheader
rc=0
for round in $(seq 1 "$ROUNDS"); do
  for name in "${names[@]}"; do
    start=$SECONDS
    # shellcheck disable=SC2086
    timeout -k 10 "$LIMIT" "$dir/$name/tpgraph" bench --no-limits --tokens "$TOKENS" --json "$OUT/bench-$name-$round.json" ${BENCH_ARGS:-} \
      >"$OUT/bench-$name-$round.log" 2>&1 || { r=$?; echo "gpu-variants: bench of $name failed (rc $r$([ $r -eq 124 ] || [ $r -eq 137 ] && echo ": stopped after $LIMIT s"))"; tail -n 3 "$OUT/bench-$name-$round.log"; rc=1; }
    echo "$name round $round: $((SECONDS - start)) s"
  done
done
if [ "${CHECKS:-1}" != 0 ]; then
  for name in "${names[@]:1}"; do
    if [ -x "$dir/$name/tpgraph_gpu_tests" ]; then
      timeout -k 10 "$LIMIT" "$dir/$name/tpgraph_gpu_tests" "[kernels]~[full]" >"$OUT/tests-$name.log" 2>&1
      t=$?
    else
      echo "not in the pack (BINARIES=tpgraph)" >"$OUT/tests-$name.log"
      t=1
    fi
    timeout -k 10 "$LIMIT" "$dir/$name/tpgraph" check >"$OUT/check-$name.log" 2>&1
    c=$?
    echo "$name: kernel tests rc=$t ($(tail -n 2 "$OUT/tests-$name.log" | tr -s ' \n' ' ')), check rc=$c ($(grep -m1 -E 'PASS|FAIL' "$OUT/check-$name.log"))"
    [ $t -eq 0 ] && [ $c -eq 0 ] || rc=1
  done
fi
echo "---- gpu-variants: medians in us (bench --no-limits, --tokens $TOKENS; gate, up, down in the chain) ----"
python3 - "$OUT" "$ROUNDS" "${names[@]}" <<'EOF'
import json, sys
out, rounds, names = sys.argv[1], int(sys.argv[2]), sys.argv[3:]
print(f"{'variant':<12} {'round':>5} {'t':>5} {'gate':>8} {'up':>8} {'down':>8} {'3 GEMMs':>9} {'chain':>9}")
sums = {}  # (name, t) -> gate + up + down in the chain, one per round
for name in names:
    for r in range(1, rounds + 1):
        try:
            runs = json.load(open(f"{out}/bench-{name}-{r}.json"))["results"]
        except (OSError, ValueError, KeyError):
            print(f"{name:<12} {r:>5} (no result)")
            continue
        for run in runs:
            k = {step["kernel"]: step["median_us"] for step in run["kernels"]}
            print(f"{name:<12} {r:>5} {run['tokens']:>5} {k['gate']:>8.1f} {k['up']:>8.1f} {k['down']:>8.1f} "
                  f"{run['gemms_us']:>9.1f} {run['chain_us']:>9.1f}")
            sums.setdefault((name, run["tokens"]), []).append(k["gate"] + k["up"] + k["down"])
# Against the first variant: the mean over rounds of gate + up + down in the chain, and the range
# of the rounds (a difference inside the rounds' spread ranks nothing).
tokens = sorted({t for _, t in sums})
base = names[0]
print(f"---- gate + up + down in the chain, mean of the rounds (min-max), against {base} ----")
for name in names:
    cells = []
    for t in tokens:
        v = sums.get((name, t))
        b = sums.get((base, t))
        if not v:
            cells.append(f"t={t}: -")
            continue
        mean = sum(v) / len(v)
        ratio = f" {mean / (sum(b) / len(b)):.3f}x" if b else ""
        cells.append(f"t={t}: {mean:.1f} ({min(v):.1f}-{max(v):.1f}){ratio}")
    print(f"{name:<12} " + "   ".join(cells))
EOF
exit $rc

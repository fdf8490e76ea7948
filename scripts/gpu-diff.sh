#!/usr/bin/env bash
# The GPU acceptance of `tpgraph diff` (docs/diff.md), in one command from the repository root, with
# binaries built elsewhere (B, default build-ci). PAIRS pairs (default 20) of each program, the same
# build run twice:
#   - `tpgraph run baseline --replays 200`: false alarms (a pair whose diff flags any figure);
#   - the C++ example under `tpgraph trace`: false alarms, then detection with spin_b 3% slower in B
#     (`--slower b=3`): flagged, and the first change listed;
#   - the PyTorch two-stream graph under `tpgraph trace` (when torch imports): false alarms;
#   - `run baseline` against `run root-busy`: the root's trunk nodes named new, r1's waits' causes.
# Prints a summary; logs and every diff's JSON go under $OUT. Arguments pick parts (default all of
# them), so that each device call fits its limit: run, example, torch, causes, gate.
set -uo pipefail
parts=${*:-run example torch causes gate}
want() { [[ " $parts " == *" $1 "* ]]; }
OUT=${OUT:-out}
B=${B:-build-ci}
W=${WORK:-/tmp/tpgraph-diff}
PAIRS=${PAIRS:-20}
REPLAYS=${REPLAYS:-200}
mkdir -p "$OUT" "$W"
rm -rf "${W:?}"/*
log() { echo "== $*" | tee -a "$OUT/summary.log"; }
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm --format=csv,noheader | tee "$OUT/summary.log"

# changes FILE [node]: the changes in a diff's JSON (with `node`: of node figures only, not spans or
# the launch cost); first FILE: the first change's subject and figure.
changes() {
  python3 -c 'import json,sys
d = json.load(open(sys.argv[1]))
node = {"duration", "wait", "contention", "idle", "arrival"}
print(sum(1 for f in d["figures"] if f["change"] and (len(sys.argv) < 3 or f["figure"] in node)))' "$@"
}
first() {
  python3 -c 'import json,sys
d = json.load(open(sys.argv[1]))
c = [f for f in d["figures"] if f["change"]]
print(c[0]["subject"] + " " + c[0]["figure"] if c else "-")' "$1"
}

# pair NAME CMD_A CMD_B: runs both (each writes its folder: $W/NAME-i-a, -b), diffs them.
pair() {
  local name=$1 i=$2 a=$3 b=$4
  eval "$a" >"$W/$name-$i-a.log" 2>&1 || echo "$name $i: A failed ($?)" | tee -a "$OUT/summary.log"
  eval "$b" >"$W/$name-$i-b.log" 2>&1 || echo "$name $i: B failed ($?)" | tee -a "$OUT/summary.log"
  "$B/tpgraph" diff "$W/$name-$i-a" "$W/$name-$i-b" --json "$OUT/$name-$i.json" >"$OUT/$name-$i.txt" 2>&1
  head -n 1 "$OUT/$name-$i.txt" >>"$OUT/comparability.log"
}

false_alarms() {
  local name=$1 nodes=0 any=0 i
  for i in $(seq 1 "$PAIRS"); do
    [[ $(changes "$OUT/$name-$i.json" node 2>/dev/null || echo 1) != 0 ]] && nodes=$((nodes + 1))
    [[ $(changes "$OUT/$name-$i.json" 2>/dev/null || echo 1) != 0 ]] && any=$((any + 1))
  done
  echo "$name: $nodes of $PAIRS pairs flag a node (accepted: at most 1); $any flag any figure (spans, launch too)" |
    tee -a "$OUT/summary.log"
}

if want run; then
log "tpgraph run baseline, $PAIRS pairs"
for i in $(seq 1 "$PAIRS"); do
  pair run "$i" "'$B/tpgraph' run baseline --replays $REPLAYS --out '$W/run-$i-a'" \
    "'$B/tpgraph' run baseline --replays $REPLAYS --out '$W/run-$i-b'"
done
false_alarms run
fi

example() { echo "'$B/tpgraph' trace --out '$W/$1' -- '$B/tpgraph-example-graph' --replays $REPLAYS --kernel-us 100 $2"; }
if want example; then
log "C++ example under trace, $PAIRS pairs, then spin_b 3% slower in B"
for i in $(seq 1 "$PAIRS"); do
  pair example "$i" "$(example "example-$i-a" "")" "$(example "example-$i-b" "")"
  pair slower "$i" "$(example "slower-$i-a" "")" "$(example "slower-$i-b" "--slower b=3")"
done
false_alarms example
detected=0
on_top=0
for i in $(seq 1 "$PAIRS"); do
  python3 -c 'import json,sys
d = json.load(open(sys.argv[1]))
sys.exit(0 if any(f["change"] and "spin_b" in f["subject"] and f["figure"] == "duration" and f["shift_us"] > 0
                  for f in d["figures"]) else 1)' "$OUT/slower-$i.json" 2>/dev/null && detected=$((detected + 1))
  [[ $(first "$OUT/slower-$i.json" 2>/dev/null) == *spin_b*duration ]] && on_top=$((on_top + 1))
done
echo "example, spin_b +3%: flagged in $detected of $PAIRS pairs, first line in $on_top (accepted: 19 each)" |
  tee -a "$OUT/summary.log"
fi

if ! want torch; then
  :
elif python3 -c 'import torch' 2>/dev/null; then
  log "PyTorch two-stream graph under trace, $PAIRS pairs"
  for i in $(seq 1 "$PAIRS"); do
    pair torch "$i" "'$B/tpgraph' trace --out '$W/torch-$i-a' -- python3 examples/torch_two_stream.py --replays $REPLAYS" \
      "'$B/tpgraph' trace --out '$W/torch-$i-b' -- python3 examples/torch_two_stream.py --replays $REPLAYS"
  done
  false_alarms torch
else
  log "PyTorch not importable: its pairs are not run"
fi

if want causes; then
log "run baseline vs run root-busy: new trunk nodes, r1's waits' causes"
"$B/tpgraph" run baseline --replays "$REPLAYS" --out "$W/causes-a" >"$W/causes-a.log" 2>&1
"$B/tpgraph" run root-busy --replays "$REPLAYS" --out "$W/causes-b" >"$W/causes-b.log" 2>&1
"$B/tpgraph" diff "$W/causes-a" "$W/causes-b" --md "$OUT/causes.md" >"$OUT/causes.txt" 2>&1
grep -E "node added|wait:|critical path" "$OUT/causes.txt" | tee -a "$OUT/summary.log"
fi

want gate && log "gate of the first pair of each program (expected: 0 or 6 when not steady; never 5)"
for name in run example; do
  if ! want gate || [ ! -d "$W/$name-1-a" ]; then continue; fi
  "$B/tpgraph" gate "$W/$name-1-a" "$W/$name-1-b" >"$OUT/gate-$name.txt" 2>&1
  echo "gate $name: exit $? · $(tail -n 1 "$OUT/gate-$name.txt")" | tee -a "$OUT/summary.log"
done
sort "$OUT/comparability.log" | uniq -c | sort -rn | head -n 5 | tee -a "$OUT/summary.log"

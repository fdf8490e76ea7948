#!/usr/bin/env bash
# Builds kernel variants on the CPU machine for one device call that times them side by side
# (scripts/gpu-variants.sh, docs/kernel-notes.md "How kernel variants are compared").
#
#   scripts/kernel-variants.sh PACK NAME=SPEC [NAME=SPEC ...]
#
# SPEC is either
#   "-DNAME=VALUE ..."  this tree's kernel sources (src/kernels/*.cu) compiled again with these
#                       defines added; every other object is BUILD's, and tpgraph and
#                       tpgraph_gpu_tests are linked again against the new kernel library;
#   "@DIR"              DIR/tpgraph and DIR/tests/tpgraph_gpu_tests as they are (a build of the code
#                       before the change, say; an empty SPEC means "@BUILD").
# BUILD (default build-ci) is a built Ninja tree of this checkout. The binaries are stripped and
# packed into PACK (a tar file, xz-compressed) with a list of the variants in their order; the
# device call carries PACK (its carry limit is 64 MiB). BINARIES=tpgraph packs only the benchmark
# binary, for a timing call with CHECKS=0 (BINARIES=all, the default, adds tpgraph_gpu_tests).
# SPILLS=ok lets a variant whose kernels spill registers build (the spills are listed).
# Then, where cuobjdump is at hand, it prints each GEMM kernel's instructions per MMA in its main
# loops, variant by variant (scripts/sass_loops.py).
set -euo pipefail
cd "$(dirname "$0")/.."
[ $# -ge 2 ] || { sed -n '2,19p' "$0" >&2; exit 2; }
pack=$1
shift
build=$(cd "${BUILD:-build-ci}" && pwd)
[ -f "$build/build.ninja" ] || { echo "kernel-variants: $build is not a Ninja build tree (BUILD)" >&2; exit 2; }
case "${BINARIES:-all}" in
  all) targets=(tpgraph tests/tpgraph_gpu_tests) ;;
  tpgraph) targets=(tpgraph) ;;
  *) echo "kernel-variants: BINARIES is 'all' or 'tpgraph', not '$BINARIES'" >&2; exit 2 ;;
esac
command -v xz >/dev/null || { echo "kernel-variants: xz is missing (apt-get install xz-utils)" >&2; exit 2; }
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
mkdir -p "$work/pack"

# The commands Ninja would run, from the build tree (paths in them are relative to it).
commands() { (cd "$build" && ninja -t commands "$1"); }
link_command() { commands "$1" | tail -n 1 | sed 's/^: && //; s/ && :$//'; }

names=()
for arg in "$@"; do
  name=${arg%%=*}
  spec=${arg#*=}
  [[ "$name" =~ ^[A-Za-z0-9_.-]+$ && "$arg" == *=* ]] || { echo "kernel-variants: '$arg' is not NAME=SPEC" >&2; exit 2; }
  out="$work/pack/$name"
  [ ! -e "$out" ] || { echo "kernel-variants: variant $name is named twice" >&2; exit 2; }
  mkdir -p "$out"
  if [ -z "$spec" ] || [[ "$spec" == @* ]]; then
    dir=${spec#@}
    dir=${dir:-$build}
    for bin in "${targets[@]}"; do
      [ -x "$dir/$bin" ] || { echo "kernel-variants: $dir/$bin is missing" >&2; exit 2; }
      strip -o "$out/$(basename "$bin")" "$dir/$bin"
    done
  else
    objs="$work/obj-$name"
    mkdir -p "$objs"
    cp "$build/libtpgraph_kernels.a" "$objs/libtpgraph_kernels.a"
    # Every CUDA object of the kernel library, compiled again with the defines (in parallel).
    pids=()
    while IFS= read -r cmd; do
      obj=$(sed -E 's/.* -o ([^ ]+\.cu\.o)( .*|$)/\1/' <<<"$cmd")
      cmd=$(sed -E "s# -MD -MT [^ ]+ -MF [^ ]+##; s# -o [^ ]+\.cu\.o( |$)# -o $objs/$(basename "$obj")\1#" <<<"$cmd")
      [[ "$cmd" == *" -o $objs/"* ]] || { echo "kernel-variants: cannot place the object of: $cmd" >&2; exit 1; }
      cmd=${cmd/ -x cu / $spec -x cu }
      [[ "$cmd" == *" $spec -x cu "* ]] || { echo "kernel-variants: cannot add the defines to: $cmd" >&2; exit 1; }
      # SPILLS=ok: a spill is reported, not an error (to time a variant before making it spill-free).
      [ "${SPILLS:-}" != ok ] || cmd=${cmd// -Werror=all-warnings / }
      (cd "$build" && eval "$cmd" >"$objs/$(basename "$obj").log" 2>&1) &
      pids+=($!)
    done < <(commands libtpgraph_kernels.a | grep -E -- ' -c [^ ]+/src/kernels/[^ ]+\.cu ')
    for pid in "${pids[@]}"; do
      wait "$pid" || { cat "$objs"/*.log >&2; echo "kernel-variants: $name does not compile" >&2; exit 1; }
    done
    (cd "$objs" && ar r libtpgraph_kernels.a ./*.cu.o 2>/dev/null)
    # ptxas's spill warnings, one line per kernel.
    grep -ho "function '[^']*', [0-9]* bytes spill stores, [0-9]* bytes spill loads" "$objs"/*.log |
      sed -E "s/function '_Z[^']*(grouped_gemm_[a-z]+_kernel)I(L[^E]*E)(L[^E]*E)(L[^E]*E)?[^']*'/\1<\2\3\4>/" |
      sed -E 's/Lb0E/v1,/; s/Lb1E/v2,/; s/Li([0-9]+)E/\1,/g; s/,>/>/; s/^/  '"$name"': /' || true
    for target in "${targets[@]}"; do
      cmd=$(link_command "$target")
      cmd=${cmd// libtpgraph_kernels.a / $objs/libtpgraph_kernels.a }
      cmd=${cmd/ -o $target / -o $objs/$(basename "$target") }
      # Without both substitutions the "variant" would silently be BUILD's own binary.
      [[ "$cmd" == *" $objs/libtpgraph_kernels.a "* && "$cmd" == *" -o $objs/"* ]] ||
        { echo "kernel-variants: cannot relink $target against the variant's kernels" >&2; exit 1; }
      (cd "$build" && eval "$cmd")
      strip -o "$out/$(basename "$target")" "$objs/$(basename "$target")"
    done
  fi
  names+=("$name")
  printf '%s\t%s\n' "$name" "${spec:-@$build}" >>"$work/pack/variants.tsv"
done
mkdir -p "$(dirname "$pack")"
XZ_OPT="-9 -T0" tar cJf "$pack" -C "$work/pack" .
echo "kernel-variants: ${names[*]} -> $pack ($(du -h "$pack" | cut -f1))"
# The GEMM kernels' instructions per MMA, side by side (scripts/sass_loops.py), where cuobjdump is
# at hand; SASS=0 skips it.
if [ "${SASS:-1}" != 0 ]; then
  columns=()
  for name in "${names[@]}"; do columns+=("$name=$work/pack/$name/tpgraph"); done
  ./scripts/sass_loops.py "${columns[@]}" || echo "kernel-variants: no instruction counts (SASS=0 skips them)"
fi

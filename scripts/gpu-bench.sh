#!/usr/bin/env bash
# bench's honest floors on the GPU machine, in one command from the repository root: build there
# (cmake + ninja, sm_90a), the limit kernels' GPU tests and compute-sanitizer (memcheck, racecheck)
# on them, then `tpgraph bench --tokens 43,416,4096` with its JSON. Everything to $OUT (default
# ./out): build.log, limits-tests.log, sanitize.log, bench.log, bench.json, gpu.txt; the last
# lines printed are a summary.
#   BUILD       build folder (default /tmp/tpgraph-bench-build)
#   BENCH_ARGS  extra bench options (e.g. --all-tiles, --layout v1)
set -uo pipefail
OUT=${OUT:-out}
B=${BUILD:-/tmp/tpgraph-bench-build}
mkdir -p "$OUT"
summary=()
note() { summary+=("$(printf '%-9s %s' "$1" "$2")"); }
t0=$(date +%s)

nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,clocks.mem,temperature.gpu,power.draw \
  --format=csv >"$OUT/gpu.txt" 2>&1
cat "$OUT/gpu.txt"

cmake -S . -B "$B" -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_CUDA_ARCHITECTURES=90a >"$OUT/build.log" 2>&1 &&
  cmake --build "$B" -j"$(nproc)" >>"$OUT/build.log" 2>&1
rc=$?
grep -E "spill|error" "$OUT/build.log" | sed 's/_ZN[^ ]*grouped_gemm_\([a-z]*\)_kernel/grouped_gemm_\1_kernel/' | head -n 20
note build "rc=$rc $(( $(date +%s) - t0 ))s"
if [ $rc -ne 0 ]; then
  tail -n 40 "$OUT/build.log"
  printf '%s\n' "${summary[@]}"
  exit 1
fi

start=$(date +%s)
"$B/tests/tpgraph_gpu_tests" "[limits]" --durations yes >"$OUT/limits-tests.log" 2>&1
rc=$?; tail -n 3 "$OUT/limits-tests.log"
note tests "rc=$rc $(( $(date +%s) - start ))s"

start=$(date +%s)
{
  compute-sanitizer --tool memcheck --error-exitcode 9 "$B/tests/tpgraph_gpu_tests" "[limits]"
  m=$?
  compute-sanitizer --tool racecheck --error-exitcode 9 "$B/tests/tpgraph_gpu_tests" "[limits]"
  r=$?
  echo "memcheck rc=$m racecheck rc=$r"
  [ $m -eq 0 ] && [ $r -eq 0 ]
} >"$OUT/sanitize.log" 2>&1
rc=$?; grep -E "ERROR SUMMARY|RACECHECK SUMMARY|rc=" "$OUT/sanitize.log" | tail -n 6
note sanitize "rc=$rc $(( $(date +%s) - start ))s"

start=$(date +%s)
# shellcheck disable=SC2086
"$B/tpgraph" bench --tokens 43,416,4096 --json "$OUT/bench.json" ${BENCH_ARGS:-} >"$OUT/bench.log" 2>&1
rc=$?; cat "$OUT/bench.log"
note bench "rc=$rc $(( $(date +%s) - start ))s"

echo "---- gpu-bench summary ($(git rev-parse --short=12 HEAD 2>/dev/null || echo unknown), $(date -u +%FT%TZ)) ----"
printf '%s\n' "${summary[@]}"

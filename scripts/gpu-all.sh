#!/usr/bin/env bash
# Everything a GPU machine checks, in one command, in priority order: build there (Catch2 v3 on
# Ubuntu 24.04), a recorded run of every variant, the GPU tests, check, bench, ncu kernel durations
# against CUPTI's (one rank, so no sharing inflates either), sanitizers. Logs and results to $OUT.
set -uo pipefail
OUT=${OUT:-out}
B=${BUILD:-/tmp/tpgraph-build}
REPLAYS=${REPLAYS:-20}
mkdir -p "$OUT"
export NCCL_NVLS_ENABLE=0
t0=$(date +%s)
stamp() { echo "== $1 ($(( $(date +%s) - t0 ))s)"; }
if ! { cmake -S . -B "$B" -G Ninja -DCMAKE_CUDA_ARCHITECTURES=90a >"$OUT/build.log" 2>&1 &&
  cmake --build "$B" -j"$(nproc)" >>"$OUT/build.log" 2>&1; }; then
  tail -40 "$OUT/build.log"
  exit 1
fi
stamp built
"$B/tpgraph" info >"$OUT/info.log" 2>&1; cat "$OUT/info.log"
"$B/tpgraph" run --replays "$REPLAYS" --warmup 3 --out /tmp/h200-run >"$OUT/run.log" 2>&1
echo "run rc=$?"; tail -n 40 "$OUT/run.log"
tar czf "$OUT/h200-run.tgz" -C /tmp h200-run
stamp run
"$B/tests/tpgraph_gpu_tests" --durations yes >"$OUT/gpu-tests.log" 2>&1
echo "gpu tests rc=$?"; grep -E "passed|failed|FAILED" "$OUT/gpu-tests.log" | tail -n 6
stamp tests
BUILD="$B" OUT="$OUT" scripts/gpu-kernels.sh check bench
stamp kernels
"$B/tpgraph" run baseline --ranks 1 --replays 5 --warmup 1 --out /tmp/ncu-ref >"$OUT/ncu-ref.log" 2>&1
cp /tmp/ncu-ref/records.json "$OUT/ncu-ref-records.json"
ncu --clock-control none --metrics gpu__time_duration.sum --csv "$B/tpgraph" run baseline --ranks 1 \
  --replays 5 --warmup 1 --no-trace --out /tmp/ncu-run >"$OUT/ncu.csv" 2>"$OUT/ncu.err"
echo "ncu rc=$? lines=$(wc -l <"$OUT/ncu.csv")"
stamp ncu
BUILD="$B" OUT="$OUT" scripts/gpu-kernels.sh sanitize
stamp finished

#!/usr/bin/env bash
# `tpgraph trace` on the GPU machine, in one command from the repository root, with binaries built
# elsewhere (B, default build-ci): the CUPTI, capture and trace GPU tests; tpgraph's own layer traced
# from the outside next to its own collection (fidelity); the C++ and PyTorch examples traced and
# untraced (overhead); torch.profiler's per-kernel medians of the same PyTorch graph. Results under
# $OUT: logs, and trace-results.tgz with every trace folder's report and record files.
set -uo pipefail
OUT=${OUT:-out}
# B may be relative to the repository root or absolute; from here on it is absolute.
build=${B:-build-ci}
B=$(cd "$build" 2>/dev/null && pwd) || { echo "$(basename "$0"): no build folder $build (B)" >&2; exit 2; }
W=${WORK:-/tmp/tpgraph-trace}
mkdir -p "$OUT" "$W"
rm -rf "${W:?}"/*
export NCCL_NVLS_ENABLE=0
log() { echo "== $*" | tee -a "$OUT/summary.log"; }
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee "$OUT/summary.log"

log "gpu tests [cupti],[capture],[trace]"
"$B/tests/tpgraph_gpu_tests" "[cupti],[capture],[trace]" >"$OUT/gpu-tests.log" 2>&1
echo "rc=$?: $(tail -n 2 "$OUT/gpu-tests.log" | tr '\n' ' ')" | tee -a "$OUT/summary.log"

R=${REPLAYS:-200}
log "tpgraph run baseline (own CUPTI collection) and the same traced from the outside (--no-trace inside)"
"$B/tpgraph" run baseline --replays "$R" --out "$W/own" >"$W/own.log" 2>&1; echo "own rc=$?" | tee -a "$OUT/summary.log"
"$B/tpgraph" trace --out "$W/tr-run" -- "$B/tpgraph" run baseline --no-trace --replays "$R" --out "$W/inner" \
  >"$W/tr-run.log" 2>&1; echo "traced run rc=$?" | tee -a "$OUT/summary.log"

log "C++ example: untraced, traced (overhead), 20 us and 1 us kernels"
for us in 20 1; do
  for i in 1 2 3; do
    "$B/tpgraph-example-graph" --replays 2000 --kernel-us "$us" 2>&1 | sed "s/^/plain  /" | tee -a "$OUT/summary.log"
    TPGRAPH_TRACE_DIR="$W/ovh-$us-$i" CUDA_INJECTION64_PATH="$B/libtpgraph_inject.so" \
      "$B/tpgraph-example-graph" --replays 2000 --kernel-us "$us" 2>&1 | sed "s/^/traced /" | tee -a "$OUT/summary.log"
  done
done
"$B/tpgraph" trace --out "$W/tr-ex" -- "$B/tpgraph-example-graph" --replays 500 >"$W/tr-ex.log" 2>&1
echo "example trace rc=$?" | tee -a "$OUT/summary.log"

log "PyTorch: two-stream graph untraced / traced, two processes, torch.profiler medians"
for i in 1 2 3; do
  python3 examples/torch_two_stream.py --replays 500 2>&1 | sed "s/^/plain  /" | tee -a "$OUT/summary.log"
  TPGRAPH_TRACE_DIR="$W/tovh-$i" CUDA_INJECTION64_PATH="$B/libtpgraph_inject.so" \
    python3 examples/torch_two_stream.py --replays 500 2>&1 | sed "s/^/traced /" | tee -a "$OUT/summary.log"
done
"$B/tpgraph" trace --out "$W/tr-torch" -- python3 examples/torch_two_stream.py --replays 200 >"$W/tr-torch.log" 2>&1
echo "torch trace rc=$?" | tee -a "$OUT/summary.log"
"$B/tpgraph" trace --out "$W/tr-2p" -- python3 examples/torch_two_procs.py --replays 200 >"$W/tr-2p.log" 2>&1
echo "two-process trace rc=$?" | tee -a "$OUT/summary.log"
python3 scripts/torch_profiler_kernels.py 200 >"$W/torch-profiler.json" 2>"$W/torch-profiler.err"
echo "torch.profiler rc=$?" | tee -a "$OUT/summary.log"
torchrun --nproc-per-node 1 examples/torch_allreduce_graph.py --replays 50 >/dev/null 2>&1 &&
  "$B/tpgraph" trace --out "$W/tr-nccl" -- torchrun --nproc-per-node 1 examples/torch_allreduce_graph.py --replays 50 \
    >"$W/tr-nccl.log" 2>&1
echo "torchrun trace rc=$?" | tee -a "$OUT/summary.log"
for d in "$W"/tr-*; do tail -n 25 "$d.log" >>"$OUT/trace-tails.log" 2>/dev/null; done
rm -rf "$W"/ovh-* "$W"/tovh-* "$W"/inner
tar -C "$W" -czf "$OUT/trace-results.tgz" . 2>/dev/null
ls -la "$OUT"

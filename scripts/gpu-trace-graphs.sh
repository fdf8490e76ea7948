#!/usr/bin/env bash
# Every graph a real program builds, traced on the GPU machine in one command from the repository
# root with binaries built elsewhere (B, default build-ci): the node-by-node C++ example (while, if,
# child graph, programmatic edge, exec update), a graph launched from the device, a JAX step with a fori_loop and a cond in XLA's
# command buffers, torch.compile reduce-overhead, CuPy capture and the older examples; two
# independent processes on one GPU; a traced program killed by SIGKILL 1 s and 5 s into a replay
# loop, under each flush setting; a program that starts torch.profiler itself; and the overhead of
# tracing (plain against traced, alternating). Results under $OUT: summary.log, and
# trace-graphs.txz with every trace folder (record files and reports; analyze them again anywhere).
# Parts, named as arguments (default all of them), so that each call fits a device call's limit:
# programs (device: the device-launched graph alone), tools (run, check, bench), kill (SIGKILL and
# SIGTERM; term: SIGTERM alone), overhead, tests (the whole GPU test binary), cost (the cost lines of
# a trace's report).
set -uo pipefail
parts=${*:-programs tools kill overhead tests cost}
want() { [[ " $parts " == *" $1 "* ]]; }
OUT=${OUT:-out}
# B may be relative to the repository root or absolute; from here on it is absolute.
build=${B:-build-ci}
B=$(cd "$build" 2>/dev/null && pwd) || { echo "$(basename "$0"): no build folder $build (B)" >&2; exit 2; }
W=${WORK:-/tmp/tpgraph-graphs}
INJECT="$B/libtpgraph_inject.so"
# The GPU tests name the examples and the injection library by the paths they were built at: where
# the binaries were built in another checkout, make those paths lead here.
built_at=$(strings "$B/tests/tpgraph_gpu_tests" 2>/dev/null | grep -m1 -o '/[^ ]*/tpgraph-example-graph' || true)
if [ -n "$built_at" ] && [ ! -e "$built_at" ]; then
  mkdir -p "$(dirname "$(dirname "$built_at")")"
  ln -sfn "$B" "$(dirname "$built_at")"
  [ -e "$(dirname "$(dirname "$built_at")")/examples" ] || ln -sfn "$PWD/examples" "$(dirname "$(dirname "$built_at")")/examples"
fi
# ... and where a folder of that name is already there (a build made on the GPU machine), the GPU tests
# take the binaries from these instead.
export TPGRAPH_INJECT_LIBRARY="$INJECT" TPGRAPH_EXAMPLE_GRAPH="$B/tpgraph-example-graph" \
  TPGRAPH_EXAMPLE_SHAPES="$B/tpgraph-example-shapes" \
  TPGRAPH_EXAMPLE_DEVICE_LAUNCH="$B/tpgraph-example-device-launch"
mkdir -p "$OUT" "$W"
rm -rf "${W:?}"/*
export NCCL_NVLS_ENABLE=0
log() { echo "== $*" | tee -a "$OUT/summary.log"; }
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee -a "$OUT/summary.log"
traced() {  # traced DIR CMD...: CMD under the injection library alone, recording into DIR
  local dir=$1
  shift
  TPGRAPH_TRACE_DIR="$dir" CUDA_INJECTION64_PATH="$INJECT" "$@"
}
trace() {  # trace NAME CMD...: tpgraph trace into $W/NAME, its tail into the summary
  local name=$1
  shift
  timeout 150 "$B/tpgraph" trace --out "$W/$name" -- "$@" >"$W/$name.log" 2>&1
  echo "$name rc=$?: $(head -n 3 "$W/$name.log" | tr '\n' ' ' | cut -c1-300)" | tee -a "$OUT/summary.log"
}

if want programs || want device; then
log "a graph launched from the device: what CUPTI gives, raw, then the report"
for mode in fire tail; do  # a graph launched from the device: what CUPTI gives, raw, then the report
  trace "device-$mode" "$B/tpgraph-example-device-launch" --replays 100 --mode "$mode"
  python3 scripts/dump_records.py "$W/device-$mode" 6 2>&1 | tee -a "$OUT/summary.log" | tail -n 20
done
fi

if want programs; then
log "programs"
trace shapes "$B/tpgraph-example-shapes" --replays 200 --iterations 3
trace shapes-noupdate "$B/tpgraph-example-shapes" --replays 200 --iterations 5 --no-update
trace unreadable env TPGRAPH_INJECT_TEST_UNREADABLE=all "$B/tpgraph-example-graph" --replays 100
trace example "$B/tpgraph-example-graph" --replays 500
trace limit env TPGRAPH_MAX_FILE_BYTES=2000000 "$B/tpgraph-example-graph" --replays 50000 --kernel-us 2
trace jax python3 examples/jax_loop_cond.py --steps 100
trace jax-default env XLA_FLAGS= python3 examples/jax_loop_cond.py --steps 100
trace compile python3 examples/torch_compile_step.py --steps 300
trace cupy python3 examples/cupy_capture.py --replays 300
trace torch python3 examples/torch_two_stream.py --replays 200
trace two-torch python3 examples/torch_two_procs.py --replays 200
trace two-cpp sh -c "$B/tpgraph-example-graph --replays 300 & $B/tpgraph-example-graph --replays 200 --kernel-us 5; wait"
trace nccl torchrun --nproc-per-node 1 examples/torch_allreduce_graph.py --replays 50
trace profiler python3 scripts/torch_profiler_kernels.py 50
trace profiler-yield env TPGRAPH_YIELD_TO_PROFILER=1 python3 scripts/torch_profiler_kernels.py 50
fi

if want tools; then
log "run, check and bench still work (their code moved)"
timeout 120 "$B/tpgraph" run baseline --replays 50 --out "$W/run" 2>&1 | head -n 14 | tee -a "$OUT/summary.log"
timeout 120 "$B/tpgraph" check --tokens 43 2>&1 | tail -n 4 | tee -a "$OUT/summary.log"
timeout 150 "$B/tpgraph" bench --tokens 43,4096 --replays 20 --json "$OUT/bench.json" 2>&1 | tee -a "$OUT/summary.log"
fi

if want kill; then
log "SIGKILL 1 s and 5 s into a replay loop (kill time on CUPTI's clock, CLOCK_REALTIME)"
for setting in default small forced noflush old; do
  case $setting in
    default) envs=() ;;
    small) envs=(TPGRAPH_INJECT_BUFFER_KB=256) ;;
    forced) envs=(TPGRAPH_INJECT_FLUSH_FORCED=1) ;;
    noflush) envs=(TPGRAPH_INJECT_FLUSH_MS=0) ;;
    old) envs=(TPGRAPH_INJECT_FLUSH_MS=0 TPGRAPH_INJECT_BUFFER_KB=4096) ;;
  esac
  for at in 1 5; do
    dir="$W/kill-$setting-$at"
    env "${envs[@]}" TPGRAPH_TRACE_DIR="$dir" CUDA_INJECTION64_PATH="$INJECT" \
      "$B/tpgraph-example-graph" --replays 2000000 --kernel-us 10 --bytes 65536 >/dev/null 2>&1 &
    pid=$!
    sleep "$at"
    killed=$(date +%s%N)
    kill -9 "$pid"
    wait "$pid" 2>/dev/null
    echo "kill $setting at ${at}s: $(python3 scripts/kill_coverage.py "$dir" "$killed")" | tee -a "$OUT/summary.log"
    rm -rf "$dir"
  done
done
fi
if want kill || want term; then
for at in 1 5; do  # SIGTERM (no handler in the program): the signal flush
  dir="$W/term-$at"
  # env execs the program, so $! is the program itself (a function run in the background would be a
  # subshell: the signal would end the subshell and leave the program running).
  env TPGRAPH_TRACE_DIR="$dir" CUDA_INJECTION64_PATH="$INJECT" \
    "$B/tpgraph-example-graph" --replays 2000000 --kernel-us 10 --bytes 65536 >/dev/null 2>&1 &
  pid=$!
  sleep "$at"
  killed=$(date +%s%N)
  kill -TERM "$pid"
  wait "$pid" 2>/dev/null
  echo "SIGTERM at ${at}s: $(python3 scripts/kill_coverage.py "$dir" "$killed")" | tee -a "$OUT/summary.log"
  "$B/tpgraph" analyze "$dir" --out "$dir-report" 2>&1 | head -n 3 | tee -a "$OUT/summary.log"
  pgrep -f "tpgraph-example-graph --replays 2000000" >/dev/null && echo "SIGTERM at ${at}s: the program still runs" |
    tee -a "$OUT/summary.log"
  rm -rf "$dir"
done
fi

if want overhead; then
log "overhead: plain / traced (default flush) / traced without the flush thread, alternating"
for us in 20 1; do
  for i in 1 2 3; do
    "$B/tpgraph-example-graph" --replays 3000 --kernel-us "$us" 2>&1 | sed "s/^/plain   $us /" | tee -a "$OUT/summary.log"
    traced "$W/ovh-$us-$i" "$B/tpgraph-example-graph" --replays 3000 --kernel-us "$us" 2>&1 |
      sed "s/^/traced  $us /" | tee -a "$OUT/summary.log"
    TPGRAPH_INJECT_FLUSH_MS=0 traced "$W/ovhn-$us-$i" "$B/tpgraph-example-graph" --replays 3000 --kernel-us "$us" \
      2>&1 | sed "s/^/noflush $us /" | tee -a "$OUT/summary.log"
    TPGRAPH_INJECT_BUFFER_KB=256 traced "$W/ovhs-$us-$i" "$B/tpgraph-example-graph" --replays 3000 --kernel-us "$us" \
      2>&1 | sed "s/^/small   $us /" | tee -a "$OUT/summary.log"
  done
done
for i in 1 2; do
  python3 examples/torch_two_stream.py --replays 500 2>&1 | sed "s/^/plain   torch /" | tee -a "$OUT/summary.log"
  traced "$W/tovh-$i" python3 examples/torch_two_stream.py --replays 500 2>&1 | sed "s/^/traced  torch /" |
    tee -a "$OUT/summary.log"
  python3 examples/torch_compile_step.py --steps 300 2>&1 | sed "s/^/plain   compile /" | tee -a "$OUT/summary.log"
  traced "$W/covh-$i" python3 examples/torch_compile_step.py --steps 300 2>&1 | sed "s/^/traced  compile /" |
    tee -a "$OUT/summary.log"
done
rm -rf "$W"/ovh* "$W"/tovh-* "$W"/covh-*
fi

if want tests; then
log "gpu tests, all of them"
"$B/tests/tpgraph_gpu_tests" --durations yes >"$OUT/gpu-tests.log" 2>&1
echo "rc=$?: $(tail -n 3 "$OUT/gpu-tests.log" | tr '\n' ' ')" | tee -a "$OUT/summary.log"
grep -B2 -A8 "FAILED" "$OUT/gpu-tests.log" | head -n 40 | tee -a "$OUT/summary.log"
fi

if want cost; then
log "the cost of tracing in the report (calibrated after the program exits)"
for us in 1 20; do
  trace "cost-$us" "$B/tpgraph-example-graph" --replays 3000 --kernel-us "$us"
  grep -h -i "cost" "$W/cost-$us.log" | head -n 6 | tee -a "$OUT/summary.log"
done
fi

tar -C "$W" -cJf "$OUT/trace-graphs.txz" . 2>/dev/null || tar -C "$W" -czf "$OUT/trace-graphs.tgz" .
ls -la "$OUT"

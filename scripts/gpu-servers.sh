#!/usr/bin/env bash
# Issue 30's acceptance on the GPU machine, in one command from the repository root with binaries
# built elsewhere (B, default build-ci): the server-like example (8 graphs replayed at random) traced
# with a window, sampling, the flight recorder dumped on SIGUSR1, its own cudaProfilerStart/Stop, an
# NVTX range; the overhead outside a window and at --sample 100 (plain against traced, alternating);
# the cost of tracing itemised with TPGRAPH_INJECT_COST on the 1 us and 20 us examples and
# torch.compile; the size limit. RUN_SECONDS (default 60) is how long each server run lasts; the window
# is at 1/3 of it. Results under $OUT: summary.log (step times, report headers, file sizes, costs)
# and servers.tgz with every trace folder. Arguments pick parts (default all): modes (the recording
# modes on the server-like example), nvtx (its --nvtx-range run alone), flight (the flight recorder
# against full tracing, with the reports' cost lines), overhead, cost, analyze. MODES (e.g. "window
# sample flight") runs only those of the modes part: window sample profiler nvtx full-bounded flight.
set -uo pipefail
parts=${*:-modes overhead cost analyze}
want() { [[ " $parts " == *" $1 "* ]]; }
OUT=${OUT:-out}
B=${B:-build-ci}
W=${WORK:-/tmp/tpgraph-servers}
SECONDS_RUN=${RUN_SECONDS:-60}
REPEATS=${REPEATS:-3}
mkdir -p "$OUT" "$W"
rm -rf "${W:?}"/*
log() { echo "== $*" | tee -a "$OUT/summary.log"; }
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee "$OUT/summary.log"
delay=$((SECONDS_RUN / 3))
server=(python3 examples/server_like.py --seconds "$SECONDS_RUN")

# trace NAME [trace flags...] -- CMD...: the report's header and the program's own last line.
trace() {
  local name=$1
  shift
  timeout $((SECONDS_RUN * 3 + 120)) "$B/tpgraph" trace --out "$W/$name" "$@" >"$W/$name.log" 2>&1
  local rc=$?
  {
    echo "-- $name rc=$rc: $(grep -m1 -E 'median step|per replay|per step' "$W/$name.log")"
    sed -n '1,/^$/p' "$W/$name/report.md" 2>/dev/null | head -n 20
    grep -h "traced graph-[0-9]* is" "$W/$name/report.md" 2>/dev/null | head -n 10
    du -b "$W/$name"/procs/*.tpgt 2>/dev/null | awk '{print "file bytes", $1}'
  } | tee -a "$OUT/summary.log"
}

if want flight; then
  # The flight recorder's cost against full tracing: the step, and each report's itemised cost lines
  # (tpgraph's callbacks per launch on the program's thread, record processing on its own).
  log "server-like example: the flight recorder against full tracing"
  "${server[@]}" 2>&1 | tail -n 1 | sed 's/^/untraced: /' | tee -a "$OUT/summary.log"
  trace flight-full -- "${server[@]}"
  trace flight-keep --keep-last 200 -- "${server[@]}"
  # The recorder's launch path without the flight recorder: a window open from the start to the end
  # (every launch recorded and written, as in full tracing, through the same callbacks).
  trace flight-window --duration 100000 -- "${server[@]}"
  # Whether the cost is CUPTI's buffers handed back inside its flush (the flight recorder files each
  # buffer's records in the buffer callback): without the flush thread, and with 8 MB buffers.
  trace flight-noflush --keep-last 200 -- env TPGRAPH_INJECT_FLUSH_MS=0 "${server[@]}"
  trace flight-8mb --keep-last 200 -- env TPGRAPH_INJECT_BUFFER_KB=8192 "${server[@]}"
  # Whether it is the NVTX ring (one step range per step): the flight recorder without NVTX.
  trace flight-nonvtx --keep-last 200 -- env TPGRAPH_INJECT_NVTX=0 "${server[@]}"
  grep -h "tracing cost, pid" "$W"/flight-*/report.md | tee -a "$OUT/summary.log"
fi
if want nvtx && ! want modes; then
  log "server-like example: the --nvtx-range window, graphs named by capture site"
  trace nvtx --nvtx-range step --launches 100 -- "${server[@]}"
fi
if want modes; then
log "server-like example: untraced, then each recording mode"
"${server[@]}" 2>&1 | tail -n 1 | sed 's/^/untraced: /' | tee -a "$OUT/summary.log"
mode() { [ -z "${MODES:-}" ] || [[ " $MODES " == *" $1 "* ]]; }
mode window && trace window --delay "$delay" --duration 5 -- "${server[@]}"
mode sample && trace sample --sample 100 -- "${server[@]}"
mode profiler && trace profiler --profiler-range -- "${server[@]}" --profile-from "$delay" --profile-for 5
mode nvtx && trace nvtx --nvtx-range step --launches 100 -- "${server[@]}"
mode full-bounded && trace full-bounded --max-file-size 64 -- "${server[@]}"
if mode flight; then
  # The flight recorder: SIGUSR1 to the traced Python process half-way, then it runs to its end.
  timeout $((SECONDS_RUN * 3 + 120)) "$B/tpgraph" trace --out "$W/flight" --keep-last 200 --dump-on SIGUSR1 -- \
    "${server[@]}" >"$W/flight.log" 2>&1 &
  tracer=$!
  sleep $((SECONDS_RUN / 2))
  tpgraph_pid=$(pgrep -P "$tracer" | head -n 1)
  pkill -USR1 -P "$tpgraph_pid" python3 || echo "no python3 child of tpgraph to signal" | tee -a "$OUT/summary.log"
  wait "$tracer"
  {
    echo "-- flight rc=$?: $(grep -m1 'median step' "$W/flight.log")"
    sed -n '1,/^$/p' "$W/flight/report.md" | head -n 20
    du -b "$W/flight"/procs/*.tpgt | awk '{print "file bytes", $1}'
  } | tee -a "$OUT/summary.log"
fi
fi

# plain against traced, alternating: the median of each program's own per-replay or per-step figure.
# PIN (a CPU list, e.g. 2-5) runs both under taskset on those CPUs: a host-bound step's time then
# does not change with the cores the scheduler picks. ONLY (names, e.g. "outside-compile") runs
# only those comparisons.
pin=()
[ -n "${PIN:-}" ] && pin=(taskset -c "$PIN")
alternate() {  # alternate NAME "TRACE FLAGS" CMD...
  local name=$1 flags=$2
  shift 2
  [ -z "${ONLY:-}" ] || [[ " $ONLY " == *" $name "* ]] || return 0
  for i in $(seq "$REPEATS"); do
    "${pin[@]}" "$@" 2>&1 | grep -m1 -oE '[0-9.]+ us per (replay|step)' | sed "s/^/$name plain $i: /"
    # shellcheck disable=SC2086 # the flags are words
    "${pin[@]}" "$B/tpgraph" trace --out "$W/$name-$i" $flags -- "$@" 2>&1 |
      grep -m1 -oE '[0-9.]+ us per (replay|step)' | sed "s/^/$name traced($flags) $i: /"
  done | tee -a "$OUT/summary.log"
}
g1=("$B/tpgraph-example-graph" --replays 20000 --kernel-us 1)
g20=("$B/tpgraph-example-graph" --replays 5000 --kernel-us 20)
if want overhead; then
log "overhead outside a window (never opens) and at --sample 100"
alternate outside-1us "--delay 100000" "${g1[@]}"
alternate sample-1us "--sample 100" "${g1[@]}"
alternate full-20us "" "${g20[@]}"
alternate outside-compile "--delay 100000" python3 examples/torch_compile_step.py --steps 3000
alternate sample-compile "--sample 100" python3 examples/torch_compile_step.py --steps 3000
alternate full-compile "" python3 examples/torch_compile_step.py --steps 3000
fi

if want cost; then
log "the cost of tracing, itemised (TPGRAPH_INJECT_COST): per replay; divide by the nodes for per node"
# subscribe: CUPTI subscribed, nothing on; callbacks: tpgraph's callbacks, no activity; activity:
# CUPTI's records, no callback; no-write: all but the file; full. "-driver": graph launches seen at
# the driver's cuGraphLaunch only (TPGRAPH_INJECT_LAUNCH_CALLBACKS=driver), no runtime callback.
# detach: traced in full, then CUPTI detached (cuptiFinalize) at the first launch after 1 ms: what
# the program pays once no subscriber is left. COST_MODES picks some of them.
for mode in ${COST_MODES:-subscribe callbacks callbacks-driver activity no-write full full-driver detach}; do
  cost_env=(env TPGRAPH_INJECT_COST="${mode%-driver}")
  [[ $mode == full* ]] && cost_env=(env)
  [[ $mode == detach ]] && cost_env=(env TPGRAPH_INJECT_DETACH_MS=1)
  [[ $mode == *-driver ]] && cost_env+=(TPGRAPH_INJECT_LAUNCH_CALLBACKS=driver)
  alternate "cost-$mode-1us" "" "${cost_env[@]}" "${g1[@]}"
  alternate "cost-$mode-compile" "" "${cost_env[@]}" python3 examples/torch_compile_step.py --steps 3000
done
fi

want analyze || exit 0
log "re-analysis of every trace folder"
for d in "$W"/*/; do
  "$B/tpgraph" analyze "$d" --out "$W/reanalysed-$(basename "$d")" >/dev/null 2>&1
  echo "analyze $(basename "$d") rc=$?"
done | tee -a "$OUT/summary.log"
tar -czf "$OUT/servers.tgz" -C "$W" . 2>/dev/null

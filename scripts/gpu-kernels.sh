#!/usr/bin/env bash
# The kernel engineer's one command on the GPU machine: run from the repository root with a build
# made elsewhere (BUILD, default build-kernels). Steps, in the order given (default: all but ncu):
#   tests     tpgraph_gpu_tests "[kernels]" (full geometry included)
#   quick     the same without the full-geometry cases
#   check     tpgraph check (numerics + determinism arms), JSON to $OUT/check.json
#   bench     tpgraph bench, JSON to $OUT/bench.json; BENCH_ARGS adds options (e.g. --all-tiles)
#   sanitize  compute-sanitizer memcheck and racecheck on the small-shape kernel tests
#   ncu       Nsight Compute (clocks left alone) of the grouped GEMMs at t=43, 416, 4096: unit-level
#             sections per kernel; NCU_SET="--set full" adds source counters and a warp-stall summary
#             of the SASS (scripts/ncu_stalls.py), which the wgmma kernel does not complete;
#             NCU_SET="--section WarpStateStats ..." other sections (the stall reasons without the
#             source pass); NCU_LAUNCHES (default 3: gate, up, down) how many GEMMs are profiled
#   ncu-chain Nsight Compute (clocks left alone) of the chain's other kernels at t=4096: duration,
#             DRAM and L2 throughput, occupancy
#   sass      cuobjdump of the kernels to $OUT/sass.txt, with instruction counts per GEMM kernel
# Logs go to $OUT (default ./out); the last lines printed are a summary table.
set -uo pipefail
BUILD=${BUILD:-build-kernels}
# The GPU test binary: in the build's tests/ folder, or beside tpgraph (a variant unpacked from a
# scripts/kernel-variants.sh pack).
TESTS="$BUILD/tests/tpgraph_gpu_tests"
[ -x "$TESTS" ] || TESTS="$BUILD/tpgraph_gpu_tests"
OUT=${OUT:-out}
mkdir -p "$OUT"
steps=("$@")
[ ${#steps[@]} -eq 0 ] && steps=(tests check bench sanitize)
summary=()
note() { summary+=("$(printf '%-9s %s' "$1" "$2")"); }

nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,clocks.mem,temperature.gpu,power.draw \
  --format=csv >"$OUT/gpu.txt" 2>&1
cat "$OUT/gpu.txt"

for step in "${steps[@]}"; do
  start=$(date +%s)
  case "$step" in
    tests)
      "$TESTS" "[kernels]" --durations yes >"$OUT/tests.log" 2>&1
      rc=$?; tail -n 4 "$OUT/tests.log" ;;
    quick)
      "$TESTS" "[kernels]~[full]" --durations yes >"$OUT/tests.log" 2>&1
      rc=$?; tail -n 4 "$OUT/tests.log" ;;
    check)
      read -r -a extra <<<"${CHECK_ARGS:-}"  # several flags, split on spaces
      "$BUILD/tpgraph" check --json "$OUT/check.json" "${extra[@]}" >"$OUT/check.log" 2>&1
      rc=$?; cat "$OUT/check.log" ;;
    bench)
      read -r -a extra <<<"${BENCH_ARGS:-}"
      "$BUILD/tpgraph" bench --json "$OUT/bench.json" "${extra[@]}" >"$OUT/bench.log" 2>&1
      rc=$?; cat "$OUT/bench.log" ;;
    sanitize)
      {
        compute-sanitizer --tool memcheck --error-exitcode 9 "$TESTS" "[kernels]~[full]"
        m=$?
        compute-sanitizer --tool racecheck --error-exitcode 9 "$TESTS" "[kernels]~[full]"
        r=$?
        echo "memcheck rc=$m racecheck rc=$r"
        [ $m -eq 0 ] && [ $r -eq 0 ]
      } >"$OUT/sanitize.log" 2>&1
      rc=$?; grep -E "ERROR SUMMARY|RACECHECK SUMMARY|rc=|All tests|failed" "$OUT/sanitize.log" | tail -n 8 ;;
    ncu)
      rc=0
      : >"$OUT/ncu.log"
      for t in ${NCU_TOKENS:-43 416 4096}; do
        # The first three grouped GEMMs of a bench run are the eager chain's gate, up and down.
        # Application replay (bench runs again for every pass, a few seconds each): kernel replay
        # saves and restores the process's device memory around each pass, and on the wgmma kernel
        # at t=4096 it made no progress in 500 s. Four sections of one kernel take about 75 s this
        # way. The source counters' instrumented pass (in --set full, or NCU_SET="--section
        # SourceCounters") launched the wgmma kernel and never completed (420 s): the default set
        # is the unit-level one, for the wgmma tiles. One token count per device call (NCU_TOKENS).
        # shellcheck disable=SC2086
        ncu --replay-mode application --clock-control none --kernel-name regex:grouped_gemm --launch-count "${NCU_LAUNCHES:-3}" \
          ${NCU_SET:---section SpeedOfLight --section ComputeWorkloadAnalysis --section MemoryWorkloadAnalysis --section Occupancy} \
          -o "/tmp/tpgraph-ncu-$t" -f "$BUILD/tpgraph" bench --tokens "$t" --replays 1 --warmup 0 --no-limits \
          >>"$OUT/ncu.log" 2>&1 || rc=$?
        ncu -i "/tmp/tpgraph-ncu-$t.ncu-rep" --page details >"$OUT/ncu-$t.txt" 2>&1 || rc=$?
        # Where the warps wait (with WarpStateStats): cycles stalled per issued instruction, by reason.
        ncu -i "/tmp/tpgraph-ncu-$t.ncu-rep" --page raw 2>/dev/null |
          grep -E "grouped_gemm|smsp__average_warps?_(issue_stalled|latency_issue_stalled)_[a-z_]+_per_issue_active.ratio" |
          awk '/grouped_gemm/ {print; next} $NF+0 >= 0.05' >"$OUT/ncu-stalls-raw-$t.txt" || true
        # The source page (with source counters only) is tens of MB: only its summary comes back.
        if [[ "${NCU_SET:-}" == *full* || "${NCU_SET:-}" == *SourceCounters* ]]; then
          ncu -i "/tmp/tpgraph-ncu-$t.ncu-rep" --page source --csv --print-source sass >"/tmp/tpgraph-ncu-$t.csv" 2>&1 &&
            python3 scripts/ncu_stalls.py "/tmp/tpgraph-ncu-$t.csv" >"$OUT/ncu-stalls-$t.txt" 2>&1 || rc=$?
        fi
      done
      grep -hE "grouped_gemm|Duration|DRAM Throughput|L2 Cache Throughput|Issue Slots Busy|No Eligible|Eligible Warps|Registers Per|Block Limit (Reg|Shared)|Stall|Warp Cycles Per Issued" \
        "$OUT"/ncu-*.txt | head -n 80
      grep -hs "stalls:" "$OUT"/ncu-stalls-*.txt
      cut -c1-160 "$OUT"/ncu-stalls-raw-*.txt 2>/dev/null | head -n 60 ;;
    ncu-chain)
      # The first launches of a bench run are the eager chain's: one of each kernel.
      ncu --replay-mode application --clock-control none --kernel-name regex:"gather_quantize|swiglu|quantize_rows|combine" --launch-count 4 \
        --section SpeedOfLight --section MemoryWorkloadAnalysis --section Occupancy \
        "$BUILD/tpgraph" bench --tokens 4096 --replays 1 --warmup 0 --no-limits >"$OUT/ncu-chain.txt" 2>&1
      rc=$?
      grep -E "^  [a-z(]|Duration|DRAM Throughput|L2 Cache Throughput|Achieved Occupancy" "$OUT/ncu-chain.txt" | head -n 40 ;;
    sass)
      # Instruction mix of each grouped GEMM kernel (no disassembler on the build machine).
      cuobjdump --dump-sass "$BUILD/tpgraph" >"$OUT/sass.txt" 2>&1
      rc=$?
      awk '/Function : .*grouped_gemm/{name=$3} name && /^ +\/\*[0-9a-f]+\*\//{n[name]++; if ($0 ~ /HMMA/) m[name]++}
           END {for (k in n) printf "%6d instructions, %5d HMMA  %s\n", n[k], m[k], k}' "$OUT/sass.txt" | sort -k4 ;;
    *) echo "unknown step $step"; rc=2 ;;
  esac
  note "$step" "rc=$rc $(( $(date +%s) - start ))s"
done
echo "---- gpu-kernels summary ----"
printf '%s\n' "${summary[@]}"

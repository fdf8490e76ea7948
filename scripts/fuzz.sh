#!/usr/bin/env bash
# Builds the `fuzz` preset (clang-14, ASan + UBSan, libFuzzer) and runs each reader's harness from
# its seed corpus in tests/fuzz/corpus/<name>/.
#   scripts/fuzz.sh SECONDS        each harness for SECONDS of wall time (CI: 60)
#   scripts/fuzz.sh -runs=N        each harness for N inputs
# Memory is bounded per input (-malloc_limit_mb) and per process (-rss_limit_mb): an input that
# makes a reader allocate more is a finding, like a crash or a leak. New inputs go to a scratch
# folder, so the committed corpus only changes by hand.
set -euo pipefail
cd "$(dirname "$0")/.."
limit="${1:-60}"
export PATH=/usr/local/cuda/bin:$PATH
cmake --preset fuzz >/dev/null
cmake --build --preset fuzz
if [[ "$limit" == -runs=* ]]; then budget=("$limit"); else budget=(-max_total_time="$limit"); fi
for name in scenario records trace_file trace_collide; do
  scratch="$(mktemp -d)"
  echo "fuzz_$name: ${budget[*]}"
  ./build-fuzz/fuzz_"$name" "${budget[@]}" -rss_limit_mb=2048 -malloc_limit_mb=1024 -max_len=65536 \
    -timeout=10 -print_final_stats=1 "$scratch" tests/fuzz/corpus/"$name"
  rm -rf "$scratch"
done

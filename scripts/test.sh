#!/usr/bin/env bash
# Install, check the formatting and the shell scripts, build (CI preset: warnings are errors) and run the tests; then
# build the libFuzzer harnesses of the file readers and run each for a minute from its seed corpus.
set -euo pipefail
cd "$(dirname "$0")/.."
./scripts/install-deps.sh
./scripts/format.sh --check
shellcheck scripts/*.sh .ci/run
python3 scripts/check_structure.py
export PATH=/usr/local/cuda/bin:$PATH
cmake --preset ci
cmake --build --preset ci
ctest --preset ci
./scripts/fuzz.sh 60

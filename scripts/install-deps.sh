#!/usr/bin/env bash
# Installs the distribution packages tpgraph builds with (the CUDA toolkit must already be there).
set -euo pipefail
# clang-14 and libclang-rt-14-dev: the libFuzzer harnesses of the file readers (the `fuzz` preset);
# clang-format-14: the tree follows .clang-format (scripts/format.sh --check); shellcheck: the
# scripts are checked too (scripts/test.sh).
pkgs=(cmake ninja-build g++ git libfmt-dev libcli11-dev nlohmann-json3-dev catch2 graphviz clang-14 libclang-rt-14-dev clang-format-14
  shellcheck)
missing=()
for p in "${pkgs[@]}"; do dpkg -s "$p" >/dev/null 2>&1 || missing+=("$p"); done
if [ ${#missing[@]} -gt 0 ]; then
  sudo_cmd=""
  [ "$(id -u)" -ne 0 ] && sudo_cmd="sudo"
  $sudo_cmd apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo_cmd apt-get install -y -qq --no-install-recommends "${missing[@]}"
fi
if ! command -v nvcc >/dev/null 2>&1 && [ ! -x /usr/local/cuda/bin/nvcc ]; then
  echo "tpgraph needs the CUDA toolkit (nvcc, CUPTI); install it from NVIDIA's repository first" >&2
  exit 1
fi

#!/usr/bin/env bash
# Formats the C++ and CUDA sources of src/, tests/ and examples/ with .clang-format.
#   scripts/format.sh            rewrite the files in place
#   scripts/format.sh --check    change nothing; list the files that are not formatted, exit 1 if any
# CLANG_FORMAT picks the binary (default clang-format-14: other versions format some lines differently).
set -euo pipefail
cd "$(dirname "$0")/.."

mode=apply
case "${1:-}" in
  "") ;;
  --check) mode=check ;;
  *) echo "format.sh: unknown argument '$1'; accepted: --check, or nothing to format in place" >&2; exit 2 ;;
esac
clang_format=${CLANG_FORMAT:-clang-format-14}
if ! command -v "$clang_format" >/dev/null; then
  echo "format.sh: $clang_format not found; install clang-format-14 or set CLANG_FORMAT" >&2
  exit 2
fi

# Tracked and new (not ignored) files. wgmma_ops.cuh is left as scripts/gen_wgmma.py writes it.
mapfile -t files < <(git ls-files --cached --others --exclude-standard -- src tests examples |
                     grep -E '\.(cpp|hpp|cu|cuh|h)$' | grep -vx 'src/kernels/wgmma_ops.cuh' | sort -u)

if [[ $mode == apply ]]; then
  "$clang_format" -i --style=file "${files[@]}"
  exit 0
fi

# --dry-run reports each replacement as "FILE:LINE:COL: warning: ..."; one line per file is enough.
unformatted=$("$clang_format" --dry-run --style=file "${files[@]}" 2>&1 |
              sed -n 's/^\([^:]*\):[0-9]*:[0-9]*: warning: .*-Wclang-format-violations.*/\1/p' | sort | uniq -c)
if [[ -n $unformatted ]]; then
  echo "format.sh: $(wc -l <<<"$unformatted") of ${#files[@]} files are not formatted (replacements, file):"
  echo "$unformatted"
  echo "format.sh: run scripts/format.sh to format them"
  exit 1
fi
echo "format.sh: ${#files[@]} files formatted"

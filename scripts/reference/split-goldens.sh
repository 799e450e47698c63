#!/usr/bin/env bash
# The reference's llama-gguf-split on SmolLM2 Q4_1: the sha256 of each part
# it writes (by size and by tensor count) and of the file it merges them
# back into. Prints native-tests/golden/families/split.txt; called by
# make-goldens.sh with the reference's build dir. Not part of the test command.
set -euo pipefail
cd "$(dirname "$0")/../.."
build=${1:-$(scripts/reference/build.sh)}
model=models/SmolLM2-135M-Instruct.Q4_1.gguf
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
echo "# case part sha256: llama-gguf-split OPTIONS $model PREFIX (case size-40M: --split-max-size 40M; tensors-100: --split-max-tensors 100), then llama-gguf-split --merge PREFIX-00001-of-0000N.gguf OUT (case CASE-merged)"
for case in size-40M tensors-100; do
  case $case in
    size-40M) opts=(--split-max-size 40M) ;;
    tensors-100) opts=(--split-max-tensors 100) ;;
  esac
  mkdir "$tmp/$case"
  "$build/bin/llama-gguf-split" --split "${opts[@]}" "$model" "$tmp/$case/part" > "$tmp/log" 2>&1 \
    || { cat "$tmp/log" >&2; exit 1; }
  parts=("$tmp/$case"/part-*.gguf)
  for p in "${parts[@]}"; do
    printf '%s %s %s\n' "$case" "$(basename "$p")" "$(sha256sum < "$p" | cut -d' ' -f1)"
  done
  "$build/bin/llama-gguf-split" --merge "${parts[0]}" "$tmp/$case/merged.gguf" > "$tmp/log" 2>&1 \
    || { cat "$tmp/log" >&2; exit 1; }
  printf '%s %s %s\n' "$case-merged" merged.gguf "$(sha256sum < "$tmp/$case/merged.gguf" | cut -d' ' -f1)"
done

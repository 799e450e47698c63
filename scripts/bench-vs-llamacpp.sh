#!/usr/bin/env bash
# lamina against the 2026 llama.cpp reference, side by side on this machine:
# `lamina bench` and `llama-bench` (built GGML_NATIVE=ON by
# scripts/reference/build.sh, cached outside the repository) alternate, test
# by test, so both see the same machine state. Prints one markdown table of
# median tokens/s with the ratio lamina / llama.cpp. Not part of the test
# command (it builds the reference and takes a quarter of an hour).
#
#   scripts/bench-vs-llamacpp.sh [MODEL.gguf ...]
#
# Without arguments: SmolLM2-135M requantized by lamina (byte-identical to
# llama-quantize) to Q4_0, Q8_0, Q4_K_M and F16, its Q4_1 original, and
# Gemma 3 270M Q4_K_M (scripts/fetch-models.sh). Tests: pp128, tg64 and tg64
# after 1024 cached tokens, at 1 and 2 threads. Encoders (MiniLM, the
# reranker: TESTS=pp128) run in the reference with `-embd 1`.
# Environment: ROUNDS (alternations, default 2), REPS (repetitions per run,
# default 3), THREADS (default "1 2"), TESTS (default "pp128 tg64 tg64@d1024").
set -euo pipefail
cd "$(dirname "$0")/.."
rounds=${ROUNDS:-2}
reps=${REPS:-3}
threads=${THREADS:-"1 2"}
tests=${TESTS:-"pp128 tg64 tg64@d1024"}

ref_build=$(scripts/reference/build.sh)
llama_bench="$ref_build/bin/llama-bench"
cargo build --release --quiet
lamina=target/release/lamina

models=("$@")
if [ ${#models[@]} -eq 0 ]; then
  scripts/fetch-models.sh >&2
  work="${LAMINA_BENCH_DIR:-$HOME/.cache/lamina/bench}"
  mkdir -p "$work"
  smol=models/SmolLM2-135M-Instruct.Q4_1.gguf
  for t in Q4_0 Q8_0 Q4_K_M F16; do
    out="$work/SmolLM2-135M-$t.gguf"
    [ -f "$out" ] || "$lamina" quantize "$smol" "$out" "$t" >&2
    models+=("$out")
  done
  models=("$smol" "${models[@]}" models/gemma-3-270m-q4_k_m.gguf)
fi

# The per-repetition tokens/s of a JSON report (either tool's), one per line.
samples() {
  python3 -c '
import json, sys
d = json.load(sys.stdin)
for row in (d if isinstance(d, list) else [d]):
    for s in row["samples_ts"]:
        print(s)'
}

# run_one TOOL MODEL THREADS TEST: one run, its samples appended to $tmp/TOOL.
run_one() {
  local tool=$1 model=$2 t=$3 test=$4 p=0 n=0 d=0
  case "$test" in
    pp*) p=${test#pp} ;;
    tg*@d*) n=${test%@d*}; n=${n#tg}; d=${test#*@d} ;;
    tg*) n=${test#tg} ;;
  esac
  if [ "$tool" = lamina ]; then
    "$lamina" bench -m "$model" -p "$p" -n "$n" -d "$d" -r "$reps" -t "$t" --json 2>/dev/null
  else
    # Encoders (BERT) run in the reference with embeddings on.
    local embd=()
    case "$(basename "$model")" in *MiniLM* | *reranker* | *bert*) embd=(-embd 1) ;; esac
    "$llama_bench" -m "$model" -p "$p" -n "$n" -d "$d" -r "$reps" -t "$t" "${embd[@]}" -o json 2>/dev/null
  fi | samples >>"$tmp/$tool"
}

# The median of a file of samples.
median() { sort -g "$1" | awk '{v[NR]=$1} END {print (NR%2 ? v[(NR+1)/2] : (v[NR/2]+v[NR/2+1])/2)}'; }

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
echo "lamina $(git rev-parse --short HEAD) ($("$lamina" devices 2>/dev/null | head -n 1)) vs llama.cpp (llama-cpp-python 0.3.36 vendored, GGML_NATIVE=ON); median t/s of $rounds x $reps runs, alternating"
echo
echo "| model | threads | test | lamina | llama.cpp | ratio |"
echo "|---|---|---|---|---|---|"
for model in "${models[@]}"; do
  for t in $threads; do
    for test in $tests; do
      : >"$tmp/lamina"
      : >"$tmp/ref"
      for _ in $(seq "$rounds"); do
        run_one lamina "$model" "$t" "$test"
        run_one ref "$model" "$t" "$test"
      done
      a=$(median "$tmp/lamina")
      b=$(median "$tmp/ref")
      ratio=$(awk -v a="$a" -v b="$b" 'BEGIN {printf "%.2f", a / b}')
      printf '| %s | %s | %s | %.1f | %.1f | %s |\n' "$(basename "$model" .gguf)" "$t" "$test" "$a" "$b" "$ratio"
    done
  done
done

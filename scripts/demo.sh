#!/usr/bin/env bash
# The demo: fetches SmolLM2-135M-Instruct (Q4_1) and generates with it (greedy,
# as llama.cpp's golden runs do). Extra arguments go to `lamina run`.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/fetch-models.sh
cargo build --release -q --bin lamina
target/release/lamina info models/SmolLM2-135M-Instruct.Q4_1.gguf | head -n 1
target/release/lamina run -m models/SmolLM2-135M-Instruct.Q4_1.gguf \
  -p "The capital of France is" -n 48 --temp 0 "$@"

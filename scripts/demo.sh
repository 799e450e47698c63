#!/usr/bin/env bash
# The demo: fetches SmolLM2-135M-Instruct (Q4_1) and runs lamina on it. Today the
# engine reads the model (metadata and tensor table); generation comes next.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/fetch-models.sh
cargo run --release -q --bin lamina -- info models/SmolLM2-135M-Instruct.Q4_1.gguf "$@"

#!/usr/bin/env bash
# Builds the WebAssembly engine into npm/dist/ (single-thread, SIMD128) with
# wasm-pack and binaryen's wasm-opt from the tools cache set up by setup.sh.
set -euo pipefail
cd "$(dirname "$0")/.."
tools="${LAMINA_TOOLS:-$HOME/.cache/lamina/tools}"
export PATH="$tools/node_modules/.bin:$HOME/.cargo/bin:$PATH"

RUSTFLAGS="-C target-feature=+simd128" \
  wasm-pack --quiet build . --release --target web --no-pack \
  --out-dir npm/dist --out-name lamina
rm -f npm/dist/.gitignore
ls -l npm/dist/lamina_bg.wasm | awk '{print "build-wasm: npm/dist/lamina_bg.wasm " $5 " bytes"}'

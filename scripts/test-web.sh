#!/usr/bin/env bash
# The browser test on its own: builds both wasm engines, fetches the models,
# serves the repository with COOP/COEP on a free port and runs
# wasm-tests/web/chat.test.mjs in headless Chromium. Leaves the screenshot at
# target/web-test/screenshot.png.
set -euo pipefail
repo=$(cd "$(dirname "$0")/.." && pwd)
cd "$repo"
source scripts/env.sh
[ -n "${LAMINA_SKIP_BUILD:-}" ] || { scripts/setup.sh; scripts/build-wasm.sh; scripts/fetch-models.sh; }

# SmolLM2 in three parts, served beside the models (the split-model test).
rm -rf target/web-split
mkdir -p target/web-split
cargo build --quiet --bin lamina
target/debug/lamina split --split-max-size 40M models/SmolLM2-135M-Instruct.Q4_1.gguf \
  target/web-split/smollm2 2>/dev/null

# The model over 4 GiB for the memory64 build, written sparse and checked
# natively first (native-tests/families.rs).
mkdir -p target/web-big
LAMINA_BIG_MODEL="$repo/target/web-big/over-4-gib.gguf" cargo test --quiet --test families \
  write_model_over_4_gib -- --ignored

source scripts/web-server.sh

LAMINA_REPO="$repo" LAMINA_TOOLS="$LAMINA_TOOLS" \
  LAMINA_WEB_URL="$WEB_URL" \
  LAMINA_SCREENSHOT="$repo/target/web-test/screenshot.png" \
  node --test --test-reporter=spec wasm-tests/web/chat.test.mjs
echo "test-web: screenshot at target/web-test/screenshot.png"

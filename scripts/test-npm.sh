#!/usr/bin/env bash
# Packs npm/ (built by build-wasm.sh), installs the tarball offline into an empty
# directory, and runs the Node smoke tests against the installed package.
set -euo pipefail
repo=$(cd "$(dirname "$0")/.." && pwd)
[ -f "$repo/npm/dist/lamina_bg.wasm" ] || { echo "test-npm: run scripts/build-wasm.sh first" >&2; exit 1; }
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
(cd "$repo/npm" && npm pack --silent --pack-destination "$work" >/dev/null)
cd "$work"
echo '{"name":"lamina-smoke","private":true,"type":"module"}' > package.json
npm install --silent --offline --no-audit --no-fund ./lamina-*.tgz
cp "$repo/wasm-tests/npm/"*.test.mjs .
# SmolLM2 split in three parts by lamina's CLI (the build the native tests
# made; its parts are llama-gguf-split's byte for byte, native-tests/split.rs).
mkdir split
(cd "$repo" && cargo build --quiet --bin lamina && target/debug/lamina split --split-max-size 40M \
  models/SmolLM2-135M-Instruct.Q4_1.gguf "$work/split/smollm2" 2>/dev/null)
# A model over 4 GiB for the memory64 build, written sparse (4.7 GB long, a
# few hundred MB on disk) and checked natively first.
(cd "$repo" && LAMINA_BIG_MODEL="$work/over-4-gib.gguf" cargo test --quiet --test families \
  write_model_over_4_gib -- --ignored)
LAMINA_REPO="$repo" LAMINA_SPLIT_PREFIX="$work/split/smollm2" LAMINA_BIG_MODEL="$work/over-4-gib.gguf" \
  node --test --test-reporter=spec ./*.test.mjs

#!/usr/bin/env bash
# pp128/tg64 in headless Chromium of lamina's chat page (its Bench button:
# llama-bench's tests, 3 repetitions) and of wllama 2.3.7 (its npm package,
# installed once into ~/.cache/lamina/wllama; scripts/bench-wllama.html), with
# lamina native (the release CLI) and the npm package in Node on the same
# model, all in one run, for each model given at 1 and 2 threads
# (THREADS="1 2"). Models outside the
# repository are linked into models/ so the page can fetch them. Not a test:
# numbers for the closing notes.
set -euo pipefail
repo=$(cd "$(dirname "$0")/.." && pwd)
cd "$repo"
source scripts/env.sh
[ $# -gt 0 ] || set -- models/SmolLM2-135M-Instruct.Q4_1.gguf

wllama_dir="$HOME/.cache/lamina/wllama"
wllama_esm="$wllama_dir/node_modules/@wllama/wllama/esm"
if [ ! -f "$wllama_esm/index.js" ]; then
  mkdir -p "$wllama_dir"
  npm install --prefix "$wllama_dir" --no-audit --no-fund @wllama/wllama@2.3.7 >/dev/null
fi
cargo build --release --quiet --bin lamina
[ -f npm/dist-threads/lamina_bg.wasm ] || scripts/build-wasm.sh

models=()
for m in "$@"; do
  case "$(realpath "$m")" in
    "$repo"/models/*) models+=("models/${m#*models/}") ;;
    *) ln -sf "$(realpath "$m")" "models/$(basename "$m")"; models+=("models/$(basename "$m")") ;;
  esac
done

source scripts/web-server.sh
# wllama's page on a second isolated server, rooted at a directory holding
# the page, the package's esm/ and the models.
wroot=$(mktemp -d)
ln -s "$repo/scripts/bench-wllama.html" "$wroot/index.html"
ln -s "$wllama_esm" "$wroot/wllama"
ln -s "$repo/models" "$wroot/models"
wport=$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
python3 web/server.py "$wroot" "$wport" >/dev/null 2>&1 &
wserver=$!
trap 'kill $web_server $wserver 2>/dev/null; rm -rf "$wroot"' EXIT
for _ in $(seq 50); do curl -fs -o /dev/null "http://127.0.0.1:$wport/" && break; sleep 0.1; done

LAMINA_TOOLS="$LAMINA_TOOLS" LAMINA_WEB_URL="$WEB_URL" WLLAMA_URL="http://127.0.0.1:$wport/" \
  LAMINA_BIN="$repo/target/release/lamina" node scripts/bench-web.mjs "${models[@]}"

#!/usr/bin/env bash
# pp128/tg64 of the chat page's engine in headless Chromium (the page's Bench
# button: llama-bench's tests, 3 repetitions), for each model given (paths
# under the repository, e.g. models/SmolLM2-135M-Instruct.Q4_1.gguf) at 1
# and 2 threads. Not a test: numbers for the closing notes.
set -euo pipefail
repo=$(cd "$(dirname "$0")/.." && pwd)
cd "$repo"
source scripts/env.sh
[ $# -gt 0 ] || set -- models/SmolLM2-135M-Instruct.Q4_1.gguf
source scripts/web-server.sh
LAMINA_TOOLS="$LAMINA_TOOLS" LAMINA_WEB_URL="$WEB_URL" node scripts/bench-web.mjs "$@"

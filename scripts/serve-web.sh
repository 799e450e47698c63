#!/usr/bin/env bash
# Serves the browser demo on http://127.0.0.1:${PORT:-8080}/web/ with COOP/COEP,
# after building the wasm package and fetching the models.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/build-wasm.sh
scripts/fetch-models.sh
exec python3 web/server.py "$(pwd)" "${PORT:-8080}"

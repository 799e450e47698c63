#!/usr/bin/env bash
# Speed of the families no small real file covers (mixtures of experts),
# side by side with the 2026 reference: writes random-weight models at the
# shapes of the smallest real releases (native-tests/common/synth.rs BENCH;
# cached outside the repository) and runs scripts/bench-vs-llamacpp.sh on
# them (or on those named: scripts/bench-synth.sh lfm2-350m). Not part of
# the test command. Environment as bench-vs-llamacpp.sh.
set -euo pipefail
cd "$(dirname "$0")/.."
dir="${LAMINA_BENCH_DIR:-$HOME/.cache/lamina/bench}/synth"
mkdir -p "$dir"
LAMINA_SYNTH_DIR="$dir" LAMINA_SYNTH_NAMES="$*" cargo test --release -q --test families write_bench_models \
  -- --ignored --nocapture > "$dir/list.txt"
mapfile -t models < <(grep '\.gguf$' "$dir/list.txt")
if [ $# -gt 0 ]; then # only the models named
  wanted=("$@")
  models=()
  for name in "${wanted[@]}"; do models+=("$dir/$name.gguf"); done
fi
exec scripts/bench-vs-llamacpp.sh "${models[@]}"

#!/usr/bin/env bash
# LoRA goldens with the 2026 llama.cpp reference (scripts/reference/build.sh):
# writes the small BF16 llama model and its seeded adapter
# (native-tests/lora.rs, through `cargo test`), runs probe.cpp on the model
# with the adapter applied at scale 0.75 (PROBE_LORA; 1 thread, n_ctx 512,
# f16 cache, flash attention off; the prompt in one decode, then 32 greedy
# steps) and records the prompt and both files' sha256 beside the outputs in
# native-tests/golden/lora/. Not part of the test command.
set -euo pipefail
cd "$(dirname "$0")/../.."
probe=$(scripts/reference/link.sh scripts/reference/probe.cpp probe)
out=native-tests/golden/lora
mkdir -p "$out"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
LAMINA_SYNTH_DIR="$tmp" cargo test --release --test lora write_lora_files -- --ignored --nocapture >&2
prompt='The quick brown fox jumps over the lazy dog, then counts: 1, 2, 3, 42. Sliding windows!'
printf '%s' "$prompt" > "$tmp/prompt.txt"
PROBE_LORA="$tmp/llama-bf16-lora.gguf" PROBE_LORA_SCALE=0.75 \
  "$probe" "$tmp/llama-bf16.gguf" "$tmp/prompt.txt" 32 "$out/llama-bf16-lora" 2> "$tmp/probe.log" \
  || { cat "$tmp/probe.log" >&2; exit 1; }
python3 - "$out/llama-bf16-lora.json" "$prompt" "$tmp/llama-bf16.gguf" "$tmp/llama-bf16-lora.gguf" <<'PY'
import hashlib, json, sys
path, prompt, model, adapter = sys.argv[1:]
g = json.load(open(path))
sha = lambda p: hashlib.sha256(open(p, "rb").read()).hexdigest()
g = {"prompt": prompt, "model_sha256": sha(model), "adapter_sha256": sha(adapter),
     "command": "PROBE_LORA=llama-bf16-lora.gguf PROBE_LORA_SCALE=0.75 probe llama-bf16.gguf PROMPT 32", **g}
json.dump(g, open(path, "w"), indent=1)
PY
echo "wrote $out" >&2

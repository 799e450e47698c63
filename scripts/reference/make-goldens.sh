#!/usr/bin/env bash
# Makes the goldens of native-tests/golden/families/ with the 2026 llama.cpp
# reference (scripts/reference/build.sh): writes each small synthetic model
# (native-tests/common/synth.rs, through `cargo test`), runs probe.cpp on it
# (1 thread, n_ctx 512, f16 cache, flash attention off; the prompt in one
# decode, then 32 greedy steps), and records the prompt, the model's sha256
# and these commands beside the outputs. With a path to
# gemma-3-270m-q4_k_m.gguf as $1, the real Gemma 3 file's goldens too.
# LAMINA_GOLDEN_FAMILIES="qwen3moe ..." remakes only those families'
# goldens (the quantize goldens stay as they are).
# Not part of the test command.
set -euo pipefail
cd "$(dirname "$0")/../.."
build=$(scripts/reference/build.sh)
probe=$(scripts/reference/link.sh scripts/reference/probe.cpp probe)
seqs=$(scripts/reference/link.sh scripts/reference/seqs.cpp seqs)
out=native-tests/golden/families
mkdir -p "$out"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
LAMINA_SYNTH_DIR="$tmp" cargo test --release --test families write_synth_models -- --ignored --nocapture >&2

all_families="llama3 qwen2 qwen3 gemma3 smollm3 phi3 phi3-long llama-q2_k qwen3-q3_k granite granite-nope qwen2-iq4_nl gemma3-iq4_xs llama-bf16 qwen3moe granitemoe lfm2 lfm2moe qwen35 qwen35moe gemma4 gemma4-kv"
families=${LAMINA_GOLDEN_FAMILIES:-$all_families}

# llama-quantize's k-quant mixtures, whole-file sha256 of its outputs.
if [ -z "${LAMINA_GOLDEN_FAMILIES:-}" ]; then
  quantize_golden() { # source name targets...
    local src=$1 name=$2; shift 2
    for t in "$@"; do
      "$build/bin/llama-quantize" --allow-requantize "$src" "$tmp/q.gguf" "$t" 2 > "$tmp/q.log" 2>&1 \
        || { cat "$tmp/q.log" >&2; exit 1; }
      printf '%s %s %s\n' "$name" "$t" "$(sha256sum < "$tmp/q.gguf" | cut -d' ' -f1)"
    done
  }
  {
    echo "# source target sha256: llama-quantize --allow-requantize SOURCE OUT TARGET 2 (the reference, scripts/reference/build.sh)"
    quantize_golden models/SmolLM2-135M-Instruct.Q4_1.gguf smollm2-q4_1 \
      Q2_K Q3_K_S Q3_K_M Q3_K_L Q4_K_S Q4_K_M Q5_K_S Q5_K_M IQ4_NL IQ4_XS
    if [ -n "${1:-}" ]; then
      quantize_golden "$1" gemma3-270m-q4_k_m Q2_K Q3_K_M Q4_K_M Q5_K_M IQ4_NL IQ4_XS
    fi
  } > "$out/quantize.txt"
  # Per-tensor types and data sha256 of the reference's SmolLM2 IQ4_XS file
  # (its 576-wide rows fall back to IQ4_NL), so a test can check the plan and a
  # few tensors without the whole file's slow search.
  "$build/bin/llama-quantize" --allow-requantize models/SmolLM2-135M-Instruct.Q4_1.gguf \
    "$tmp/q.gguf" IQ4_XS 2 > "$tmp/q.log" 2>&1 || { cat "$tmp/q.log" >&2; exit 1; }
  cargo run --release -q -- info "$tmp/q.gguf" --json > "$tmp/q.json"
  python3 - "$tmp/q.gguf" "$tmp/q.json" "$out/smollm2-iq4_xs.json" <<'PY'
import hashlib, json, sys
gguf, info, out = sys.argv[1:4]
d = json.load(open(info))
data = open(gguf, "rb").read()
base = d["data_offset"]
tensors = {t["name"]: [t["type"], hashlib.sha256(data[base + t["offset"]:base + t["offset"] + t["bytes"]]).hexdigest()]
           for t in d["tensors"]}
json.dump({"command": "llama-quantize --allow-requantize SmolLM2-135M-Instruct.Q4_1.gguf OUT IQ4_XS 2",
           "file_sha256": hashlib.sha256(data).hexdigest(), "tensors": tensors}, open(out, "w"), indent=0)
PY
  echo "goldens: quantize" >&2
  scripts/reference/split-goldens.sh "$build" > "$out/split.txt"
  echo "goldens: split" >&2
fi

prompt='The quick brown fox jumps over the lazy dog, then counts: 1, 2, 3, 42. Sliding windows!'
run() { # name model prompt
  printf '%s' "$3" > "$tmp/$1.txt"
  "$probe" "$2" "$tmp/$1.txt" 32 "$out/$1" 2> "$tmp/$1.log" || { cat "$tmp/$1.log" >&2; exit 1; }
  PROBE_UBATCH=1 "$probe" "$2" "$tmp/$1.txt" 1 "$tmp/$1.ub1" 2> "$tmp/$1.log" || { cat "$tmp/$1.log" >&2; exit 1; }
  python3 - "$out/$1.json" "$2" "$3" "$tmp/$1.ub1.last_prompt_logits.f32" <<'PY'
import hashlib, json, struct, sys
path, model, prompt, ub1 = sys.argv[1:5]
g = json.load(open(path))
def f32(p):
    b = open(p, "rb").read()
    return struct.unpack("<%df" % (len(b) // 4), b)
d = [a - b for a, b in zip(f32(ub1), f32(path[:-5] + ".last_prompt_logits.f32"))]
g["spread_ubatch_1_vs_512"] = {"max_abs": max(abs(v) for v in d),
                               "rms": (sum(v * v for v in d) / len(d)) ** 0.5}
h = hashlib.sha256()
with open(model, "rb") as f:
    for chunk in iter(lambda: f.read(1 << 20), b""):
        h.update(chunk)
g = {"prompt": prompt, "model_sha256": h.hexdigest(),
     "reference": "llama.cpp vendored in llama-cpp-python==0.3.36 (scripts/reference/build.sh)",
     "command": "scripts/reference/probe MODEL PROMPT_FILE 32 OUT (1 thread, n_ctx=n_batch=n_ubatch=512, f16 KV cache, flash attention off)",
     **g}
json.dump(g, open(path, "w"), indent=1)
PY
  echo "goldens: $1" >&2
}
for name in $families; do
  run "$name" "$tmp/$name.gguf" "$prompt"
done

# Several sequences in shared batches, a copied sequence continued
# (seqs.cpp), for the families whose layers keep more than plain KV rows
# or route tokens: experts, sliding windows, recurrent states.
second='Once upon a time, in a small village by the sea, there lived'
for name in qwen3moe gemma3 lfm2 qwen35 gemma4; do
  case " $families " in *" $name "*) ;; *) continue ;; esac
  printf '%s' "$prompt" > "$tmp/a.txt"
  printf '%s' "$second" > "$tmp/b.txt"
  "$seqs" "$tmp/$name.gguf" "$tmp/a.txt" "$tmp/b.txt" 6 "$out/$name.seqs" 2> "$tmp/$name.log" \
    || { cat "$tmp/$name.log" >&2; exit 1; }
  python3 - "$out/$name.seqs.json" "$tmp/$name.gguf" <<'PY'
import hashlib, json, sys
path, model = sys.argv[1:3]
g = json.load(open(path))
g = {"model_sha256": hashlib.sha256(open(model, "rb").read()).hexdigest(),
     "reference": "llama.cpp vendored in llama-cpp-python==0.3.36 (scripts/reference/build.sh)",
     "command": "scripts/reference/seqs MODEL PROMPT_A_FILE PROMPT_B_FILE 6 OUT (1 thread, n_ctx=n_batch=n_ubatch=512, one f16 KV cache for 3 sequences, flash attention off)",
     **g}
json.dump(g, open(path, "w"), indent=1)
PY
  echo "goldens: $name.seqs" >&2
done
if [ -n "${1:-}" ]; then
  # Gemma 3's large activations make its logits sensitive to rounding: the
  # reference itself moves by up to rms 0.44 between one-token and whole-
  # prompt decoding on some prompts. These two stay well inside the
  # tolerance; each golden records that spread (spread_ubatch_1_vs_512).
  run gemma3-270m-story "$1" 'Once upon a time, in a small village by the sea, there lived an old fisherman who'
  run gemma3-270m-chat "$1" $'<start_of_turn>user\nGive me three tips for learning to cook.<end_of_turn>\n<start_of_turn>model\n'
  ppl_cmd=(-m "$1" -f ../shared/golden/smollm2/ppl.txt -c 128 -t 2 -fa off)
  "$build/bin/llama-perplexity" "${ppl_cmd[@]}" > "$tmp/ppl.log" 2>&1
  python3 - "$tmp/ppl.log" "$out/gemma3-270m-perplexity.json" "llama-perplexity ${ppl_cmd[*]:2}" <<'PY'
import json, re, sys
log, out, cmd = sys.argv[1:4]
text = open(log).read()
running = [float(v) for v in re.findall(r"\[\d+\](\d+\.\d+)", text)]
final = re.search(r"Final estimate: PPL = ([\d.]+) \+/- ([\d.]+)", text)
json.dump({"model": "gemma-3-270m-q4_k_m.gguf", "text": "../shared/golden/smollm2/ppl.txt",
           "command": cmd, "ppl": float(final.group(1)), "plus_minus": float(final.group(2)),
           "running_ppl_after_chunk": running}, open(out, "w"), indent=1)
PY
  echo "goldens: gemma3-270m-perplexity" >&2
fi

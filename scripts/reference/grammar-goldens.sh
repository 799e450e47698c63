#!/usr/bin/env bash
# Greedy grammar-constrained completions from the 2026 llama.cpp reference
# (`llama-completion --grammar`, built by scripts/reference/build.sh) on
# SmolLM2-135M-Instruct Q4_1, written to native-tests/golden/grammar/.
# Not part of the test command; the `grammar` test reads what it writes.
#
#   scripts/reference/grammar-goldens.sh [MODEL]
set -euo pipefail
here="$(cd "$(dirname "$0")/../.." && pwd)"
bin="$("$here/scripts/reference/build.sh")/bin"
model="${1:-$here/models/SmolLM2-135M-Instruct.Q4_1.gguf}"
out="$here/native-tests/golden/grammar"
mkdir -p "$out"
python3 - "$bin/llama-completion" "$model" "$out" <<'PY'
import hashlib, json, subprocess, sys
exe, model, out = sys.argv[1:]
cases = [
    ("days", "The days of the week are Monday, Tuesday,", 14,
     'root ::= (" " day ",")+\nday ::= [A-Z] [a-z]+'),
    ("counting", "Count to ten: one, two, three,", 16,
     'root ::= (" " [a-z]+ ","){1,6}'),
    ("person_json", "A JSON object for a person named Tom who is 32 years old: ", 40,
     'root ::= "{" ws "\\"name\\":" ws string "," ws "\\"age\\":" ws number ws "}"\n'
     'string ::= "\\"" [^"\\\\]* "\\""\nnumber ::= [0-9]{1,3}\nws ::= [ \\t\\n]?'),
    ("arithmetic", "1 + 1 = 2\n2 + 2 = 4\n3 + 3 =", 8,
     '# a number, then the end of the line\nroot ::= " " [1-9] [0-9]* "\\n"'),
    ("accents", "The French word for coffee is \"caf", 8,
     'root ::= [a-zàâçéèêëîïôûùüÿœ]+ "\\""'),
    ("special_token", "The capital of France is", 8,
     'root ::= " Paris" <[1]> "user"'),
]
sha = hashlib.sha256(open(model, "rb").read()).hexdigest()
for name, prompt, n, grammar in cases:
    cmd = [exe, "-m", model, "-p", prompt, "--temp", "0", "-n", str(n), "-t", "1",
           "-c", "512", "-no-cnv", "--no-display-prompt", "--grammar", grammar]
    if name == "special_token":
        cmd.append("--special")  # control tokens written out
    text = subprocess.run(cmd, capture_output=True, check=True).stdout.decode("utf-8")
    # llama-completion ends its output with two newlines, after
    # " [end of text]\n" when generation ended with an EOG token (written
    # out too with --special).
    assert text.endswith("\n\n"), repr(text)
    text = text[:-2]
    end = " [end of text]\n"
    eog = text.endswith(end)
    if eog:
        text = text[: -len(end)]
        for t in ("<|im_end|>", "<|endoftext|>"):
            if "--special" in cmd and text.endswith(t):
                text = text[: -len(t)]
    json.dump({
        "reference": "llama.cpp vendored in llama-cpp-python==0.3.36, llama-completion",
        "argv": ["llama-completion", "-m", model.split("/")[-1]] + cmd[3:],
        "model": {"file": model.split("/")[-1], "sha256": sha},
        "prompt": prompt, "n_predict": n, "grammar": grammar,
        "special": "--special" in cmd, "text": text, "ended_by_eog": eog,
    }, open(f"{out}/{name}.json", "w"), indent=1, ensure_ascii=False)
    print(f"{name}: {text!r} eog={eog}")
PY

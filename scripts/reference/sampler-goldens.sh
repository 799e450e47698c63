#!/usr/bin/env bash
# What llama.cpp's seeded sampler chain (2026 reference) leaves for the draw
# (sampler-chain.cpp linked against its libllama by link.sh) for
# lamina's `sampling` test: native-tests/golden/sampling/chain.json. Not part
# of the test command.
set -euo pipefail
cd "$(dirname "$0")/../.."
exe=$(scripts/reference/link.sh scripts/reference/sampler-chain.cpp sampler-chain)
python3 - "$exe" <<'PY'
import json, subprocess, sys
exe = sys.argv[1]
keys = ["n_vocab", "steps", "seed", "top_n_sigma", "top_k", "typical_p", "top_p", "min_p",
        "xtc_probability", "xtc_threshold", "temperature", "penalty_last_n", "penalty_repeat",
        "penalty_freq", "penalty_present", "min_keep"]
cases = [
    # name: n_vocab steps seed  nsigma k  typ  top_p min_p xtc_p xtc_t temp last_n rep freq pres keep
    ("xtc_always",    [64, 24, 7,  -1, 0,  1.0, 1.0, 0.0,  1.0, 0.05, 1.0, 0, 1.0, 0.0, 0.0, 0]),
    ("xtc_half",      [64, 24, 11, -1, 40, 1.0, 0.95, 0.05, 0.5, 0.1, 0.8, 64, 1.1, 0.0, 0.0, 0]),
    ("xtc_min_keep",  [64, 24, 3,  -1, 0,  1.0, 1.0, 0.0,  1.0, 0.02, 1.0, 0, 1.0, 0.0, 0.0, 40]),
    ("top_n_sigma",   [64, 24, 5,  1.0, 0, 1.0, 1.0, 0.0, 0.0, 0.1, 1.0, 0, 1.0, 0.0, 0.0, 0]),
    ("sigma_and_all", [64, 24, 42, 2.0, 20, 0.9, 0.9, 0.02, 0.3, 0.08, 1.3, 16, 1.2, 0.1, 0.2, 1]),
]
out = {
    "reference": "llama.cpp vendored in llama-cpp-python==0.3.36: llama_sampler chain "
                 "(penalties, top_n_sigma, top_k, typical, top_p, min_p, xtc, temp), "
                 "the candidates left before the draw; the lowest id accepted",
    "command": "scripts/reference/sampler-chain " + " ".join(k.upper() for k in keys),
    "cases": [],
}
for name, args in cases:
    run = json.loads(subprocess.run([exe] + [str(a) for a in args], capture_output=True,
                                    check=True).stdout)
    out["cases"].append({"name": name, "params": dict(zip(keys, args)), "steps": run["steps"]})
    print(name, [len(s["left"]) for s in run["steps"]])
json.dump(out, open("native-tests/golden/sampling/chain.json", "w"), indent=0)

# The same chain ending in llama.cpp's seeded draw: the token selected at
# each step (then accepted), for native-tests/golden/sampling/draws.json.
draw_cases = [
    # name: n_vocab steps seed  nsigma k  typ  top_p min_p xtc_p xtc_t temp last_n rep freq pres keep
    ("llama_rn_defaults", [64, 24, 1,   -1, 40, 1.0, 0.95, 0.05, 0.0, 0.1, 0.8, 64, 1.0, 0.0, 0.0, 0]),
    ("all_off",           [64, 24, 2,   -1, 0,  1.0, 1.0, 0.0,  0.0, 0.1, 1.0, 0, 1.0, 0.0, 0.0, 0]),
    ("min_p_unsorted",    [64, 24, 3,   -1, 0,  1.0, 1.0, 0.05, 0.0, 0.1, 1.0, 0, 1.0, 0.0, 0.0, 0]),
    ("typical",           [64, 24, 4,   -1, 0,  0.9, 1.0, 0.0,  0.0, 0.1, 1.2, 0, 1.0, 0.0, 0.0, 0]),
    ("top_n_sigma",       [64, 24, 5,   1.5, 0, 1.0, 1.0, 0.0,  0.0, 0.1, 1.0, 0, 1.0, 0.0, 0.0, 0]),
    ("xtc",               [64, 24, 6,   -1, 0,  1.0, 1.0, 0.0,  0.5, 0.05, 1.0, 0, 1.0, 0.0, 0.0, 0]),
    ("greedy",            [64, 24, 7,   -1, 40, 1.0, 0.95, 0.05, 0.0, 0.1, 0.0, 0, 1.0, 0.0, 0.0, 0]),
    ("top_k_1",           [64, 24, 8,   -1, 1,  1.0, 1.0, 0.0,  0.0, 0.1, 1.0, 0, 1.0, 0.0, 0.0, 0]),
    ("penalties",         [64, 24, 9,   -1, 20, 1.0, 0.9, 0.0,  0.0, 0.1, 1.0, 8, 1.3, 0.2, 0.3, 0]),
    ("everything",        [64, 24, 10,  2.0, 30, 0.95, 0.9, 0.02, 0.3, 0.08, 1.3, 16, 1.2, 0.1, 0.2, 1]),
    ("large_top_p",       [3000, 12, 11, -1, 0, 1.0, 0.9, 0.0,  0.0, 0.1, 1.0, 0, 1.0, 0.0, 0.0, 0]),
    ("large_top_k",       [3000, 12, 12, -1, 200, 1.0, 1.0, 0.0, 0.0, 0.1, 1.0, 0, 1.0, 0.0, 0.0, 0]),
    ("large_defaults",    [3000, 12, 13, -1, 40, 1.0, 0.95, 0.05, 0.0, 0.1, 0.8, 64, 1.0, 0.0, 0.0, 0]),
]
out = {
    "reference": "llama.cpp vendored in llama-cpp-python==0.3.36: the chain of chain.json "
                 "followed by llama_sampler_init_dist(seed); the selected token is accepted. "
                 "Logits: the generator in sampler-chain.cpp",
    "command": "scripts/reference/sampler-chain " + " ".join(k.upper() for k in keys) + " draw",
    "cases": [],
}
for name, args in draw_cases:
    run = json.loads(subprocess.run([exe] + [str(a) for a in args] + ["draw"], capture_output=True,
                                    check=True).stdout)
    out["cases"].append({"name": name, "params": dict(zip(keys, args)), "steps": run["steps"]})
    print(name, [s["selected"] for s in run["steps"]])
json.dump(out, open("native-tests/golden/sampling/draws.json", "w"), separators=(",", ":"))
PY

# DRY: the penalties llama.cpp's DRY sampler gives after a history, with
# breakers as token sequences (random histories over a small vocabulary) and
# as strings over SmolLM2's vocabulary: native-tests/golden/sampling/dry.json.
dry=$(scripts/reference/link.sh scripts/reference/dry-penalties.cpp dry-penalties)
python3 - "$dry" "models/SmolLM2-135M-Instruct.Q4_1.gguf" <<'PY'
import json, random, subprocess, sys, tempfile
exe, model = sys.argv[1:]
rng = random.Random(1234)
cases = []
# name: multiplier base allowed_length last_n, then how the history is made
token_cases = [
    ("short_repeat", 1.0, 1.1, 2, 5),
    ("long_history", 0.8, 1.75, 2, 64),
    ("window_cuts", 0.8, 1.75, 2, 16),
    ("allowed_4", 1.5, 2.0, 4, 96),
    ("exponent_cap", 1.0, 30.0, 1, 200),
    ("base_one", 0.5, 1.0, 2, 48),
]
for name, mult, base, allowed, last_n in token_cases:
    for k in range(3):
        n_vocab = rng.choice([6, 10, 16])
        phrase = [rng.randrange(n_vocab) for _ in range(rng.randint(3, 9))]
        history = []
        while len(history) < rng.randint(20, 150):
            history += phrase[: rng.randint(1, len(phrase))] if rng.random() < 0.7 else [rng.randrange(n_vocab)]
        history += phrase[: rng.randint(2, len(phrase))]
        breakers = [[rng.randrange(n_vocab) for _ in range(rng.randint(1, 3))] for _ in range(rng.randint(0, 3))]
        stdin = " ".join(map(str, history)) + "\n" + "".join(" ".join(map(str, b)) + "\n" for b in breakers)
        out = subprocess.run([exe, "tokens", str(n_vocab), str(mult), str(base), str(allowed), str(last_n)],
                             input=stdin.encode(), capture_output=True, check=True).stdout
        cases.append({"name": f"{name}_{k}", "n_vocab": n_vocab, "multiplier": mult, "base": base,
                      "allowed_length": allowed, "penalty_last_n": last_n, "history": history,
                      "breaker_tokens": breakers, "penalties": json.loads(out)})
# Made by hand: a breaker token that would extend a repeat is never
# penalised itself; a two-token breaker right before the end cuts the repeat.
for name, n_vocab, history, breakers in [
    ("breaker_would_extend", 6, [1, 2, 5, 1, 2], [[5]]),
    ("breaker_would_extend_long", 8, [3, 1, 2, 5, 4, 3, 1, 2, 5, 4, 3, 1, 2], [[5], [7, 7]]),
    ("two_token_breaker", 6, [1, 2, 5, 1, 2], [[5, 1]]),
]:
    stdin = " ".join(map(str, history)) + "\n" + "".join(" ".join(map(str, b)) + "\n" for b in breakers)
    out = subprocess.run([exe, "tokens", str(n_vocab), "1.0", "1.75", "2", "16"],
                         input=stdin.encode(), capture_output=True, check=True).stdout
    cases.append({"name": name, "n_vocab": n_vocab, "multiplier": 1.0, "base": 1.75, "allowed_length": 2,
                  "penalty_last_n": 16, "history": history, "breaker_tokens": breakers, "penalties": json.loads(out)})
default_breakers = ["\n", ":", "\"", "*"]
text_cases = [
    ("prose_default_breakers", "I like the red car and the blue car. I like the red car and the blue", default_breakers),
    ("list_default_breakers", "name: Tom\nage: 32\nname: Tom\nage: 32\nname: Tom and Tom and Tom and", default_breakers),
    ("multi_token_breakers", "the quick brown fox jumps over the lazy dog, the quick brown fox jumps over the",
     [" brown fox", "lazy dog,", "\u00e9t\u00e9"]),
    ("breaker_in_tail", "one two three four, one two three four, one two three four, one two", [" four,", "o, one"]),
]
for name, text, breakers in text_cases:
    with tempfile.NamedTemporaryFile("w", suffix=".txt", delete=False) as f:
        f.write(text)
    out = subprocess.run([exe, "text", model, "0.8", "1.75", "2", "64", f.name] + breakers,
                         capture_output=True, check=True).stdout
    cases.append({"name": name, "multiplier": 0.8, "base": 1.75, "allowed_length": 2, "penalty_last_n": 64,
                  "text": text, "breaker_strings": breakers, "penalties": json.loads(out)})
out = {
    "reference": "llama.cpp vendored in llama-cpp-python==0.3.36: llama_sampler_init_dry "
                 "(strings over the model's vocabulary) and llama_sampler_init_dry_testing "
                 "(token sequences); logits start at 0, the history is accepted, DRY applied once",
    "command": "scripts/reference/dry-penalties tokens|text ...",
    "cases": cases,
}
with open("native-tests/golden/sampling/dry.json", "w") as f:
    json.dump(out, f, indent=0)
print("dry:", [(c["name"], len(c["penalties"])) for c in cases])
PY

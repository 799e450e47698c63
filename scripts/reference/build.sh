#!/usr/bin/env bash
# Builds the 2026 llama.cpp reference (vendored in the PyPI source
# distribution of llama-cpp-python==0.3.36) once, outside the repository:
# $LAMINA_REF_DIR (default ~/.cache/lamina/ref). Not part of the test
# command; the goldens and benchmark scripts call it. Prints the build dir.
# The traps (../shared/TOOLCHAIN.md): `--no-binary :all:` would build cmake
# from source, and the vendored tree's `.git` file makes ninja loop.
# AMX is left out of the native build: on the Sapphire Rapids machines here
# its kernels (ggml-cpu/amx, built in when -march=native has AMX-INT8)
# crash llama-bench with a segfault in ggml_backend_amx_mul_mat on
# SmolLM2's Q4_0 and Q8_0. Without AMX the reference runs its AVX-512 and
# VNNI kernels, as on machines without AMX (the flags change nothing there).
#
#   scripts/reference/build.sh            builds, prints the build dir
#   scripts/reference/build.sh --source   only fetches the source and the
#                                         venv (cmake, ninja); prints the
#                                         source dir (cross builds start here)
set -euo pipefail
ref="${LAMINA_REF_DIR:-$HOME/.cache/lamina/ref}"
src="$ref/llama_cpp_python-0.3.36/vendor/llama.cpp"
targets="llama-completion llama-quantize llama-tokenize llama-perplexity llama-bench llama-embedding llama-gguf-split"
mkdir -p "$ref"

fetch_source() {
  [ -x "$ref/venv/bin/cmake" ] || {
    [ -d "$ref/venv" ] || python3 -m venv "$ref/venv"
    "$ref/venv/bin/pip" install --quiet cmake ninja
  }
  if [ ! -d "$src" ]; then
    "$ref/venv/bin/pip" download --quiet --no-deps --no-binary llama-cpp-python \
      llama-cpp-python==0.3.36 -d "$ref/dl"
    tar xzf "$ref/dl/llama_cpp_python-0.3.36.tar.gz" -C "$ref"
    rm -f "$src/.git"
  fi
}

if [ "${1:-}" = "--source" ]; then
  fetch_source
  echo "$src"
  exit 0
fi
flags="-mno-amx-tile -mno-amx-int8 -mno-amx-bf16"
case "$(uname -m)" in x86_64) ;; *) flags="" ;; esac
missing=0
for t in $targets; do [ -x "$ref/build/bin/$t" ] || missing=1; done
# A build made with other flags (before AMX was left out) is rebuilt.
[ "$(cat "$ref/build/lamina-flags" 2>/dev/null)" = "$flags" ] || missing=1
if [ "$missing" = 1 ]; then
  echo "reference: building llama.cpp from llama-cpp-python==0.3.36 in $ref (10-15 minutes)" >&2
  fetch_source
  PATH="$ref/venv/bin:$PATH"
  rm -rf "$ref/build"
  cmake -S "$src" -B "$ref/build" -G Ninja -DCMAKE_BUILD_TYPE=Release -DGGML_NATIVE=ON \
    -DCMAKE_C_FLAGS="$flags" -DCMAKE_CXX_FLAGS="$flags" \
    -DLLAMA_CURL=OFF -DBUILD_SHARED_LIBS=OFF -DLLAMA_BUILD_TESTS=OFF -DLLAMA_OPENSSL=OFF \
    -DLLAMA_BUILD_SERVER=OFF >&2
  # shellcheck disable=SC2086
  cmake --build "$ref/build" -j"$(nproc)" --target $targets >&2
  echo "$flags" >"$ref/build/lamina-flags"
fi
echo "$ref/build"

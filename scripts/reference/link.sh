#!/usr/bin/env bash
# Builds a C++ program against the 2026 reference's libllama (built by
# build.sh), next to the reference outside the repository, when the source
# is newer than the program; prints the program's path.
#
#   scripts/reference/link.sh scripts/reference/probe.cpp probe
set -euo pipefail
cd "$(dirname "$0")/../.."
source_file="$1"
build=$(scripts/reference/build.sh)
ref=$(dirname "$build")
src="$ref/llama_cpp_python-0.3.36/vendor/llama.cpp"
exe="$ref/$2"
if [ ! -x "$exe" ] || [ "$source_file" -nt "$exe" ]; then
  c++ -O2 -std=c++17 "$source_file" -I"$src/include" -I"$src/ggml/include" \
    "$build/src/libllama.a" "$build"/ggml/src/libggml.a "$build"/ggml/src/libggml-cpu.a \
    "$build"/ggml/src/libggml-base.a -fopenmp -lpthread -o "$exe" >&2
fi
echo "$exe"

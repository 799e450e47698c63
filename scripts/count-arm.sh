#!/usr/bin/env bash
# Guest instructions per token on aarch64, lamina against the 2026 llama.cpp
# reference, counted under qemu-user with the insncount plugin
# (../shared/tools/qemu-insncount): x86 timings say nothing about ARM, the
# instruction count is exact and repeatable. Prints two markdown tables,
# instructions per prompt token (pp) and per generated token (tg), with the
# ratio lamina / llama.cpp, per model and per qemu CPU model.
#
#   scripts/count-arm.sh [MODEL.gguf ...]
#
# Without arguments: SmolLM2-135M requantized by lamina to Q4_K_M (as
# scripts/bench-vs-llamacpp.sh does) and Gemma 3 270M Q4_K_M.
#
# Each engine runs its bench (lamina bench / llama-bench) with 1 thread, one
# repetition, twice per test with different sizes; the per-token cost is the
# count difference over the token difference. Both run a warm-up before the
# repetition: lamina's is the same size as the test (pp and tg: 2 x the
# tokens), llama-bench's is the same size for pp and 1 token for tg (so its
# tg difference is 1 x the tokens). Model loading, repacking and any other
# fixed cost cancel out. llama-bench pads its context to 256 cells, so lamina
# runs with -c 256.
#
# Builds (cached under $LAMINA_CACHE, default ~/.cache/lamina, never in the
# repository): lamina for aarch64-unknown-linux-gnu ($CARGO_TARGET_DIR is
# honoured); the reference's source (scripts/reference/build.sh --source);
# one static aarch64 llama-bench per -march (cross gcc, GGML_NATIVE=OFF); the
# qemu plugin. On this 2-core machine: ~18 minutes of build per -march,
# ~5 for lamina; counting about
# 3 minutes per model and CPU model (the defaults: 13 minutes). Not part of
# the test command.
#
# Environment:
#   CPUS      qemu CPU models (default "neoverse-n1 max,sve=off"; also known:
#             "max,sve128=on" "max,sve256=on" "max,sve512=on", cortex-a53,
#             cortex-a72, a64fx)
#   PP        two prompt sizes (default "16 48")
#   TG        two generation sizes (default "4 12")
#   LAMINA_CACHE, CARGO_TARGET_DIR, INSNCOUNT_SRC (plugin source directory,
#   default ../shared/tools/qemu-insncount next to the repository)
set -euo pipefail
cd "$(dirname "$0")/.."
read -r -a cpus <<<"${CPUS:-neoverse-n1 max,sve=off}"
read -r pp1 pp2 <<<"${PP:-16 48}"
read -r tg1 tg2 <<<"${TG:-4 12}"
cache="${LAMINA_CACHE:-$HOME/.cache/lamina}"
plugin_src="${INSNCOUNT_SRC:-$PWD/../shared/tools/qemu-insncount}"
target_dir="${CARGO_TARGET_DIR:-target}"
export CARGO_TARGET_AARCH64_UNKNOWN_LINUX_GNU_LINKER="${CARGO_TARGET_AARCH64_UNKNOWN_LINUX_GNU_LINKER:-aarch64-linux-gnu-gcc}"

log() { echo "count-arm: $*" >&2; }

# The -march the reference is built with for a qemu CPU model: what that
# model exposes (dotprod, FP16 arithmetic, i8mm, SVE), as a native build on
# such a CPU would use. ggml picks its kernels (and repacked layouts: Q4_K
# 8x4 with dotprod, 8x8 with i8mm) at compile time from these flags.
march_for() {
  case "$1" in
    cortex-a53 | cortex-a72) echo armv8-a ;;
    cortex-a76 | neoverse-n1) echo armv8.2-a+dotprod+fp16 ;;
    max,sve=off) echo armv8.6-a+dotprod+fp16+i8mm ;;
    max,sve*=on) echo armv8.6-a+dotprod+fp16+i8mm+sve+sve2 ;;
    a64fx) echo armv8.2-a+fp16+sve ;;
    *) log "no -march known for qemu CPU '$1'"; exit 1 ;;
  esac
}

# The qemu plugin, built once (again when its source changes).
build_plugin() {
  local so="$cache/insncount/libinsncount.so"
  if [ ! -f "$so" ] || [ "$plugin_src/insncount.c" -nt "$so" ]; then
    mkdir -p "$cache/insncount"
    gcc -O2 -shared -fPIC -fvisibility=hidden -I"$plugin_src" \
      -o "$so" "$plugin_src/insncount.c"
  fi
  echo "$so"
}

# A static aarch64 llama-bench for one -march, built once; prints its path.
build_ref() {
  local march=$1 src venv dir
  src=$(scripts/reference/build.sh --source)
  venv="$(cd "$src/../../.." && pwd)/venv/bin"
  dir="$cache/ref-arm/$march"
  if [ ! -x "$dir/bin/llama-bench" ]; then
    command -v aarch64-linux-gnu-g++ >/dev/null ||
      { log "the reference needs the aarch64 C++ cross compiler: apt-get install g++-aarch64-linux-gnu"; exit 1; }
    log "building llama-bench for aarch64 -march=$march in $dir (~18 minutes)"
    mkdir -p "$dir"
    PATH="$venv:$PATH" cmake -S "$src" -B "$dir" -G Ninja -DCMAKE_BUILD_TYPE=Release \
      -DCMAKE_C_COMPILER=aarch64-linux-gnu-gcc -DCMAKE_CXX_COMPILER=aarch64-linux-gnu-g++ \
      -DCMAKE_SYSTEM_NAME=Linux -DCMAKE_SYSTEM_PROCESSOR=aarch64 \
      -DGGML_NATIVE=OFF -DGGML_CPU_ARM_ARCH="$march" -DGGML_CPU_ALL_VARIANTS=OFF \
      -DGGML_BACKEND_DL=OFF -DBUILD_SHARED_LIBS=OFF -DGGML_STATIC=ON \
      -DCMAKE_EXE_LINKER_FLAGS=-static -DGGML_CCACHE=OFF \
      -DLLAMA_CURL=OFF -DLLAMA_BUILD_TESTS=OFF -DLLAMA_OPENSSL=OFF \
      -DLLAMA_BUILD_SERVER=OFF >"$dir.configure.log" 2>&1 ||
      { log "configure failed, see $dir.configure.log"; exit 1; }
    PATH="$venv:$PATH" cmake --build "$dir" -j"$(nproc)" --target llama-bench >"$dir.build.log" 2>&1 ||
      { log "build failed, see $dir.build.log"; exit 1; }
  fi
  echo "$dir/bin/llama-bench"
}

# The default models: SmolLM2 requantized to Q4_K_M (by the x86 lamina,
# built only when the file is missing) and Gemma 3 270M Q4_K_M.
default_models() {
  scripts/fetch-models.sh >&2
  local work="${LAMINA_BENCH_DIR:-$cache/bench}" out
  out="$work/SmolLM2-135M-Q4_K_M.gguf"
  if [ ! -f "$out" ]; then
    mkdir -p "$work"
    cargo build --release --quiet --bin lamina
    "$target_dir/release/lamina" quantize models/SmolLM2-135M-Instruct.Q4_1.gguf "$out.tmp" Q4_K_M >&2
    mv "$out.tmp" "$out"
  fi
  echo "$out"
  echo models/gemma-3-270m-q4_k_m.gguf
}

# count CPU NAME COMMAND...: runs COMMAND under qemu with the plugin and
# prints its instruction count; stdout and stderr go to $tmp/NAME.{out,err},
# the same redirection for every run.
count() {
  local cpu=$1 name=$2; shift 2
  qemu-aarch64 -L /usr/aarch64-linux-gnu -cpu "$cpu" \
    -plugin "$plugin,out=$tmp/$name.insns" "$@" >"$tmp/$name.out" 2>"$tmp/$name.err" ||
    { log "failed: $* (under -cpu $cpu)"; cat "$tmp/$name.err" >&2; exit 1; }
  sed -n 's/^insns: //p' "$tmp/$name.insns"
}

# per_token A B TOKENS: (B - A) / TOKENS.
per_token() { awk -v a="$1" -v b="$2" -v n="$3" 'BEGIN {printf "%.0f", (b - a) / n}'; }

# One engine's test runs: lamina|ref CPU MODEL P N prints the count.
run_lamina() {
  count "$1" lamina "$lamina" bench -m "$2" -c 256 -p "$3" -n "$4" -r 1 -t 1 --json
}
run_ref() {
  count "$1" ref "$ref_bench" -m "$2" -p "$3" -n "$4" -r 1 -t 1 -o json
}

# measure CPU MODEL: appends "model cpu pp_lamina pp_ref tg_lamina tg_ref"
# (instructions per token) to $tmp/results.
measure() {
  local cpu=$1 model=$2 a b pp_l pp_r tg_l tg_r variant
  a=$(run_lamina "$cpu" "$model" "$pp1" 0); b=$(run_lamina "$cpu" "$model" "$pp2" 0)
  pp_l=$(per_token "$a" "$b" $((2 * (pp2 - pp1))))
  variant=$(python3 -c 'import json,sys; print(json.load(sys.stdin)[0]["cpu_variant"])' <"$tmp/lamina.out")
  a=$(run_lamina "$cpu" "$model" 0 "$tg1"); b=$(run_lamina "$cpu" "$model" 0 "$tg2")
  tg_l=$(per_token "$a" "$b" $((2 * (tg2 - tg1))))
  a=$(run_ref "$cpu" "$model" "$pp1" 0); b=$(run_ref "$cpu" "$model" "$pp2" 0)
  pp_r=$(per_token "$a" "$b" $((2 * (pp2 - pp1))))
  a=$(run_ref "$cpu" "$model" 0 "$tg1"); b=$(run_ref "$cpu" "$model" 0 "$tg2")
  tg_r=$(per_token "$a" "$b" $((tg2 - tg1)))
  echo "$(basename "$model" .gguf) $cpu $pp_l $pp_r $tg_l $tg_r" >>"$tmp/results"
  echo "$cpu lamina variant $variant" >>"$tmp/variants"
  log "$(basename "$model" .gguf) on $cpu: pp $pp_l vs $pp_r, tg $tg_l vs $tg_r (lamina variant $variant)"
}

# table COLUMN TITLE: one markdown table from $tmp/results (column 3: pp, 5: tg).
table() {
  local col=$1
  echo "$2"
  echo
  echo "| model | qemu CPU | lamina | llama.cpp | ratio |"
  echo "|---|---|---|---|---|"
  awk -v c="$col" '{printf "| %s | %s | %.2f M | %.2f M | %.2f |\n", $1, $2, $c / 1e6, $(c + 1) / 1e6, $c / $(c + 1)}' "$tmp/results"
  echo
}

start=$SECONDS
models=("$@")
if [ ${#models[@]} -eq 0 ]; then
  defaults=$(default_models)
  mapfile -t models <<<"$defaults"
fi
plugin=$(build_plugin)
cargo build --release --quiet --target aarch64-unknown-linux-gnu --bin lamina
lamina="$target_dir/aarch64-unknown-linux-gnu/release/lamina"
# The source the binary was just built from (another edit may land later).
lamina_rev="$(git rev-parse --short HEAD)$(git diff --quiet HEAD -- src Cargo.toml Cargo.lock || echo +dirty)"
declare -A marches=()
for cpu in "${cpus[@]}"; do
  marches[$cpu]=$(march_for "$cpu")
  build_ref "${marches[$cpu]}" >/dev/null
done
log "builds done ($((SECONDS - start)) s)"

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
: >"$tmp/results"
: >"$tmp/variants"
for cpu in "${cpus[@]}"; do
  ref_bench=$(build_ref "${marches[$cpu]}")
  for model in "${models[@]}"; do
    measure "$cpu" "$model"
  done
done

echo "aarch64 guest instructions per token under qemu-user $(qemu-aarch64 --version | sed -n 's/.*version \([^ ]*\).*/\1/p'), 1 thread:"
echo "lamina $lamina_rev vs llama.cpp (llama-cpp-python 0.3.36 vendored, static aarch64 build)."
for cpu in "${cpus[@]}"; do
  echo "- $cpu: lamina variant $(sed -n "s/^$cpu lamina variant //p" "$tmp/variants" | sort -u | paste -sd/), llama.cpp -march=${marches[$cpu]}"
done
echo
table 3 "pp: instructions per prompt token (pp$pp2 - pp$pp1; lamina -c 256)"
table 5 "tg: instructions per generated token (tg$tg2 - tg$tg1; lamina -c 256)"
log "done in $((SECONDS - start)) s"

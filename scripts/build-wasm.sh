#!/usr/bin/env bash
# Builds the WebAssembly engines into the npm package: cargo, then the
# wasm-bindgen CLI (the version in Cargo.lock) and binaryen's wasm-opt from
# the tools cache set up by setup.sh (what wasm-pack would run, without a
# five-minute install of wasm-pack itself):
#   npm/dist/                  single-thread, SIMD128 (Node; pages without
#                              COOP/COEP)
#   npm/dist-threads/          threaded, SIMD128 + atomics and shared memory up
#                              to 4 GiB, rayon's pool on Web Workers
#                              (wasm-bindgen-rayon); needs the pinned nightly
#                              and build-std.
#   npm/dist-relaxed/, npm/dist-threads-relaxed/
#                              the same two with relaxed SIMD as well (the
#                              `relaxed-simd` CPU variant); the package loads
#                              them where the engine runs relaxed SIMD
#                              correctly (npm/simd.js).
#   npm/dist-memory64/         single-thread, SIMD128, 64-bit memory up to
#                              16 GiB (wasm64-unknown-unknown, tier 3: the
#                              pinned nightly and build-std), for models
#                              that do not fit in 4 GiB (npm/builds.js).
# `LAMINA_WASM_BUILDS="single"` (or any of "single threads single-relaxed
# threads-relaxed memory64") builds just those.
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/env.sh
builds="${LAMINA_WASM_BUILDS:-single threads single-relaxed threads-relaxed memory64}"

report() { ls -l "$1" | awk '{print "build-wasm: " $9 " " $5 " bytes"}'; }

# package TARGET_DIR OUT_DIR CARGO_ARGS...: the release library built for
# $WASM_TARGET (wasm32-unknown-unknown unless set), its JS bindings
# generated for `import` in browsers and Node, and the module optimised in
# place (wasm-opt also enables the features the
# module's target_features section lists, such as atomics and relaxed-simd,
# so a SIMD128 build stays free of relaxed instructions).
package() {
  local target_dir=$1 out=$2 target=${WASM_TARGET:-wasm32-unknown-unknown}
  shift 2
  CARGO_TARGET_DIR="$target_dir" cargo build --quiet --lib --release \
    --target "$target" "$@"
  rm -rf "$out"
  wasm-bindgen --target web --out-dir "$out" --out-name lamina \
    "$target_dir/$target/release/lamina.wasm"
  wasm-opt -O3 --enable-simd --enable-bulk-memory --enable-nontrapping-float-to-int \
    --enable-sign-ext --enable-mutable-globals "$out/lamina_bg.wasm" -o "$out/lamina_bg.wasm"
  report "$out/lamina_bg.wasm"
}


# The linker flags make the memory shared and imported (every worker gets
# the same one) and export the TLS symbols wasm-bindgen's thread start needs;
# without them current nightlies build an unshared memory.
threads_flags=(
  -C target-feature=+atomics,+bulk-memory,+mutable-globals,+simd128
  -C link-arg=--shared-memory -C link-arg=--import-memory
  -C link-arg=--max-memory=4294967296
  -C link-arg=--export=__wasm_init_tls -C link-arg=--export=__tls_size
  -C link-arg=--export=__tls_align -C link-arg=--export=__tls_base
)
# threaded TARGET_DIR OUT_DIR EXTRA_RUSTFLAGS...
threaded() {
  local target_dir=$1 out=$2
  shift 2
  RUSTUP_TOOLCHAIN="$LAMINA_NIGHTLY" RUSTFLAGS="${threads_flags[*]} $*" \
    package "$target_dir" "$out" \
    --no-default-features --features threads -Z build-std=panic_abort,std
}
build() {
  case $1 in
    single) RUSTFLAGS="-C target-feature=+simd128" package target/wasm-single npm/dist --no-default-features ;;
    single-relaxed)
      RUSTFLAGS="-C target-feature=+simd128,+relaxed-simd" \
        package target/wasm-relaxed npm/dist-relaxed --no-default-features ;;
    threads) threaded target/wasm-threads npm/dist-threads ;;
    threads-relaxed)
      threaded target/wasm-threads-relaxed npm/dist-threads-relaxed -C target-feature=+relaxed-simd ;;
    memory64)
      WASM_TARGET=wasm64-unknown-unknown RUSTUP_TOOLCHAIN="$LAMINA_NIGHTLY" \
        RUSTFLAGS="-C target-feature=+simd128 -C link-arg=--max-memory=17179869184" \
        package target/wasm-memory64 npm/dist-memory64 --no-default-features -Z build-std=panic_abort,std ;;
    *) echo "build-wasm: unknown build '$1'" >&2; return 1 ;;
  esac
}

# Two builds at a time: each spends long stretches on one core (parsing,
# type checking, the single-threaded parts of LTO and wasm-opt), so a pair
# shares the two cores better than one build alone. Each has its own
# target directory; a failed build fails the script.
pids=()
for b in $builds; do
  build "$b" &
  pids+=($!)
  if ((${#pids[@]} == 2)); then
    for p in "${pids[@]}"; do wait "$p"; done
    pids=()
  fi
done
for p in "${pids[@]}"; do wait "$p"; done

#!/usr/bin/env bash
# Builds both WebAssembly engines into the npm package, with wasm-pack and
# binaryen's wasm-opt from the tools cache set up by setup.sh:
#   npm/dist/          single-thread, SIMD128 (Node; pages without COOP/COEP)
#   npm/dist-threads/  threaded, SIMD128 + atomics and shared memory up to
#                      4 GiB, rayon's pool on Web Workers (wasm-bindgen-rayon);
#                      needs the pinned nightly and build-std.
# `LAMINA_WASM_BUILDS="single"` (or "threads") builds just one.
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/env.sh
builds="${LAMINA_WASM_BUILDS:-single threads}"

report() { ls -l "$1" | awk '{print "build-wasm: " $9 " " $5 " bytes"}'; }

if [[ " $builds " == *" single "* ]]; then
  RUSTFLAGS="-C target-feature=+simd128" \
    wasm-pack --quiet build . --release --target web --no-pack \
    --out-dir npm/dist --out-name lamina -- --no-default-features
  rm -f npm/dist/.gitignore
  report npm/dist/lamina_bg.wasm
fi

if [[ " $builds " == *" threads "* ]]; then
  # The linker flags make the memory shared and imported (every worker gets
  # the same one) and export the TLS symbols wasm-bindgen's thread start
  # needs; without them current nightlies build an unshared memory.
  threads_flags=(
    -C target-feature=+atomics,+bulk-memory,+mutable-globals,+simd128
    -C link-arg=--shared-memory -C link-arg=--import-memory
    -C link-arg=--max-memory=4294967296
    -C link-arg=--export=__wasm_init_tls -C link-arg=--export=__tls_size
    -C link-arg=--export=__tls_align -C link-arg=--export=__tls_base
  )
  RUSTUP_TOOLCHAIN="$LAMINA_NIGHTLY" RUSTFLAGS="${threads_flags[*]}" \
    CARGO_TARGET_DIR=target/wasm-threads \
    wasm-pack --quiet build . --release --target web --no-pack \
    --out-dir npm/dist-threads --out-name lamina \
    -- --no-default-features --features threads -Z build-std=panic_abort,std
  rm -f npm/dist-threads/.gitignore
  report npm/dist-threads/lamina_bg.wasm
fi

#!/usr/bin/env bash
# Installs everything the tests need on a fresh machine of this kind (Debian 12,
# rustup, Node 20). Idempotent: each step checks first, so a second run takes
# about a second.
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/env.sh
say() { echo "setup: $*" >&2; }

# --- Debian packages: aarch64 cross linker and libc, qemu-user, Chromium.
need_apt=()
command -v aarch64-linux-gnu-gcc >/dev/null || need_apt+=(gcc-aarch64-linux-gnu)
[ -d /usr/aarch64-linux-gnu/lib ] || need_apt+=(libc6-dev-arm64-cross)
command -v qemu-aarch64 >/dev/null || need_apt+=(qemu-user)
command -v chromium >/dev/null || need_apt+=(chromium)
command -v chromedriver >/dev/null || need_apt+=(chromium-driver)
if [ ${#need_apt[@]} -gt 0 ]; then
  say "apt-get install ${need_apt[*]}"
  SUDO=; [ "$(id -u)" = 0 ] || SUDO=sudo
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends \
    gcc-aarch64-linux-gnu libc6-dev-arm64-cross qemu-user chromium chromium-driver >/dev/null
fi

# --- Rust targets and the pinned nightly.
installed=$(rustup target list --installed)
for t in aarch64-unknown-linux-gnu wasm32-unknown-unknown; do
  grep -qx "$t" <<<"$installed" || { say "rustup target add $t"; rustup target add "$t"; }
done
if ! rustc "+$LAMINA_NIGHTLY" -V >/dev/null 2>&1 \
  || ! rustup component list --toolchain "$LAMINA_NIGHTLY" --installed | grep -q '^rust-src' \
  || ! rustup target list --toolchain "$LAMINA_NIGHTLY" --installed | grep -qx wasm32-unknown-unknown; then
  say "rustup toolchain install $LAMINA_NIGHTLY"
  rustup toolchain install "$LAMINA_NIGHTLY" --profile minimal \
    --component rust-src --target wasm32-unknown-unknown
fi

# --- Cargo-installed tools, at exact versions.
bindgen_version=$(awk '/^name = "wasm-bindgen"$/ { getline; gsub(/[^0-9.]/, ""); print; exit }' Cargo.lock)
[ -n "$bindgen_version" ] || { say "no wasm-bindgen in Cargo.lock"; exit 1; }
if [ "$(wasm-bindgen --version 2>/dev/null)" != "wasm-bindgen $bindgen_version" ]; then
  say "cargo install wasm-bindgen-cli $bindgen_version"
  # --locked has failed once on a stale lock entry; retry without it.
  cargo install -q wasm-bindgen-cli --version "$bindgen_version" --locked \
    || cargo install -q wasm-bindgen-cli --version "$bindgen_version" --force
fi
if [ "$(cargo fuzz --version 2>/dev/null)" != "cargo-fuzz $CARGO_FUZZ_VERSION" ]; then
  say "cargo install cargo-fuzz $CARGO_FUZZ_VERSION"
  cargo install -q --locked cargo-fuzz --version "$CARGO_FUZZ_VERSION"
fi

# --- wasm-opt: Debian's binaryen 108 writes broken modules; npm's 132 works.
if [ "$("$LAMINA_TOOLS/node_modules/.bin/wasm-opt" --version 2>/dev/null)" != "wasm-opt version 132 (version_132)" ]; then
  say "npm install binaryen@$BINARYEN_VERSION into $LAMINA_TOOLS"
  mkdir -p "$LAMINA_TOOLS"
  npm install --silent --no-audit --no-fund --prefix "$LAMINA_TOOLS" "binaryen@$BINARYEN_VERSION"
fi

# --- playwright-core drives Debian's Chromium in the browser test (it never
# downloads a browser of its own).
if [ "$(node -p "require('$LAMINA_TOOLS/node_modules/playwright-core/package.json').version" 2>/dev/null)" != "$PLAYWRIGHT_CORE_VERSION" ]; then
  say "npm install playwright-core@$PLAYWRIGHT_CORE_VERSION into $LAMINA_TOOLS"
  mkdir -p "$LAMINA_TOOLS"
  npm install --silent --no-audit --no-fund --prefix "$LAMINA_TOOLS" "playwright-core@$PLAYWRIGHT_CORE_VERSION"
fi

node -e 'const [a, b] = process.versions.node.split(".").map(Number);
  if (a < 20 || (a === 20 && b < 16)) { console.error("setup: Node >= 20.16 needed, have " + process.versions.node); process.exit(1); }'
say "ready"

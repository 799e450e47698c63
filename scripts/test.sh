#!/usr/bin/env bash
# The test command: set-up, then every target's tests, one summary line each.
#   x86_64 native; aarch64 under qemu for each CPU model in scripts/env.sh;
#   wasm32 in Node and in headless Chromium; the packed npm package in Node;
#   the chat page (both wasm builds) in headless Chromium;
#   a 40-second fuzz run of each fuzz target (two at a time).
# Exits non-zero if any target fails or runs no tests.
set -uo pipefail
cd "$(dirname "$0")/.."
source scripts/env.sh
start=$SECONDS
summary=()
# took NAME T0: a summary line with the time since T0 of a step outside the
# stages (set-up, builds, waits), so a slower run shows where it went.
took() { summary+=("     $1: $((SECONDS - $2)) s"); }

t0=$SECONDS
scripts/setup.sh || { echo "setup failed"; exit 1; }
scripts/fetch-models.sh || { echo "fetch-models failed"; exit 1; }
took "set-up and models" "$t0"

logs=target/test-logs
mkdir -p "$logs"
total_pass=0
total_fail=0
failed=0

# run NAME COMMAND...: runs one target's tests, shows its output, and records
# the passed/failed counts read from cargo's, wasm-bindgen's or node's results.
run() {
  local name=$1; shift
  local log="$logs/${name//[^A-Za-z0-9_.-]/_}.log" t0=$SECONDS status pass fail
  echo "=== $name: $*"
  "$@" 2>&1 | tee "$log"
  status=${PIPESTATUS[0]}
  # libFuzzer closes a clean run with "Done N runs in S second(s)": one
  # fuzz target that passed (a crash ends it with a non-zero exit instead).
  pass=$(sed -nE 's/^test result: [A-Za-z]+\. ([0-9]+) passed.*/\1/p; s/^ℹ pass ([0-9]+)$/\1/p; s/^Done [0-9]+ runs in [0-9]+ second.*/1/p' "$log" | awk '{s+=$1} END {print s+0}')
  fail=$(sed -nE 's/^test result: [A-Za-z]+\. [0-9]+ passed; ([0-9]+) failed.*/\1/p; s/^ℹ fail ([0-9]+)$/\1/p' "$log" | awk '{s+=$1} END {print s+0}')
  if [ "$status" != 0 ] || [ "$pass" = 0 ]; then
    failed=1
    [ "$fail" = 0 ] && fail=1
    summary+=("FAIL $name: $pass passed, $fail failed (exit $status, $((SECONDS - t0)) s; log $log)")
  else
    summary+=("ok   $name: $pass passed, $fail failed ($((SECONDS - t0)) s)")
  fi
  total_pass=$((total_pass + pass))
  total_fail=$((total_fail + fail))
}

# --- native; the expected variant comes from /proc/cpuinfo, not from lamina.
has_flags() { for f in "$@"; do grep -qw "$f" /proc/cpuinfo || return 1; done; }
if has_flags avx2 fma f16c avx512f avx512bw avx512vl avx512_vnni; then
  native_variant=avx512
elif has_flags avx2 fma f16c avx_vnni; then
  native_variant=avx-vnni
elif has_flags avx2 fma f16c; then
  native_variant=avx2
else
  native_variant=scalar
fi
LAMINA_EXPECT_VARIANT=$native_variant run "x86_64" cargo test --no-fail-fast

# --- aarch64 under qemu, one run per CPU model (built once). Every model runs
# the kernel tests and the golden forward-pass gates for its variant; the
# target-independent suites and the model-heavy ones (context, completion,
# embedding, CLI, every variant at 1 and 2 threads, perplexity) run on
# $AARCH64_FULL_CPU, where every variant is available: emulation makes them
# minutes each.
t0=$SECONDS
cargo test --target aarch64-unknown-linux-gnu --no-run -q 2>&1 | tail -n 3
took "aarch64 test build" "$t0"
# The other models run what depends on the variant: the kernels, the
# quantizers, the repacked layouts, the backend's ops and the golden forward
# passes (target-independent code, such as tokenizers, templates and the
# GGUF reader, runs on the full model, natively and in wasm).
light_tests=()
for t in backend_ops families generate kernels quantizers registry repack; do
  light_tests+=(--test "$t")
done
for cpu in "${AARCH64_CPUS[@]}"; do
  qemu="qemu-aarch64 -L /usr/aarch64-linux-gnu -cpu $cpu"
  read -r expect_variant expect_bits <<<"${AARCH64_EXPECT[$cpu]}"
  if [ "$cpu" = "$AARCH64_FULL_CPU" ]; then
    selection=(--)
    for t in "${AARCH64_EMULATION_SKIP[@]}"; do selection+=(--skip "$t"); done
  else
    # The families' light subset: the 2- and 3-bit k-quants on a small
    # vocabulary (the other types' kernels are in the kernel tests, on
    # every variant; their families run on $AARCH64_FULL_CPU). Two of the
    # five golden prompts (the others differ in text, not in kernels).
    selection=(--lib "${light_tests[@]}" -- --skip every_variant --skip perplexity
      --skip chat_q4_1 --skip prose_q4_1 --skip chat_study_tips_q4_1
      --skip qwen2_biases --skip gemma3_sliding --skip smollm3_no_rope --skip granite_
      --skip phi3_ --skip llama3_rope --skip qwen3_qk_norm --skip _iq4_ --skip llama_bf16
      --skip moe --skip lfm2 --skip qwen35 --skip gemma4 --skip sequences_in_shared_batches)
  fi
  LAMINA_EXPECT_VARIANT=$expect_variant LAMINA_EXPECT_SVE_BITS=$expect_bits \
  CARGO_TARGET_AARCH64_UNKNOWN_LINUX_GNU_RUNNER="$qemu" LAMINA_EXEC_WRAPPER="$qemu" \
    run "aarch64 $cpu" cargo test --target aarch64-unknown-linux-gnu --no-fail-fast "${selection[@]}"
done

# --- wasm32: Node runs every test; Chromium those that need no file system.
export CARGO_TARGET_WASM32_UNKNOWN_UNKNOWN_RUNNER=wasm-bindgen-test-runner
wasm_flags="-C target-feature=+simd128"
# Without debug info: a test module with it is ~68 MB, and the runner spends
# ~10 s reading each one (3-4 minutes over the suites); without, ~1.5 s.
# At opt-level 2, not the dev profile's 1: the suites run whole models
# through one thread; at 1 they ran ~9 minutes in this stage, at 2 under 4
# (building them at 2 took ~2.5 minutes alone).
# (Given to the wasm stages only: exported, they would make the npm stage's
# native cargo commands rebuild what the x86_64 stage built with debug info.)
wasm_env=(CARGO_PROFILE_DEV_DEBUG=false CARGO_PROFILE_DEV_OPT_LEVEL=2 RUSTFLAGS="$wasm_flags")
browser_tests=(--test gguf_hostile --test gguf_roundtrip --test gguf_stream --test wasm_api --test kernels --test registry)
# The relaxed-SIMD variant's kernels against their scalar twins, in Chromium
# (Node 20 runs relaxed SIMD only behind a V8 flag; the npm tests use it
# there for whole models). Its own target directory keeps the SIMD128
# stages' builds.
relaxed_tests=(--test kernels --test registry --test repack --test backend_ops)
relaxed_env=(CARGO_PROFILE_DEV_DEBUG=false CARGO_TARGET_DIR=target/wasm-relaxed-tests RUSTFLAGS="$wasm_flags,+relaxed-simd")
# Every wasm test module is built first, on both cores; the runs then take
# one core (one test process at a time), and the npm package's five release
# wasm builds take the other, in the background (the npm stage waits for
# them). Started during the test builds, they made those builds ~3 minutes
# longer.
t0=$SECONDS
env "${wasm_env[@]}" cargo test --target wasm32-unknown-unknown --no-default-features --no-run -q 2>&1 | tail -n 3
took "wasm32 test build" "$t0"
t0=$SECONDS
env "${relaxed_env[@]}" cargo test --target wasm32-unknown-unknown --no-default-features --no-run -q "${relaxed_tests[@]}" 2>&1 | tail -n 3
took "wasm32 relaxed-simd test build" "$t0"
scripts/build-wasm.sh > "$logs/build-wasm.log" 2>&1 &
build_wasm_pid=$!
# (`run` is a shell function: `env` cannot run it, so its stages take the
# same settings as prefix assignments.)
CARGO_PROFILE_DEV_DEBUG=false CARGO_PROFILE_DEV_OPT_LEVEL=2 RUSTFLAGS="$wasm_flags" run "wasm32 node" \
  cargo test --target wasm32-unknown-unknown --no-default-features --no-fail-fast
CARGO_PROFILE_DEV_DEBUG=false CARGO_PROFILE_DEV_OPT_LEVEL=2 RUSTFLAGS="$wasm_flags" WASM_BINDGEN_USE_BROWSER=1 CHROMEDRIVER=/usr/bin/chromedriver \
  run "wasm32 chromium" cargo test --target wasm32-unknown-unknown --no-default-features --no-fail-fast "${browser_tests[@]}"
CARGO_PROFILE_DEV_DEBUG=false CARGO_TARGET_DIR=target/wasm-relaxed-tests RUSTFLAGS="$wasm_flags,+relaxed-simd" \
  WASM_BINDGEN_USE_BROWSER=1 CHROMEDRIVER=/usr/bin/chromedriver \
  run "wasm32 chromium relaxed-simd" cargo test --target wasm32-unknown-unknown --no-default-features --no-fail-fast "${relaxed_tests[@]}"

# --- the npm package, packed and installed as a user would. The fuzz build
# starts in the background once the wasm builds are done: the package's tests
# and the chat page's leave a core free for much of their time.
t0=$SECONDS
wait "$build_wasm_pid"
build_wasm_status=$?
echo "(waited $((SECONDS - t0)) s for the wasm builds)"
took "wait for the npm package's wasm builds" "$t0"
cargo "+$LAMINA_NIGHTLY" fuzz build > "$logs/fuzz-build.log" 2>&1 &
fuzz_build_pid=$!
npm_stage() {
  cat "$logs/build-wasm.log"
  [ "$build_wasm_status" = 0 ] || { echo "build-wasm.sh failed (exit $build_wasm_status)"; return 1; }
  scripts/test-npm.sh
}
run "npm node" npm_stage
# --- the chat page in headless Chromium: threaded build with 2 threads, and
# the single-thread fallback without cross-origin isolation.
LAMINA_SKIP_BUILD=1 run "web chromium" scripts/test-web.sh

# --- fuzzing for 40 seconds per target, two at a time (each runs on one
# core): the GGUF parser, model loading (a small llama with mutated keys and
# tensors), the tokenizers (random vocabularies and text), the sampler
# (any parameters and logits) and chat templates. New inputs go to the
# ignored corpus dirs; the seeds are in the repository. (40 s, not 60: the
# whole run came to 45-47 minutes on this 2-core machine, its budget 45;
# LAMINA_FUZZ_SECONDS runs longer.)
fuzz_seconds=${LAMINA_FUZZ_SECONDS:-40}
fuzz_targets=(gguf_parse model_load tokenizer sampler chat_template grammar)
t0=$SECONDS
wait "$fuzz_build_pid"
fuzz_build_status=$?
echo "(waited $((SECONDS - t0)) s for the fuzz build)"
took "wait for the fuzz build" "$t0"
fuzz_all() {
  tail -n 3 "$logs/fuzz-build.log"
  [ "$fuzz_build_status" = 0 ] || { echo "cargo fuzz build failed (exit $fuzz_build_status)"; return 1; }
  local status=0 i t pids
  for ((i = 0; i < ${#fuzz_targets[@]}; i += 2)); do
    pids=()
    for t in "${fuzz_targets[@]:i:2}"; do
      cargo "+$LAMINA_NIGHTLY" fuzz run "$t" -- -max_total_time="$fuzz_seconds" -timeout=30 \
        -print_final_stats=1 > "$logs/fuzz-$t.log" 2>&1 &
      pids+=($!)
    done
    for t in "${pids[@]}"; do wait "$t" || status=1; done
  done
  for t in "${fuzz_targets[@]}"; do
    echo "--- fuzz $t"
    tail -n 30 "$logs/fuzz-$t.log"
  done
  return $status
}
run "fuzz (${#fuzz_targets[@]} targets)" fuzz_all

echo
echo "=== summary ($((SECONDS - start)) s)"
printf '%s\n' "${summary[@]}"
echo "total: $total_pass passed, $total_fail failed"
exit $failed

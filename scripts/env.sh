# Shared settings for the scripts; sourced, not run.
# The pinned nightly (rustc 1.97.0-nightly e50aa6fba, the one this machine image
# ships as `nightly`) for cargo-fuzz and, later, the threaded wasm build.
LAMINA_NIGHTLY=nightly-2026-05-20
# Tools installed outside cargo (binaryen's wasm-opt from npm).
LAMINA_TOOLS="${LAMINA_TOOLS:-$HOME/.cache/lamina/tools}"
# Exact tool versions (wasm-bindgen-cli must equal the wasm-bindgen in Cargo.lock).
CARGO_FUZZ_VERSION=0.13.2
BINARYEN_VERSION=132.0.0
PLAYWRIGHT_CORE_VERSION=1.57.0
# qemu CPU models the aarch64 tests run under: NEON only; NEON+dotprod;
# NEON+dotprod+i8mm; SVE at 128, 256 and 512 bits; SVE-512 without dotprod
# (A64FX). Each with the variant the registry must select on it (and SVE bits).
AARCH64_CPUS=(cortex-a53 neoverse-n1 "max,sve=off" "max,sve128=on" "max,sve256=on" "max,sve512=on" a64fx)
# The model that also runs the model-heavy suites (all NEON and SVE variants).
AARCH64_FULL_CPU="max,sve256=on"
# Tests the full model skips: they check logic above the kernels (batching,
# truncation, context shift, stop strings, samplers, the allocation count,
# a whole-file k-quant mixture: scalar quantizers; free-running completions
# through the completion API and perplexity's multi-sequence batches: the
# golden gates check the same forward passes teacher-forced; the IQ4 families,
# whose test-time quantizer search is float work that emulation makes slow:
# their kernels are checked bit for bit on every model), the same code on
# every target, run natively and in wasm; under emulation each costs a
# minute or more. Three of the five greedy prompts and MiniLM's per-token
# vectors are skipped too: they run the same kernels as the prompts and the
# pooled vectors that stay, with other text. So are the requantizers'
# whole-file checks (scalar quantizers, the same bytes on every target), the
# CLI's JSON outputs (the forward passes behind them are gated here by the
# golden tests; the CLI's own logic runs natively) and the load-time
# validation of hostile files. So are the shared-batch sequence goldens of
# Qwen3-MoE, Qwen3.5 and Gemma 3 and 4 (their 151k and 32k vocabularies
# make each output costly; LFM2's, whose recurrent states they test,
# stays), Granite MoE (Qwen3-MoE's experts run the same code) and Gemma 4's
# session (the format is target-independent code). Every other golden
# forward pass still runs.
AARCH64_EMULATION_SKIP=(
  decoding_allocates_nothing_per_token hybrid_families_decode_without_allocating
  bad_inputs_are_clear_errors sequences_in_one_batch_equal_separate_runs
  long_prompts_are_cut_and_full_contexts_shift an_abort_from_the_callback_stops_within_one_token
  stop_strings_end_the_text_and_are_never_emitted chat_messages_use_the_model_template
  end_of_generation_and_ignore_eos seeded_sampling_is_reproducible
  run_sampler_options bench_json_has_llama_bench_keys
  k_quant_mixtures_like_llama_quantize greedy_completions_follow_llama_cpp
  perplexity_q4_1 gemma3_iq4_xs qwen2_iq4_nl
  chat_q4_1 prose_q4_1 chat_study_tips_q4_1 minilm_per_token_vectors_match_llama_cpp
  twenty_thousand_tokens_with_context_shifts_keep_memory_flat
  like_llama_quantize _json run_chat_two_threads
  hostile_llama_hyperparameters hostile_bert_files vocabulary_and_tensors_must_match
  a_loaded_session_continues_as_if_never_saved a_session_keeps_its_first_tokens_when_asked
  a_bad_session_is_an_error_that_changes_nothing a_session_loads_only_into_its_model_and_cache_shape
  run_with_a_prompt_cache parallel_streams_equal_their_solo_runs parallel_requests_keep_their_own_state
  parallel_cancel_and_errors required_tool_calls_follow_the_tools run_with_tools
  run_with_a_lora_adapter
  qwen3moe_sequences_in_shared_batches gemma3_sequences_in_shared_batches granitemoe_shared_expert_q8_0
  qwen35_sequences_in_shared_batches gemma4_sequences_in_shared_batches
  gemma4_sessions_keep_caches_of_two_widths
)
declare -A AARCH64_EXPECT=(
  [cortex-a53]="neon 0" [neoverse-n1]="neon-dotprod 0" ["max,sve=off"]="neon-i8mm 0"
  ["max,sve128=on"]="sve 128" ["max,sve256=on"]="sve 256" ["max,sve512=on"]="sve 512"
  [a64fx]="sve 512"
)
export PATH="$LAMINA_TOOLS/node_modules/.bin:$HOME/.cargo/bin:$PATH"

//! The decoder families against the 2026 llama.cpp reference, on small
//! models with seeded random weights and real tokenizers
//! (`common::synth`): the file is rebuilt byte for byte (its sha256 is the
//! one the goldens were made from), the prompt tokenizes to the
//! reference's ids, and the run is teacher-forced against the reference's
//! (`common::teacher`: last-prompt logits, top-1 and top-5 per step).
//! Goldens: `native-tests/golden/families/`, made by
//! `scripts/reference/make-goldens.sh` (it records its commands there).

mod common;

#[cfg(target_arch = "wasm32")]
use wasm_bindgen_test::wasm_bindgen_test as test;

use std::sync::Arc;

use common::synth::family;
use common::teacher::{read_f32, shared_batches, teacher_forced, F16, QUANTIZED};
use common::{golden_path, json_ids, read_file, sha256_hex};
use lamina::backend::cpu::{CpuDevice, CpuVariant};
use lamina::context::{Batch, Context, ContextParams};
use lamina::gguf::GgufFile;
use lamina::model::Model;
use lamina::session;
use lamina::tensor::GgmlType;

fn golden(name: &str) -> serde_json::Value {
    serde_json::from_slice(&read_file(&golden_path(&format!("families/{name}.json")))).unwrap()
}

/// Steps checked: natively all; under emulation and in wasm a few.
const STEPS: usize = if cfg!(target_arch = "x86_64") { 32 } else { 4 };

fn check(name: &str, variant: Option<CpuVariant>, threads: usize) {
    check_steps(name, variant, threads, STEPS)
}

fn check_steps(name: &str, variant: Option<CpuVariant>, threads: usize, steps: usize) {
    let device = CpuDevice::new(None).unwrap();
    let device = match variant {
        Some(v) => device.with_variant(v).unwrap(),
        None => device,
    }
    .shared();
    let synth = family(name);
    let g = golden(name);
    let bytes = synth.write();
    assert_eq!(
        sha256_hex(&bytes),
        g["model_sha256"].as_str().unwrap(),
        "{name}: the generator no longer writes the file the goldens were made from"
    );
    let file = Arc::new(GgufFile::from_bytes(bytes).unwrap());
    let model = Arc::new(Model::load(file, device, None).unwrap());
    assert_eq!(model.arch_name(), synth.arch);
    let prompt = g["prompt"].as_str().unwrap();
    assert_eq!(
        model.vocab.tokenize(prompt, true, true).unwrap(),
        json_ids(&g["prompt_ids"]),
        "{name}: prompt tokens"
    );
    let mut ctx = Context::new(
        model,
        ContextParams {
            n_ctx: 512,
            n_threads: threads,
            ..ContextParams::default()
        },
    )
    .unwrap();
    let reference = read_f32(&golden_path(&format!(
        "families/{name}.last_prompt_logits.f32"
    )));
    let tol = if matches!(synth.weights, GgmlType::F16 | GgmlType::BF16) {
        &F16
    } else {
        &QUANTIZED
    };
    teacher_forced(&mut ctx, name, &g, &reference, steps, tol);
}

#[test]
fn llama3_rope_freqs_q4_k() {
    check("llama3", None, 1);
}

#[test]
fn qwen2_biases_q8_0() {
    check("qwen2", None, 1);
}

#[test]
fn qwen3_qk_norm_q5_k() {
    check("qwen3", None, 1);
}

#[test]
fn gemma3_sliding_window_q4_0() {
    check("gemma3", None, 1);
}

#[test]
fn smollm3_no_rope_layers_q6_k() {
    check("smollm3", None, 1);
}

#[test]
fn phi3_fused_longrope_q5_1() {
    check("phi3", None, 1);
}

/// Qwen3-MoE: each token routed to 2 of 8 Q4_K experts per layer.
#[test]
fn qwen3moe_experts_q4_k() {
    check("qwen3moe", None, 1);
}

/// Two sequences in shared batches, then one copied and continued apart,
/// against the reference's outputs for each (`seqs.cpp`): the experts route
/// each sequence's tokens within one micro-batch.
#[test]
fn qwen3moe_sequences_in_shared_batches() {
    check_seqs("qwen3moe");
}

/// The same with Gemma 3's sliding windows, per sequence.
#[test]
fn gemma3_sequences_in_shared_batches() {
    check_seqs("gemma3");
}

/// What `lamina info` lists for the synthetic family `name`.
fn hyperparameters(name: &str) -> Vec<(&'static str, String)> {
    hyperparameters_of(family(name).write())
}

/// What `lamina info` lists for the model file `bytes`.
fn hyperparameters_of(bytes: Vec<u8>) -> Vec<(&'static str, String)> {
    let file = Arc::new(GgufFile::from_bytes(bytes).unwrap());
    let device = CpuDevice::new(None).unwrap().shared();
    Model::load(file, device, None)
        .unwrap()
        .arch()
        .hyperparameters()
}

/// The value of `key` in an info list (the first, if it repeats).
fn info_value<'a>(info: &'a [(&'static str, String)], key: &str) -> Option<&'a str> {
    info.iter()
        .find(|(k, _)| *k == key)
        .map(|(_, v)| v.as_str())
}

/// The info list's "layer kind" lines, in order.
fn layer_kinds<'a>(info: &'a [(&'static str, String)]) -> Vec<&'a str> {
    info.iter()
        .filter(|(k, _)| *k == "layer kind")
        .map(|(_, v)| v.as_str())
        .collect()
}

fn check_seqs(name: &str) {
    let g = golden(&format!("{name}.seqs"));
    let bytes = family(name).write();
    assert_eq!(
        sha256_hex(&bytes),
        g["model_sha256"].as_str().unwrap(),
        "{name}: the generator no longer writes the file the goldens were made from"
    );
    let file = Arc::new(GgufFile::from_bytes(bytes).unwrap());
    let device = CpuDevice::new(None).unwrap().shared();
    let model = Arc::new(Model::load(file, device, None).unwrap());
    let mut ctx = Context::new(
        model,
        ContextParams {
            n_ctx: 512,
            n_threads: 1,
            ..ContextParams::default()
        },
    )
    .unwrap();
    let checked = shared_batches(&mut ctx, name, &g, &QUANTIZED);
    assert_eq!(checked, 2 + 2 * 6 + 2 * 6, "{name}: outputs checked");
}

/// LFM2: short convolutions (a recurrent state per sequence) in two layers,
/// attention in the other two.
#[test]
fn lfm2_short_convolutions_q4_k() {
    check("lfm2", None, 1);
}

/// LFM2's sequences in shared batches: each token advances its own
/// sequence's convolution state, and a copied sequence continues from a
/// copy of the state.
#[test]
fn lfm2_sequences_in_shared_batches() {
    check_seqs("lfm2");
}

/// LFM2-MoE: a dense first layer, then 2 of 8 experts picked by sigmoid
/// plus a selection bias, weighted by the unbiased sigmoids.
#[test]
fn lfm2moe_sigmoid_experts_q4_k() {
    check("lfm2moe", None, 1);
}

/// `lamina info` names LFM2-MoE's gating, bias and dense lead.
#[test]
fn lfm2moe_info_names_the_gating() {
    let info = hyperparameters("lfm2moe");
    assert_eq!(
        info_value(&info, "experts"),
        Some("from layer 1: 2 used of 8, feed-forward 256 each, sigmoid gating, a selection bias, weights renormalised"),
        "{info:?}"
    );
}

/// Qwen3.5: gated DeltaNets (a convolution and a matrix state per value
/// head, per sequence) in three layers, gated attention over partial RoPE
/// in the fourth.
#[test]
fn qwen35_gated_delta_net_q4_k() {
    check("qwen35", None, 1);
}

/// Qwen3.5's sequences in shared batches: each sequence's run of tokens
/// goes through the recurrence against its own state, and a copied
/// sequence continues from a copy of it.
#[test]
fn qwen35_sequences_in_shared_batches() {
    check_seqs("qwen35");
}

/// Qwen3.5-MoE: Qwen3.5's layers with 2 of 8 experts and a shared expert
/// gated per token by a sigmoid.
#[test]
fn qwen35moe_gated_shared_expert_q4_k() {
    check("qwen35moe", None, 1);
}

/// `lamina info` describes the DeltaNet layers.
#[test]
fn qwen35_info_names_the_delta_net() {
    let info = hyperparameters("qwen35");
    let kinds = layer_kinds(&info);
    assert_eq!(
        kinds,
        [
            "gated DeltaNet, 2 key heads and 4 value heads of 64, convolution of 4 taps (a recurrent state per sequence): layers [0, 1, 2]",
            "rope Neox over 16 dims, base 10000000, scale 1; full attention: layers [3]",
        ],
        "{info:?}"
    );
}

/// Gemma 4: sliding layers with heads of 64 and global ones with heads of
/// 128 (RoPE on a quarter, keys as values), two last layers sharing
/// earlier layers' caches with double-wide feed-forwards, per-layer inputs,
/// layer output scales.
#[test]
fn gemma4_per_layer_inputs_shared_caches_q4_k() {
    check("gemma4", None, 1);
}

/// Gemma 4 with KV heads per layer (2 in sliding layers, 1 in global
/// ones, as the 31B's file gives them).
#[test]
fn gemma4_kv_heads_per_layer_q4_k() {
    check("gemma4-kv", None, 1);
    let info = hyperparameters("gemma4-kv");
    assert_eq!(
        info_value(&info, "attention"),
        Some("4 heads, KV heads per layer [2, 2, 2, 1, 2, 1], of 128"),
        "{info:?}"
    );
    let kinds = layer_kinds(&info);
    assert!(
        kinds[1].contains("full attention; 4 heads, 1 KV heads of 128: layers [3]"),
        "{kinds:?}"
    );
}

/// Gemma 4's sequences in shared batches: the sharing layers read each
/// sequence's cells of the layers they share.
#[test]
fn gemma4_sequences_in_shared_batches() {
    check_seqs("gemma4");
}

/// `lamina info` describes Gemma 4's two kinds of layers and what they
/// share.
#[test]
fn gemma4_info_names_heads_and_shared_caches() {
    let info = hyperparameters("gemma4");
    let kinds = layer_kinds(&info);
    assert_eq!(
        kinds,
        [
            "rope Neox over 64 dims, base 10000, scale 1; sliding window 8; 4 heads, 1 KV heads of 64: layers [0, 1, 2]",
            "rope Neox over 128 dims, base 1000000, scale 1, rope_freqs factors; full attention: layers [3]",
            "rope Neox over 64 dims, base 10000, scale 1; sliding window 8; 4 heads, 1 KV heads of 64; the keys and values of layer 2: layers [4]",
            "rope Neox over 128 dims, base 1000000, scale 1, rope_freqs factors; full attention; the keys and values of layer 3: layers [5]",
        ],
        "{info:?}"
    );
    let value =
        |key: &str| info_value(&info, key).unwrap_or_else(|| panic!("no {key} in {info:?}"));
    assert!(
        value("per-layer inputs").starts_with("32 values per layer and token"),
        "{info:?}"
    );
    assert_eq!(value("score scale"), "1");
    assert_eq!(value("logit soft-cap"), "30");
    assert_eq!(
        value("inputs"),
        "text only: images and audio (Gemma 4's vision and audio encoders, a separate mmproj file) are not run"
    );
    // A file that carries an encoder's tensors loads, and says they are
    // ignored.
    let bytes = family("gemma4").write_with(&[
        "v.patch_embd.weight",
        "a.conv1d.0.weight",
        "mm.input_projection.weight",
    ]);
    let info = hyperparameters_of(bytes);
    assert_eq!(
        info_value(&info, "inputs"),
        Some("text only: images and audio (Gemma 4's vision and audio encoders, a separate mmproj file) are not run (this file's 3 tensors of them are ignored)")
    );
}

/// A Gemma 4 session holds cache layers of two widths (format version 3):
/// a fresh context that loads it gives the saver's next logits, and a
/// session of another shape is refused.
#[test]
fn gemma4_sessions_keep_caches_of_two_widths() {
    let file = Arc::new(GgufFile::from_bytes(family("gemma4").write()).unwrap());
    let device = CpuDevice::new(None).unwrap().shared();
    let model = Arc::new(Model::load(file, device, None).unwrap());
    let context = || {
        let params = ContextParams {
            n_ctx: 64,
            n_threads: 1,
            ..ContextParams::default()
        };
        Context::new(model.clone(), params).unwrap()
    };
    let prompt = [1u32, 450, 4996, 17354, 1701, 29916];
    let mut a = context();
    a.decode(&Batch::for_sequence(&prompt, 0, 0).unwrap())
        .unwrap();
    a.set_prompt_cache(&prompt);
    let bytes = session::save_bytes(&a, None).unwrap();
    assert_eq!(&bytes[8..12], &3u32.to_le_bytes(), "format version");
    let mut b = context();
    assert_eq!(
        session::load_bytes(&mut b, &bytes).unwrap().tokens_loaded,
        6
    );
    let next = |ctx: &mut Context| {
        ctx.decode(&Batch::for_sequence(&[373], 6, 0).unwrap())
            .unwrap();
        ctx.logits(-1).unwrap().to_vec()
    };
    assert_eq!(next(&mut b), next(&mut a));
    // The same rows claimed for one width: refused, the context unchanged.
    let mut state = a.save_state(None).unwrap();
    state.kv.widths[0] = state.kv.widths[3];
    let mut c = context();
    let e = c.load_state(&state).unwrap_err().to_string();
    assert!(e.contains("this model's has 4 of [64, 64, 64, 128]"), "{e}");
    assert!(c.prompt_cache().is_empty());
}

/// Granite MoE: Granite's multipliers, 2 of 4 experts and a shared one.
#[test]
fn granitemoe_shared_expert_q8_0() {
    check("granitemoe", None, 1);
}

/// `lamina info` names the experts.
#[test]
fn qwen3moe_info_names_the_experts() {
    let info = hyperparameters("qwen3moe");
    assert!(
        info.iter()
            .any(|(k, v)| *k == "experts" && v.starts_with("2 used of 8, feed-forward 256 each")),
        "{info:?}"
    );
}

/// Granite with `rope.scaling.finetuned = false`: no layer rotates.
#[test]
fn granite_without_rope() {
    check("granite-nope", None, 1);
}

#[test]
fn llama_q2_k() {
    check("llama-q2_k", None, 1);
}

#[test]
fn qwen3_q3_k() {
    check("qwen3-q3_k", None, 1);
}

#[test]
fn qwen2_iq4_nl() {
    check("qwen2-iq4_nl", None, 1);
}

#[test]
fn gemma3_iq4_xs() {
    check("gemma3-iq4_xs", None, 1);
}

#[test]
fn llama_bf16() {
    check("llama-bf16", None, 1);
}

/// A context longer than LongRoPE's original length (256 here; the tests'
/// contexts are 512) takes the long factors, as the reference does.
#[test]
fn phi3_long_factors_beyond_the_original_length() {
    check("phi3-long", None, 1);
}

/// `lamina info` names the long factors and when they apply.
#[test]
fn phi3_info_names_the_long_factors() {
    let info = hyperparameters("phi3-long");
    assert!(
        info.iter()
            .any(|(k, v)| *k == "long rope" && v.contains("over 256 positions")),
        "{info:?}"
    );
}

#[test]
fn granite_multipliers_f16() {
    check("granite", None, 1);
}

/// Every family on every variant this machine has, at 2 threads, 8 steps
/// (natively; under emulation the single runs above cover the emulated
/// CPU's variant).
#[cfg(target_arch = "x86_64")]
#[test]
fn every_family_every_variant_two_threads() {
    let device = CpuDevice::new(None).unwrap();
    for variant in CpuVariant::ALL {
        if variant.supported(device.features()) {
            for s in common::synth::FAMILIES {
                check_steps(s.name, Some(variant), 2, 8);
            }
        }
    }
}

/// Writes every family's model into `$LAMINA_SYNTH_DIR` (for
/// `scripts/reference/make-goldens.sh`, which runs the reference on them).
#[cfg(not(target_arch = "wasm32"))]
#[test]
#[ignore]
fn write_synth_models() {
    let dir = std::env::var("LAMINA_SYNTH_DIR").expect("LAMINA_SYNTH_DIR");
    for s in common::synth::FAMILIES {
        let bytes = s.write();
        std::fs::write(format!("{dir}/{}.gguf", s.name), &bytes).unwrap();
        println!("{} {}", s.name, sha256_hex(&bytes));
    }
}

/// Writes the bench-sized models (`common::synth::BENCH`) into
/// `$LAMINA_SYNTH_DIR` (for `scripts/bench-synth.sh`).
#[cfg(not(target_arch = "wasm32"))]
#[test]
#[ignore]
fn write_bench_models() {
    let dir = std::env::var("LAMINA_SYNTH_DIR").expect("LAMINA_SYNTH_DIR");
    // `LAMINA_SYNTH_NAMES`: only these (space-separated).
    let names = std::env::var("LAMINA_SYNTH_NAMES").unwrap_or_default();
    let wanted = |name: &str| names.is_empty() || names.split(' ').any(|n| n == name);
    for s in common::synth::BENCH.iter().filter(|s| wanted(s.name)) {
        let path = format!("{dir}/{}.gguf", s.name);
        std::fs::write(&path, s.write()).unwrap();
        println!("{path}");
    }
}

/// Writes the model over 4 GiB that the memory64 build's tests load
/// (common/big_model.rs) to `LAMINA_BIG_MODEL`, then checks it natively:
/// mapped, its greedy tokens are the one its last bytes say.
#[cfg(not(target_arch = "wasm32"))]
#[test]
#[ignore]
fn write_model_over_4_gib() {
    use lamina::completion::CompletionParams;
    use lamina::sampling::SamplingParams;
    let path = std::env::var("LAMINA_BIG_MODEL").expect("LAMINA_BIG_MODEL");
    let bytes = common::big_model::write(&path);
    assert!(bytes > 4 << 30, "{bytes} bytes");
    let device = CpuDevice::new(None).unwrap().shared();
    let model =
        Arc::new(Model::load(Arc::new(GgufFile::open(&path).unwrap()), device, None).unwrap());
    let params = ContextParams {
        n_ctx: 64,
        n_threads: 2,
        ..ContextParams::default()
    };
    let mut ctx = Context::new(model, params).unwrap();
    let greedy = CompletionParams {
        prompt: "Hello".into(),
        n_predict: 2,
        sampling: SamplingParams {
            temperature: 0.0,
            ..SamplingParams::default()
        },
        ..CompletionParams::default()
    };
    let r = ctx.completion(&greedy, |_| {}).unwrap();
    assert_eq!(r.generated_ids, [common::big_model::TOKEN; 2]);
    println!("{path}: {bytes} bytes");
}

/// The real Gemma 3 270M Q4_K_M file (scripts/fetch-models.sh): a plain
/// prompt and one in Gemma's turn format, teacher-forced against the
/// reference. Gemma's logits are sensitive to rounding (the reference moves
/// by up to rms 0.44 between batch sizes on some prompts); these prompts'
/// own spread is recorded in their goldens, well inside the tolerance.
/// Natively and in wasm; too big a model for the emulator.
#[cfg(not(target_arch = "aarch64"))]
fn gemma3_270m() -> Arc<Model> {
    let file =
        GgufFile::from_bytes(read_file(&common::model_path("gemma-3-270m-q4_k_m.gguf"))).unwrap();
    let device = CpuDevice::new(None).unwrap().shared();
    Arc::new(Model::load(Arc::new(file), device, None).unwrap())
}

#[cfg(not(target_arch = "aarch64"))]
#[test]
fn gemma3_270m_real_file() {
    let model = gemma3_270m();
    for name in ["gemma3-270m-story", "gemma3-270m-chat"] {
        let g = golden(name);
        let mut ctx = Context::new(
            model.clone(),
            ContextParams {
                n_ctx: 512,
                n_threads: if cfg!(target_arch = "wasm32") { 1 } else { 2 },
                ..ContextParams::default()
            },
        )
        .unwrap();
        assert_eq!(
            model
                .vocab
                .tokenize(g["prompt"].as_str().unwrap(), true, true)
                .unwrap(),
            json_ids(&g["prompt_ids"]),
            "{name}: prompt tokens"
        );
        let reference = read_f32(&golden_path(&format!(
            "families/{name}.last_prompt_logits.f32"
        )));
        teacher_forced(&mut ctx, name, &g, &reference, STEPS, &QUANTIZED);
    }
}

/// Perplexity of the real Gemma 3 file on the shared golden text, within 1%
/// of the reference's running value: natively after 8 chunks, in wasm after
/// two.
#[cfg(not(target_arch = "aarch64"))]
#[test]
fn gemma3_270m_perplexity() {
    let want: serde_json::Value = serde_json::from_slice(&read_file(&golden_path(
        "families/gemma3-270m-perplexity.json",
    )))
    .unwrap();
    let mut text = String::from_utf8(read_file(&golden_path("smollm2/ppl.txt"))).unwrap();
    if text.ends_with('\n') {
        text.pop();
    }
    let chunks = if cfg!(target_arch = "x86_64") { 8 } else { 2 };
    let reference = want["running_ppl_after_chunk"][chunks - 1]
        .as_f64()
        .unwrap();
    let mut ctx = Context::new(
        gemma3_270m(),
        ContextParams {
            n_ctx: 512,
            n_threads: if cfg!(target_arch = "wasm32") { 1 } else { 2 },
            ..ContextParams::default()
        },
    )
    .unwrap();
    let vocab = &ctx.model().vocab;
    let ids = vocab.tokenize(&text, true, false).unwrap();
    let bytes = vocab.detokenize(&ids[..(chunks * 128 + 8).min(ids.len())], false);
    let text = String::from_utf8(bytes).unwrap();
    let r = lamina::perplexity::perplexity(&mut ctx, &text, 128, |_, _, _| true).unwrap();
    assert_eq!(r.n_chunks, chunks);
    let rel = (r.ppl - reference).abs() / reference;
    eprintln!(
        "gemma3 270m perplexity over {chunks} chunks: {:.4} vs the reference's {reference} ({:.3}%)",
        r.ppl,
        rel * 100.0
    );
    assert!(rel <= 0.01, "perplexity {} vs {reference}", r.ppl);
}

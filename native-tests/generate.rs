//! The llama forward pass against llama.cpp's golden outputs for SmolLM2 Q4_1:
//! last-prompt-position logits within the golden README's tolerances, and
//! greedy continuations equal to llama.cpp's up to the first near-tie.

mod common;

#[cfg(target_arch = "wasm32")]
use wasm_bindgen_test::wasm_bindgen_test as test;

use std::sync::Arc;

#[cfg(target_arch = "x86_64")]
use common::teacher::F16;
use common::teacher::{read_f32, teacher_forced, Tolerance, QUANTIZED};
use common::{golden_path, model_path, read_file};
use lamina::backend::cpu::{CpuDevice, CpuVariant};
use lamina::context::{Context, ContextParams};
use lamina::gguf::GgufFile;
use lamina::model::Model;

fn q4_1_file() -> GgufFile {
    GgufFile::from_bytes(read_file(&model_path("SmolLM2-135M-Instruct.Q4_1.gguf"))).unwrap()
}

/// The Q4_1 model, or its requantization to `target` (byte-identical to
/// llama-quantize's, see native-tests/requantize.rs), for the best variant.
fn model_as(target: &str) -> Arc<Model> {
    let device = CpuDevice::new(None).unwrap();
    Arc::new(Model::load(Arc::new(file_as(target)), device.shared(), None).unwrap())
}

fn file_as(target: &str) -> GgufFile {
    let file = q4_1_file();
    if target == "Q4_1" {
        return file;
    }
    let t = lamina::requantize::Target::from_name(target).unwrap();
    let bytes = lamina::requantize::requantize(&file, t, |_, _| {}).unwrap();
    GgufFile::from_bytes(bytes).unwrap()
}

fn context(model: &Arc<Model>, n_threads: usize) -> Context {
    Context::new(
        model.clone(),
        ContextParams {
            n_threads,
            ..ContextParams::default()
        },
    )
    .unwrap()
}

fn golden(name: &str) -> serde_json::Value {
    serde_json::from_slice(&read_file(&golden_path(&format!(
        "smollm2/generate/{name}.json"
    ))))
    .unwrap()
}

/// Teacher-forced against a golden run (see `common::teacher`).
fn check_prompt(name: &str, steps: usize) {
    check_prompt_with(&model_as("Q4_1"), name, steps, &QUANTIZED, 1)
}

fn check_prompt_with(
    model: &Arc<Model>,
    name: &str,
    steps: usize,
    tol: &Tolerance,
    threads: usize,
) {
    let mut ctx = context(model, threads);
    let reference = read_f32(&golden_path(&format!(
        "smollm2/generate/{name}.last_prompt_logits.f32"
    )));
    teacher_forced(&mut ctx, name, &golden(name), &reference, steps, tol);
}

/// All 48 steps natively; a shorter run under emulation and in wasm (the same
/// code, at a fraction of the cost).
const STEPS: usize = if cfg!(target_arch = "x86_64") { 48 } else { 6 };

#[test]
fn france_q4_1() {
    check_prompt("q4_1_france", STEPS);
}

#[test]
fn chat_q4_1() {
    check_prompt("q4_1_chat", STEPS);
}

#[test]
fn prose_q4_1() {
    check_prompt("q4_1_prose", STEPS);
}

#[test]
fn code_fibonacci_q4_1() {
    check_prompt("q4_1_code_fibonacci", STEPS);
}

#[test]
fn chat_study_tips_q4_1() {
    check_prompt("q4_1_chat_study_tips", STEPS);
}

/// lamina's own requantized files (byte-identical to llama-quantize's) against
/// llama.cpp's runs of its Q8_0 and F16 files. Natively only: requantizing and
/// running a 270 MB F16 model is not for an emulator.
#[cfg(target_arch = "x86_64")]
#[test]
fn q8_0_and_f16_requantized() {
    const PROMPTS: [&str; 5] = [
        "france",
        "chat",
        "prose",
        "code_fibonacci",
        "chat_study_tips",
    ];
    let q8 = model_as("Q8_0");
    for prompt in PROMPTS {
        check_prompt_with(&q8, &format!("q8_0_{prompt}"), 48, &QUANTIZED, 2);
    }
    drop(q8);
    let f16 = model_as("F16");
    for prompt in PROMPTS {
        check_prompt_with(&f16, &format!("f16_{prompt}"), 48, &F16, 2);
    }
}

/// Every variant this machine supports, at 1 and 2 threads: the teacher-forced
/// gates on two prompts (natively all 48 steps; fewer under emulation).
#[test]
fn every_variant_at_one_and_two_threads() {
    let file = Arc::new(file_as("Q4_1"));
    let device = CpuDevice::new(None).unwrap();
    // Natively two long prompts, all steps; emulated or in wasm a short one.
    let (prompts, steps): (&[&str], usize) = if cfg!(target_arch = "x86_64") {
        (&["q4_1_chat_study_tips", "q4_1_code_fibonacci"], 48)
    } else {
        (&["q4_1_france"], 4)
    };
    let threads: &[usize] = if cfg!(target_arch = "wasm32") {
        &[1]
    } else {
        &[1, 2]
    };
    for variant in CpuVariant::ALL {
        if !variant.supported(device.features()) {
            continue;
        }
        let dev = device.with_variant(variant).unwrap().shared();
        let model = Arc::new(Model::load(file.clone(), dev, None).unwrap());
        for &t in threads {
            for name in prompts {
                check_prompt_with(&model, name, steps, &QUANTIZED, t);
            }
        }
    }
}

/// Perplexity on the golden text: llama-perplexity's chunking and scoring,
/// within the golden README's 1% (quantized). Natively the whole text (31
/// chunks); in wasm the first 2 chunks against llama.cpp's running value
/// (not under emulation: see `AARCH64_EMULATION_SKIP` in scripts/env.sh).
#[test]
fn perplexity_q4_1() {
    let golden: serde_json::Value =
        serde_json::from_slice(&read_file(&golden_path("smollm2/perplexity.json"))).unwrap();
    let want = &golden["results"]["Q4_1"];
    let mut text = String::from_utf8(read_file(&golden_path("smollm2/ppl.txt"))).unwrap();
    if text.ends_with('\n') {
        text.pop();
    }
    let (chunks, reference) = if cfg!(target_arch = "x86_64") {
        (31, want["ppl"].as_f64().unwrap())
    } else {
        (2, want["running_ppl_after_chunk"][1].as_f64().unwrap())
    };
    let model = model_as("Q4_1");
    let mut ctx = Context::new(
        model,
        ContextParams {
            n_ctx: 512,
            n_batch: 512,
            n_threads: if cfg!(target_arch = "wasm32") { 1 } else { 2 },
            ..ContextParams::default()
        },
    )
    .unwrap();
    // Cut the text to the chunks wanted (plus a token's worth of slack).
    let vocab = &ctx.model().vocab;
    let ids = vocab.tokenize(&text, false, false).unwrap();
    let bytes = vocab.detokenize(&ids[..(chunks * 128 + 8).min(ids.len())], false);
    let text = String::from_utf8(bytes).unwrap();
    let r = lamina::perplexity::perplexity(&mut ctx, &text, 128, |_, _, _| true).unwrap();
    assert_eq!(r.n_chunks, chunks);
    assert_eq!(r.tokens_scored, chunks * 63);
    let rel = (r.ppl - reference).abs() / reference;
    eprintln!(
        "perplexity over {chunks} chunks: {:.4} vs llama.cpp {reference} ({:.3}%)",
        r.ppl,
        rel * 100.0
    );
    assert!(rel <= 0.01, "perplexity {} vs {reference}", r.ppl);
}

//! The llama forward pass against llama.cpp's golden outputs for SmolLM2 Q4_1:
//! last-prompt-position logits within the golden README's tolerances, and
//! greedy continuations equal to llama.cpp's up to the first near-tie.

mod common;

#[cfg(target_arch = "wasm32")]
use wasm_bindgen_test::wasm_bindgen_test as test;

use std::sync::Arc;

use common::{golden_path, model_path, read_file};
use lamina::backend::cpu::CpuDevice;
use lamina::gguf::GgufFile;
use lamina::model::llama::{KvCache, LlamaModel};
use lamina::sampling::greedy;

fn q4_1_file() -> GgufFile {
    GgufFile::from_bytes(read_file(&model_path("SmolLM2-135M-Instruct.Q4_1.gguf"))).unwrap()
}

/// The Q4_1 model, or its requantization to `target` (byte-identical to
/// llama-quantize's, see native-tests/requantize.rs).
fn model_as(target: &str) -> LlamaModel {
    let file = q4_1_file();
    let file = if target == "Q4_1" {
        file
    } else {
        let t = lamina::requantize::Target::from_name(target).unwrap();
        let bytes = lamina::requantize::requantize(&file, t, |_, _| {})
            .unwrap()
            .to_bytes();
        GgufFile::from_bytes(bytes).unwrap()
    };
    LlamaModel::load(Arc::new(file)).unwrap()
}

fn golden(name: &str) -> serde_json::Value {
    serde_json::from_slice(&read_file(&golden_path(&format!(
        "smollm2/generate/{name}.json"
    ))))
    .unwrap()
}

fn ids(v: &serde_json::Value) -> Vec<u32> {
    v.as_array()
        .unwrap()
        .iter()
        .map(|x| x.as_u64().unwrap() as u32)
        .collect()
}

/// The golden README's tolerances: quantized models, and F16.
struct Tolerance {
    max_abs: f64,
    rms: f64,
    /// Top-1 must agree where the reference top1-top2 gap is at least this.
    gap: f64,
}

const QUANTIZED: Tolerance = Tolerance {
    max_abs: 1.5,
    rms: 0.5,
    gap: 0.5,
};
const F16: Tolerance = Tolerance {
    max_abs: 0.1,
    rms: 0.05,
    gap: 0.1,
};

fn compare_logits(
    name: &str,
    what: &str,
    got: &[f32],
    reference: &[f32],
    tol: &Tolerance,
) -> (f64, f64) {
    let diffs: Vec<f64> = got
        .iter()
        .zip(reference)
        .map(|(a, b)| (a - b) as f64)
        .collect();
    let max_abs = diffs.iter().fold(0.0f64, |m, d| m.max(d.abs()));
    let rms = (diffs.iter().map(|d| d * d).sum::<f64>() / diffs.len() as f64).sqrt();
    assert!(
        max_abs <= tol.max_abs && rms <= tol.rms,
        "{name} {what}: logits max abs {max_abs}, rms {rms}"
    );
    (max_abs, rms)
}

/// Teacher-forced: feeds the prompt, then llama.cpp's generated ids one by one;
/// at every step the top-1 must equal llama.cpp's wherever its top1-top2 gap
/// is at least the tolerance's gap, and its top-5 logits must be within the
/// tolerance's max abs.
fn check_prompt(name: &str, steps: usize) {
    check_prompt_with(&model_as("Q4_1"), name, steps, &QUANTIZED)
}

fn check_prompt_with(model: &LlamaModel, name: &str, steps: usize, tol: &Tolerance) {
    let device = CpuDevice::new(None).unwrap();
    let k = device.kernels();
    let g = golden(name);
    let prompt = ids(&g["prompt_ids"]);
    let generated = ids(&g["generated_ids"]);
    let top5 = g["step_top5"].as_array().unwrap();
    let mut cache = KvCache::new(&model.hparams, 512);
    let mut logits = None;
    for (i, &t) in prompt.iter().enumerate() {
        logits = model
            .forward(k, t, &mut cache, i + 1 == prompt.len())
            .unwrap();
    }
    let mut logits = logits.unwrap();
    let reference: Vec<f32> = read_file(&golden_path(&format!(
        "smollm2/generate/{name}.last_prompt_logits.f32"
    )))
    .chunks_exact(4)
    .map(|b| f32::from_le_bytes([b[0], b[1], b[2], b[3]]))
    .collect();
    let (max_abs, rms) = compare_logits(name, "last prompt position", &logits, &reference, tol);
    for s in 0..steps.min(generated.len()) {
        let want = top5[s].as_array().unwrap();
        let (top_id, top_logit) = (
            want[0][0].as_u64().unwrap() as u32,
            want[0][1].as_f64().unwrap(),
        );
        let gap = top_logit - want[1][1].as_f64().unwrap();
        if gap >= tol.gap {
            assert_eq!(
                greedy(&logits),
                Some(top_id),
                "{name}: step {s} (gap {gap:.2})"
            );
        }
        for pair in want {
            let (id, l) = (
                pair[0].as_u64().unwrap() as usize,
                pair[1].as_f64().unwrap(),
            );
            assert!(
                (logits[id] as f64 - l).abs() <= tol.max_abs,
                "{name}: step {s} token {id}: {} vs {l}",
                logits[id]
            );
        }
        if s + 1 < steps.min(generated.len()) {
            logits = model
                .forward(k, generated[s], &mut cache, true)
                .unwrap()
                .unwrap();
        }
    }
    eprintln!(
        "{name}: last-prompt logits max abs {max_abs:.3}, rms {rms:.3}; {steps} steps checked"
    );
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
    let q8 = model_as("Q8_0");
    for prompt in [
        "france",
        "chat",
        "prose",
        "code_fibonacci",
        "chat_study_tips",
    ] {
        check_prompt_with(&q8, &format!("q8_0_{prompt}"), 48, &QUANTIZED);
    }
    drop(q8);
    let f16 = model_as("F16");
    for prompt in [
        "france",
        "chat",
        "prose",
        "code_fibonacci",
        "chat_study_tips",
    ] {
        check_prompt_with(&f16, &format!("f16_{prompt}"), 48, &F16);
    }
}

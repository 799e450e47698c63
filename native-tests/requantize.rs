//! `lamina quantize` reproduces llama-quantize: requantizing the SmolLM2 Q4_1
//! file to Q4_0, Q8_0 and F16 gives llama.cpp's files, tensor for tensor and
//! byte for byte (../shared/golden/smollm2/quantize.json).

mod common;

#[cfg(target_arch = "wasm32")]
use wasm_bindgen_test::wasm_bindgen_test as test;

use common::{golden_path, model_path, read_file, sha256_hex};
use lamina::gguf::GgufFile;
use lamina::requantize::{plan, requantize, Target};
use lamina::tensor::{convert, DType};

fn check(target_name: &str) {
    let golden: serde_json::Value =
        serde_json::from_slice(&read_file(&golden_path("smollm2/quantize.json"))).unwrap();
    let expected = &golden["outputs"][target_name];
    let file =
        GgufFile::from_bytes(read_file(&model_path("SmolLM2-135M-Instruct.Q4_1.gguf"))).unwrap();
    let target = Target::from_name(target_name).unwrap();
    // Natively with two threads (the output must not depend on them).
    let bytes = if cfg!(target_arch = "x86_64") {
        let workers = lamina::parallel::Workers::new(2).unwrap();
        lamina::requantize::requantize_with(&file, target, &workers, |_, _| {}).unwrap()
    } else {
        requantize(&file, target, |_, _| {}).unwrap()
    };
    let out = GgufFile::from_bytes(bytes).unwrap();

    let tensors = expected["tensors"].as_array().unwrap();
    assert_eq!(out.tensors().len(), tensors.len());
    for (t, e) in out.tensors().iter().zip(tensors) {
        assert_eq!(
            t.name,
            e["name"].as_str().unwrap(),
            "{target_name}: tensor order"
        );
        assert_eq!(
            t.ggml_type.name(),
            e["type"].as_str().unwrap(),
            "{target_name}: {}",
            t.name
        );
        assert_eq!(
            sha256_hex(out.tensor_data(t).unwrap()),
            e["sha256"].as_str().unwrap(),
            "{target_name}: data of {}",
            t.name
        );
    }
    assert_eq!(
        out.metadata().get_u32("general.file_type").unwrap() as u64,
        expected["model"]["metadata"]["general.file_type"]
            .as_u64()
            .unwrap()
    );
    assert_eq!(
        sha256_hex(out.bytes()),
        expected["model"]["sha256"].as_str().unwrap(),
        "{target_name}: whole file"
    );
}

#[test]
fn requantize_to_q4_0_like_llama_quantize() {
    check("Q4_0");
}

#[test]
fn requantize_to_q8_0_like_llama_quantize() {
    check("Q8_0");
}

#[test]
fn requantize_to_f16_like_llama_quantize() {
    check("F16");
}

#[test]
fn output_rule_and_fallbacks() {
    let file =
        GgufFile::from_bytes(read_file(&model_path("SmolLM2-135M-Instruct.Q4_1.gguf"))).unwrap();
    // The tied token embedding is the output: Q6_K would need rows of 256, so Q8_0.
    for name in ["Q4_0", "Q4_1", "Q5_0", "Q5_1", "Q8_0", "Q6_K"] {
        let p = plan(&file, Target::from_name(name).unwrap()).unwrap();
        let embd = p.iter().find(|p| p.name == "token_embd.weight").unwrap();
        assert_eq!(embd.to.name(), "Q8_0", "{name}");
        // Norms stay F32.
        assert!(p
            .iter()
            .filter(|p| p.name.ends_with("norm.weight"))
            .all(|p| p.to.name() == "F32"));
    }
    // Q6_K needs rows of 256: the 576-wide weights fall back to Q8_0, the
    // 1536-wide ffn_down weights take Q6_K.
    let p = plan(&file, Target::from_name("q6_k").unwrap()).unwrap();
    for t in p.iter().filter(|p| p.from.name() == "Q4_1") {
        let row = file.tensor(&t.name).unwrap().shape[0];
        let want = if row == 1536 { "Q6_K" } else { "Q8_0" };
        assert_eq!(t.to.name(), want, "{}", t.name);
    }
    assert_eq!(p.iter().filter(|p| p.to.name() == "Q6_K").count(), 30);
    let e = Target::from_name("IQ2_XXS").unwrap_err();
    assert!(
        e.to_string()
            .contains("unknown quantization type 'IQ2_XXS'"),
        "{e}"
    );
}

/// The whole-file sha256 of the 2026 reference's llama-quantize output
/// (native-tests/golden/families/quantize.txt, from
/// scripts/reference/make-goldens.sh).
fn reference_sha(source: &str, target: &str) -> String {
    let text = String::from_utf8(read_file(&golden_path("families/quantize.txt"))).unwrap();
    text.lines()
        .filter(|l| !l.starts_with('#'))
        .map(|l| l.split(' ').collect::<Vec<_>>())
        .find(|f| f[0] == source && f[1] == target)
        .map(|f| f[2].to_string())
        .unwrap_or_else(|| panic!("no reference for {source} {target}"))
}

fn check_mixture(model: &str, source: &str, target: &str) {
    let file = GgufFile::from_bytes(read_file(&model_path(model))).unwrap();
    let target_type = Target::from_name(target).unwrap();
    // Natively with two threads; wasm32 without threads has one.
    let bytes = if cfg!(target_arch = "x86_64") {
        let workers = lamina::parallel::Workers::new(2).unwrap();
        lamina::requantize::requantize_with(&file, target_type, &workers, |_, _| {})
    } else {
        requantize(&file, target_type, |_, _| {})
    }
    .unwrap();
    assert_eq!(
        sha256_hex(&bytes),
        reference_sha(source, target),
        "{model} to {target}"
    );
}

/// The k-quant mixtures (per-tensor types by role and layer) give the
/// reference's files byte for byte: SmolLM2, whose 576-wide rows take the
/// fallbacks. Natively four, elsewhere Q4_K_M.
#[test]
fn k_quant_mixtures_like_llama_quantize() {
    let targets: &[&str] = if cfg!(target_arch = "x86_64") {
        // One per rule set (the others' goldens are checked by
        // make-goldens.sh's reruns; the test command's time is bounded).
        &["Q2_K", "Q3_K_M", "Q4_K_M", "Q5_K_S"]
    } else {
        &["Q4_K_M"]
    };
    for t in targets {
        check_mixture("SmolLM2-135M-Instruct.Q4_1.gguf", "smollm2-q4_1", t);
    }
    // The rules: Q4_K_M gives attention V and feed-forward down of the
    // "more bits" layers Q6_K (ffn_down is 1536 wide: whole blocks).
    let file =
        GgufFile::from_bytes(read_file(&model_path("SmolLM2-135M-Instruct.Q4_1.gguf"))).unwrap();
    let p = plan(&file, Target::from_name("Q4_K_M").unwrap()).unwrap();
    let down: Vec<&str> = (0..30)
        .map(|i| {
            let name = format!("blk.{i}.ffn_down.weight");
            p.iter().find(|t| t.name == name).unwrap().to.name()
        })
        .collect();
    assert_eq!(&down[..6], ["Q6_K", "Q6_K", "Q6_K", "Q4_K", "Q4_K", "Q6_K"]);
}

/// IQ4_XS on SmolLM2: every tensor's type is the reference's (its 576-wide
/// rows fall back to IQ4_NL; attention V and the first ffn_down layers take
/// other types), and tensors of each converted type have the reference's
/// bytes. (The whole file is byte-identical too, see quantize.txt; the
/// non-linear search makes converting all of it slow in a debug build.)
#[test]
fn iq4_xs_like_llama_quantize() {
    let golden: serde_json::Value =
        serde_json::from_slice(&read_file(&golden_path("families/smollm2-iq4_xs.json"))).unwrap();
    let want = golden["tensors"].as_object().unwrap();
    let file =
        GgufFile::from_bytes(read_file(&model_path("SmolLM2-135M-Instruct.Q4_1.gguf"))).unwrap();
    let p = plan(&file, Target::from_name("IQ4_XS").unwrap()).unwrap();
    assert_eq!(p.len(), want.len());
    for t in &p {
        assert_eq!(
            t.to.name(),
            want[&t.name][0].as_str().unwrap(),
            "{}",
            t.name
        );
    }
    for name in [
        "blk.0.attn_k.weight",   // IQ4_NL (576 wide)
        "blk.5.ffn_down.weight", // IQ4_XS
        "blk.0.ffn_down.weight", // Q5_K (first eighth of ffn_down)
    ] {
        let t = p.iter().find(|t| t.name == name).unwrap();
        let info = file.tensor(name).unwrap();
        let from = DType::of_tensor(info.ggml_type, name).unwrap();
        let values = convert::to_f32(
            from,
            file.tensor_data(info).unwrap(),
            info.n_elements() as usize,
        )
        .unwrap();
        let to = DType::of_tensor(t.to, name).unwrap();
        let bytes = convert::from_f32(to, &values).unwrap();
        assert_eq!(
            sha256_hex(&bytes),
            want[name][1].as_str().unwrap(),
            "{name} as {to}"
        );
    }
}

/// Gemma 3 270M: Q3_K_M and Q5_K_M are the reference's. Natively (a 250 MB
/// model).
#[cfg(target_arch = "x86_64")]
#[test]
fn gemma3_mixtures_like_llama_quantize() {
    for t in ["Q3_K_M", "Q5_K_M"] {
        check_mixture("gemma-3-270m-q4_k_m.gguf", "gemma3-270m-q4_k_m", t);
    }
}

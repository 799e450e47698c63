//! LoRA adapters: a seeded random adapter on the small BF16 llama model
//! (`common::synth`), teacher-forced against the 2026 reference applying
//! the same adapter file at the same scale (goldens in
//! `native-tests/golden/lora/`, made by `scripts/reference/lora-goldens.sh`);
//! the adapter equals a model with the adapter merged into its weights;
//! removing it gives the base model's logits back bit for bit; and bad
//! adapters are errors naming the problem.

mod common;

#[cfg(target_arch = "wasm32")]
use wasm_bindgen_test::wasm_bindgen_test as test;

use std::sync::Arc;

use common::synth::family;
use common::teacher::{compare_logits, read_f32, teacher_forced, Tolerance, F16};
use common::{golden_path, read_file, sha256_hex, Rng};
use lamina::backend::cpu::CpuDevice;
use lamina::backend::CacheType;
use lamina::context::{Batch, Context, ContextParams};
use lamina::gguf::{GgufFile, GgufWriter, Value};
use lamina::lora::{ActiveLora, LoraAdapter};
use lamina::model::Model;
use lamina::tensor::{convert, DType, GgmlType};

const BASE: &str = "llama-bf16";
const RANK: u64 = 8;
const ALPHA: f32 = 16.0;
const SCALE: f32 = 0.75;

/// The weights the adapter changes: every projection of every layer, and
/// the token embedding when `embedding` (the reference refuses an embedding
/// adapter on a model whose output is tied to its embedding, as this one's
/// is).
fn adapted(file: &GgufFile, embedding: bool) -> Vec<(String, u64, u64)> {
    file.tensors()
        .iter()
        .filter(|t| {
            (embedding && t.name == "token_embd.weight")
                || [
                    "attn_q",
                    "attn_k",
                    "attn_v",
                    "attn_output",
                    "ffn_gate",
                    "ffn_up",
                    "ffn_down",
                ]
                .iter()
                .any(|w| t.name.starts_with("blk.") && t.name.ends_with(&format!(".{w}.weight")))
        })
        .map(|t| (t.name.clone(), t.shape[1], t.shape[0]))
        .collect()
}

fn uniform(rng: &mut Rng, a: f32) -> f32 {
    ((rng.next_u64() >> 40) as f32 / 16777216.0 * 2.0 - 1.0) * a
}

fn f32_bytes(v: &[f32]) -> Vec<u8> {
    v.iter().flat_map(|x| x.to_le_bytes()).collect()
}

/// A seeded adapter for `base` (rows x cols per weight): A is F32, B is
/// F16, as `convert_lora_to_gguf.py` may write them; the embedding's pair is
/// flipped as llama.cpp expects.
fn adapter_bytes(base: &GgufFile, arch: &str, embedding: bool) -> Vec<u8> {
    adapter_bytes_typed(base, arch, embedding, GgmlType::F16)
}

/// The same with B of type `b_type`.
fn adapter_bytes_typed(base: &GgufFile, arch: &str, embedding: bool, b_type: GgmlType) -> Vec<u8> {
    let mut rng = Rng::new(0x10ba);
    let mut w = GgufWriter::new();
    w.add_metadata("general.architecture", Value::String(arch.into()))
        .unwrap();
    w.add_metadata("general.type", Value::String("adapter".into()))
        .unwrap();
    w.add_metadata("adapter.type", Value::String("lora".into()))
        .unwrap();
    w.add_metadata("adapter.lora.alpha", Value::F32(ALPHA))
        .unwrap();
    for (name, rows, cols) in adapted(base, embedding) {
        let stem = name.trim_end_matches(".weight");
        let (a_shape, b_shape) = if name == "token_embd.weight" {
            // A: a rank-wide row per token; B: the width's rows of rank values.
            ([RANK, rows], [RANK, cols])
        } else {
            ([cols, RANK], [RANK, rows])
        };
        let a_amp = 1.0 / (a_shape[0] as f32).sqrt();
        let a: Vec<f32> = (0..a_shape[0] * a_shape[1])
            .map(|_| uniform(&mut rng, a_amp))
            .collect();
        let b: Vec<f32> = (0..b_shape[0] * b_shape[1])
            .map(|_| uniform(&mut rng, 0.5))
            .collect();
        let b_dtype = DType::try_from(b_type).unwrap();
        let mut b_bytes = vec![0u8; b_dtype.bytes_for(b.len())];
        convert::quantize(b_dtype, &b, &mut b_bytes).unwrap();
        w.add_tensor(
            format!("{stem}.weight.lora_a"),
            GgmlType::F32,
            &a_shape,
            f32_bytes(&a),
        )
        .unwrap();
        w.add_tensor(format!("{stem}.weight.lora_b"), b_type, &b_shape, b_bytes)
            .unwrap();
    }
    w.to_bytes()
}

fn device() -> Arc<dyn lamina::backend::Device> {
    CpuDevice::new(None).unwrap().shared()
}

fn base_model() -> (Arc<Model>, Arc<GgufFile>) {
    let file = Arc::new(GgufFile::from_bytes(family(BASE).write()).unwrap());
    (
        Arc::new(Model::load(file.clone(), device(), None).unwrap()),
        file,
    )
}

fn adapter(model: &Model, base: &GgufFile) -> Arc<LoraAdapter> {
    let file =
        Arc::new(GgufFile::from_bytes(adapter_bytes(base, family(BASE).arch, false)).unwrap());
    Arc::new(LoraAdapter::load(file, model, "seeded.gguf").unwrap())
}

fn context(model: Arc<Model>) -> Context {
    context_with(model, ContextParams::default())
}

fn context_with(model: Arc<Model>, params: ContextParams) -> Context {
    let threads = if cfg!(target_arch = "wasm32") { 1 } else { 2 };
    Context::new(
        model,
        ContextParams {
            n_ctx: 512,
            n_threads: threads,
            ..params
        },
    )
    .unwrap()
}

fn golden() -> serde_json::Value {
    serde_json::from_slice(&read_file(&golden_path("lora/llama-bf16-lora.json"))).unwrap()
}

fn prompt_logits(ctx: &mut Context, ids: &[u32]) -> Vec<f32> {
    ctx.decode(&Batch::for_sequence(ids, 0, 0).unwrap())
        .unwrap();
    ctx.logits(-1).unwrap().to_vec()
}

/// Steps checked: natively all; under emulation and in wasm a few.
const STEPS: usize = if cfg!(target_arch = "x86_64") { 32 } else { 4 };

#[test]
fn adapted_logits_follow_the_reference() {
    let g = golden();
    let (model, base) = base_model();
    assert_eq!(
        sha256_hex(&adapter_bytes(&base, family(BASE).arch, false)),
        g["adapter_sha256"].as_str().unwrap(),
        "the generator no longer writes the adapter the goldens were made from"
    );
    let lora = adapter(&model, &base);
    assert_eq!(lora.n_weights(), adapted(&base, false).len());
    let mut ctx = context(model.clone());
    ctx.set_lora_adapters(vec![ActiveLora {
        adapter: lora,
        scale: SCALE,
    }])
    .unwrap();
    let reference = read_f32(&golden_path("lora/llama-bf16-lora.last_prompt_logits.f32"));
    teacher_forced(&mut ctx, "lora", &g, &reference, STEPS, &F16);

    // The adapter matters: the base model's logits are far from these.
    let mut plain = context(model);
    let base_logits = prompt_logits(&mut plain, &common::json_ids(&g["prompt_ids"]));
    let far = base_logits
        .iter()
        .zip(&reference)
        .map(|(a, b)| (a - b).abs())
        .fold(0.0f32, f32::max);
    assert!(far > 1.0, "the adapter changes the logits by {far} only");
}

/// `W + factor·B·A`, in F32, for each weight of `base` that `lora` adapts
/// (factor 0: the weights only widened to F32).
fn merged_bytes(base: &GgufFile, lora: &GgufFile, factor: f32) -> Vec<u8> {
    let read = |file: &GgufFile, name: &str| -> (Vec<f32>, u64, u64) {
        let t = file.tensor(name).unwrap();
        let (cols, rows) = (t.shape[0], t.shape.iter().skip(1).product::<u64>());
        let start = (file.data_offset() + t.offset) as usize;
        let bytes = &file.bytes()[start..start + t.n_bytes as usize];
        let mut v = vec![0.0; (rows * cols) as usize];
        convert::dequantize(DType::try_from(t.ggml_type).unwrap(), bytes, &mut v).unwrap();
        (v, rows, cols)
    };
    let mut w = GgufWriter::new();
    for (k, v) in base.metadata().iter() {
        w.add_metadata(k, v.clone()).unwrap();
    }
    let adapted: Vec<String> = adapted(base, true).into_iter().map(|(n, _, _)| n).collect();
    let adapted: Vec<String> = adapted
        .into_iter()
        .filter(|n| lora.tensor(&format!("{n}.lora_a")).is_some())
        .collect();
    for t in base.tensors() {
        let start = (base.data_offset() + t.offset) as usize;
        if !adapted.contains(&t.name) {
            let bytes = base.bytes()[start..start + t.n_bytes as usize].to_vec();
            w.add_tensor(t.name.clone(), t.ggml_type, &t.shape, bytes)
                .unwrap();
            continue;
        }
        let (mut wv, rows, cols) = read(base, &t.name);
        let (a, a_rows, a_cols) = read(lora, &format!("{}.lora_a", t.name));
        let (b, _, b_cols) = read(lora, &format!("{}.lora_b", t.name));
        if t.name == "token_embd.weight" && base.tensor("output.weight").is_none() {
            // The output was tied to the embedding, and an embedding
            // adapter changes only the look-up: the merged model gets the
            // original as an output of its own.
            w.add_tensor("output.weight", GgmlType::F32, &t.shape, f32_bytes(&wv))
                .unwrap();
        }
        for r in 0..rows as usize {
            for c in 0..cols as usize {
                let delta: f32 = if t.name == "token_embd.weight" {
                    // Row r (a token) gains B·A[r]: column c of it.
                    (0..a_cols as usize)
                        .map(|k| b[c * b_cols as usize + k] * a[r * a_cols as usize + k])
                        .sum()
                } else {
                    (0..a_rows as usize)
                        .map(|k| b[r * b_cols as usize + k] * a[k * a_cols as usize + c])
                        .sum()
                };
                wv[r * cols as usize + c] += factor * delta;
            }
        }
        w.add_tensor(t.name.clone(), GgmlType::F32, &t.shape, f32_bytes(&wv))
            .unwrap();
    }
    w.to_bytes()
}

/// The adapter applied equals its merge into the weights. Both sides use
/// F32 weights (the base's BF16 widened exactly), an F32 adapter and an F32
/// cache, so only the order of the sums differs: logits within 1e-3. The
/// token embedding is adapted too (the look-up's pair).
#[test]
fn the_adapter_equals_the_merged_model() {
    let g = golden();
    let (_, base) = base_model();
    let lora_bytes = adapter_bytes_typed(&base, family(BASE).arch, true, GgmlType::F32);
    let lora_file = Arc::new(GgufFile::from_bytes(lora_bytes).unwrap());
    let load = |bytes: Vec<u8>| {
        Arc::new(
            Model::load(
                Arc::new(GgufFile::from_bytes(bytes).unwrap()),
                device(),
                None,
            )
            .unwrap(),
        )
    };
    let wide = load(merged_bytes(&base, &lora_file, 0.0));
    let merged = load(merged_bytes(&base, &lora_file, SCALE * ALPHA / RANK as f32));
    let f32_cache = || ContextParams {
        type_k: CacheType::F32,
        type_v: CacheType::F32,
        ..ContextParams::default()
    };
    let mut ctx = context_with(wide.clone(), f32_cache());
    let adapter = LoraAdapter::load(lora_file, &wide, "seeded.gguf").unwrap();
    ctx.set_lora_adapters(vec![ActiveLora {
        adapter: Arc::new(adapter),
        scale: SCALE,
    }])
    .unwrap();
    let ids = common::json_ids(&g["prompt_ids"]);
    let applied = prompt_logits(&mut ctx, &ids);
    let merged_logits = prompt_logits(&mut context_with(merged, f32_cache()), &ids);
    let tol = Tolerance {
        max_abs: 1e-3,
        rms: 2e-4,
        gap: 0.0,
    };
    compare_logits("lora", "applied vs merged", &applied, &merged_logits, &tol);
}

/// Removing the adapters gives the base model back exactly; a scale of 0
/// does too; the prompt cache is forgotten when they change.
#[test]
fn removing_the_adapter_restores_the_model() {
    let g = golden();
    let ids = common::json_ids(&g["prompt_ids"]);
    let (model, base) = base_model();
    let lora = adapter(&model, &base);
    let plain = prompt_logits(&mut context(model.clone()), &ids);
    let mut ctx = context(model);
    ctx.set_lora_adapters(vec![ActiveLora {
        adapter: lora.clone(),
        scale: SCALE,
    }])
    .unwrap();
    assert_ne!(prompt_logits(&mut ctx, &ids), plain);
    assert_eq!(ctx.lora_adapters().len(), 1);
    ctx.kv_clear();
    ctx.set_lora_adapters(Vec::new()).unwrap();
    assert_eq!(prompt_logits(&mut ctx, &ids), plain);
    ctx.kv_clear();
    ctx.set_lora_adapters(vec![ActiveLora {
        adapter: lora.clone(),
        scale: 0.0,
    }])
    .unwrap();
    assert_eq!(prompt_logits(&mut ctx, &ids), plain);
    let err = ctx
        .set_lora_adapters(vec![ActiveLora {
            adapter: lora,
            scale: f32::NAN,
        }])
        .unwrap_err()
        .to_string();
    assert!(err.contains("not a finite number"), "{err}");
}

/// Files that are not this model's adapter are errors naming the problem.
#[test]
fn bad_adapters_are_errors() {
    let (model, base) = base_model();
    let arch = family(BASE).arch;
    let load = |bytes: Vec<u8>| {
        let file = Arc::new(GgufFile::from_bytes(bytes).unwrap());
        LoraAdapter::load(file, &model, "bad.gguf")
            .unwrap_err()
            .to_string()
    };
    // The model itself is no adapter.
    assert!(
        load(family(BASE).write()).contains("general.type"),
        "model file"
    );
    // Another architecture.
    assert!(load(adapter_bytes(&base, "qwen2", false)).contains("made for a \"qwen2\" model"));
    // Edits of a good adapter: a lone half, an unknown tensor, a wrong shape,
    // a weight the model lacks.
    let good = GgufFile::from_bytes(adapter_bytes(&base, arch, false)).unwrap();
    let rewrite = |skip: &str, extra: Option<(&str, Vec<u64>)>| {
        let mut w = GgufWriter::new();
        for (k, v) in good.metadata().iter() {
            w.add_metadata(k, v.clone()).unwrap();
        }
        for t in good.tensors() {
            if t.name == skip {
                continue;
            }
            let start = (good.data_offset() + t.offset) as usize;
            w.add_tensor(
                t.name.clone(),
                t.ggml_type,
                &t.shape,
                good.bytes()[start..start + t.n_bytes as usize].to_vec(),
            )
            .unwrap();
        }
        if let Some((name, shape)) = extra {
            let n: u64 = shape.iter().product();
            w.add_tensor(name, GgmlType::F32, &shape, vec![0u8; 4 * n as usize])
                .unwrap();
        }
        w.to_bytes()
    };
    let err = load(rewrite("blk.0.attn_q.weight.lora_b", None));
    assert!(
        err.contains("'blk.0.attn_q.weight' is missing a half"),
        "{err}"
    );
    let err = load(rewrite("", Some(("blk.0.attn_q.weight.extra", vec![4]))));
    assert!(err.contains("neither a lora_a nor a lora_b"), "{err}");
    let err = load(rewrite(
        "blk.1.ffn_up.weight.lora_a",
        Some(("blk.1.ffn_up.weight.lora_a", vec![3, RANK])),
    ));
    assert!(err.contains("'blk.1.ffn_up.weight' is"), "{err}");
    let err = load(rewrite(
        "",
        Some(("blk.99.attn_q.weight.lora_a", vec![4, RANK])),
    ));
    assert!(
        err.contains("missing a half") || err.contains("not a weight of this model"),
        "{err}"
    );
}

/// The files the reference is run on (`scripts/reference/lora-goldens.sh`).
#[cfg(not(target_arch = "wasm32"))]
#[test]
#[ignore]
fn write_lora_files() {
    let dir = std::env::var("LAMINA_SYNTH_DIR").expect("LAMINA_SYNTH_DIR");
    let base = family(BASE).write();
    let file = GgufFile::from_bytes(base.clone()).unwrap();
    let lora = adapter_bytes(&file, family(BASE).arch, false);
    std::fs::write(format!("{dir}/{BASE}.gguf"), &base).unwrap();
    std::fs::write(format!("{dir}/{BASE}-lora.gguf"), &lora).unwrap();
    println!("{BASE} {} adapter {}", sha256_hex(&base), sha256_hex(&lora));
}

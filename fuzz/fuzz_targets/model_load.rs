//! Fuzzes model loading beyond the header, structure-aware: a small llama
//! model with real tensor names and shapes, its metadata and tensors mutated
//! as the input says (keys set to values of any type, removed; tensors
//! reshaped, retyped, dropped). Loading must give a model or an error; a
//! model that loads must make a context and decode without panicking, and a
//! session saved from it, edited, must load or fail without changing it.
#![no_main]

use std::sync::Arc;

use lamina::backend::cpu::CpuDevice;
use lamina::context::{Batch, Context, ContextParams};
use lamina::gguf::{Array, GgufFile, GgufWriter, Value};
use lamina::model::Model;
use lamina::tensor::GgmlType;
use libfuzzer_sys::fuzz_target;

const N_EMBD: u64 = 32;
const N_FF: u64 = 64;
const KV: u64 = 16;
const N_VOCAB: u64 = 3 + 256;

const KEYS: &[&str] = &[
    "general.architecture",
    "llama.block_count",
    "llama.context_length",
    "llama.embedding_length",
    "llama.feed_forward_length",
    "llama.attention.head_count",
    "llama.attention.head_count_kv",
    "llama.attention.key_length",
    "llama.attention.layer_norm_rms_epsilon",
    "llama.rope.freq_base",
    "llama.rope.dimension_count",
    "llama.rope.scaling.type",
    "llama.rope.scaling.factor",
    "tokenizer.ggml.model",
    "tokenizer.ggml.tokens",
    "tokenizer.ggml.token_type",
    "tokenizer.ggml.scores",
    "tokenizer.ggml.bos_token_id",
    "tokenizer.ggml.eos_token_id",
    "tokenizer.ggml.add_bos_token",
    "general.alignment",
];

/// The base model's metadata and tensors (name, shape).
fn base() -> (Vec<(String, Value)>, Vec<(String, Vec<u64>)>) {
    let mut tokens: Vec<String> = ["<unk>", "<s>", "</s>"].map(String::from).to_vec();
    tokens.extend((0..=255u8).map(|b| format!("<0x{b:02X}>")));
    let mut types = vec![2, 3, 3];
    types.extend([6; 256]);
    let md = vec![
        ("general.architecture".into(), Value::String("llama".into())),
        ("llama.block_count".into(), Value::U32(2)),
        ("llama.context_length".into(), Value::U32(64)),
        ("llama.embedding_length".into(), Value::U32(N_EMBD as u32)),
        ("llama.feed_forward_length".into(), Value::U32(N_FF as u32)),
        ("llama.attention.head_count".into(), Value::U32(2)),
        ("llama.attention.head_count_kv".into(), Value::U32(1)),
        (
            "llama.attention.layer_norm_rms_epsilon".into(),
            Value::F32(1e-5),
        ),
        ("llama.rope.freq_base".into(), Value::F32(10000.0)),
        ("tokenizer.ggml.model".into(), Value::String("llama".into())),
        (
            "tokenizer.ggml.tokens".into(),
            Value::Array(Array::String(tokens)),
        ),
        (
            "tokenizer.ggml.token_type".into(),
            Value::Array(Array::I32(types)),
        ),
        (
            "tokenizer.ggml.scores".into(),
            Value::Array(Array::F32(vec![0.0; N_VOCAB as usize])),
        ),
        ("tokenizer.ggml.bos_token_id".into(), Value::U32(1)),
        ("tokenizer.ggml.eos_token_id".into(), Value::U32(2)),
    ];
    let mut tensors = vec![
        ("token_embd.weight".to_string(), vec![N_EMBD, N_VOCAB]),
        ("output_norm.weight".to_string(), vec![N_EMBD]),
    ];
    for l in 0..2 {
        for (name, shape) in [
            ("attn_norm", vec![N_EMBD]),
            ("attn_q", vec![N_EMBD, N_EMBD]),
            ("attn_k", vec![N_EMBD, KV]),
            ("attn_v", vec![N_EMBD, KV]),
            ("attn_output", vec![N_EMBD, N_EMBD]),
            ("ffn_norm", vec![N_EMBD]),
            ("ffn_gate", vec![N_EMBD, N_FF]),
            ("ffn_up", vec![N_EMBD, N_FF]),
            ("ffn_down", vec![N_FF, N_EMBD]),
        ] {
            tensors.push((format!("blk.{l}.{name}.weight"), shape));
        }
    }
    (md, tensors)
}

/// A value of the kind `kind` from four bytes.
fn value(kind: u8, b: [u8; 4]) -> Value {
    let u = u32::from_le_bytes(b);
    match kind % 8 {
        0 => Value::U32(u),
        1 => Value::I32(u as i32),
        2 => Value::F32(f32::from_bits(u)),
        3 => Value::U64(if b[0] == 0xFF { u64::MAX } else { u as u64 }),
        4 => Value::String(String::from_utf8_lossy(&b).into_owned()),
        5 => Value::Bool(u & 1 == 1),
        6 => Value::Array(Array::U32(vec![u; (b[0] % 8) as usize])),
        _ => Value::Array(Array::U8(b.to_vec())),
    }
}

fn build(data: &[u8]) -> Option<GgufFile> {
    let (mut md, mut tensors) = base();
    let mut types: Vec<GgmlType> = vec![GgmlType::F32; tensors.len()];
    for op in data.chunks_exact(6) {
        let b = [op[2], op[3], op[4], op[5]];
        match op[0] % 5 {
            0 => {
                let key = KEYS[op[1] as usize % KEYS.len()];
                md.retain(|(k, _)| k != key);
                md.push((key.to_string(), value(op[2], [op[3], op[4], op[5], op[2]])));
            }
            1 => {
                let key = KEYS[op[1] as usize % KEYS.len()];
                md.retain(|(k, _)| k != key);
            }
            2 => {
                let i = op[1] as usize % tensors.len();
                let dims = &mut tensors[i].1;
                let d = b[0] as usize % dims.len();
                dims[d] = (u16::from_le_bytes([b[1], b[2]]) % 600) as u64;
            }
            3 => {
                let i = op[1] as usize % tensors.len();
                tensors.remove(i);
                types.remove(i);
            }
            _ => {
                let i = op[1] as usize % tensors.len();
                types[i] = [GgmlType::F32, GgmlType::F16, GgmlType::Q8_0, GgmlType::Q4_0]
                    [b[0] as usize % 4];
            }
        }
    }
    let mut w = GgufWriter::new();
    for (k, v) in md {
        w.add_metadata(k, v).ok()?;
    }
    for ((name, shape), ty) in tensors.iter().zip(types) {
        let n: u64 = shape.iter().product();
        if n > 1 << 20 || n % ty.block_size() != 0 {
            return None;
        }
        // Small deterministic values (bytes of every type give finite ones).
        let bytes = (n / ty.block_size() * ty.block_bytes()) as usize;
        let data: Vec<u8> = (0..bytes).map(|i| (i * 7 % 61) as u8 & 0x3B).collect();
        w.add_tensor(name.clone(), ty, shape, data).ok()?;
    }
    GgufFile::from_bytes(w.to_bytes()).ok()
}

fuzz_target!(|data: &[u8]| {
    let Some(file) = build(data) else {
        return;
    };
    let device = CpuDevice::new(Some("scalar")).expect("the scalar device");
    let Ok(model) = Model::load(Arc::new(file), device.shared(), None) else {
        return;
    };
    let model = Arc::new(model);
    let params = ContextParams {
        n_ctx: 16,
        n_batch: 8,
        n_ubatch: 8,
        n_threads: 1,
        ..ContextParams::default()
    };
    let Ok(mut ctx) = Context::new(model.clone(), params) else {
        return;
    };
    let Ok(ids) = model.vocab.tokenize("hi there", true, false) else {
        return;
    };
    let ids: Vec<u32> = ids.into_iter().take(8).collect();
    if let Ok(batch) = Batch::for_sequence(&ids, 0, 0) {
        if ctx.decode(&batch).is_ok() {
            let logits = ctx
                .logits(-1)
                .expect("the last token's logits after a decode");
            assert_eq!(logits.len(), model.n_vocab());
            ctx.set_prompt_cache(&ids);
            session_round_trip(&mut ctx, data);
        }
    }
});

/// A session of the decoded tokens, edited as the input's last bytes say
/// (bytes flipped, the file cut) and, mostly, resealed with a valid checksum
/// so the edits reach the sizes and fields behind it: loading gives the
/// session or an error, and an error leaves the context as it was.
fn session_round_trip(ctx: &mut Context, data: &[u8]) {
    let Ok(mut bytes) = lamina::session::save_bytes(ctx, None) else {
        return;
    };
    let mut reseal = true;
    for op in data.rchunks_exact(6).take(4) {
        let at = u16::from_le_bytes([op[1], op[2]]) as usize % bytes.len();
        match op[0] % 4 {
            0 | 1 => bytes[at] ^= op[3].max(1),
            2 => bytes.truncate(at.max(1)),
            _ => reseal = op[4] & 1 == 0,
        }
    }
    if reseal && bytes.len() > 8 {
        let body = bytes.len() - 8;
        let sum = lamina::session::checksum(&bytes[..body]);
        bytes[body..].copy_from_slice(&sum.to_le_bytes());
    }
    let before = ctx.prompt_cache().to_vec();
    match lamina::session::load_bytes(ctx, &bytes) {
        Ok(loaded) => {
            assert_eq!(ctx.prompt_cache().len(), loaded.tokens_loaded);
            let next = before.first().copied().unwrap_or(0);
            if let Ok(batch) = Batch::for_sequence(&[next], loaded.tokens_loaded as i32, 0) {
                let _ = ctx.decode(&batch);
            }
        }
        Err(_) => assert_eq!(
            ctx.prompt_cache(),
            before.as_slice(),
            "a failed load changed the context"
        ),
    }
}

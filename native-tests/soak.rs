//! A long generation stays flat in memory: 20,000 tokens through a
//! 256-position context that shifts again and again, with the process's
//! resident memory read after the first thousand tokens and at the end.
//! A small llama-shaped model (random weights, a byte vocabulary) keeps it
//! to seconds. Linux only (it reads /proc/self/status); under emulation the
//! emulator's own translation cache grows, so scripts/env.sh skips it there.
#![cfg(target_os = "linux")]

mod common;

use std::sync::Arc;

use common::ggml_test_values;
use lamina::backend::cpu::CpuDevice;
use lamina::completion::CompletionParams;
use lamina::context::{Context, ContextParams};
use lamina::gguf::{Array, GgufFile, GgufWriter, Value};
use lamina::model::Model;
use lamina::sampling::SamplingParams;
use lamina::tensor::GgmlType;

/// A two-layer llama, 64 wide, over a byte vocabulary (259 tokens).
fn small_model() -> GgufFile {
    let (embd, ff, kv, vocab) = (64u64, 128u64, 32u64, 259u64);
    let mut w = GgufWriter::new();
    let mut tokens: Vec<String> = ["<unk>", "<s>", "</s>"].map(String::from).to_vec();
    tokens.extend((0..=255u8).map(|b| format!("<0x{b:02X}>")));
    let mut types = vec![2, 3, 3];
    types.extend([6; 256]);
    for (k, v) in [
        ("general.architecture", Value::String("llama".into())),
        ("llama.block_count", Value::U32(2)),
        ("llama.context_length", Value::U32(256)),
        ("llama.embedding_length", Value::U32(embd as u32)),
        ("llama.feed_forward_length", Value::U32(ff as u32)),
        ("llama.attention.head_count", Value::U32(2)),
        ("llama.attention.head_count_kv", Value::U32(1)),
        ("llama.attention.layer_norm_rms_epsilon", Value::F32(1e-5)),
        ("tokenizer.ggml.model", Value::String("llama".into())),
        ("tokenizer.ggml.tokens", Value::Array(Array::String(tokens))),
        ("tokenizer.ggml.token_type", Value::Array(Array::I32(types))),
        (
            "tokenizer.ggml.scores",
            Value::Array(Array::F32(vec![0.0; vocab as usize])),
        ),
        ("tokenizer.ggml.bos_token_id", Value::U32(1)),
        ("tokenizer.ggml.eos_token_id", Value::U32(2)),
    ] {
        w.add_metadata(k, v).unwrap();
    }
    let mut shapes = vec![
        ("token_embd.weight".to_string(), vec![embd, vocab]),
        ("output_norm.weight".to_string(), vec![embd]),
    ];
    for l in 0..2 {
        for (name, shape) in [
            ("attn_norm", vec![embd]),
            ("attn_q", vec![embd, embd]),
            ("attn_k", vec![embd, kv]),
            ("attn_v", vec![embd, kv]),
            ("attn_output", vec![embd, embd]),
            ("ffn_norm", vec![embd]),
            ("ffn_gate", vec![embd, ff]),
            ("ffn_up", vec![embd, ff]),
            ("ffn_down", vec![ff, embd]),
        ] {
            shapes.push((format!("blk.{l}.{name}.weight"), shape));
        }
    }
    for (i, (name, shape)) in shapes.into_iter().enumerate() {
        let n: u64 = shape.iter().product();
        let bytes: Vec<u8> = ggml_test_values(i as u64, n as usize)
            .iter()
            .flat_map(|v| v.to_le_bytes())
            .collect();
        w.add_tensor(name, GgmlType::F32, &shape, bytes).unwrap();
    }
    GgufFile::from_bytes(w.to_bytes()).unwrap()
}

/// The process's resident memory, in KiB.
fn rss_kib() -> u64 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap();
    let line = status.lines().find(|l| l.starts_with("VmRSS:")).unwrap();
    line.split_whitespace().nth(1).unwrap().parse().unwrap()
}

#[test]
fn twenty_thousand_tokens_with_context_shifts_keep_memory_flat() {
    let device = CpuDevice::new(None).unwrap();
    let model = Arc::new(Model::load(Arc::new(small_model()), device.shared(), None).unwrap());
    let mut ctx = Context::new(
        model,
        ContextParams {
            n_ctx: 256,
            n_threads: 1,
            ..ContextParams::default()
        },
    )
    .unwrap();
    let params = CompletionParams {
        prompt: "Once upon a time".into(),
        n_predict: 20_000,
        ignore_eos: true,
        sampling: SamplingParams {
            seed: Some(1),
            ..SamplingParams::default()
        },
        ..CompletionParams::default()
    };
    let mut n = 0usize;
    let mut rss_after_warm_up = 0;
    let r = ctx
        .completion(&params, |_| {
            n += 1;
            if n == 1000 {
                rss_after_warm_up = rss_kib();
            }
        })
        .unwrap();
    let rss_end = rss_kib();
    assert_eq!(r.tokens_predicted, 20_000);
    assert!(r.truncated, "the context shifted");
    assert!(ctx.kv().used() <= 256);
    // What may grow: the result's ids and text (about 100 KiB) and the
    // allocator's slack. A cache, a buffer or a list growing per token or
    // per shift would be megabytes.
    let grown = rss_end.saturating_sub(rss_after_warm_up);
    assert!(
        grown < 2048,
        "resident memory grew by {grown} KiB over 19,000 tokens ({rss_after_warm_up} -> {rss_end} KiB)"
    );
    eprintln!("soak: RSS {rss_after_warm_up} KiB after 1,000 tokens, {rss_end} KiB after 20,000");
}

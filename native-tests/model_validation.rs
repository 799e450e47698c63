//! A model that loads runs; one that cannot run does not load. Real files
//! (SmolLM2, MiniLM, the MS MARCO reranker) with one hyperparameter or one
//! tensor made hostile: each is refused at load with an error naming what is
//! wrong, never a panic and never a model that runs silently wrong.

mod common;

use std::sync::Arc;

#[cfg(target_arch = "wasm32")]
use wasm_bindgen_test::wasm_bindgen_test as test;

use common::{model_path, read_file};
use lamina::backend::cpu::CpuDevice;
use lamina::gguf::{Array, GgufFile, GgufWriter, Value};
use lamina::model::Model;
use lamina::tokenizer::TokenType;

fn source(name: &str) -> GgufFile {
    GgufFile::from_bytes(read_file(&model_path(name))).unwrap()
}

/// `src` rewritten: `key` set to `value` (removed when `None`), tensors
/// passed through `tensor` (`None` drops one).
fn rewrite(
    src: &GgufFile,
    edits: &[(&str, Option<Value>)],
    tensor: impl Fn(&str, &[u64]) -> Option<Vec<u64>>,
) -> GgufFile {
    let mut w = GgufWriter::new();
    for (k, v) in src.metadata().iter() {
        match edits.iter().find(|(key, _)| *key == k) {
            Some((_, Some(new))) => w.add_metadata(k, new.clone()).unwrap(),
            Some((_, None)) => {}
            None => w.add_metadata(k, v.clone()).unwrap(),
        }
    }
    for (k, v) in edits {
        if let (Some(v), None) = (v, src.metadata().get(k)) {
            w.add_metadata(*k, v.clone()).unwrap();
        }
    }
    for t in src.tensors() {
        let data = src.tensor_data_by_name(&t.name).unwrap();
        match tensor(&t.name, &t.shape) {
            Some(shape) if shape == t.shape => w
                .add_tensor(&t.name, t.ggml_type, &t.shape, data.to_vec())
                .unwrap(),
            Some(shape) => {
                // A reshaped tensor keeps as many bytes as its new shape takes.
                let n: u64 = shape.iter().product();
                let bytes = (n / t.ggml_type.block_size() * t.ggml_type.block_bytes()) as usize;
                w.add_tensor(&t.name, t.ggml_type, &shape, vec![0u8; bytes])
                    .unwrap()
            }
            None => {}
        }
    }
    GgufFile::from_bytes(w.to_bytes()).unwrap()
}

fn load_error(f: GgufFile) -> String {
    let device = CpuDevice::new(Some("scalar")).unwrap();
    match Model::load(Arc::new(f), device.shared(), None) {
        Ok(_) => "loaded".into(),
        Err(e) => e.to_string(),
    }
}

fn keep(_: &str, shape: &[u64]) -> Option<Vec<u64>> {
    Some(shape.to_vec())
}

fn assert_refused(f: GgufFile, want: &str, what: &str) {
    let e = load_error(f);
    assert!(e.contains(want), "{what}: {e:?} does not say {want:?}");
}

#[test]
fn hostile_llama_hyperparameters_are_refused() {
    let src = source("SmolLM2-135M-Instruct.Q4_1.gguf");
    let f32v = Value::F32;
    // KV heads per layer: one that does not divide the 9 query heads, and
    // one that does but disagrees with the layer's tensors.
    let per_layer = |last: u32| {
        let mut counts = vec![3u32; 30];
        counts[29] = last;
        Value::Array(Array::U32(counts))
    };
    let cases: [(&str, Value, &str); 15] = [
        ("llama.block_count", Value::U32(u32::MAX), "out of range"),
        (
            "llama.block_count",
            Value::U32(1 << 20),
            "but the file has only 272 tensors",
        ),
        ("llama.block_count", Value::U32(0), "no layers"),
        ("llama.block_count", Value::U32(31), "blk.30"),
        ("llama.block_count", Value::U32(29), "layer 29"),
        (
            "llama.attention.layer_norm_rms_epsilon",
            f32v(f32::NAN),
            "layer_norm_rms_epsilon",
        ),
        (
            "llama.attention.layer_norm_rms_epsilon",
            f32v(-1e-5),
            "layer_norm_rms_epsilon",
        ),
        ("llama.rope.freq_base", f32v(0.0), "rope.freq_base"),
        ("llama.rope.freq_base", f32v(f32::NAN), "rope.freq_base"),
        ("llama.context_length", Value::U32(0), "context_length"),
        ("llama.attention.head_count", Value::U32(7), "heads"),
        ("llama.attention.head_count_kv", Value::U32(0), "KV heads"),
        (
            "llama.attention.head_count_kv",
            per_layer(2),
            "each attending layer's KV head count must divide the 9 heads",
        ),
        (
            "llama.attention.head_count_kv",
            per_layer(1),
            "blk.29.attn_k",
        ),
        ("llama.embedding_length", Value::U32(512), "512"),
    ];
    for (key, value, want) in cases {
        let what = format!("{key} = {value:?}");
        assert_refused(rewrite(&src, &[(key, Some(value))], keep), want, &what);
    }
}

#[test]
fn vocabulary_and_tensors_must_match() {
    let src = source("SmolLM2-135M-Instruct.Q4_1.gguf");
    let Some(Value::Array(Array::String(tokens))) = src.metadata().get("tokenizer.ggml.tokens")
    else {
        panic!("SmolLM2 has a vocabulary");
    };
    let short = Array::String(tokens[..tokens.len() - 10].to_vec());
    let f = rewrite(
        &src,
        &[
            ("tokenizer.ggml.tokens", Some(Value::Array(short))),
            ("tokenizer.ggml.scores", None),
            ("tokenizer.ggml.token_type", None),
        ],
        keep,
    );
    assert_refused(
        f,
        "the vocabulary has 49142 tokens but the token embedding 49152 rows",
        "a vocabulary shorter than the embedding",
    );
    // A tensor the model uses, missing or of the wrong shape.
    let f = rewrite(&src, &[], |name, shape| {
        (name != "blk.3.attn_q.weight").then(|| shape.to_vec())
    });
    assert_refused(f, "blk.3.attn_q.weight", "a missing tensor");
    let f = rewrite(&src, &[], |name, shape| {
        Some(if name == "blk.2.ffn_up.weight" {
            vec![shape[0], shape[1] - 32]
        } else {
            shape.to_vec()
        })
    });
    assert_refused(f, "blk.2.ffn_up.weight", "a tensor of the wrong shape");
}

#[test]
fn hostile_bert_files_are_refused() {
    let minilm = source("all-MiniLM-L6-v2-f16.gguf");
    let f = rewrite(
        &minilm,
        &[("bert.context_length", Some(Value::U32(0)))],
        keep,
    );
    // Caught by the position table's shape (it has 512 rows, not 0).
    assert_refused(f, "expected 0x384", "BERT context_length 0");
    let f = rewrite(&minilm, &[], |name, shape| {
        Some(if name == "token_types.weight" {
            vec![shape[0], 0]
        } else {
            shape.to_vec()
        })
    });
    assert_refused(f, "token_types.weight", "zero token types");
    let reranker = source("ms-marco-MiniLM-L12-v2-reranker-withpooler-q8_0.gguf");
    let f = rewrite(&reranker, &[], |name, shape| {
        Some(if name == "cls.output.weight" {
            vec![shape[0], 0]
        } else {
            shape.to_vec()
        })
    });
    assert_refused(f, "cls.output.weight", "a classifier with no outputs");
    // Token types stored as u8 are read (as llama.cpp's loader takes any
    // integer array), not ignored: the reranker still loads.
    let Some(Value::Array(Array::I32(types))) =
        reranker.metadata().get("tokenizer.ggml.token_type")
    else {
        panic!("the reranker has i32 token types");
    };
    let n_tokens = types.len() as u32;
    let as_u8 = Array::U8(types.iter().map(|&t| t as u8).collect());
    let f = rewrite(
        &reranker,
        &[("tokenizer.ggml.token_type", Some(Value::Array(as_u8)))],
        keep,
    );
    let device = CpuDevice::new(Some("scalar")).unwrap();
    let from_u8 = Model::load(Arc::new(f), device.shared(), None).unwrap();
    let original = Model::load(Arc::new(reranker), device.shared(), None).unwrap();
    let n_control = (0..n_tokens)
        .filter(|&id| {
            assert_eq!(
                from_u8.vocab.token_type(id),
                original.vocab.token_type(id),
                "token {id}"
            );
            original.vocab.token_type(id) == Some(TokenType::Control)
        })
        .count();
    assert!(
        n_control >= 4,
        "[PAD], [CLS], [SEP], [MASK] are control tokens"
    );
}

//! Fuzzes the tokenizers with random vocabularies and text: the input gives
//! the tokenizer model (SentencePiece, byte-level BPE with one of the known
//! pre-tokenizers, WordPiece, Gemma 4's), the tokens and their types, and the
//! text. Building the vocabulary may fail with an error; tokenizing must give
//! ids inside the vocabulary, and detokenizing them must not panic.
#![no_main]

use lamina::gguf::{Array, Metadata, Value};
use lamina::tokenizer::Vocab;
use libfuzzer_sys::fuzz_target;

const MODELS: &[&str] = &["llama", "gpt2", "bert", "gemma4"];
const PRES: &[&str] = &[
    "default",
    "llama3",
    "qwen2",
    "qwen35",
    "gpt-2",
    "deepseek-llm",
    "falcon",
    "starcoder",
    "mpt",
    "tekken",
    "smollm",
    "gemma4",
];

fuzz_target!(|data: &[u8]| {
    let Some((&head, rest)) = data.split_first() else {
        return;
    };
    // Parts separated by 0xFF: the tokens, then (the last part) the text.
    let mut parts: Vec<&[u8]> = rest.split(|&b| b == 0xFF).collect();
    let text = String::from_utf8_lossy(parts.pop().unwrap_or_default()).into_owned();
    let tokens: Vec<String> = parts
        .iter()
        .map(|p| String::from_utf8_lossy(p).into_owned())
        .collect();
    if tokens.is_empty() {
        return;
    }
    let types: Vec<i32> = tokens
        .iter()
        .enumerate()
        .map(|(i, t)| (t.len() as i32 + i as i32 * (head as i32 >> 4)) % 7)
        .collect();
    // Merges of neighbouring tokens, for byte-level BPE.
    let merges: Vec<String> = tokens
        .windows(2)
        .filter(|w| {
            !w[0].contains(' ') && !w[1].contains(' ') && !w[0].is_empty() && !w[1].is_empty()
        })
        .map(|w| format!("{} {}", w[0], w[1]))
        .collect();
    let n = tokens.len() as u32;
    let mut md = Metadata::default();
    let model = MODELS[head as usize % MODELS.len()];
    let pre = PRES[(head as usize / 4) % PRES.len()];
    let ok = md
        .insert("tokenizer.ggml.model", Value::String(model.into()))
        .is_ok()
        && md
            .insert("tokenizer.ggml.pre", Value::String(pre.into()))
            .is_ok()
        && md
            .insert("tokenizer.ggml.tokens", Value::Array(Array::String(tokens)))
            .is_ok()
        && md
            .insert("tokenizer.ggml.token_type", Value::Array(Array::I32(types)))
            .is_ok()
        && md
            .insert("tokenizer.ggml.merges", Value::Array(Array::String(merges)))
            .is_ok()
        && md
            .insert(
                "tokenizer.ggml.unknown_token_id",
                Value::U32(head as u32 % n),
            )
            .is_ok()
        && md
            .insert(
                "tokenizer.ggml.bos_token_id",
                Value::U32((head as u32 + 1) % n),
            )
            .is_ok();
    if !ok {
        return;
    }
    let Ok(vocab) = Vocab::from_metadata(&md) else {
        return;
    };
    for (add_special, parse_special) in [(false, false), (true, true)] {
        if let Ok(ids) = vocab.tokenize(&text, add_special, parse_special) {
            assert!(
                ids.iter().all(|&id| id < n),
                "an id outside the vocabulary: {ids:?}"
            );
            let _ = vocab.detokenize(&ids, parse_special);
        }
    }
});

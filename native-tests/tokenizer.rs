//! Tokenizers against llama.cpp's own test suites (../shared/golden/vocab: the
//! vocab-only GGUF files with their inputs and expected ids) and the SmolLM2
//! golden token ids.

mod common;

#[cfg(target_arch = "wasm32")]
use wasm_bindgen_test::wasm_bindgen_test as test;

use common::{golden_path, json_ids, model_path, read_file};
use lamina::gguf::GgufFile;
use lamina::tokenizer::Vocab;

fn vocab_of(path: &str) -> Vocab {
    let file = GgufFile::from_bytes(read_file(path)).unwrap_or_else(|e| panic!("{path}: {e}"));
    Vocab::from_metadata(file.metadata()).unwrap_or_else(|e| panic!("{path}: {e}"))
}

/// The cases of a `.inp` file, split as the vocab README says.
fn cases(inp: &str) -> Vec<String> {
    const SEP: &str = "\n__ggml_vocab_test__\n";
    let mut parts: Vec<String> = inp.split(SEP).map(str::to_string).collect();
    if inp.ends_with(SEP) {
        parts.pop();
    }
    parts
}

fn expected_ids(out: &str) -> Vec<Vec<u32>> {
    out.split('\n')
        .map(|l| l.trim())
        .collect::<Vec<_>>()
        .into_iter()
        .map(|l| {
            if l.is_empty() {
                vec![]
            } else {
                l.split(' ').map(|n| n.parse().unwrap()).collect()
            }
        })
        .collect()
}

fn check_suite(set: &str) {
    check_suite_at(&golden_path(&format!("vocab/ggml-vocab-{set}.gguf")), set)
}

/// A suite of the 2026 reference's `models/` folder, put in `models/vocab/`
/// by scripts/fetch-models.sh (from the llama-cpp-python==0.3.36 sdist).
fn check_reference_suite(set: &str) {
    check_suite_at(
        &format!("{}/models/vocab/ggml-vocab-{set}.gguf", common::REPO),
        set,
    )
}

fn check_suite_at(base: &str, set: &str) {
    let base = base.to_string();
    let vocab = vocab_of(&base);
    let inp = String::from_utf8(read_file(&format!("{base}.inp"))).unwrap();
    let out = String::from_utf8(read_file(&format!("{base}.out"))).unwrap();
    let cases = cases(&inp);
    let expected = expected_ids(&out);
    // 46 cases in every suite (50 in qwen35's), one line of ids each.
    assert!(cases.len() >= 46, "{set}: {} cases", cases.len());
    assert!(
        expected.len() >= cases.len(),
        "{set}: fewer expected lines than cases"
    );
    let mut failures = Vec::new();
    for (i, text) in cases.iter().enumerate() {
        let got = vocab.tokenize(text, false, false).unwrap();
        if got != expected[i] {
            failures.push(format!(
                "case {i} {text:?}: got {got:?}, want {:?}",
                expected[i]
            ));
        }
    }
    assert!(
        failures.is_empty(),
        "{set}: {} of {} cases differ:\n{}",
        failures.len(),
        cases.len(),
        failures.join("\n")
    );
}

#[test]
fn vocab_gpt_2() {
    check_suite("gpt-2");
}

#[test]
fn vocab_llama_bpe() {
    check_suite("llama-bpe");
}

#[test]
fn vocab_qwen2() {
    check_suite("qwen2");
}

#[test]
fn vocab_falcon() {
    check_suite("falcon");
}

#[test]
fn vocab_starcoder() {
    check_suite("starcoder");
}

#[test]
fn vocab_deepseek_llm() {
    check_suite("deepseek-llm");
}

#[test]
fn vocab_mpt() {
    check_suite("mpt");
}

#[test]
fn vocab_llama_spm() {
    check_suite("llama-spm");
}

#[test]
fn vocab_phi_3() {
    check_suite("phi-3");
}

#[test]
fn vocab_bert_bge() {
    check_suite("bert-bge");
}

#[test]
fn vocab_qwen35() {
    check_reference_suite("qwen35");
}

#[test]
fn vocab_gemma_4() {
    check_reference_suite("gemma-4");
}

#[test]
fn vocab_command_r() {
    check_reference_suite("command-r");
}

#[test]
fn vocab_deepseek_coder() {
    check_reference_suite("deepseek-coder");
}

#[test]
fn vocab_refact() {
    check_reference_suite("refact");
}

#[test]
fn smollm2_golden_ids() {
    let vocab = vocab_of(&model_path("SmolLM2-135M-Instruct.Q4_1.gguf"));
    let golden: serde_json::Value =
        serde_json::from_slice(&read_file(&golden_path("smollm2/tokenize.json"))).unwrap();
    let cases = golden["cases"]
        .as_array()
        .or_else(|| golden.as_array())
        .expect("cases");
    assert_eq!(cases.len(), 12);
    for case in cases {
        let text = case["text"].as_str().unwrap();
        let ids = |key: &str| json_ids(&case[key]);
        assert_eq!(
            vocab.tokenize(text, true, true).unwrap(),
            ids("ids_parse_special"),
            "{text:?}"
        );
        assert_eq!(
            vocab.tokenize(text, true, false).unwrap(),
            ids("ids_no_parse_special"),
            "{text:?}"
        );
        // Pieces, byte for byte.
        let hex: Vec<String> = case["pieces_hex_parse_special"]
            .as_array()
            .unwrap()
            .iter()
            .map(|v| v.as_str().unwrap().to_string())
            .collect();
        let got: Vec<String> = ids("ids_parse_special")
            .iter()
            .map(|&id| {
                vocab
                    .token_bytes(id, true)
                    .iter()
                    .map(|b| format!("{b:02x}"))
                    .collect()
            })
            .collect();
        assert_eq!(got, hex, "{text:?}: pieces");
    }
}

/// BERT's [CLS] ... [SEP] layout and lower-casing/accent stripping, against
/// llama-tokenize on all-MiniLM-L6-v2.
#[test]
fn minilm_golden_ids() {
    let vocab = vocab_of(&model_path("all-MiniLM-L6-v2-f16.gguf"));
    let golden: serde_json::Value =
        serde_json::from_slice(&read_file(&golden_path("minilm/tokens.json"))).unwrap();
    let items = golden["items"].as_array().unwrap();
    assert_eq!(items.len(), 6);
    for item in items {
        let text = item["text"].as_str().unwrap();
        let want = json_ids(&item["token_ids"]);
        assert_eq!(vocab.tokenize(text, true, false).unwrap(), want, "{text:?}");
    }
}

/// Byte-level BPE round-trips any text, and the stream hands out whole
/// characters only, even when a character spans tokens.
#[test]
fn detokenize_and_stream() {
    use lamina::tokenizer::TextStream;
    let vocab = vocab_of(&model_path("SmolLM2-135M-Instruct.Q4_1.gguf"));
    let golden: serde_json::Value =
        serde_json::from_slice(&read_file(&golden_path("smollm2/tokenize.json"))).unwrap();
    let mut split_chars = 0;
    for case in golden["cases"]
        .as_array()
        .or_else(|| golden.as_array())
        .unwrap()
    {
        let text = case["text"].as_str().unwrap();
        let ids = vocab.tokenize(text, false, true).unwrap();
        assert_eq!(vocab.detokenize(&ids, true), text.as_bytes(), "{text:?}");
        let mut stream = TextStream::new();
        let mut streamed = String::new();
        for &id in &ids {
            let piece = stream.push(&vocab.token_bytes(id, true));
            split_chars += stream.has_pending() as usize;
            streamed.push_str(&piece);
        }
        streamed.push_str(&stream.finish());
        assert_eq!(streamed, text, "{text:?}");
    }
    assert!(
        split_chars > 0,
        "the golden cases include characters split across tokens"
    );
    // Control tokens are dropped without `special`.
    let ids = vocab.tokenize("<|im_start|>user", false, true).unwrap();
    assert_eq!(vocab.detokenize(&ids, false), b"user");
    // Invalid bytes become U+FFFD; an unfinished character waits.
    let mut s = TextStream::new();
    assert_eq!(s.push(&[0xF0, 0x9F]), "");
    assert_eq!(s.push(&[0x98, 0x80, b'!']), "\u{1F600}!");
    assert_eq!(s.push(&[0xFF, b'a']), "\u{FFFD}a");
    assert_eq!(s.push(&[0xE4]), "");
    assert_eq!(s.finish(), "\u{FFFD}");
}

/// SentencePiece round trip on plain text (the space prefix is removed again).
#[test]
fn spm_detokenize() {
    let vocab = vocab_of(&golden_path("vocab/ggml-vocab-llama-spm.gguf"));
    for text in [
        "Hello world",
        "  two leading",
        "tabs\tand\nnewlines",
        "ünïcödé 中文 🦙",
    ] {
        let ids = vocab.tokenize(text, false, false).unwrap();
        assert_eq!(
            String::from_utf8(vocab.detokenize(&ids, false)).unwrap(),
            text,
            "{text:?}"
        );
    }
}

#[test]
fn unsupported_models_and_pre_tokenizers_are_named() {
    let vocab = vocab_of(&golden_path("vocab/ggml-vocab-gpt-2.gguf"));
    assert_eq!(vocab.model(), "gpt2");
    let e = lamina::tokenizer::PreTokenizer::for_name("nonesuch").unwrap_err();
    assert!(
        e.to_string()
            .contains("unknown pre-tokenizer type 'nonesuch'"),
        "{e}"
    );
}

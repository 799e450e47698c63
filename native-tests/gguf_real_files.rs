//! Real files: the SmolLM2 chat model, the embedding models, and llama.cpp's
//! vocab-only test files. Run natively, under qemu and in Node.

mod common;

#[cfg(target_arch = "wasm32")]
use wasm_bindgen_test::wasm_bindgen_test as test;

use std::collections::BTreeMap;

use common::{golden_path, list_dir, model_path, read_file};
use lamina::gguf::{GgufFile, GgufWriter, StreamLoader};

const SMOLLM2: &str = "SmolLM2-135M-Instruct.Q4_1.gguf";

fn load(path: &str) -> GgufFile {
    GgufFile::from_bytes(read_file(path)).unwrap_or_else(|e| panic!("{path}: {e}"))
}

fn count_by_type(file: &GgufFile) -> BTreeMap<&'static str, usize> {
    let mut counts = BTreeMap::new();
    for t in file.tensors() {
        *counts.entry(t.ggml_type.name()).or_insert(0) += 1;
    }
    counts
}

#[test]
fn smollm2_header() {
    let file = load(&model_path(SMOLLM2));
    assert_eq!(file.version(), 3);
    assert_eq!(file.metadata().len(), 33);
    assert_eq!(file.tensors().len(), 272);
    let md = file.metadata();
    assert_eq!(md.get_str("general.architecture").unwrap(), "llama");
    assert_eq!(md.get_u32("llama.block_count").unwrap(), 30);
    assert_eq!(md.get_u32("llama.embedding_length").unwrap(), 576);
    assert_eq!(md.get_u32("llama.attention.head_count").unwrap(), 9);
    assert_eq!(md.get_u32("llama.attention.head_count_kv").unwrap(), 3);
    assert_eq!(md.get_f32("llama.rope.freq_base").unwrap(), 100000.0);
    assert_eq!(md.get_str("tokenizer.ggml.pre").unwrap(), "smollm");
    let tokens = md.get_str_array("tokenizer.ggml.tokens").unwrap();
    assert_eq!(tokens.len(), 49152);
    assert_eq!(tokens[1], "<|im_start|>");
    assert_eq!(tokens[2], "<|im_end|>");
    assert_eq!(
        count_by_type(&file),
        BTreeMap::from([("F32", 61), ("Q4_1", 210), ("Q8_0", 1)])
    );
    let embd = file.tensor("token_embd.weight").unwrap();
    assert_eq!(embd.shape, [576, 49152]);
    assert_eq!(embd.n_bytes, 49152 * 18 * 34);
    assert_eq!(embd.offset, 0);
    // the last tensor ends exactly at the end of the file
    let end = file
        .tensors()
        .iter()
        .map(|t| file.data_offset() + t.offset + t.n_bytes)
        .max()
        .unwrap();
    assert_eq!(end, file.file_len());
}

/// The writer reproduces the file llama.cpp's tooling wrote, byte for byte: the
/// strongest evidence that llama.cpp reads what lamina writes.
#[test]
fn smollm2_rewrites_byte_identical() {
    let file = load(&model_path(SMOLLM2));
    let mut w = GgufWriter::new();
    w.set_version(file.version()).unwrap();
    for (key, value) in file.metadata().iter() {
        w.add_metadata(key, value.clone()).unwrap();
    }
    for t in file.tensors() {
        w.add_tensor(
            t.name.clone(),
            t.ggml_type,
            &t.shape,
            file.tensor_data(t).unwrap(),
        )
        .unwrap();
    }
    let rewritten = w.to_bytes();
    assert_eq!(rewritten.len(), file.bytes().len());
    assert!(rewritten == file.bytes(), "rewritten bytes differ");
}

#[test]
fn smollm2_streams_in_chunks() {
    let bytes = read_file(&model_path(SMOLLM2));
    let whole = GgufFile::from_bytes(bytes.clone()).unwrap();
    let mut loader = StreamLoader::new(bytes.len() as u64).unwrap();
    let mut header_seen_at = None;
    for chunk in bytes.chunks(256 * 1024) {
        loader.push(chunk).unwrap();
        if header_seen_at.is_none() && loader.header_ready() {
            header_seen_at = Some(loader.received());
        }
    }
    // The 1.7 MiB header is known long before the 94 MiB of data have arrived.
    let seen = header_seen_at.expect("header parsed");
    assert!(
        seen < whole.data_offset() + (1 << 20),
        "header ready at {seen}"
    );
    let streamed = loader.finish().unwrap();
    assert_eq!(streamed.metadata(), whole.metadata());
    assert_eq!(streamed.tensors(), whole.tensors());
}

#[test]
fn embedding_models_parse() {
    let minilm = load(&model_path("all-MiniLM-L6-v2-f16.gguf"));
    assert_eq!(
        minilm.metadata().get_str("general.architecture").unwrap(),
        "bert"
    );
    assert_eq!(minilm.tensors().len(), 101);
    assert_eq!(
        count_by_type(&minilm),
        BTreeMap::from([("F16", 37), ("F32", 64)])
    );
    assert_eq!(minilm.metadata().get_u32("bert.pooling_type").unwrap(), 1);

    let reranker = load(&model_path(
        "ms-marco-MiniLM-L12-v2-reranker-withpooler-q8_0.gguf",
    ));
    assert_eq!(reranker.tensors().len(), 201);
    assert_eq!(
        count_by_type(&reranker),
        BTreeMap::from([("F16", 1), ("F32", 126), ("Q8_0", 74)])
    );
    assert!(reranker.tensor("cls.output.weight").is_some());
}

/// llama.cpp's tokenizer test vocabularies: every one parses, with the tokenizer
/// model, pre-tokenizer and vocabulary size its README lists.
#[test]
fn vocab_files_parse() {
    let expected: BTreeMap<&str, (&str, Option<&str>, usize)> = BTreeMap::from([
        ("llama-spm", ("llama", Some("default"), 32000)),
        ("llama-bpe", ("gpt2", Some("llama-bpe"), 128256)),
        ("gpt-2", ("gpt2", Some("gpt-2"), 50257)),
        ("qwen2", ("gpt2", Some("qwen2"), 151936)),
        ("phi-3", ("llama", Some("default"), 32064)),
        ("bert-bge", ("bert", Some("bert-bge"), 30522)),
        ("falcon", ("gpt2", Some("falcon"), 65024)),
        ("starcoder", ("gpt2", Some("starcoder"), 49152)),
        ("deepseek-llm", ("gpt2", Some("deepseek-llm"), 102400)),
        ("mpt", ("gpt2", Some("mpt"), 50432)),
    ]);
    let dir = golden_path("vocab");
    let files: Vec<String> = list_dir(&dir)
        .into_iter()
        .filter(|f| f.ends_with(".gguf"))
        .collect();
    assert_eq!(files.len(), expected.len(), "{files:?}");
    for name in files {
        let set = name
            .trim_start_matches("ggml-vocab-")
            .trim_end_matches(".gguf");
        let (model, pre, n_vocab) = expected[set];
        let file = load(&format!("{dir}/{name}"));
        let md = file.metadata();
        assert!(file.tensors().is_empty(), "{set}");
        assert_eq!(md.get_str("tokenizer.ggml.model").unwrap(), model, "{set}");
        assert_eq!(md.get_str("tokenizer.ggml.pre").ok(), pre, "{set}");
        assert_eq!(
            md.get_str_array("tokenizer.ggml.tokens").unwrap().len(),
            n_vocab,
            "{set}"
        );
    }
}

/// A file opened by the app and handed over as a descriptor (Android
/// `content://`): same result as from the path, and the descriptor stays the
/// caller's: open, at the same position, usable after the model is loaded.
#[cfg(unix)]
#[test]
fn loading_from_an_fd_leaves_it_open() {
    use std::io::{Read, Seek, SeekFrom};
    use std::os::fd::{AsFd, AsRawFd};

    let path = model_path(SMOLLM2);
    let from_path = GgufFile::open(&path).unwrap();
    let mut file = std::fs::File::open(&path).unwrap();
    file.seek(SeekFrom::Start(2)).unwrap();
    {
        let from_fd = GgufFile::from_fd(file.as_fd()).unwrap();
        assert_eq!(from_fd.metadata(), from_path.metadata());
        assert_eq!(from_fd.tensors(), from_path.tensors());
        let by_raw = GgufFile::from_raw_fd(file.as_raw_fd()).unwrap();
        assert_eq!(by_raw.tensors(), from_path.tensors());
    }
    // Still open, still at offset 2.
    assert_eq!(file.stream_position().unwrap(), 2);
    let mut two = [0u8; 2];
    file.read_exact(&mut two).unwrap();
    assert_eq!(&two, b"UF");
    drop(file);

    // A model outlives the descriptor it came from.
    let file = std::fs::File::open(&path).unwrap();
    let model = GgufFile::from_raw_fd(file.as_raw_fd()).unwrap();
    drop(file);
    let t = model.tensor("output_norm.weight").unwrap().clone();
    assert_eq!(
        model.tensor_data(&t).unwrap(),
        from_path.tensor_data(&t).unwrap()
    );
}

#[cfg(unix)]
#[test]
fn bad_descriptors_and_paths_are_errors() {
    use std::os::fd::AsFd;
    let e = GgufFile::from_raw_fd(-1).unwrap_err();
    assert!(e.to_string().contains("file descriptor -1"), "{e}");
    let e = GgufFile::from_raw_fd(987_654).unwrap_err();
    assert!(e.to_string().contains("file descriptor 987654"), "{e}");
    let e = GgufFile::open("/nonexistent/model.gguf").unwrap_err();
    assert!(e.to_string().contains("/nonexistent/model.gguf"), "{e}");
    // An empty file and a directory.
    let empty = std::env::temp_dir().join(format!("lamina-empty-{}.gguf", std::process::id()));
    std::fs::write(&empty, b"").unwrap();
    let f = std::fs::File::open(&empty).unwrap();
    let e = GgufFile::from_fd(f.as_fd()).unwrap_err();
    assert_eq!(e.to_string(), "not a GGUF file: the input is empty");
    std::fs::remove_file(&empty).unwrap();
    assert!(GgufFile::open(std::env::temp_dir()).is_err());
}

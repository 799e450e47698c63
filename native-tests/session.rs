//! Session files (llama.rn's `saveSession`/`loadSession`, llama.cpp's
//! `--prompt-cache`) with the real SmolLM2 model: a loaded session continues
//! with the same ids as the context that saved it; `max_tokens` keeps a
//! prefix; a corrupt file, another model's session, other cache types or a
//! small context are errors that change nothing.

mod common;

#[cfg(target_arch = "wasm32")]
use wasm_bindgen_test::wasm_bindgen_test as test;

use std::sync::Arc;

use common::{model_path, read_file};
use lamina::backend::cpu::CpuDevice;
use lamina::completion::{CompletionParams, CompletionResult};
use lamina::context::{Context, ContextParams, KvType};
use lamina::gguf::GgufFile;
use lamina::model::Model;
use lamina::sampling::SamplingParams;
use lamina::session;

fn context_with(model: Arc<Model>, n_ctx: usize, type_k: KvType) -> Context {
    Context::new(
        model,
        ContextParams {
            n_ctx,
            n_threads: if cfg!(target_arch = "wasm32") { 1 } else { 2 },
            type_k,
            ..ContextParams::default()
        },
    )
    .unwrap()
}

fn context() -> Context {
    context_with(common::smollm2_q4_1(), 256, KvType::F16)
}

const PROMPT: &str = "The capital of France is Paris. The capital of Italy is";

fn params(prompt: &str, n_predict: i32, seed: Option<u32>) -> CompletionParams {
    CompletionParams {
        prompt: prompt.into(),
        n_predict,
        sampling: SamplingParams {
            temperature: if seed.is_some() { 0.9 } else { 0.0 },
            seed,
            ..SamplingParams::default()
        },
        ..CompletionParams::default()
    }
}

fn run(ctx: &mut Context, p: &CompletionParams) -> CompletionResult {
    ctx.completion(p, |_| {}).unwrap()
}

/// A context that has run one completion, and its session bytes.
fn saved() -> (Context, Vec<u8>) {
    let mut ctx = context();
    run(&mut ctx, &params(PROMPT, 4, None));
    let bytes = session::save_bytes(&ctx, None).unwrap();
    (ctx, bytes)
}

/// The same completion from the context that saved and from a fresh context
/// that loaded the session: same ids, same cached prefix, one prompt token
/// evaluated — greedy, seeded, and with a longer prompt over the prefix.
#[test]
fn a_loaded_session_continues_as_if_never_saved() {
    let continued = format!("{PROMPT} Rome. The capital of Spain is");
    for p in [
        params(PROMPT, 12, None),
        params(PROMPT, 12, Some(7)),
        params(&continued, 12, None),
    ] {
        let (mut a, bytes) = saved();
        let mut b = context();
        let loaded = session::load_bytes(&mut b, &bytes).unwrap();
        assert_eq!(loaded.tokens_loaded, a.prompt_cache().len());
        assert!(
            loaded.tokens_loaded > 4,
            "the prompt and the generated tokens"
        );
        assert!(loaded.prompt.starts_with(PROMPT), "{:?}", loaded.prompt);
        assert_eq!(b.prompt_cache(), a.prompt_cache());
        let from_a = run(&mut a, &p);
        let from_b = run(&mut b, &p);
        assert_eq!(from_b.generated_ids, from_a.generated_ids, "{}", p.prompt);
        assert_eq!(from_b.text, from_a.text);
        assert!(from_a.tokens_cached > 5, "the prefix was reused");
        assert_eq!(from_b.tokens_cached, from_a.tokens_cached);
        assert_eq!(from_b.timings.prompt_n, from_a.timings.prompt_n);
    }
}

/// llama.rn's `tokenSize`: only the first tokens are saved, and the next
/// completion reuses exactly those.
#[test]
fn a_session_keeps_its_first_tokens_when_asked() {
    let (_, all) = saved();
    let (a, _) = saved();
    let bytes = session::save_bytes(&a, Some(5)).unwrap();
    assert!(bytes.len() < all.len());
    let mut b = context();
    let loaded = session::load_bytes(&mut b, &bytes).unwrap();
    assert_eq!(loaded.tokens_loaded, 5);
    assert_eq!(b.prompt_cache(), &a.prompt_cache()[..5]);
    let r = run(&mut b, &params(PROMPT, 2, None));
    assert_eq!(r.tokens_cached, 5);
    // More than the cache holds is all of it.
    let bytes = session::save_bytes(&a, Some(100_000)).unwrap();
    assert_eq!(bytes, all);
}

/// Sets the checksum of edited session bytes, as a hostile writer would.
fn reseal(bytes: &mut [u8]) {
    let body = bytes.len() - 8;
    let sum = session::checksum(&bytes[..body]);
    bytes[body..].copy_from_slice(&sum.to_le_bytes());
}

/// Offset of the token count in a SmolLM2 session: after the magic, the
/// version, the fingerprint, three strings, the width and the layer count.
fn token_count_offset(bytes: &[u8]) -> usize {
    let mut at = 8 + 4 + 8;
    for _ in 0..3 {
        at += 4 + u32::from_le_bytes(bytes[at..at + 4].try_into().unwrap()) as usize;
    }
    at + 8
}

fn expect_session_error(ctx: &mut Context, bytes: &[u8], needle: &str) {
    match session::load_bytes(ctx, bytes) {
        Err(e) => assert!(e.to_string().contains(needle), "{e} (wanted {needle:?})"),
        Ok(_) => panic!("loaded a session that should fail with {needle:?}"),
    }
}

/// Every way a session can be wrong is an error naming it, and the context
/// that refused it keeps its own cache: the next completion reuses it.
#[test]
fn a_bad_session_is_an_error_that_changes_nothing() {
    let (_, good) = saved();
    let mut ctx = context();
    let p = params("Once upon a time there was a dragon who", 6, None);
    let before = run(&mut ctx, &p);
    let cache = ctx.prompt_cache().to_vec();

    let mut flipped = good.clone();
    let mid = flipped.len() / 2;
    flipped[mid] ^= 0x10;
    expect_session_error(&mut ctx, &flipped, "checksum");
    expect_session_error(&mut ctx, &good[..good.len() - 100], "checksum");
    expect_session_error(&mut ctx, &good[..10], "truncated");
    expect_session_error(
        &mut ctx,
        b"GGUF\x03\0\0\0 a model, not a session",
        "not a lamina session",
    );
    expect_session_error(&mut ctx, &[], "not a lamina session");

    let mut newer = good.clone();
    newer[8] = 5;
    reseal(&mut newer);
    expect_session_error(&mut ctx, &newer, "version 5");

    // Sizes from the file are checked against the bytes present.
    let at = token_count_offset(&good);
    let mut huge = good.clone();
    huge[at..at + 4].copy_from_slice(&u32::MAX.to_le_bytes());
    reseal(&mut huge);
    expect_session_error(&mut ctx, &huge, "ends inside the tokens");
    let mut more = good.clone();
    let n = u32::from_le_bytes(more[at..at + 4].try_into().unwrap());
    more[at..at + 4].copy_from_slice(&(n - 1).to_le_bytes());
    reseal(&mut more);
    expect_session_error(&mut ctx, &more, "bytes present");

    // A token the vocabulary lacks.
    let mut token = good.clone();
    token[at + 4..at + 8].copy_from_slice(&10_000_000u32.to_le_bytes());
    reseal(&mut token);
    expect_session_error(&mut ctx, &token, "outside the vocabulary");

    assert_eq!(ctx.prompt_cache(), cache.as_slice());
    let after = run(&mut ctx, &p);
    assert_eq!(after.tokens_cached, p_len(&before) - 1);
    assert_eq!(after.generated_ids, before.generated_ids);
}

/// A version 1 file (written before sessions held recurrent states: no
/// state count before the checksum) still loads, and continues as the
/// version 2 file of the same cache does.
#[test]
fn version_1_sessions_still_load() {
    let (_, v2) = saved();
    let body = v2.len() - 8;
    assert_eq!(&v2[body - 4..body], &[0; 4], "no recurrent values");
    let mut v1 = [&v2[..body - 4], &[0u8; 8][..]].concat();
    v1[8] = 1;
    reseal(&mut v1);
    let p = params(PROMPT, 8, None);
    let mut a = context();
    session::load_bytes(&mut a, &v2).unwrap();
    let mut b = context();
    let loaded = session::load_bytes(&mut b, &v1).unwrap();
    assert_eq!(loaded.tokens_loaded, a.prompt_cache().len());
    assert_eq!(run(&mut b, &p).generated_ids, run(&mut a, &p).generated_ids);
}

fn p_len(r: &CompletionResult) -> usize {
    r.prompt_ids.len()
}

/// The same file with one weight byte changed: a model of the same shape
/// that is not the same model (a fine-tune) refuses the session, naming both.
fn another_model() -> Arc<Model> {
    let mut bytes = read_file(&model_path("SmolLM2-135M-Instruct.Q4_1.gguf"));
    let file = GgufFile::from_bytes(bytes.clone()).unwrap();
    let info = file.tensors().last().unwrap().clone();
    let at = (file.data_offset() + info.offset + 100) as usize;
    bytes[at] ^= 0x01;
    let file = GgufFile::from_bytes(bytes).unwrap();
    let device = CpuDevice::new(None).unwrap();
    Arc::new(Model::load(Arc::new(file), device.shared(), None).unwrap())
}

#[test]
fn a_session_loads_only_into_its_model_and_cache_shape() {
    let (_, good) = saved();
    let mut other = context_with(another_model(), 256, KvType::F16);
    expect_session_error(&mut other, &good, "saved with another model");
    assert!(other.prompt_cache().is_empty());

    let mut q8 = context_with(common::smollm2_q4_1(), 256, KvType::Q8_0);
    match session::load_bytes(&mut q8, &good) {
        Err(e) => assert!(
            e.to_string().contains("f16/f16") && e.to_string().contains("q8_0/f16"),
            "{e}"
        ),
        Ok(_) => panic!("loaded an f16 cache into a q8_0 one"),
    }
    let mut small = context_with(common::smollm2_q4_1(), 8, KvType::F16);
    match session::load_bytes(&mut small, &good) {
        Err(e) => assert!(e.to_string().contains("n_ctx = 8"), "{e}"),
        Ok(_) => panic!("loaded more positions than the context has"),
    }
    // A q8_0 cache saves and loads too.
    run(&mut q8, &params(PROMPT, 3, None));
    let bytes = session::save_bytes(&q8, None).unwrap();
    let mut q8b = context_with(common::smollm2_q4_1(), 256, KvType::Q8_0);
    session::load_bytes(&mut q8b, &bytes).unwrap();
    let p = params(PROMPT, 8, None);
    assert_eq!(
        run(&mut q8b, &p).generated_ids,
        run(&mut q8, &p).generated_ids
    );
}

/// Files: written atomically beside the target, never over the model, read
/// back whole; an unreadable path is an I/O error naming it.
#[cfg(not(target_arch = "wasm32"))]
#[test]
fn session_files_round_trip_and_never_replace_the_model() {
    let model_file = model_path("SmolLM2-135M-Instruct.Q4_1.gguf");
    let file = GgufFile::open(&model_file).unwrap();
    let device = CpuDevice::new(None).unwrap();
    let model = Arc::new(Model::load(Arc::new(file), device.shared(), None).unwrap());
    let mut a = context_with(model.clone(), 256, KvType::F16);
    run(&mut a, &params(PROMPT, 4, None));
    let dir = std::env::temp_dir().join(format!("lamina-session-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("chat.session");
    std::fs::write(&path, b"an older session").unwrap();
    let saved = session::save_file(&a, &path, None).unwrap();
    assert_eq!(saved, a.prompt_cache().len());
    assert_eq!(
        std::fs::read(&path).unwrap(),
        session::save_bytes(&a, None).unwrap()
    );
    let mut b = context_with(model, 256, KvType::F16);
    let loaded = session::load_file(&mut b, &path).unwrap();
    assert_eq!(loaded.tokens_loaded, saved);
    assert_eq!(b.prompt_cache(), a.prompt_cache());

    let before = std::fs::read(&model_file).unwrap().len();
    let e = session::save_file(&a, std::path::Path::new(&model_file), None).unwrap_err();
    assert!(e.to_string().contains("does not write over"), "{e}");
    assert_eq!(std::fs::read(&model_file).unwrap().len(), before);
    let e = session::load_file(&mut b, &dir.join("missing.session")).unwrap_err();
    assert!(
        matches!(e, lamina::Error::Io { .. }) && e.to_string().contains("missing.session"),
        "{e}"
    );
    std::fs::write(&path, b"LAMSESS\0 garbage").unwrap();
    let e = session::load_file(&mut b, &path).unwrap_err();
    assert!(e.to_string().contains("chat.session"), "{e}");
    assert_eq!(b.prompt_cache(), a.prompt_cache());
    std::fs::remove_dir_all(&dir).unwrap();
}

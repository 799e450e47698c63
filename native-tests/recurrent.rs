//! A context's memory with recurrent layers (the synthetic LFM2 model of
//! `common::synth`: short convolutions keep a state per sequence): the
//! sequence edits a state cannot make are errors that change nothing, whole
//! sequences are removed and copied, a batch must give each sequence its
//! next positions, and completions fall back where the KV-only tricks
//! (reusing part of a prompt, shifting a full context) do not apply. Every
//! check compares logits or ids with a fresh context that never saw the
//! refused call.

mod common;

#[cfg(target_arch = "wasm32")]
use wasm_bindgen_test::wasm_bindgen_test as test;

use std::sync::{Arc, OnceLock};

use common::synth::family;
use lamina::completion::CompletionParams;
use lamina::context::{Batch, Context, ContextParams};
use lamina::error::Error;
use lamina::gguf::GgufFile;
use lamina::model::Model;
use lamina::sampling::SamplingParams;

fn model() -> Arc<Model> {
    static MODEL: OnceLock<Arc<Model>> = OnceLock::new();
    MODEL
        .get_or_init(|| {
            let file = Arc::new(GgufFile::from_bytes(family("lfm2").write()).unwrap());
            let device = lamina::backend::cpu::CpuDevice::new(None).unwrap().shared();
            Arc::new(Model::load(file, device, None).unwrap())
        })
        .clone()
}

fn context(n_ctx: usize) -> Context {
    Context::new(
        model(),
        ContextParams {
            n_ctx,
            n_threads: 1,
            ..ContextParams::default()
        },
    )
    .unwrap()
}

const PROMPT: [u32; 10] = [791, 4062, 14198, 39935, 35308, 927, 279, 16053, 5679, 11];

/// Decodes `tokens` into `seq` from `pos` and returns the last logits.
fn decode(ctx: &mut Context, tokens: &[u32], pos: i32, seq: u32) -> Vec<f32> {
    ctx.decode(&Batch::for_sequence(tokens, pos, seq).unwrap())
        .unwrap();
    ctx.logits(-1).unwrap().to_vec()
}

/// The logits of `PROMPT` then `next` in a context that saw nothing else.
fn fresh_logits(next: u32) -> Vec<f32> {
    let mut ctx = context(64);
    decode(&mut ctx, &PROMPT, 0, 0);
    decode(&mut ctx, &[next], PROMPT.len() as i32, 0)
}

fn assert_recurrent_refusal(r: lamina::error::Result<()>, what: &str) {
    match r {
        Err(Error::InvalidArgument(m)) => assert!(m.contains("recurrent"), "{what}: {m}"),
        other => panic!("{what}: {other:?}"),
    }
}

#[test]
fn cutting_a_recurrent_sequence_is_an_error_that_changes_nothing() {
    let mut ctx = context(64);
    decode(&mut ctx, &PROMPT, 0, 0);
    assert_recurrent_refusal(ctx.kv_seq_rm(0, 5, -1), "drop the tail");
    assert_recurrent_refusal(ctx.kv_seq_rm(0, 3, 6), "drop the middle");
    assert_recurrent_refusal(ctx.kv_seq_rm(-1, 9, -1), "drop the last of all");
    assert_recurrent_refusal(ctx.kv_seq_cp(0, 1, 0, 5), "copy a prefix");
    assert_recurrent_refusal(ctx.kv_seq_add(0, 4, -1, -2), "move a part");
    // Ranges beyond the sequence touch nothing and are allowed.
    ctx.kv_seq_rm(0, 10, -1).unwrap();
    assert_eq!(ctx.kv_seq_pos_max(0), Some(9));
    assert_eq!(ctx.kv().used(), PROMPT.len());
    let next = decode(&mut ctx, &[13], 10, 0);
    assert_eq!(next, fresh_logits(13));
}

#[test]
fn whole_sequences_are_removed_copied_and_moved() {
    let mut ctx = context(64);
    let first = decode(&mut ctx, &PROMPT, 0, 0);
    // Removed whole, the sequence starts again from nothing.
    ctx.kv_seq_rm(0, -1, -1).unwrap();
    assert_eq!(ctx.kv_seq_pos_max(0), None);
    assert_eq!(decode(&mut ctx, &PROMPT, 0, 0), first);
    // Copied whole, the copy continues as the original does.
    ctx.kv_seq_cp(0, 1, -1, -1).unwrap();
    let on_copy = decode(&mut ctx, &[13], 10, 1);
    let on_original = decode(&mut ctx, &[13], 10, 0);
    assert_eq!(on_copy, on_original);
    assert_eq!(on_copy, fresh_logits(13));
    // Kept alone, the other sequence is gone; moved whole, it goes on at
    // its new positions.
    ctx.kv_seq_keep(1).unwrap();
    assert_eq!(ctx.kv_seq_pos_max(0), None);
    ctx.kv_seq_add(1, -1, -1, 5).unwrap();
    assert_eq!(ctx.kv_seq_pos_max(1), Some(15));
    decode(&mut ctx, &[14], 16, 1);
    assert_eq!(ctx.kv_seq_pos_max(1), Some(16));
}

#[test]
fn a_batch_gives_each_sequence_its_next_positions() {
    let mut ctx = context(64);
    decode(&mut ctx, &PROMPT, 0, 0);
    // A gap after the sequence's last position.
    let gap = ctx.decode(&Batch::for_sequence(&[13], 12, 0).unwrap());
    assert_recurrent_refusal(gap, "a gap");
    // A position the state has already taken in.
    let again = ctx.decode(&Batch::for_sequence(&[13], 9, 0).unwrap());
    assert_recurrent_refusal(again, "a repeated position");
    // One token in two sequences.
    let mut shared = Batch::new(4);
    shared.add(13, 10, &[0, 1], true).unwrap();
    assert_recurrent_refusal(ctx.decode(&shared), "a shared token");
    // A later token of the batch breaking the order refuses all of it,
    // the tokens before it too.
    let mut mixed = Batch::new(4);
    mixed.add(13, 10, &[0], false).unwrap();
    mixed.add(14, 12, &[0], true).unwrap();
    assert_recurrent_refusal(ctx.decode(&mixed), "a gap inside the batch");
    assert_eq!(ctx.kv_seq_pos_max(0), Some(9));
    assert_eq!(decode(&mut ctx, &[13], 10, 0), fresh_logits(13));
}

fn greedy(prompt: &str, n_predict: i32) -> CompletionParams {
    CompletionParams {
        prompt: prompt.into(),
        n_predict,
        ignore_eos: true,
        sampling: SamplingParams {
            temperature: 0.0,
            ..SamplingParams::default()
        },
        ..CompletionParams::default()
    }
}

/// A prompt that extends the whole cache reuses it; any other starts from
/// the longest state checkpoint within the part it shares (one is kept
/// before each prompt's last token), or from the start. Each goes on as a
/// fresh context would.
#[test]
fn completions_reuse_the_cache_from_state_checkpoints() {
    let mut ctx = context(128);
    // One token predicted: the cache then holds the prompt (the sampled
    // token is never decoded).
    let p = greedy("The quick brown fox jumps over the lazy dog", 1);
    let first = ctx.completion(&p, |_| {}).unwrap();
    let n = first.prompt_ids.len();
    assert_eq!(first.tokens_cached, 0);
    assert_eq!(ctx.checkpoint_lengths(), [n - 1]);
    // The same prompt: its last token is evaluated again, from the
    // checkpoint before it.
    let again = ctx.completion(&p, |_| {}).unwrap();
    assert_eq!(again.tokens_cached, n - 1);
    assert_eq!(again.timings.prompt_n, 1);
    assert_eq!(again.generated_ids, first.generated_ids);
    // A prompt that extends the whole cache reuses all of it.
    let q = greedy(&format!("{}, and then it runs", p.prompt), 4);
    let extended = ctx.completion(&q, |_| {}).unwrap();
    let alone = context(128).completion(&q, |_| {}).unwrap();
    assert_eq!(extended.tokens_cached, n);
    assert_eq!(extended.generated_ids, alone.generated_ids);
    let m = extended.prompt_ids.len();
    assert_eq!(ctx.checkpoint_lengths(), [n - 1, m - 1]);
    // A prompt that leaves the cache within the second prompt's extension
    // goes back to the first prompt's checkpoint, and drops the other.
    let r = greedy(&format!("{}, but it naps", p.prompt), 4);
    let back = ctx.completion(&r, |_| {}).unwrap();
    let shared = back
        .prompt_ids
        .iter()
        .zip(&extended.prompt_ids)
        .take_while(|(a, b)| a == b)
        .count();
    assert!(
        shared >= n && shared < m - 1,
        "{shared}: the prompts part after p"
    );
    let alone = context(128).completion(&r, |_| {}).unwrap();
    assert_eq!(back.tokens_cached, n - 1);
    assert_eq!(back.generated_ids, alone.generated_ids);
    assert_eq!(ctx.checkpoint_lengths(), [n - 1, back.prompt_ids.len() - 1]);
    // A prompt that leaves the cache before any checkpoint starts over.
    let other = greedy("The quick brown cat sleeps", 4);
    let diverged = ctx.completion(&other, |_| {}).unwrap();
    let alone = context(128).completion(&other, |_| {}).unwrap();
    assert_eq!(diverged.tokens_cached, 0);
    assert_eq!(diverged.generated_ids, alone.generated_ids);
    // Editing sequence 0 by hand forgets them.
    ctx.kv_seq_rm(0, -1, -1).unwrap();
    assert!(ctx.checkpoint_lengths().is_empty());
}

#[test]
fn a_full_context_ends_the_completion_instead_of_shifting() {
    let mut ctx = context(32);
    let p = greedy("Count: 1, 2, 3,", 48);
    assert!(p.context_shift, "the shift is asked for");
    let r = ctx.completion(&p, |_| {}).unwrap();
    assert!(r.stopped_limit && r.context_full && !r.truncated, "{r:?}");
    // All 32 positions filled; the last token sampled is never decoded.
    assert_eq!(r.prompt_ids.len() + r.tokens_predicted, 33);
}

/// A session holds the recurrent states beside the KV rows, and the state
/// checkpoints of the prompt cache: a fresh context that loads it
/// continues exactly as the one that saved it, rewinding to the same
/// checkpoints. Only the whole cache can be saved (a state has taken in
/// every token), and a session whose states do not fit the model is
/// refused, changing nothing.
#[test]
fn sessions_keep_the_recurrent_states() {
    let saver = || {
        let mut ctx = context(64);
        ctx.completion(&greedy("Hello", 4), |_| {}).unwrap();
        ctx
    };
    let mut a = saver();
    let n = a.prompt_cache().len();
    let bytes = lamina::session::save_bytes(&a, None).unwrap();
    let e = a.save_state(Some(n - 1)).unwrap_err().to_string();
    assert!(e.contains("every token"), "{e}");
    // The next token's logits after loading are the saver's.
    let mut b = context(64);
    let loaded = lamina::session::load_bytes(&mut b, &bytes).unwrap();
    assert_eq!(loaded.tokens_loaded, n);
    let next = PROMPT[0];
    let want = decode(&mut a, &[next], n as i32, 0);
    assert_eq!(decode(&mut b, &[next], n as i32, 0), want);
    // A completion over the loaded cache goes as over the saver's.
    let p = greedy(&format!("{} and", loaded.prompt), 6);
    let (mut c, mut d) = (saver(), context(64));
    lamina::session::load_bytes(&mut d, &bytes).unwrap();
    let (rc, rd) = (
        c.completion(&p, |_| {}).unwrap(),
        d.completion(&p, |_| {}).unwrap(),
    );
    assert_eq!(rd.generated_ids, rc.generated_ids);
    // The new prompt parts from the cache before its end, so the saver
    // starts from one of its state checkpoints; the session carries them,
    // and the loaded context starts from the same one.
    assert!(
        rc.tokens_cached > 0 && rc.tokens_cached < n,
        "{}",
        rc.tokens_cached
    );
    assert_eq!(rd.tokens_cached, rc.tokens_cached);
    // Two checkpoints, saved and loaded: the loaded context has them, and
    // a prompt that parts within the second rewinds to the first in both.
    let two = |ctx: &mut Context| {
        ctx.completion(&greedy("Hello there", 1), |_| {}).unwrap();
        ctx.completion(&greedy("Hello there, my old friend", 1), |_| {})
            .unwrap();
    };
    let mut f = context(64);
    two(&mut f);
    let lengths = f.checkpoint_lengths();
    assert_eq!(lengths.len(), 2, "{lengths:?}");
    let bytes = lamina::session::save_bytes(&f, None).unwrap();
    assert_eq!(&bytes[8..12], &4u32.to_le_bytes(), "format version");
    let mut g = context(64);
    lamina::session::load_bytes(&mut g, &bytes).unwrap();
    assert_eq!(g.checkpoint_lengths(), lengths);
    let part = greedy("Hello there, my dear", 4);
    let (rf, rg) = (
        f.completion(&part, |_| {}).unwrap(),
        g.completion(&part, |_| {}).unwrap(),
    );
    assert_eq!(rg.tokens_cached, lengths[0]);
    assert_eq!(rf.tokens_cached, lengths[0]);
    assert_eq!(rg.generated_ids, rf.generated_ids);
    // The checkpoint count is checked against the bytes present.
    let mut huge = bytes.clone();
    let body = huge.len() - 8;
    let per = 4 + 4 * f.save_state(None).unwrap().recurrent.len();
    let at = body - 2 * per - 4;
    assert_eq!(
        &huge[at..at + 4],
        &2u32.to_le_bytes(),
        "the checkpoint count"
    );
    let reseal = |bytes: &mut Vec<u8>| {
        let sum = lamina::session::checksum(&bytes[..body]);
        bytes[body..].copy_from_slice(&sum.to_le_bytes());
    };
    huge[at..at + 4].copy_from_slice(&u32::MAX.to_le_bytes());
    reseal(&mut huge);
    let err = lamina::session::load_bytes(&mut context(64), &huge)
        .unwrap_err()
        .to_string();
    assert!(err.contains("checkpoints of"), "{err}");
    // So is the states' count before them (4 · u32::MAX overflows wasm32's
    // sizes).
    let mut huge = bytes.clone();
    let at = body - 2 * per - 4 - (per - 4) - 4;
    huge[at..at + 4].copy_from_slice(&u32::MAX.to_le_bytes());
    reseal(&mut huge);
    let err = lamina::session::load_bytes(&mut context(64), &huge)
        .unwrap_err()
        .to_string();
    assert!(err.contains("recurrent values need"), "{err}");
    // States of another shape: refused, and the context keeps its own; so
    // is a checkpoint of another shape, or past the saved tokens.
    let mut state = saver().save_state(None).unwrap();
    state.recurrent.pop();
    let mut e = saver();
    let err = e.load_state(&state).unwrap_err().to_string();
    assert!(err.contains("recurrent values"), "{err}");
    assert_eq!(decode(&mut e, &[next], n as i32, 0), want);
    let mut e = saver();
    let mut state = saver().save_state(None).unwrap();
    assert_eq!(state.checkpoints.len(), 1);
    state.checkpoints[0].states.pop();
    let err = e.load_state(&state).unwrap_err().to_string();
    assert!(err.contains("recurrent values"), "{err}");
    let mut state = saver().save_state(None).unwrap();
    state.checkpoints[0].tokens = n + 1;
    let err = e.load_state(&state).unwrap_err().to_string();
    assert!(err.contains("checkpoint"), "{err}");
    assert_eq!(decode(&mut e, &[next], n as i32, 0), want);
}

#[test]
fn info_names_the_convolution_layers() {
    let info = model().arch().hyperparameters();
    let kinds: Vec<&String> = info
        .iter()
        .filter(|(k, _)| *k == "layer kind")
        .map(|(_, v)| v)
        .collect();
    assert!(
        kinds
            .iter()
            .any(|v| v.starts_with("short convolution of 3 taps") && v.ends_with("layers [0, 2]")),
        "{kinds:?}"
    );
}

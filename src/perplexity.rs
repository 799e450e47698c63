//! Perplexity as llama-perplexity computes it: the text is cut into
//! independent chunks of `n_ctx` tokens, each evaluated from an empty cache at
//! position 0 (its first token replaced by BOS when the model adds one); the
//! second half of each chunk, but its last token, predicts the next token,
//! and PPL = exp(mean negative log-likelihood). Several chunks share a decode
//! as separate sequences when the batch holds them.

use serde::Serialize;

use crate::context::{Batch, Context};
use crate::error::{Error, Result};
use crate::kv::MAX_SEQUENCES;

#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Perplexity {
    pub ppl: f64,
    /// The standard error of the estimate, in PPL units (llama.cpp's "±").
    pub ppl_error: f64,
    pub n_chunks: usize,
    pub n_ctx: usize,
    pub tokens_scored: usize,
    /// PPL over the chunks so far, after each chunk (llama.cpp prints these).
    pub running: Vec<f64>,
}

/// -log p(token) from a row of logits, via a log-softmax in f64.
fn nll(logits: &[f32], token: u32) -> f64 {
    let max = logits.iter().fold(f32::NEG_INFINITY, |m, &l| m.max(l)) as f64;
    let sum: f64 = logits.iter().map(|&l| (l as f64 - max).exp()).sum();
    -(logits[token as usize] as f64 - max - sum.ln())
}

/// Perplexity of `text` in chunks of `n_ctx` tokens. `on_chunk` hears each
/// chunk's running value and may stop the run (an error) by returning false.
pub fn perplexity(
    ctx: &mut Context,
    text: &str,
    n_ctx: usize,
    mut on_chunk: impl FnMut(usize, usize, f64) -> bool,
) -> Result<Perplexity> {
    let model = ctx.model().clone();
    let vocab = &model.vocab;
    if n_ctx < 4 || n_ctx > ctx.n_ctx() {
        return Err(Error::InvalidArgument(format!(
            "perplexity chunks of {n_ctx} tokens need a context of at least that size (it has {}) and at least 4",
            ctx.n_ctx()
        )));
    }
    let bos = if vocab.add_bos { vocab.bos } else { None };
    let tokens = vocab.tokenize(text, bos.is_some(), false)?;
    if tokens.len() < 2 * n_ctx {
        return Err(Error::InvalidArgument(format!(
            "the text has {} tokens; perplexity with chunks of {n_ctx} needs at least {}",
            tokens.len(),
            2 * n_ctx
        )));
    }
    let n_chunks = tokens.len() / n_ctx;
    let first = n_ctx / 2;
    let n_batch = ctx.params().n_batch;
    // As llama-perplexity: when a batch holds several chunks, each goes in
    // its own sequence and one decode runs them all.
    let n_seq = (n_batch / n_ctx)
        .min(ctx.n_ctx() / n_ctx)
        .clamp(1, MAX_SEQUENCES);
    let (mut sum, mut sum2, mut count) = (0.0f64, 0.0f64, 0usize);
    let mut running = Vec::with_capacity(n_chunks);
    for group in (0..n_chunks).step_by(n_seq) {
        let chunks = n_seq.min(n_chunks - group);
        ctx.kv_clear();
        // Pieces of at most n_batch tokens: whole chunks, or parts of one.
        let piece = if chunks > 1 {
            chunks * n_ctx
        } else {
            n_batch.min(n_ctx)
        };
        let mut start = 0;
        while start < chunks * n_ctx {
            let end = (start + piece).min(chunks * n_ctx);
            let mut batch = Batch::new(end - start);
            for i in start..end {
                let (s, p) = (i / n_ctx, i % n_ctx);
                let t = match (p, bos) {
                    (0, Some(b)) => b,
                    _ => tokens[(group + s) * n_ctx + p],
                };
                batch.add(t, p as i32, &[s as u32], p >= first && p + 1 < n_ctx)?;
            }
            ctx.decode(&batch)?;
            for i in start..end {
                let (s, p) = (i / n_ctx, i % n_ctx);
                if p >= first && p + 1 < n_ctx {
                    let next = tokens[(group + s) * n_ctx + p + 1];
                    let v = nll(ctx.logits((i - start) as i32)?, next);
                    sum += v;
                    sum2 += v * v;
                    count += 1;
                }
                if p + 1 == n_ctx {
                    let ppl = (sum / count as f64).exp();
                    running.push(ppl);
                    if !on_chunk(group + s + 1, n_chunks, ppl) {
                        return Err(Error::Cancelled("the perplexity run".into()));
                    }
                }
            }
            start = end;
        }
    }
    let mean = sum / count as f64;
    let var = (sum2 / count as f64 - mean * mean).max(0.0);
    let ppl = mean.exp();
    Ok(Perplexity {
        ppl,
        ppl_error: ppl * (var / (count as f64 - 1.0).max(1.0)).sqrt(),
        n_chunks,
        n_ctx,
        tokens_scored: count,
        running,
    })
}

//! `completion()`: the llama.rn surface over a context. Tokenize the prompt
//! (reusing the cached prefix of the previous completion, as llama.cpp's
//! server does), evaluate it in batches, then sample token by token with the
//! sampler chain, streaming text through the UTF-8 and stop-string holds,
//! until an end-of-generation token, a stop string, the token limit or an
//! abort. A prompt longer than the context is cut and a full context shifted,
//! both reported as `truncated`.

pub mod stop;

use serde::Serialize;

use crate::chat::ChatMessage;
use crate::context::{Batch, Context};
use crate::error::{Error, Result};
use crate::sampling::{Sampler, SamplingParams};
use crate::stopwatch::Stopwatch;
use crate::tokenizer::TextStream;
use stop::{Step, StopMatcher};

#[derive(Clone, Debug)]
pub struct CompletionParams {
    /// The prompt text (ignored when `messages` is given).
    pub prompt: String,
    /// A conversation, rendered with the model's chat template (and an
    /// assistant turn opened) to make the prompt.
    pub messages: Option<Vec<ChatMessage>>,
    /// Tokens to generate; negative: until something else stops it.
    pub n_predict: i32,
    pub sampling: SamplingParams,
    /// Strings that end the completion; never part of the text.
    pub stop: Vec<String>,
    /// Generate past end-of-generation tokens (they are never sampled).
    pub ignore_eos: bool,
    /// Top probabilities to report per generated token (0: none).
    pub n_probs: usize,
    /// Prompt tokens kept when the context must be cut (-1: all of them).
    pub n_keep: i32,
    /// Slide the context when it fills, instead of stopping.
    pub context_shift: bool,
    /// Reuse the KV of the longest common prefix with the previous completion.
    pub cache_prompt: bool,
    /// Add the model's BOS/EOS where its metadata asks.
    pub add_special: bool,
    /// Parse special-token text (`<|im_start|>`) in the prompt.
    pub parse_special: bool,
}

impl Default for CompletionParams {
    fn default() -> Self {
        CompletionParams {
            prompt: String::new(),
            messages: None,
            n_predict: -1,
            sampling: SamplingParams::default(),
            stop: Vec::new(),
            ignore_eos: false,
            n_probs: 0,
            n_keep: 0,
            context_shift: true,
            cache_prompt: true,
            add_special: true,
            parse_special: true,
        }
    }
}

#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct TokenProb {
    pub id: u32,
    pub piece: String,
    pub prob: f32,
}

/// What the callback hears per generated token.
#[derive(Debug)]
pub struct TokenEvent<'a> {
    pub id: u32,
    /// Text released by this token (empty while held back).
    pub text: &'a str,
    pub probs: &'a [TokenProb],
}

#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct Timings {
    pub prompt_n: usize,
    pub prompt_ms: f64,
    pub prompt_per_token_ms: f64,
    pub prompt_per_second: f64,
    pub predicted_n: usize,
    pub predicted_ms: f64,
    pub predicted_per_token_ms: f64,
    pub predicted_per_second: f64,
}

impl Timings {
    fn new(prompt_n: usize, prompt_ms: f64, predicted_n: usize, predicted_ms: f64) -> Timings {
        let per = |n: usize, ms: f64| {
            if n > 0 && ms > 0.0 {
                (ms / n as f64, n as f64 * 1e3 / ms)
            } else {
                (0.0, 0.0)
            }
        };
        let (ppt, pps) = per(prompt_n, prompt_ms);
        let (gpt, gps) = per(predicted_n, predicted_ms);
        Timings {
            prompt_n,
            prompt_ms,
            prompt_per_token_ms: ppt,
            prompt_per_second: pps,
            predicted_n,
            predicted_ms,
            predicted_per_token_ms: gpt,
            predicted_per_second: gps,
        }
    }
}

#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct CompletionResult {
    pub text: String,
    /// The prompt as evaluated (after any cut).
    pub prompt_ids: Vec<u32>,
    /// Every sampled token, including a final end-of-generation token.
    pub generated_ids: Vec<u32>,
    pub tokens_predicted: usize,
    /// Prompt tokens plus generated tokens evaluated in this completion.
    pub tokens_evaluated: usize,
    /// Prompt tokens whose KV came from the previous completion.
    pub tokens_cached: usize,
    pub stopped_eos: bool,
    pub stopped_word: bool,
    pub stopped_limit: bool,
    pub stopped_aborted: bool,
    pub stopping_word: String,
    /// "eos", "word", "limit" or "abort".
    pub stop_reason: &'static str,
    pub truncated: bool,
    /// The prompt text as evaluated (the rendered chat, for messages).
    pub prompt: String,
    pub timings: Timings,
    /// Per generated token, when `n_probs` > 0.
    pub completion_probabilities: Vec<Vec<TokenProb>>,
}

/// Softmax of the raw logits, the `n` most likely tokens.
fn top_probs(ctx: &Context, logits: &[f32], n: usize) -> Vec<TokenProb> {
    let max = logits.iter().fold(f32::NEG_INFINITY, |m, &l| m.max(l));
    let sum: f64 = logits.iter().map(|&l| ((l - max) as f64).exp()).sum();
    let mut ids: Vec<u32> = (0..logits.len() as u32).collect();
    let n = n.min(ids.len());
    ids.select_nth_unstable_by(n.saturating_sub(1), |&a, &b| {
        logits[b as usize]
            .total_cmp(&logits[a as usize])
            .then(a.cmp(&b))
    });
    ids.truncate(n);
    ids.sort_by(|&a, &b| {
        logits[b as usize]
            .total_cmp(&logits[a as usize])
            .then(a.cmp(&b))
    });
    let vocab = &ctx.model().vocab;
    ids.into_iter()
        .map(|id| TokenProb {
            id,
            piece: String::from_utf8_lossy(&vocab.token_bytes(id, true)).into_owned(),
            prob: (((logits[id as usize] - max) as f64).exp() / sum) as f32,
        })
        .collect()
}

/// llama.cpp server's cut of a prompt that does not fit: keep `n_keep`
/// tokens, drop whole blocks of half the remaining context after them.
fn cut_prompt(ids: &[u32], n_ctx: usize, n_keep: i32) -> Vec<u32> {
    let n_keep = if n_keep < 0 {
        ids.len()
    } else {
        n_keep as usize
    }
    .min(n_ctx.saturating_sub(4));
    let n_left = n_ctx - n_keep;
    let block = (n_left / 2).max(1);
    let erased = (ids.len() - n_keep - block) / block;
    let mut out = ids[..n_keep].to_vec();
    out.extend_from_slice(&ids[n_keep + erased * block..]);
    out
}

impl Context {
    /// Generates a completion of `params.prompt` in sequence 0, calling
    /// `on_token` for each generated token. The abort handle
    /// (`abort_handle()`) stops it between tokens from any thread.
    pub fn completion(
        &mut self,
        params: &CompletionParams,
        mut on_token: impl FnMut(&TokenEvent),
    ) -> Result<CompletionResult> {
        self.abort_handle().reset();
        let n_ctx = self.n_ctx();
        let model = self.model().clone();
        let vocab = &model.vocab;
        let n_vocab = model.llama.hparams.n_vocab;
        let rendered;
        let prompt = match &params.messages {
            Some(messages) => {
                rendered = model.chat_template()?.apply(messages, true)?;
                &rendered
            }
            None => &params.prompt,
        };
        let mut prompt_ids = vocab.tokenize(prompt, params.add_special, params.parse_special)?;
        if prompt_ids.is_empty() {
            return Err(Error::InvalidArgument("the prompt is empty".into()));
        }
        let mut truncated = false;
        if prompt_ids.len() >= n_ctx {
            prompt_ids = cut_prompt(&prompt_ids, n_ctx, params.n_keep);
            truncated = true;
        }
        let mut sampling = params.sampling.clone();
        if params.ignore_eos {
            sampling.logit_bias.extend(
                (0..n_vocab as u32)
                    .filter(|&t| vocab.is_eog(t))
                    .map(|t| (t, f32::NEG_INFINITY)),
            );
        }
        let mut sampler = Sampler::new(sampling, n_vocab)?;

        // Reuse the cached prefix; at least the last prompt token is
        // evaluated again, for its logits.
        let cached = if params.cache_prompt {
            let common = self
                .history
                .iter()
                .zip(&prompt_ids)
                .take_while(|(a, b)| a == b)
                .count();
            common.min(prompt_ids.len() - 1)
        } else {
            0
        };
        self.kv_mut().seq_rm(0, cached as i32, -1)?;
        self.history.truncate(cached);

        let t0 = Stopwatch::start();
        let n_batch = self.params().n_batch;
        let mut pos = cached;
        let mut aborted = false;
        for chunk in prompt_ids[cached..].chunks(n_batch) {
            let batch = Batch::for_sequence(chunk, pos as i32, 0)?;
            match self.decode(&batch) {
                Err(Error::Cancelled(_)) => {
                    aborted = true;
                    break;
                }
                other => other?,
            }
            self.history.extend_from_slice(chunk);
            pos += chunk.len();
        }
        for &t in &prompt_ids {
            sampler.accept(t);
        }
        let prompt_ms = t0.elapsed_ms();
        let n_prompt_evaluated = prompt_ids.len() - cached;

        let t1 = Stopwatch::start();
        let mut generated = Vec::new();
        let mut probs_out = Vec::new();
        let mut stream = TextStream::new();
        let mut stops = StopMatcher::new(&params.stop);
        let mut reason = if aborted { "abort" } else { "limit" };
        let mut stopping_word = String::new();
        let mut n_generated_evaluated = 0;
        let limit = if params.n_predict < 0 {
            usize::MAX
        } else {
            params.n_predict as usize
        };
        while !aborted && generated.len() < limit {
            if self.abort_handle().is_aborted() {
                reason = "abort";
                break;
            }
            let logits = self.logits(-1)?;
            let token = sampler.sample(logits)?;
            let probs = if params.n_probs > 0 {
                top_probs(self, logits, params.n_probs)
            } else {
                Vec::new()
            };
            generated.push(token);
            if vocab.is_eog(token) {
                reason = "eos";
                on_token(&TokenEvent {
                    id: token,
                    text: "",
                    probs: &probs,
                });
                probs_out.push(probs);
                break;
            }
            sampler.accept(token);
            let piece = stream.push(&vocab.token_bytes(token, false));
            let emitted = match stops.push(&piece) {
                Step::Emit(t) => t,
                Step::Stop(t, word) => {
                    reason = "word";
                    stopping_word = word;
                    on_token(&TokenEvent {
                        id: token,
                        text: &t,
                        probs: &probs,
                    });
                    probs_out.push(probs);
                    break;
                }
            };
            on_token(&TokenEvent {
                id: token,
                text: &emitted,
                probs: &probs,
            });
            probs_out.push(probs);
            if generated.len() >= limit {
                break;
            }
            if self.abort_handle().is_aborted() {
                reason = "abort";
                break;
            }
            if pos >= n_ctx {
                if !params.context_shift {
                    break;
                }
                self.shift_context(params.n_keep, &mut pos)?;
                truncated = true;
            }
            match self.decode(&Batch::for_sequence(&[token], pos as i32, 0)?) {
                Err(Error::Cancelled(_)) => {
                    reason = "abort";
                    break;
                }
                other => other?,
            }
            self.history.push(token);
            pos += 1;
            n_generated_evaluated += 1;
        }
        let mut text = String::new();
        if reason == "word" {
            text.push_str(stops.text());
        } else {
            let tail = stream.finish();
            if let Step::Stop(_, word) = stops.push(&tail) {
                reason = "word";
                stopping_word = word;
            } else {
                stops.finish();
            }
            text.push_str(stops.text());
        }
        let predicted_ms = t1.elapsed_ms();
        Ok(CompletionResult {
            text,
            tokens_predicted: generated.len(),
            tokens_evaluated: n_prompt_evaluated + n_generated_evaluated,
            tokens_cached: cached,
            prompt_ids,
            stopped_eos: reason == "eos",
            stopped_word: reason == "word",
            stopped_limit: reason == "limit",
            stopped_aborted: reason == "abort",
            stopping_word,
            stop_reason: reason,
            truncated,
            prompt: prompt.to_string(),
            timings: Timings::new(n_prompt_evaluated, prompt_ms, generated.len(), predicted_ms),
            completion_probabilities: probs_out,
            generated_ids: generated,
        })
    }

    /// Frees half of the positions after `n_keep` and slides the rest down,
    /// as llama.cpp's context shift.
    fn shift_context(&mut self, n_keep: i32, pos: &mut usize) -> Result<()> {
        let n_keep = (n_keep.max(0) as usize).min(*pos);
        let n_discard = (*pos - n_keep) / 2;
        if n_discard == 0 {
            return Err(Error::ContextFull {
                n_ctx: self.n_ctx(),
                free: 0,
                needed: 1,
            });
        }
        let (k, d, p) = (n_keep as i32, n_discard as i32, *pos as i32);
        self.kv_mut().seq_rm(0, k, k + d)?;
        self.shift_kv(0, k + d, p, -d)?;
        self.history.drain(n_keep..n_keep + n_discard);
        *pos -= n_discard;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    #[cfg(target_arch = "wasm32")]
    use wasm_bindgen_test::wasm_bindgen_test as test;

    #[test]
    fn a_long_prompt_is_cut_in_blocks_after_n_keep() {
        let ids: Vec<u32> = (0..100).collect();
        // n_ctx 64, keep 4: blocks of 30; (100 - 4 - 30) / 30 = 2 blocks go.
        let cut = cut_prompt(&ids, 64, 4);
        assert_eq!(&cut[..4], &[0, 1, 2, 3]);
        assert_eq!(cut[4], 64);
        assert_eq!(cut.len(), 40);
        let cut = cut_prompt(&ids, 64, 0);
        assert_eq!(cut.len(), 36);
        assert_eq!(cut[0], 64);
    }
}

//! `completion()`: the llama.rn surface over a context. Tokenize the prompt
//! (reusing the cached prefix of the previous completion, as llama.cpp's
//! server does), evaluate it in batches, then sample token by token with the
//! sampler chain, streaming text through the UTF-8 and stop-string holds,
//! until an end-of-generation token, a stop string, the token limit or an
//! abort. A prompt longer than the context is cut and a full context shifted,
//! both reported as `truncated`.

pub mod parallel;
pub mod stop;

use std::collections::HashSet;
use std::sync::Arc;

use serde::Serialize;

use crate::chat::tools::{ChatOptions, ChatParser};
use crate::chat::{ChatMessage, ChatTemplate, ToolCall};
use crate::context::{Batch, Context, SeqId};
use crate::error::{Error, Result};
use crate::sampling::grammar::{Grammar, GrammarState, TokenTable};
use crate::sampling::{DryBreakers, Sampler, SamplingParams};
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
    /// A chat template (Jinja text or a family name) for `messages` in place
    /// of the model's.
    pub chat_template: Option<String>,
    /// Render `messages` with the template's Jinja even where a built-in
    /// family matches (llama.cpp's `--jinja`).
    pub jinja: bool,
    /// Tools, `enable_thinking`, reasoning format and template kwargs for
    /// `messages`; with `jinja` or tools, the output is parsed into
    /// `content`, `reasoning_content` and `tool_calls`.
    pub chat: ChatOptions,
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
            chat_template: None,
            jinja: false,
            chat: ChatOptions::default(),
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

/// Why a completion stopped.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum StopReason {
    /// An end-of-generation token.
    Eos,
    /// A stop string.
    Word,
    /// `n_predict` tokens, or a full context that cannot shift.
    Limit,
    /// The abort handle (or `stopCompletion()`).
    Abort,
}

impl StopReason {
    pub fn as_str(self) -> &'static str {
        match self {
            StopReason::Eos => "eos",
            StopReason::Word => "word",
            StopReason::Limit => "limit",
            StopReason::Abort => "abort",
        }
    }
}

impl PartialEq<&str> for StopReason {
    fn eq(&self, other: &&str) -> bool {
        self.as_str() == *other
    }
}

impl std::fmt::Display for StopReason {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
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
    /// Prompt tokens, cached ones included (llama.cpp's server and
    /// llama.rn count them so).
    pub tokens_evaluated: usize,
    /// Prompt tokens whose KV came from the previous completion.
    pub tokens_cached: usize,
    pub stopped_eos: bool,
    pub stopped_word: bool,
    pub stopped_limit: bool,
    pub stopped_aborted: bool,
    /// The context filled and could not shift (llama.rn's `context_full`;
    /// `stopped_limit` is set too).
    pub context_full: bool,
    pub stopping_word: String,
    /// Why generation stopped (serialized as "eos", "word", "limit", "abort").
    pub stop_reason: StopReason,
    pub truncated: bool,
    /// The prompt text as evaluated (the rendered chat, for messages).
    pub prompt: String,
    /// The text without reasoning and tool calls (the text itself when the
    /// output is not parsed: no messages rendered as Jinja).
    pub content: String,
    /// The model's reasoning (`<think>` blocks), when extracted.
    #[serde(skip_serializing_if = "String::is_empty")]
    pub reasoning_content: String,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub tool_calls: Vec<ToolCall>,
    /// The output format the text was parsed in ("content" when not parsed).
    pub chat_format: &'static str,
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

/// What a run needs before its next token (`CompletionRun::next_decode`).
enum NextStep {
    Ended,
    /// Decode this token at the run's position, then sample.
    Decode(u32),
    /// The logits of the last decode are the run's: sample.
    Sample,
}

/// A generated token, owned: what `CompletionRun::next_token` returns.
#[derive(Clone, Debug, PartialEq)]
pub struct GeneratedToken {
    pub id: u32,
    /// Text released by this token (empty while held back).
    pub text: String,
    pub probs: Vec<TokenProb>,
}

impl GeneratedToken {
    pub fn event(&self) -> TokenEvent<'_> {
        TokenEvent {
            id: self.id,
            text: &self.text,
            probs: &self.probs,
        }
    }
}

/// A completion in progress, one token per `next_token` call. It holds no
/// borrow of its context, so a caller that must give control back between
/// tokens (a JavaScript event loop) keeps it beside the context; `finish`
/// makes the result. `Context::completion` drives one to the end.
pub struct CompletionRun {
    prompt: String,
    /// Reads the output of a chat rendered with `apply_chat`.
    parser: Option<ChatParser>,
    /// Special tokens of the output format (`<tool_call>`, `[TOOL_CALLS]`)
    /// whose text is kept in the output for the parser.
    preserved: HashSet<u32>,
    prompt_ids: Vec<u32>,
    cached: usize,
    n_prompt_evaluated: usize,
    prompt_ms: f64,
    truncated: bool,
    sampler: Sampler,
    limit: usize,
    n_probs: usize,
    n_keep: i32,
    context_shift: bool,
    /// The sequence the run writes (0 for `completion`; parallel runs have
    /// their own) and the positions it may take.
    seq: SeqId,
    n_ctx_slot: usize,
    /// Position of the next token in the sequence.
    pos: usize,
    /// A token still to be evaluated before the next one is sampled: the
    /// last sampled one, or (parallel runs, whose first decode is shared
    /// with the other runs) the prompt's last token.
    pending: Option<u32>,
    /// Whether `pending` is the prompt's last token.
    pending_is_prompt: bool,
    generated: Vec<u32>,
    probs_out: Vec<Vec<TokenProb>>,
    stream: TextStream,
    stops: StopMatcher,
    /// Why the run ended, once it has.
    reason: Option<StopReason>,
    /// Whether it ended because the context was full.
    context_full: bool,
    stopping_word: String,
    n_generated_evaluated: usize,
    predicted_ms: f64,
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
        let mut run = self.start_completion(params)?;
        let ended = loop {
            match run.next_token(self) {
                Ok(Some(token)) => on_token(&token.event()),
                Ok(None) => break Ok(()),
                Err(e) => break Err(e),
            }
        };
        // A stop request ends with its completion; it must not cancel the
        // next decode.
        self.abort_handle().reset();
        ended.map(|()| run.finish())
    }

    /// Starts a completion: renders and tokenizes the prompt and reuses the
    /// cached prefix. The rest of the prompt is evaluated by
    /// `CompletionRun::eval_prompt` (one micro-batch per call, so a caller
    /// that cannot be interrupted mid-call, a wasm worker, can stop between
    /// them) or by the first `next_token`; tokens then come from
    /// `next_token`.
    pub fn start_completion(&mut self, params: &CompletionParams) -> Result<CompletionRun> {
        self.abort_handle().reset();
        let n_ctx = self.n_ctx();
        self.start_run(params, 0, n_ctx)
    }

    /// A run in sequence `seq` within `n_ctx` positions. Sequence 0 reuses
    /// the prompt cache; another sequence (a parallel slot) starts empty and
    /// leaves its prompt's last token to the first shared decode.
    pub(crate) fn start_run(
        &mut self,
        params: &CompletionParams,
        seq: SeqId,
        n_ctx: usize,
    ) -> Result<CompletionRun> {
        let model = self.model().clone();
        let vocab = &model.vocab;
        if !model.can_generate() {
            return Err(Error::InvalidArgument(format!(
                "a {} model cannot generate text (it is an encoder): use it for embeddings or reranking",
                model.arch_name()
            )));
        }
        let n_vocab = model.n_vocab();
        let mut parser = None;
        let mut tool_grammar = None;
        let mut preserved = HashSet::new();
        let prompt = match &params.messages {
            Some(messages) => {
                let template = ChatTemplate::for_model(&model, params.chat_template.as_deref())?;
                if params.jinja || !params.chat.tools.is_empty() {
                    let chat = template.apply_chat(messages, &params.chat)?;
                    preserved = single_tokens(vocab, &chat.preserved_tokens());
                    tool_grammar = chat.grammar;
                    parser = Some(chat.parser);
                    chat.prompt
                } else {
                    template.format(messages, false)?
                }
            }
            None => params.prompt.clone(),
        };
        let mut prompt_ids = vocab.tokenize(&prompt, params.add_special, params.parse_special)?;
        if prompt_ids.is_empty() {
            return Err(Error::InvalidArgument("the prompt is empty".into()));
        }
        let mut truncated = false;
        if prompt_ids.len() >= n_ctx {
            prompt_ids = cut_prompt(&prompt_ids, n_ctx, params.n_keep);
            truncated = true;
        }
        let mut sampling = params.sampling.clone();
        if let Some(g) = tool_grammar {
            if sampling.grammar.is_some() {
                return Err(Error::InvalidArgument(
                    "a grammar (or JSON schema) cannot be given with tools: the tools' own grammar holds the calls"
                        .into(),
                ));
            }
            sampling.grammar = Some(g.grammar);
            sampling.grammar_lazy = g.lazy;
            sampling.grammar_triggers.patterns = g.triggers;
        }
        // -1 is llama.cpp's "the context size in effect".
        let n_ctx_i32 = i32::try_from(n_ctx).unwrap_or(i32::MAX);
        if sampling.penalty_last_n == -1 {
            sampling.penalty_last_n = n_ctx_i32;
        }
        if sampling.dry_penalty_last_n == -1 {
            sampling.dry_penalty_last_n = n_ctx_i32;
        }
        if params.ignore_eos {
            sampling.logit_bias.extend(
                (0..n_vocab as u32)
                    .filter(|&t| vocab.is_eog(t))
                    .map(|t| (t, f32::NEG_INFINITY)),
            );
        }
        let grammar = match &sampling.grammar {
            Some(src) => Some(Grammar::parse(src, "root", Some(vocab))?),
            None => None,
        };
        if sampling.grammar_lazy && grammar.is_none() {
            return Err(Error::InvalidArgument(
                "grammar_lazy needs a grammar".into(),
            ));
        }
        let lazy = sampling
            .grammar_lazy
            .then(|| sampling.grammar_triggers.clone());
        let breakers = sampling.dry_sequence_breakers.clone();
        let mut sampler = Sampler::new(sampling, n_vocab)?;
        if sampler.uses_dry() {
            sampler.set_dry_breakers(DryBreakers::from_strings(vocab, &breakers));
        }
        if let Some(g) = grammar {
            // Built per constrained completion: about 10 ms for SmolLM2's
            // 49k tokens natively, small beside the prompt.
            let table = Arc::new(TokenTable::new(vocab));
            let state = GrammarState::new(&g, table, lazy.as_ref())?;
            sampler.set_grammar(state);
        }

        // Reuse the cached prefix; at least the last prompt token is
        // evaluated again, for its logits. Recurrent states cannot go back
        // to an earlier position: with them a prompt that extends the whole
        // cache reuses it, any other starts from the longest state
        // checkpoint within the common prefix (one is taken before each
        // prompt's last token, as llama.cpp's server does), or from the
        // start.
        let cached = if params.cache_prompt && seq == 0 {
            let common = self
                .prompt_cache()
                .iter()
                .zip(&prompt_ids)
                .take_while(|(a, b)| a == b)
                .count();
            let reuse = common.min(prompt_ids.len() - 1);
            if reuse < self.prompt_cache().len() && !self.memory().can_cut() {
                self.rewind_prompt_cache(reuse)?
            } else {
                reuse
            }
        } else {
            0
        };
        if seq == 0 {
            let kept = self.prompt_cache()[..cached].to_vec();
            self.kv_seq_rm(0, cached as i32, -1)?;
            self.set_prompt_cache(&kept);
        } else {
            self.kv_seq_rm(seq as i32, -1, -1)?;
        }

        for &t in &prompt_ids {
            sampler.accept(t);
        }
        Ok(CompletionRun {
            prompt,
            parser,
            preserved,
            n_prompt_evaluated: 0,
            prompt_ids,
            cached,
            prompt_ms: 0.0,
            truncated,
            sampler,
            limit: usize::try_from(params.n_predict).unwrap_or(usize::MAX),
            n_probs: params.n_probs,
            n_keep: params.n_keep,
            context_shift: params.context_shift,
            seq,
            n_ctx_slot: n_ctx,
            pos: cached,
            pending: None,
            pending_is_prompt: false,
            generated: Vec::new(),
            probs_out: Vec::new(),
            stream: TextStream::new(),
            stops: StopMatcher::new(&params.stop),
            reason: None,
            context_full: false,
            stopping_word: String::new(),
            n_generated_evaluated: 0,
            predicted_ms: 0.0,
        })
    }
}

impl CompletionRun {
    /// Whether the run has ended (`next_token` gives no more tokens).
    pub fn is_done(&self) -> bool {
        self.reason.is_some()
    }

    /// Evaluates the next micro-batch (`n_ubatch` tokens) of the prompt;
    /// true while more of it remains. An abort request (checked first) ends
    /// the run. `ctx` must be the context that started the run.
    pub fn eval_prompt(&mut self, ctx: &mut Context) -> Result<bool> {
        // A parallel run keeps the prompt's last token for the shared decode.
        let end = self.prompt_ids.len() - usize::from(self.seq != 0);
        let done = self.cached + self.n_prompt_evaluated;
        if self.reason.is_some() || done >= end {
            self.hold_last_prompt_token();
            return Ok(false);
        }
        if ctx.abort_handle().is_aborted() {
            self.reason = Some(StopReason::Abort);
            return Ok(false);
        }
        // With recurrent layers the prompt's last token waits for its own
        // micro-batch, so the states before it become a checkpoint.
        let checkpoint_at = self.prompt_ids.len() - 1;
        let takes_checkpoint = self.seq == 0 && !ctx.memory().can_cut() && done < checkpoint_at;
        let stop = if takes_checkpoint { checkpoint_at } else { end };
        let t = Stopwatch::start();
        let n = ctx.params().n_ubatch.max(1).min(stop - done);
        let chunk = &self.prompt_ids[done..done + n];
        let decoded =
            Batch::for_sequence(chunk, self.pos as i32, self.seq).and_then(|b| ctx.decode(&b));
        self.prompt_ms += t.elapsed_ms();
        match decoded {
            Err(Error::Cancelled(_)) => {
                self.reason = Some(StopReason::Abort);
                return Ok(false);
            }
            Err(e) => {
                self.reason = Some(StopReason::Abort);
                return Err(e);
            }
            Ok(()) => {}
        }
        if self.seq == 0 {
            ctx.extend_prompt_cache(chunk);
            if takes_checkpoint && done + n == checkpoint_at {
                ctx.checkpoint_prompt_cache()?;
            }
        }
        self.pos += n;
        self.n_prompt_evaluated += n;
        if done + n == end {
            self.hold_last_prompt_token();
        }
        Ok(done + n < end)
    }

    /// A parallel run's prompt is evaluated but for its last token: that
    /// token becomes the pending one, decoded with the other runs' tokens.
    fn hold_last_prompt_token(&mut self) {
        let evaluated = self.cached + self.n_prompt_evaluated + 1 == self.prompt_ids.len();
        if self.seq != 0 && self.reason.is_none() && self.generated.is_empty() && evaluated {
            self.pending = self.prompt_ids.last().copied();
            self.pending_is_prompt = true;
        }
    }

    /// Whether the prompt is evaluated (or the run ended): tokens come next.
    pub fn prompt_done(&self) -> bool {
        self.reason.is_some()
            || self.pending.is_some()
            || !self.generated.is_empty()
            || (self.seq == 0 && self.cached + self.n_prompt_evaluated == self.prompt_ids.len())
    }

    /// The next generated token, or `None` once the run has ended (end of
    /// generation, a stop string, the limit, an abort, a full context without
    /// shifting). Evaluates what remains of the prompt first. `ctx` must be
    /// the context that started the run.
    pub fn next_token(&mut self, ctx: &mut Context) -> Result<Option<GeneratedToken>> {
        while self.eval_prompt(ctx)? {}
        if self.reason.is_some() {
            return Ok(None);
        }
        let t = Stopwatch::start();
        let token = self.step(ctx);
        self.predicted_ms += t.elapsed_ms();
        if token.is_err() {
            self.reason = Some(StopReason::Abort);
        }
        token
    }

    fn step(&mut self, ctx: &mut Context) -> Result<Option<GeneratedToken>> {
        match self.next_decode(ctx)? {
            NextStep::Ended => return Ok(None),
            NextStep::Sample => {}
            NextStep::Decode(token) => {
                let batch = Batch::for_sequence(&[token], self.pos as i32, self.seq)?;
                match ctx.decode(&batch) {
                    Err(Error::Cancelled(_)) => return Ok(self.end(StopReason::Abort)),
                    other => other?,
                }
                self.decoded(ctx, token);
            }
        }
        self.sample_at(ctx, -1)
    }

    /// What must happen before the next token: the run has ended (the
    /// limit, an abort, a full context that cannot shift), or `pending`
    /// must be decoded at `pos` (after a context shift where needed), or
    /// the logits are already there.
    fn next_decode(&mut self, ctx: &mut Context) -> Result<NextStep> {
        if self.reason.is_some() {
            return Ok(NextStep::Ended);
        }
        if self.generated.len() >= self.limit {
            self.end(StopReason::Limit);
            return Ok(NextStep::Ended);
        }
        if ctx.abort_handle().is_aborted() {
            self.end(StopReason::Abort);
            return Ok(NextStep::Ended);
        }
        let Some(token) = self.pending else {
            return Ok(NextStep::Sample);
        };
        if self.pos >= self.n_ctx_slot {
            // Recurrent states cannot drop the shifted-out positions: a full
            // context ends the run as without the shift (llama.cpp turns the
            // shift off for such models).
            if !self.context_shift || !ctx.memory().can_cut() {
                self.context_full = true;
                self.end(StopReason::Limit);
                return Ok(NextStep::Ended);
            }
            shift_context(ctx, self.seq, self.n_keep, &mut self.pos)?;
            self.truncated = true;
        }
        Ok(NextStep::Decode(token))
    }

    /// Records that `token` (the pending one) was decoded at `pos`.
    fn decoded(&mut self, ctx: &mut Context, token: u32) {
        self.pending = None;
        if self.seq == 0 {
            ctx.extend_prompt_cache(&[token]);
        }
        self.pos += 1;
        if std::mem::take(&mut self.pending_is_prompt) {
            self.n_prompt_evaluated += 1;
        } else {
            self.n_generated_evaluated += 1;
        }
    }

    /// Samples the next token from the logits of batch index `index` of
    /// the last decode.
    fn sample_at(&mut self, ctx: &mut Context, index: i32) -> Result<Option<GeneratedToken>> {
        let model = ctx.model().clone();
        let vocab = &model.vocab;
        let logits = ctx.logits(index)?;
        let id = self.sampler.sample(logits)?;
        let probs = if self.n_probs > 0 {
            top_probs(ctx, logits, self.n_probs)
        } else {
            Vec::new()
        };
        self.generated.push(id);
        self.probs_out.push(probs.clone());
        if vocab.is_eog(id) {
            self.reason = Some(StopReason::Eos);
            return Ok(Some(GeneratedToken {
                id,
                text: String::new(),
                probs,
            }));
        }
        self.sampler.accept_generated(id)?;
        let piece = self
            .stream
            .push(&vocab.token_bytes(id, self.preserved.contains(&id)));
        let text = match self.stops.push(&piece) {
            Step::Emit(text) => text,
            Step::Stop(text, word) => {
                self.reason = Some(StopReason::Word);
                self.stopping_word = word;
                text
            }
        };
        self.pending = Some(id);
        Ok(Some(GeneratedToken { id, text, probs }))
    }

    /// The message written so far, parsed as a stream (a marker still being
    /// written held back, tool calls once complete); `None` when the output
    /// is not parsed.
    pub fn partial_message(&self) -> Option<ChatMessage> {
        self.parser
            .as_ref()
            .map(|p| p.parse(self.stops.text(), true))
    }

    /// Stops the run before its next token (reported as aborted).
    pub fn stop(&mut self) {
        if self.reason.is_none() {
            self.reason = Some(StopReason::Abort);
        }
    }

    /// Ends the run for `reason`; no token.
    fn end(&mut self, reason: StopReason) -> Option<GeneratedToken> {
        self.reason = Some(reason);
        None
    }

    /// The result: text (with any held-back tail), ids, why it stopped,
    /// timings. A run stopped before its end is reported as aborted.
    pub fn finish(mut self) -> CompletionResult {
        let mut reason = self.reason.unwrap_or(StopReason::Abort);
        if reason != StopReason::Word {
            let tail = self.stream.finish();
            if let Step::Stop(_, word) = self.stops.push(&tail) {
                reason = StopReason::Word;
                self.stopping_word = word;
            } else {
                self.stops.finish();
            }
        }
        let text = self.stops.text().to_string();
        let message = match &self.parser {
            Some(parser) => parser.parse(&text, false),
            None => ChatMessage::new("assistant", text.as_str()),
        };
        CompletionResult {
            content: message.content,
            reasoning_content: message.reasoning_content,
            tool_calls: message.tool_calls,
            chat_format: self.parser.as_ref().map_or("content", |p| p.format().name),
            text,
            tokens_predicted: self.generated.len(),
            tokens_evaluated: self.prompt_ids.len(),
            tokens_cached: self.cached,
            prompt_ids: self.prompt_ids,
            stopped_eos: reason == StopReason::Eos,
            stopped_word: reason == StopReason::Word,
            stopped_limit: reason == StopReason::Limit,
            stopped_aborted: reason == StopReason::Abort,
            context_full: self.context_full,
            stopping_word: self.stopping_word,
            stop_reason: reason,
            truncated: self.truncated,
            prompt: self.prompt,
            timings: Timings::new(
                self.n_prompt_evaluated,
                self.prompt_ms,
                self.generated.len(),
                self.predicted_ms,
            ),
            completion_probabilities: self.probs_out,
            generated_ids: self.generated,
        }
    }
}

/// The ids of the `markers` that are one token each in `vocab`.
fn single_tokens(vocab: &crate::tokenizer::Vocab, markers: &[&str]) -> HashSet<u32> {
    markers
        .iter()
        .filter_map(|m| match vocab.tokenize(m, false, true) {
            Ok(ids) if ids.len() == 1 => Some(ids[0]),
            _ => None,
        })
        .collect()
}

/// Frees half of the positions after `n_keep` of sequence `seq` and slides
/// the rest down, as llama.cpp's context shift (through `Context`'s public
/// sequence calls); sequence 0's prompt-cache record follows.
fn shift_context(ctx: &mut Context, seq: SeqId, n_keep: i32, pos: &mut usize) -> Result<()> {
    let n_keep = (n_keep.max(0) as usize).min(*pos);
    let n_discard = (*pos - n_keep) / 2;
    if n_discard == 0 {
        return Err(Error::ContextFull {
            n_ctx: ctx.n_ctx(),
            free: 0,
            needed: 1,
        });
    }
    let (k, d, p) = (n_keep as i32, n_discard as i32, *pos as i32);
    let mut kept = ctx.prompt_cache().to_vec();
    ctx.kv_seq_rm(seq as i32, k, k + d)?;
    ctx.kv_seq_add(seq, k + d, p, -d)?;
    if seq == 0 {
        if kept.len() >= n_keep + n_discard {
            kept.drain(n_keep..n_keep + n_discard);
        } else {
            kept.clear();
        }
        ctx.set_prompt_cache(&kept);
    }
    *pos -= n_discard;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    #[cfg(target_family = "wasm")]
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

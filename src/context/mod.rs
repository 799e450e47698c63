//! A context: one model's working state, as `llama_context`. It owns the
//! backend it computes with (threads and scratch), the KV cache (several
//! sequences), the architecture's forward-pass state, the logits of the last
//! decode and the embeddings of the last encode. `decode` runs a `Batch` in
//! micro-batches of `n_ubatch` tokens; a batch that does not fit (too many
//! tokens, a full cache) is an error that leaves the cache as it was.
//! Buffers are sized when the context is made (or on the first batch of each
//! size): decoding a token allocates nothing.

pub mod batch;
mod pooling;

use std::any::Any;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

pub use batch::Batch;
pub use pooling::Pooling;

pub use crate::kv::{KvCache, KvLayout, KvSnapshot, KvType, Memory, SeqId, MAX_SEQUENCES};

use crate::backend::Backend;
use crate::error::{Error, Result};
use crate::lora::backend::LoraBackend;
use crate::lora::ActiveLora;
use crate::model::{MicroBatch, Model};

/// Most state checkpoints a context keeps of its prompt cache (each is
/// every recurrent layer's state: about 19 MiB for Qwen3.5-0.8B).
pub const MAX_CHECKPOINTS: usize = 4;

/// Sequence 0's recurrent states when its prompt cache held `tokens`.
struct Checkpoint {
    tokens: Vec<u32>,
    states: Vec<f32>,
}

#[derive(Clone, Debug, PartialEq)]
pub struct ContextParams {
    /// KV cells (positions over all sequences); 0 takes the model's training context.
    pub n_ctx: usize,
    /// Most tokens one `decode` takes.
    pub n_batch: usize,
    /// Most tokens one forward pass computes at once.
    pub n_ubatch: usize,
    pub n_threads: usize,
    pub type_k: KvType,
    pub type_v: KvType,
    /// How `encode` pools; `None` takes the model's (`{arch}.pooling_type`,
    /// else none).
    pub pooling: Option<Pooling>,
}

impl Default for ContextParams {
    fn default() -> Self {
        ContextParams {
            n_ctx: 512,
            n_batch: 512,
            n_ubatch: 512,
            n_threads: default_threads(),
            type_k: KvType::F16,
            type_v: KvType::F16,
            pooling: None,
        }
    }
}

/// Threads by default: the machine's parallelism, at most 4 (more rarely
/// helps a small model); in wasm, the thread pool JavaScript started (1 in
/// the single-thread build).
pub fn default_threads() -> usize {
    if cfg!(target_family = "wasm") {
        crate::parallel::global_pool_threads().max(1)
    } else {
        std::thread::available_parallelism().map_or(1, |n| n.get().min(4))
    }
}

/// A flag another thread can raise to stop a decode or a completion between
/// micro-batches or tokens.
#[derive(Clone, Debug, Default)]
pub struct AbortHandle(Arc<AtomicBool>);

impl AbortHandle {
    pub fn new() -> AbortHandle {
        AbortHandle::default()
    }

    pub fn abort(&self) {
        self.0.store(true, Ordering::Relaxed);
    }

    pub fn is_aborted(&self) -> bool {
        self.0.load(Ordering::Relaxed)
    }

    /// Lowers the flag for the next run.
    pub fn reset(&self) {
        self.0.store(false, Ordering::Relaxed);
    }
}

/// What the last `encode` left: pooled vectors per sequence, or (pooling
/// none) one vector per token.
#[derive(Default)]
struct EncodeOutput {
    pooled: Vec<(SeqId, Vec<f32>)>,
    per_token: Vec<f32>,
    n_tokens: usize,
}

/// Buffers of `decode` kept between calls.
#[derive(Default)]
struct DecodeScratch {
    cells: Vec<usize>,
    outputs: Vec<usize>,
}

/// Sequence 0's tokens, their cache rows and the recurrent layers' states
/// after them (`Context::save_state`).
#[derive(Clone, Debug, PartialEq)]
pub struct SequenceState {
    pub tokens: Vec<u32>,
    pub kv: KvSnapshot,
    /// The recurrent layers' states after the tokens (empty without such
    /// layers).
    pub recurrent: Vec<f32>,
    /// The prompt cache's state checkpoints within the tokens, oldest
    /// first (none without recurrent layers).
    pub checkpoints: Vec<StateCheckpoint>,
}

/// The recurrent states after the first `tokens` of a saved sequence.
#[derive(Clone, Debug, PartialEq)]
pub struct StateCheckpoint {
    pub tokens: usize,
    pub states: Vec<f32>,
}

pub struct Context {
    model: Arc<Model>,
    params: ContextParams,
    backend: Box<dyn Backend>,
    /// The KV cells and the recurrent states of the sequences.
    memory: Memory,
    /// The architecture's forward-pass scratch.
    state: Box<dyn Any + Send>,
    scratch: DecodeScratch,
    /// Rows of the last decode's output tokens: logits (`n_vocab` each), or
    /// hidden states for an embedding pass.
    logits: Vec<f32>,
    /// For each token of the last batch, its row in `logits`.
    output_rows: Vec<Option<usize>>,
    abort: AbortHandle,
    /// Tokens of sequence 0 at positions 0.., as the last completion left
    /// them (its prompt cache); emptied by any direct edit of its cells.
    prompt_cache: Vec<u32>,
    /// Recurrent states of sequence 0 at earlier lengths of its prompt
    /// cache (models with recurrent layers), oldest first: what lets a
    /// prompt that shares only part of the cache reuse that part.
    checkpoints: Vec<Checkpoint>,
    pooling: Pooling,
    encoded: EncodeOutput,
    /// Adapters every forward pass applies, with their scales.
    loras: Vec<ActiveLora>,
}

impl Context {
    pub fn new(model: Arc<Model>, params: ContextParams) -> Result<Context> {
        let mut params = params;
        if params.n_ctx == 0 {
            params.n_ctx = model.n_ctx_train();
        }
        if params.n_batch == 0 || params.n_ubatch == 0 {
            return Err(Error::InvalidArgument(
                "n_batch and n_ubatch must be at least 1".into(),
            ));
        }
        // As llama.cpp: a batch never needs more than the context.
        params.n_batch = params.n_batch.min(params.n_ctx);
        params.n_ubatch = params.n_ubatch.min(params.n_batch);
        let pooling = match params.pooling {
            Some(p) => p,
            None => model
                .pooling_type()
                .map_or(Ok(Pooling::None), Pooling::from_type)?,
        };
        if pooling == Pooling::Rank {
            check_rank(&model)?;
        }
        let device = model.device().clone();
        // An encoder keeps no KV cache (a sequence is encoded whole), but its
        // cells still place a batch's tokens.
        let layout = model
            .arch()
            .kv_layout()
            .unwrap_or(KvLayout { layers: Vec::new() });
        let kv = KvCache::new(
            device.buffer_type().as_ref(),
            layout,
            params.n_ctx,
            params.type_k,
            params.type_v,
        )?;
        let mut backend = device.create_backend(params.n_threads)?;
        backend.reserve(params.n_ubatch, params.n_ctx)?;
        let max_tokens = if model.can_generate() {
            params.n_ubatch
        } else {
            params.n_batch
        };
        crate::log_info!(
            "context: n_ctx = {}, n_batch = {}, n_ubatch = {}, {} threads, variant {}, KV cache {}/{} {:.2} MiB",
            params.n_ctx,
            params.n_batch,
            params.n_ubatch,
            backend.n_threads(),
            backend.variant_name(),
            kv.type_k().name(),
            kv.type_v().name(),
            kv.size_bytes() as f64 / (1u64 << 20) as f64
        );
        let memory = Memory::new(kv, model.arch().recurrent_layout())?;
        Ok(Context {
            state: model.arch().new_state(max_tokens, params.n_ctx)?,
            scratch: DecodeScratch {
                cells: Vec::with_capacity(params.n_batch),
                outputs: Vec::with_capacity(params.n_batch),
            },
            output_rows: Vec::with_capacity(params.n_batch),
            backend,
            model,
            params,
            memory,
            logits: Vec::new(),
            abort: AbortHandle::new(),
            prompt_cache: Vec::new(),
            checkpoints: Vec::new(),
            pooling,
            encoded: EncodeOutput::default(),
            loras: Vec::new(),
        })
    }

    pub fn model(&self) -> &Arc<Model> {
        &self.model
    }

    pub fn params(&self) -> &ContextParams {
        &self.params
    }

    pub fn n_ctx(&self) -> usize {
        self.params.n_ctx
    }

    pub fn n_threads(&self) -> usize {
        self.backend.n_threads()
    }

    /// The kernel variant (or implementation) the backend runs.
    pub fn cpu_variant(&self) -> String {
        self.backend.variant_name()
    }

    /// The KV cache, to read its state.
    pub fn kv(&self) -> &KvCache {
        &self.memory.kv
    }

    /// The KV cells and recurrent states together.
    pub fn memory(&self) -> &Memory {
        &self.memory
    }

    pub fn kv_clear(&mut self) {
        self.memory.clear();
        self.forget_prompt_cache();
    }

    /// Removes positions `[p0, p1)` of `seq` (`seq < 0`: of all sequences;
    /// negative bounds are open). With recurrent layers only whole
    /// sequences can go: another range is an error that changes nothing.
    pub fn kv_seq_rm(&mut self, seq: i32, p0: i32, p1: i32) -> Result<()> {
        self.memory.seq_rm(seq, p0, p1)?;
        if seq <= 0 {
            // Cutting a tail leaves the checkpoints before it valid.
            let kept = if p0 >= 0 && p1 < 0 { p0 as usize } else { 0 };
            self.checkpoints.retain(|c| c.tokens.len() <= kept);
            self.prompt_cache.clear();
        }
        Ok(())
    }

    pub fn kv_seq_cp(&mut self, src: SeqId, dst: SeqId, p0: i32, p1: i32) -> Result<()> {
        self.memory.seq_cp(src, dst, p0, p1)?;
        if dst == 0 {
            self.forget_prompt_cache();
        }
        Ok(())
    }

    pub fn kv_seq_keep(&mut self, seq: SeqId) -> Result<()> {
        self.memory.seq_keep(seq)?;
        if seq != 0 {
            self.forget_prompt_cache();
        }
        Ok(())
    }

    pub fn kv_seq_pos_max(&self, seq: SeqId) -> Option<i32> {
        self.memory.seq_pos_max(seq)
    }

    /// Moves positions `[p0, p1)` of `seq` by `delta` (the context shift:
    /// after removing old positions, the rest slide down).
    pub fn kv_seq_add(&mut self, seq: SeqId, p0: i32, p1: i32, delta: i32) -> Result<()> {
        let arch = self.model.arch();
        let state = &*self.state;
        let shift = |be: &mut dyn Backend, l: usize, row: &mut [f32], d: i32| {
            arch.shift_keys(be, state, l, row, d)
        };
        self.memory
            .seq_add(self.backend.as_mut(), &shift, seq, p0, p1, delta)?;
        if seq == 0 {
            self.forget_prompt_cache();
        }
        Ok(())
    }

    /// The tokens of sequence 0 the last completion left in the cache at
    /// positions 0.. (its prompt cache). Any direct edit of sequence 0's
    /// cells (`kv_*`) empties it.
    pub fn prompt_cache(&self) -> &[u32] {
        &self.prompt_cache
    }

    /// Sets the prompt-cache record after a completion changed the cache
    /// with the `kv_*` calls (which empty it): what sequence 0 now holds.
    pub fn set_prompt_cache(&mut self, tokens: &[u32]) {
        self.prompt_cache.clear();
        self.prompt_cache.extend_from_slice(tokens);
    }

    /// Empties the prompt-cache record and its checkpoints.
    fn forget_prompt_cache(&mut self) {
        self.prompt_cache.clear();
        self.checkpoints.clear();
    }

    /// Keeps the recurrent states of sequence 0 at the prompt cache's
    /// current length, so a later prompt sharing that much of it can start
    /// there (`rewind_prompt_cache`). Nothing to keep without recurrent
    /// layers (any prefix of the cells can be kept as it is) or with an
    /// empty cache; at most `MAX_CHECKPOINTS` are kept, the oldest going
    /// first.
    pub fn checkpoint_prompt_cache(&mut self) -> Result<()> {
        let n = self.prompt_cache.len();
        if self.memory.can_cut() || n == 0 || self.checkpoints.iter().any(|c| c.tokens.len() == n) {
            return Ok(());
        }
        let states = self.memory.recurrent.snapshot(0, n)?;
        if self.checkpoints.len() == MAX_CHECKPOINTS {
            self.checkpoints.remove(0);
        }
        self.checkpoints.push(Checkpoint {
            tokens: self.prompt_cache.clone(),
            states,
        });
        Ok(())
    }

    /// Puts sequence 0 back to the longest checkpoint of at most `max`
    /// tokens that the prompt cache still starts with: its cells after it
    /// go, its recurrent states become the checkpoint's, and the prompt
    /// cache keeps its tokens. Returns the tokens kept (0: no checkpoint
    /// fits, nothing changed). Checkpoints past it are dropped.
    pub fn rewind_prompt_cache(&mut self, max: usize) -> Result<usize> {
        let cache = &self.prompt_cache;
        let best = self
            .checkpoints
            .iter()
            .filter(|c| c.tokens.len() <= max && cache.starts_with(&c.tokens))
            .max_by_key(|c| c.tokens.len());
        let Some(c) = best else {
            return Ok(0);
        };
        let n = c.tokens.len();
        self.memory.rewind(0, n, &c.states)?;
        self.prompt_cache.truncate(n);
        self.checkpoints.retain(|c| c.tokens.len() <= n);
        Ok(n)
    }

    /// The lengths of the prompt cache the checkpoints hold, oldest first.
    pub fn checkpoint_lengths(&self) -> Vec<usize> {
        self.checkpoints.iter().map(|c| c.tokens.len()).collect()
    }

    /// Appends tokens the caller just decoded at the end of sequence 0's
    /// prompt-cache record.
    pub fn extend_prompt_cache(&mut self, tokens: &[u32]) {
        self.prompt_cache.extend_from_slice(tokens);
    }

    /// Sequence 0's first `max_tokens` (None: all) tokens of the prompt cache
    /// with their cache rows, the recurrent layers' states and the state
    /// checkpoints within those tokens: what a session file keeps. A
    /// recurrent state has taken in every token, so such a model saves its
    /// whole cache (fewer tokens are an error).
    pub fn save_state(&self, max_tokens: Option<usize>) -> Result<SequenceState> {
        self.check_can_generate()?;
        let n = max_tokens.map_or(self.prompt_cache.len(), |m| m.min(self.prompt_cache.len()));
        let tokens = &self.prompt_cache[..n];
        Ok(SequenceState {
            tokens: tokens.to_vec(),
            kv: self.memory.kv.snapshot(0, n)?,
            recurrent: self.memory.recurrent.snapshot(0, n)?,
            checkpoints: self
                .checkpoints
                .iter()
                .filter(|c| tokens.starts_with(&c.tokens))
                .map(|c| StateCheckpoint {
                    tokens: c.tokens.len(),
                    states: c.states.clone(),
                })
                .collect(),
        })
    }

    /// Replaces the cache (every sequence) with `state` as sequence 0 and
    /// its tokens as the prompt cache, with its state checkpoints, so the
    /// next completion reuses them as the saver's would have.
    /// Checked first: on an error nothing changes. No logits are readable
    /// until the next decode.
    pub fn load_state(&mut self, state: &SequenceState) -> Result<()> {
        self.check_can_generate()?;
        if state.tokens.len() != state.kv.n_cells {
            return Err(Error::InvalidArgument(format!(
                "the saved state has {} tokens for {} cache positions",
                state.tokens.len(),
                state.kv.n_cells
            )));
        }
        self.model.check_tokens(&state.tokens)?;
        let n = state.tokens.len();
        self.memory.recurrent.check_restore(n, &state.recurrent)?;
        for c in &state.checkpoints {
            if c.tokens == 0 || c.tokens > n {
                return Err(Error::Session(format!(
                    "a state checkpoint after {} tokens in a saved state of {n} tokens",
                    c.tokens
                )));
            }
            self.memory.recurrent.check_restore(c.tokens, &c.states)?;
        }
        if state.checkpoints.len() > MAX_CHECKPOINTS
            || (self.memory.can_cut() && !state.checkpoints.is_empty())
        {
            return Err(Error::Session(format!(
                "{} state checkpoints for a model that keeps {}",
                state.checkpoints.len(),
                if self.memory.can_cut() {
                    0
                } else {
                    MAX_CHECKPOINTS
                }
            )));
        }
        self.memory.kv.restore(0, &state.kv)?;
        self.memory.recurrent.restore(0, n, &state.recurrent);
        self.forget_prompt_cache();
        self.prompt_cache.extend_from_slice(&state.tokens);
        self.checkpoints = state
            .checkpoints
            .iter()
            .map(|c| Checkpoint {
                tokens: state.tokens[..c.tokens].to_vec(),
                states: c.states.clone(),
            })
            .collect();
        self.logits.clear();
        self.output_rows.clear();
        Ok(())
    }

    fn check_can_generate(&self) -> Result<()> {
        if self.model.can_generate() {
            Ok(())
        } else {
            Err(Error::InvalidArgument(format!(
                "a {} model cannot generate text (it is an encoder): use it for embeddings or reranking",
                self.model.arch_name()
            )))
        }
    }

    /// The handle that stops this context's decodes and completions.
    pub fn abort_handle(&self) -> AbortHandle {
        self.abort.clone()
    }

    /// Runs `batch`: its keys and values join the cache, and the logits of its
    /// tokens that asked for them become readable with `logits`. On any error
    /// the cache is as before the call.
    /// Applies `loras` (adapters loaded for this context's model, each with
    /// its scale) to every forward pass from now on, in place of the ones
    /// applied before; an empty list removes them. The cached KV was made
    /// without them, so the prompt cache is forgotten (llama.rn's
    /// `applyLoraAdapters` / `removeLoraAdapters`).
    pub fn set_lora_adapters(&mut self, loras: Vec<ActiveLora>) -> Result<()> {
        for l in &loras {
            if !l.scale.is_finite() {
                return Err(Error::InvalidArgument(format!(
                    "LoRA adapter {}: scale {} is not a finite number",
                    l.adapter.path(),
                    l.scale
                )));
            }
        }
        self.loras = loras;
        // The states and rows were made with the other adapters.
        self.forget_prompt_cache();
        Ok(())
    }

    /// The adapters applied, with their scales.
    pub fn lora_adapters(&self) -> &[ActiveLora] {
        &self.loras
    }

    pub fn decode(&mut self, batch: &Batch) -> Result<()> {
        self.check_batch(batch, self.params.n_batch)?;
        self.check_can_generate()?;
        self.run_decode(batch, false)
    }

    fn check_batch(&self, batch: &Batch, limit: usize) -> Result<()> {
        let n = batch.len();
        if n == 0 {
            return Err(Error::InvalidArgument("the batch is empty".into()));
        }
        if n > limit {
            return Err(Error::InvalidArgument(format!(
                "the batch has {n} tokens, more than n_batch = {limit}"
            )));
        }
        self.model.check_tokens(&batch.tokens)
    }

    /// Places `batch` in free cells and runs it; on error the cells are
    /// released and no output is readable. The recurrent states are put
    /// back too, except after a one-micro-batch forward pass that failed
    /// while running (they are not copied for it, see kv/recurrent.rs):
    /// those sequences are cleared and the error says so.
    fn run_decode(&mut self, batch: &Batch, hidden: bool) -> Result<()> {
        let n = batch.len();
        let back_up = n > self.params.n_ubatch;
        if let Err(e) = self
            .memory
            .recurrent
            .begin(&batch.pos, &batch.seq_mask, back_up)
        {
            self.memory.recurrent.abandon();
            return Err(e);
        }
        if let Err(e) = self.memory.kv.find_cells(n, &mut self.scratch.cells) {
            self.memory.recurrent.abandon();
            return Err(e);
        }
        self.logits.clear();
        self.output_rows.clear();
        self.output_rows.resize(n, None);
        let mut started = false;
        let result = self.decode_placed(batch, hidden, &mut started);
        if let Err(e) = result {
            self.memory.kv.release(&self.scratch.cells);
            self.logits.clear();
            self.output_rows.fill(None);
            if !started {
                self.memory.recurrent.abandon();
                return Err(e);
            }
            let lost = self.memory.recurrent.rollback();
            return Err(self.clear_lost_sequences(lost, e));
        }
        self.memory.recurrent.commit(&batch.pos, &batch.seq_mask);
        Ok(())
    }

    /// Clears the sequences (`lost`: a mask) whose recurrent states a failed
    /// forward pass left half-updated, and adds that to its error.
    fn clear_lost_sequences(&mut self, lost: u64, error: Error) -> Error {
        if lost == 0 {
            return error;
        }
        let seqs: Vec<i32> = (0..64).filter(|i| lost & (1 << i) != 0).collect();
        for &seq in &seqs {
            // Whole sequences can always be removed.
            let _ = self.kv_seq_rm(seq, -1, -1);
        }
        let names: Vec<String> = seqs.iter().map(|s| s.to_string()).collect();
        Error::InvalidArgument(format!(
            "{error}; the recurrent states of sequence {} were partly updated, so it was cleared",
            names.join(", ")
        ))
    }

    /// Runs a placed batch in micro-batches; `hidden`: every token's
    /// final-norm hidden state goes to the outputs instead of the logits of
    /// those that asked.
    /// `started` turns true when the first forward pass begins.
    fn decode_placed(&mut self, batch: &Batch, hidden: bool, started: &mut bool) -> Result<()> {
        let n = batch.len();
        let s = &mut self.scratch;
        let width = if hidden {
            self.model.n_embd()
        } else {
            self.model.n_vocab()
        };
        let mut start = 0;
        while start < n {
            if self.abort.is_aborted() {
                return Err(Error::Cancelled("decoding".into()));
            }
            let end = (start + self.params.n_ubatch).min(n);
            for ((&cell, &pos), &mask) in s.cells[start..end]
                .iter()
                .zip(&batch.pos[start..end])
                .zip(&batch.seq_mask[start..end])
            {
                self.memory.kv.occupy(cell, pos, mask)?;
            }
            s.outputs.clear();
            s.outputs.extend(
                (start..end)
                    .filter(|&i| hidden || batch.logits[i])
                    .map(|i| i - start),
            );
            let ub = MicroBatch {
                tokens: &batch.tokens[start..end],
                pos: &batch.pos[start..end],
                seq: &batch.seq[start..end],
                cells: &s.cells[start..end],
                outputs: &s.outputs,
                hidden,
            };
            let first_row = self.logits.len() / width;
            *started = true;
            let (arch, memory, state, logits, loras) = (
                self.model.arch(),
                &mut self.memory,
                self.state.as_mut(),
                &mut self.logits,
                self.loras.as_slice(),
            );
            self.backend.run(&mut |be| {
                if loras.is_empty() {
                    arch.decode(be, memory, &ub, state, logits)
                } else {
                    arch.decode(&mut LoraBackend::new(be, loras), memory, &ub, state, logits)
                }
            })?;
            for (r, &i) in s.outputs.iter().enumerate() {
                self.output_rows[start + i] = Some(first_row + r);
            }
            start = end;
        }
        Ok(())
    }

    /// Logits of token `i` of the last decoded batch; a negative `i` counts
    /// from the end of the outputs (-1: the last token that asked for logits).
    pub fn logits(&self, i: i32) -> Result<&[f32]> {
        let n_vocab = self.model.n_vocab();
        let n_out = self.logits.len() / n_vocab;
        let row = if i < 0 {
            let back = i.unsigned_abs() as usize;
            (back <= n_out).then(|| n_out - back)
        } else {
            self.output_rows.get(i as usize).copied().flatten()
        };
        let row = row.ok_or_else(|| {
            Error::InvalidArgument(format!(
                "no logits for batch index {i}: the last batch asked for {n_out} outputs"
            ))
        })?;
        Ok(&self.logits[row * n_vocab..(row + 1) * n_vocab])
    }
}

// ---- Encoding (embeddings).

impl Context {
    /// The pooling this context's `encode` applies.
    pub fn pooling(&self) -> Pooling {
        self.pooling
    }

    /// Most tokens one `encode` takes: the context, the batch, and for an
    /// encoder the micro-batch and its positions (a sequence is computed at
    /// once).
    pub fn max_encode_tokens(&self) -> usize {
        let p = &self.params;
        if self.model.can_generate() {
            p.n_ctx.min(p.n_batch)
        } else {
            p.n_ctx
                .min(p.n_batch)
                .min(p.n_ubatch)
                .min(self.model.n_ctx_train())
        }
    }

    /// Encodes `batch` for embeddings: every sequence in it whole (its
    /// tokens attend to each other; a decoder's KV cache is cleared before
    /// and after). Read the result with `embeddings_seq` (pooled) or
    /// `embeddings_ith` (pooling none). An error (too many tokens, a
    /// sequence without a position 0 for cls/rank) changes nothing.
    pub fn encode(&mut self, batch: &Batch) -> Result<()> {
        let n = batch.len();
        let limit = self.max_encode_tokens();
        if n > limit {
            return Err(Error::InvalidArgument(format!(
                "the batch has {n} tokens, more than one encode takes ({limit}: n_ctx, n_batch{})",
                if self.model.can_generate() {
                    ""
                } else {
                    ", n_ubatch and the model's positions"
                }
            )));
        }
        self.check_batch(batch, limit)?;
        let seq = &batch.seq;
        let hidden = if self.model.can_generate() {
            self.decoder_hidden(batch)?
        } else {
            let mut out = Vec::new();
            let (arch, state) = (self.model.arch(), self.state.as_mut());
            self.backend
                .run(&mut |be| arch.encode(be, &batch.tokens, &batch.pos, seq, state, &mut out))?;
            out
        };
        let d = self.model.n_embd();
        let pooled = pooling::pool(self.pooling, &hidden, d, &batch.pos, seq)?;
        self.encoded = match self.pooling {
            Pooling::None => EncodeOutput {
                pooled: Vec::new(),
                per_token: hidden,
                n_tokens: n,
            },
            Pooling::Rank => {
                let rows: Vec<f32> = pooled.iter().flat_map(|(_, v)| v.iter().copied()).collect();
                let mut scores = Vec::new();
                let arch = self.model.arch();
                self.backend
                    .run(&mut |be| arch.classify(be, &rows, pooled.len(), &mut scores))?;
                let per = arch.n_labels().max(1);
                EncodeOutput {
                    pooled: pooled
                        .iter()
                        .zip(scores.chunks_exact(per))
                        .map(|((s, _), sc)| (*s, sc.to_vec()))
                        .collect(),
                    per_token: Vec::new(),
                    n_tokens: n,
                }
            }
            _ => EncodeOutput {
                pooled,
                per_token: Vec::new(),
                n_tokens: n,
            },
        };
        Ok(())
    }

    /// Hidden states (after the final norm) of every token of `batch`
    /// through a decoder, from an empty cache; the cache is cleared again
    /// afterwards (embeddings keep no state), as is the prompt cache.
    fn decoder_hidden(&mut self, batch: &Batch) -> Result<Vec<f32>> {
        self.kv_clear();
        let result = self.run_decode(batch, true);
        self.kv_clear();
        self.output_rows.clear();
        result?;
        Ok(std::mem::take(&mut self.logits))
    }

    /// The pooled embedding of sequence `seq` from the last `encode` (rank
    /// pooling: the classifier's scores).
    pub fn embeddings_seq(&self, seq: SeqId) -> Result<&[f32]> {
        self.encoded
            .pooled
            .iter()
            .find(|(s, _)| *s == seq)
            .map(|(_, v)| v.as_slice())
            .ok_or_else(|| {
                Error::InvalidArgument(format!(
                    "no pooled embedding for sequence {seq} (pooling {}; the last encode had {} sequences)",
                    self.pooling.name(),
                    self.encoded.pooled.len()
                ))
            })
    }

    /// Token `i`'s hidden state from the last `encode` (pooling none).
    pub fn embeddings_ith(&self, i: usize) -> Result<&[f32]> {
        let d = self.model.n_embd();
        if self.pooling != Pooling::None || i >= self.encoded.n_tokens {
            return Err(Error::InvalidArgument(format!(
                "no embedding for token {i} (pooling {}; the last encode had {} tokens)",
                self.pooling.name(),
                self.encoded.n_tokens
            )));
        }
        Ok(&self.encoded.per_token[i * d..(i + 1) * d])
    }
}

/// Rank pooling needs the classifier head and the tokens of a pair input.
fn check_rank(model: &Model) -> Result<()> {
    if model.arch().n_labels() == 0 {
        return Err(Error::InvalidArgument(format!(
            "rank pooling needs a classifier head (cls.weight, cls.output.weight): this {} model has none",
            model.arch_name()
        )));
    }
    let v = &model.vocab;
    let missing: Vec<&str> = [("BOS", v.bos), ("EOS", v.eos), ("SEP", v.sep)]
        .iter()
        .filter(|(_, id)| id.is_none())
        .map(|(name, _)| *name)
        .collect();
    if !missing.is_empty() {
        return Err(Error::InvalidArgument(format!(
            "rank pooling needs BOS, EOS and SEP tokens: the vocabulary has no {}",
            missing.join(", ")
        )));
    }
    Ok(())
}

//! A context: one model's working state for generation, as `llama_context`.
//! It owns the KV cache (several sequences), the worker pool, and the logits
//! of the last decode. `decode` runs a `Batch` in micro-batches of `n_ubatch`
//! tokens; a batch that does not fit (too many tokens, a full cache) is an
//! error that leaves the cache as it was.

pub mod batch;
pub mod kv_cache;

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

pub use batch::Batch;
pub use kv_cache::{KvCache, KvType, SeqId};

use crate::error::{Error, Result};
use crate::model::llama::MicroBatch;
use crate::model::Model;
use crate::parallel::Workers;

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
        }
    }
}

/// Threads by default: the machine's parallelism, at most 4 (more rarely
/// helps a small model); in wasm, the thread pool JavaScript started (1 in
/// the single-thread build).
pub fn default_threads() -> usize {
    if cfg!(target_arch = "wasm32") {
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

pub struct Context {
    model: Arc<Model>,
    params: ContextParams,
    kv: KvCache,
    workers: Workers,
    /// Logits of the last decode's output tokens, `n_vocab` each.
    logits: Vec<f32>,
    /// For each token of the last batch, its row in `logits`.
    output_rows: Vec<Option<usize>>,
    abort: AbortHandle,
    /// Tokens of sequence 0 at positions 0.., as the last completion left
    /// them (its prompt cache); emptied by any direct cache edit.
    pub(crate) history: Vec<u32>,
}

impl Context {
    pub fn new(model: Arc<Model>, params: ContextParams) -> Result<Context> {
        let h = &model.llama.hparams;
        let mut params = params;
        if params.n_ctx == 0 {
            params.n_ctx = h.n_ctx_train;
        }
        if params.n_batch == 0 || params.n_ubatch == 0 {
            return Err(Error::InvalidArgument(
                "n_batch and n_ubatch must be at least 1".into(),
            ));
        }
        // As llama.cpp: a batch never needs more than the context.
        params.n_batch = params.n_batch.min(params.n_ctx);
        params.n_ubatch = params.n_ubatch.min(params.n_batch);
        let kv = KvCache::new(
            h.n_layer,
            params.n_ctx,
            h.n_head_kv * h.head_dim,
            h.head_dim,
            params.type_k,
            params.type_v,
        )?;
        Ok(Context {
            workers: Workers::new(params.n_threads)?,
            model,
            params,
            kv,
            logits: Vec::new(),
            output_rows: Vec::new(),
            abort: AbortHandle::new(),
            history: Vec::new(),
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
        self.workers.n_threads()
    }

    /// The KV cache, to clear it or edit its sequences.
    pub fn kv(&self) -> &KvCache {
        &self.kv
    }

    pub fn kv_clear(&mut self) {
        self.kv.clear();
        self.history.clear();
    }

    /// Removes positions `[p0, p1)` of `seq` (`seq < 0`: of all sequences;
    /// negative bounds are open).
    pub fn kv_seq_rm(&mut self, seq: i32, p0: i32, p1: i32) -> Result<()> {
        self.history.clear();
        self.kv.seq_rm(seq, p0, p1)
    }

    /// The cache, for edits that keep the prompt cache in step themselves.
    pub(crate) fn kv_mut(&mut self) -> &mut KvCache {
        &mut self.kv
    }

    pub fn kv_seq_cp(&mut self, src: SeqId, dst: SeqId, p0: i32, p1: i32) -> Result<()> {
        self.history.clear();
        self.kv.seq_cp(src, dst, p0, p1)
    }

    pub fn kv_seq_keep(&mut self, seq: SeqId) -> Result<()> {
        self.history.clear();
        self.kv.seq_keep(seq)
    }

    pub fn kv_seq_pos_max(&self, seq: SeqId) -> Option<i32> {
        self.kv.seq_pos_max(seq)
    }

    /// Moves positions `[p0, p1)` of `seq` by `delta` (the context shift:
    /// after removing old positions, the rest slide down).
    pub fn kv_seq_add(&mut self, seq: SeqId, p0: i32, p1: i32, delta: i32) -> Result<()> {
        self.history.clear();
        self.shift_kv(seq, p0, p1, delta)
    }

    pub(crate) fn shift_kv(&mut self, seq: SeqId, p0: i32, p1: i32, delta: i32) -> Result<()> {
        let rope = &self.model.llama.hparams.rope;
        let k = *self.model.llama.kernels();
        self.kv
            .seq_add(&k, &|row, d| rope.apply(row, d), seq, p0, p1, delta)
    }

    /// The handle that stops this context's decodes and completions.
    pub fn abort_handle(&self) -> AbortHandle {
        self.abort.clone()
    }

    /// Runs `batch`: its keys and values join the cache, and the logits of its
    /// tokens that asked for them become readable with `logits`. On any error
    /// the cache is as before the call.
    pub fn decode(&mut self, batch: &Batch) -> Result<()> {
        let n = batch.len();
        if n == 0 {
            return Err(Error::InvalidArgument("the batch is empty".into()));
        }
        if n > self.params.n_batch {
            return Err(Error::InvalidArgument(format!(
                "the batch has {n} tokens, more than n_batch = {}",
                self.params.n_batch
            )));
        }
        let n_vocab = self.model.llama.hparams.n_vocab;
        if let Some(&t) = batch.tokens.iter().find(|&&t| t as usize >= n_vocab) {
            return Err(Error::InvalidArgument(format!(
                "token {t} is outside the vocabulary of {n_vocab}"
            )));
        }
        let placement = self.kv.find_cells(n)?;
        self.logits.clear();
        self.output_rows = vec![None; n];
        let result = self.decode_placed(batch, &placement.cells);
        if result.is_err() {
            self.kv.release(&placement.cells);
            self.logits.clear();
            self.output_rows = vec![None; n];
        }
        result
    }

    fn decode_placed(&mut self, batch: &Batch, cells: &[usize]) -> Result<()> {
        let n = batch.len();
        let seq: Vec<SeqId> = batch.seqs.iter().map(|s| s[0]).collect();
        let mut start = 0;
        while start < n {
            if self.abort.is_aborted() {
                return Err(Error::Cancelled("decoding".into()));
            }
            let end = (start + self.params.n_ubatch).min(n);
            for ((&cell, &pos), seqs) in cells[start..end]
                .iter()
                .zip(&batch.pos[start..end])
                .zip(&batch.seqs[start..end])
            {
                self.kv.occupy(cell, pos, seqs)?;
            }
            let outputs: Vec<usize> = (start..end)
                .filter(|&i| batch.logits[i])
                .map(|i| i - start)
                .collect();
            let ub = MicroBatch {
                tokens: &batch.tokens[start..end],
                pos: &batch.pos[start..end],
                seq: &seq[start..end],
                cells: &cells[start..end],
                outputs: &outputs,
            };
            let (model, workers, kv) = (&self.model, &self.workers, &mut self.kv);
            let logits = workers.install(|| model.llama.forward(workers, kv, &ub))?;
            let first_row = self.logits.len() / self.model.llama.hparams.n_vocab;
            for (r, &i) in outputs.iter().enumerate() {
                self.output_rows[start + i] = Some(first_row + r);
            }
            self.logits.extend_from_slice(&logits);
            start = end;
        }
        Ok(())
    }

    /// Logits of token `i` of the last decoded batch; a negative `i` counts
    /// from the end of the outputs (-1: the last token that asked for logits).
    pub fn logits(&self, i: i32) -> Result<&[f32]> {
        let n_vocab = self.model.llama.hparams.n_vocab;
        let n_out = self.logits.len() / n_vocab;
        let row = if i < 0 {
            let back = (-i) as usize;
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

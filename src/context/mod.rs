//! A context: one model's working state, as `llama_context`. It owns the KV
//! cache (several sequences), the worker pool, the logits of the last decode
//! and the embeddings of the last encode (src/embedding/). `decode` runs a
//! `Batch` in micro-batches of `n_ubatch` tokens; a batch that does not fit
//! (too many tokens, a full cache) is an error that leaves the cache as it was.

pub mod batch;
pub mod kv_cache;

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

pub use batch::Batch;
pub use kv_cache::{KvCache, KvType, SeqId};

use crate::embedding::{EncodeOutput, Pooling};
use crate::error::{Error, Result};
use crate::model::llama::MicroBatch;
use crate::model::{Model, Net};
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
    pub(crate) workers: Workers,
    /// Logits of the last decode's output tokens, `n_vocab` each.
    logits: Vec<f32>,
    /// For each token of the last batch, its row in `logits`.
    output_rows: Vec<Option<usize>>,
    abort: AbortHandle,
    /// Tokens of sequence 0 at positions 0.., as the last completion left
    /// them (its prompt cache); emptied by any direct cache edit.
    pub(crate) history: Vec<u32>,
    pub(crate) pooling: Pooling,
    /// What the last `encode` produced.
    pub(crate) encoded: EncodeOutput,
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
        // An encoder keeps no KV cache: a sequence is encoded whole.
        let kv = match &model.net {
            Net::Llama(l) => {
                let h = &l.hparams;
                KvCache::new(
                    h.n_layer,
                    params.n_ctx,
                    h.n_head_kv * h.head_dim,
                    h.head_dim,
                    params.type_k,
                    params.type_v,
                )?
            }
            Net::Bert(b) => KvCache::new(
                0,
                params.n_ctx,
                b.hparams.n_embd,
                b.hparams.head_dim,
                params.type_k,
                params.type_v,
            )?,
        };
        Ok(Context {
            workers: Workers::new(params.n_threads)?,
            model,
            params,
            kv,
            logits: Vec::new(),
            output_rows: Vec::new(),
            abort: AbortHandle::new(),
            history: Vec::new(),
            pooling,
            encoded: EncodeOutput::default(),
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
        let llama = self.model.llama()?;
        let rope = &llama.hparams.rope;
        let k = *llama.kernels();
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
        let n_vocab = self.model.llama()?.hparams.n_vocab;
        if let Some(&t) = batch.tokens.iter().find(|&&t| t as usize >= n_vocab) {
            return Err(Error::InvalidArgument(format!(
                "token {t} is outside the vocabulary of {n_vocab}"
            )));
        }
        let placement = self.kv.find_cells(n)?;
        self.logits.clear();
        self.output_rows = vec![None; n];
        let result = self.decode_placed(batch, &placement.cells, false);
        if result.is_err() {
            self.kv.release(&placement.cells);
            self.logits.clear();
            self.output_rows = vec![None; n];
        }
        result
    }

    /// Runs a placed batch; `hidden`: every token's final-norm hidden state
    /// goes to the outputs instead of the logits of those that asked.
    fn decode_placed(&mut self, batch: &Batch, cells: &[usize], hidden: bool) -> Result<()> {
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
                .filter(|&i| hidden || batch.logits[i])
                .map(|i| i - start)
                .collect();
            let ub = MicroBatch {
                tokens: &batch.tokens[start..end],
                pos: &batch.pos[start..end],
                seq: &seq[start..end],
                cells: &cells[start..end],
                outputs: &outputs,
                hidden,
            };
            let llama = self.model.llama()?;
            let (workers, kv) = (&self.workers, &mut self.kv);
            let logits = workers.install(|| llama.forward(workers, kv, &ub))?;
            let width = if hidden {
                llama.hparams.n_embd
            } else {
                llama.hparams.n_vocab
            };
            let first_row = self.logits.len() / width;
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
        let n_vocab = self.model.llama()?.hparams.n_vocab;
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

impl Context {
    /// Hidden states (after the final norm) of every token of `batch`
    /// through a llama model, from an empty cache; the cache is cleared
    /// again afterwards (embeddings keep no state), as is the prompt cache.
    pub(crate) fn llama_hidden(&mut self, batch: &Batch) -> Result<Vec<f32>> {
        let n_vocab = self.model.llama()?.hparams.n_vocab;
        if let Some(&t) = batch.tokens.iter().find(|&&t| t as usize >= n_vocab) {
            return Err(Error::InvalidArgument(format!(
                "token {t} is outside the vocabulary of {n_vocab}"
            )));
        }
        self.kv_clear();
        let placement = self.kv.find_cells(batch.len())?;
        self.logits.clear();
        self.output_rows = vec![None; batch.len()];
        let result = self.decode_placed(batch, &placement.cells, true);
        self.kv_clear();
        self.output_rows.clear();
        result?;
        Ok(std::mem::take(&mut self.logits))
    }
}

/// Rank pooling needs the classifier head and the tokens of a pair input.
fn check_rank(model: &Model) -> Result<()> {
    let has_head = matches!(&model.net, Net::Bert(b) if b.has_classifier());
    if !has_head {
        return Err(Error::InvalidArgument(format!(
            "rank pooling needs a classifier head (cls.weight, cls.output.weight): this {} model has none",
            model.arch()
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

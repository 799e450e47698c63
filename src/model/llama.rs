//! The llama family (llama, mistral, smollm, tinyllama, ...): token embedding,
//! then per layer RMSNorm, attention with RoPE and grouped KV heads over the KV
//! cache, residual, RMSNorm, SwiGLU feed-forward, residual; a final RMSNorm
//! and the output projection (the token embedding when `output.weight` is
//! absent). Numerics follow ggml's: activations quantized for each matrix
//! product as its kernels take them, RMS sums in f64, attention as in
//! `attention.rs`. A forward pass takes a micro-batch of tokens at once.

use std::sync::Arc;

use super::attention::attend;
use super::matmul::{matmul, MatRef, Weight};
use super::ops::{rms_norm, Rope, RopeKind};
pub use super::weights::Progress;
use super::weights::{tensor, vector, weight, LoadSteps, Tensor};
use crate::backend::cpu::repack::RepackedQ4_0;
use crate::backend::cpu::Kernels;
use crate::context::kv_cache::{KvCache, Rows, SeqId};
use crate::error::{Error, Result};
use crate::gguf::GgufFile;
use crate::parallel::Workers;
use crate::tensor::blocks::{as_blocks, BlockQ4_0};
use crate::tensor::DType;

/// Hyperparameters from `llama.*` metadata.
#[derive(Clone, Debug, PartialEq)]
pub struct HParams {
    pub n_layer: usize,
    pub n_embd: usize,
    pub n_head: usize,
    pub n_head_kv: usize,
    pub n_ff: usize,
    pub n_vocab: usize,
    pub head_dim: usize,
    pub rms_eps: f32,
    pub n_ctx_train: usize,
    pub rope: Rope,
}

/// A weight matrix: in the memory-mapped file, or copied into a repacked
/// layout at load (Q4_0 with a variant that accelerates one).
enum Matrix {
    Mapped(Tensor),
    Repacked(RepackedQ4_0),
}

struct Layer {
    attn_norm: Vec<f32>,
    wq: Matrix,
    wk: Matrix,
    wv: Matrix,
    wo: Matrix,
    ffn_norm: Vec<f32>,
    gate: Matrix,
    up: Matrix,
    down: Matrix,
}

/// A loaded llama-family model.
pub struct LlamaModel {
    file: Arc<GgufFile>,
    pub hparams: HParams,
    kernels: Kernels,
    token_embd: Tensor,
    output_norm: Vec<f32>,
    output: Matrix,
    layers: Vec<Layer>,
    repacked: usize,
}

impl LlamaModel {
    /// Binds the weights of `file` by name for the kernels `kernels`. Q4_0
    /// matrices are repacked when the variant has a layout for them; the rest
    /// stay in the file's memory. `progress` hears the fraction of weight
    /// bytes done and stops the load (an error) by returning false.
    pub fn load(
        file: Arc<GgufFile>,
        kernels: Kernels,
        progress: Option<Progress>,
    ) -> Result<LlamaModel> {
        let md = file.metadata();
        let arch = md.get_str("general.architecture")?;
        if arch != "llama" {
            return Err(Error::InvalidArgument(format!(
                "unsupported model architecture '{arch}' (supported: llama)"
            )));
        }
        let u = |k: &str| md.get_u32(&format!("llama.{k}")).map(|v| v as usize);
        let n_embd = u("embedding_length")?;
        let n_head = u("attention.head_count")?;
        let n_head_kv = u("attention.head_count_kv").unwrap_or(n_head);
        if n_head == 0 || n_head_kv == 0 || n_head % n_head_kv != 0 || n_embd % n_head != 0 {
            return Err(Error::InvalidArgument(format!(
                "inconsistent attention shape: {n_embd} embedding, {n_head} heads, {n_head_kv} KV heads"
            )));
        }
        let head_dim = n_embd / n_head;
        let rope_dim = u("rope.dimension_count").unwrap_or(head_dim);
        if rope_dim == 0 || rope_dim > head_dim || rope_dim % 2 != 0 {
            return Err(Error::InvalidArgument(format!(
                "rope dimension {rope_dim} does not fit heads of {head_dim}"
            )));
        }
        let freq_scale = match md.get_str("llama.rope.scaling.type") {
            Ok("linear") => 1.0 / md.get_f32("llama.rope.scaling.factor").unwrap_or(1.0),
            Ok("none") | Err(_) => 1.0,
            Ok(other) => {
                return Err(Error::InvalidArgument(format!(
                    "unsupported rope scaling type '{other}'"
                )))
            }
        };
        let token_embd = tensor(&file, "token_embd.weight")?;
        let freq_factors = match tensor(&file, "rope_freqs.weight") {
            Ok(t) => Some(vector(&file, &t, rope_dim / 2)?),
            Err(Error::MissingTensor { .. }) => None,
            Err(e) => return Err(e),
        };
        let hparams = HParams {
            n_layer: u("block_count")?,
            n_embd,
            n_head,
            n_head_kv,
            n_ff: u("feed_forward_length")?,
            n_vocab: token_embd.rows,
            head_dim,
            rms_eps: md.get_f32("llama.attention.layer_norm_rms_epsilon")?,
            n_ctx_train: u("context_length")?,
            rope: Rope {
                kind: RopeKind::Normal,
                head_dim,
                dim: rope_dim,
                base: md.get_f32("llama.rope.freq_base").unwrap_or(10000.0),
                freq_scale,
                freq_factors,
            },
        };
        let kv_w = n_head_kv * head_dim;
        let h = &hparams;
        let shapes = |n: &str| -> (usize, usize) {
            match n {
                "attn_q" | "attn_output" => (n_embd, n_embd),
                "attn_k" | "attn_v" => (kv_w, n_embd),
                "ffn_gate" | "ffn_up" => (h.n_ff, n_embd),
                _ => (n_embd, h.n_ff),
            }
        };
        if token_embd.cols != n_embd {
            return Err(Error::InvalidArgument(format!(
                "token_embd.weight rows have {} values, the model's embedding is {n_embd}",
                token_embd.cols
            )));
        }

        let mut steps = LoadSteps::new(&file, progress)?;
        let bind = |t: Tensor, shape: (usize, usize)| -> Result<Matrix> {
            if (t.rows, t.cols) != shape {
                return Err(Error::InvalidArgument(format!(
                    "tensor '{}' is {}x{}, expected {}x{}",
                    t.name, t.rows, t.cols, shape.0, shape.1
                )));
            }
            match kernels.repack {
                Some(layout) if t.dtype == DType::Q4_0 && t.rows % layout.rows() == 0 => {
                    let blocks = as_blocks::<BlockQ4_0>(&file.bytes()[t.range.clone()])?;
                    Ok(Matrix::Repacked(RepackedQ4_0::new(
                        blocks, t.rows, t.cols, layout,
                    )?))
                }
                _ => Ok(Matrix::Mapped(t)),
            }
        };
        let mut layers = Vec::with_capacity(h.n_layer);
        for i in 0..h.n_layer {
            let t = |n: &str| tensor(&file, &format!("blk.{i}.{n}.weight"));
            let m = |n: &str| bind(t(n)?, shapes(n));
            let layer = Layer {
                attn_norm: vector(&file, &t("attn_norm")?, n_embd)?,
                wq: m("attn_q")?,
                wk: m("attn_k")?,
                wv: m("attn_v")?,
                wo: m("attn_output")?,
                ffn_norm: vector(&file, &t("ffn_norm")?, n_embd)?,
                gate: m("ffn_gate")?,
                up: m("ffn_up")?,
                down: m("ffn_down")?,
            };
            let bytes: usize = [
                "attn_norm",
                "attn_q",
                "attn_k",
                "attn_v",
                "attn_output",
                "ffn_norm",
                "ffn_gate",
                "ffn_up",
                "ffn_down",
            ]
            .iter()
            .filter_map(|n| t(n).ok())
            .map(|t| t.range.len())
            .sum();
            layers.push(layer);
            steps.step(bytes)?;
        }
        let output = match tensor(&file, "output.weight") {
            Ok(t) => bind(t, (h.n_vocab, n_embd))?,
            // Tied output: the token embedding, read in place (llama.cpp does
            // not repack the input embedding either).
            Err(Error::MissingTensor { .. }) => Matrix::Mapped(token_embd.clone()),
            Err(e) => return Err(e),
        };
        let output_norm = vector(&file, &tensor(&file, "output_norm.weight")?, n_embd)?;
        steps.finish()?;
        let repacked = layers
            .iter()
            .flat_map(|l| [&l.wq, &l.wk, &l.wv, &l.wo, &l.gate, &l.up, &l.down])
            .chain([&output])
            .filter(|m| matches!(m, Matrix::Repacked(_)))
            .count();
        Ok(LlamaModel {
            output_norm,
            token_embd,
            output,
            layers,
            hparams,
            kernels,
            repacked,
            file,
        })
    }

    pub fn kernels(&self) -> &Kernels {
        &self.kernels
    }

    /// How many weight matrices were repacked at load.
    pub fn repacked_matrices(&self) -> usize {
        self.repacked
    }

    pub fn file(&self) -> &Arc<GgufFile> {
        &self.file
    }

    fn weight(&self, t: &Tensor) -> Weight<'_> {
        weight(&self.file, t)
    }

    fn mat<'a>(&'a self, m: &'a Matrix) -> MatRef<'a> {
        match m {
            Matrix::Mapped(t) => MatRef::Mapped(self.weight(t)),
            Matrix::Repacked(r) => MatRef::Repacked(r),
        }
    }
}

/// The tokens of one forward pass, already placed in KV cells.
pub(crate) struct MicroBatch<'a> {
    pub tokens: &'a [u32],
    pub pos: &'a [i32],
    /// The sequence whose cells each token attends to (its first).
    pub seq: &'a [SeqId],
    pub cells: &'a [usize],
    /// Indices (into this micro-batch) of the tokens whose logits are wanted.
    pub outputs: &'a [usize],
    /// Return the output tokens' hidden states (after the final norm)
    /// instead of their logits: embeddings.
    pub hidden: bool,
}

impl LlamaModel {
    /// Runs a micro-batch: stores its keys and values in its cells, and
    /// returns the logits of its output tokens, one row of `n_vocab` each.
    pub(crate) fn forward(
        &self,
        workers: &Workers,
        kv: &mut KvCache,
        ub: &MicroBatch,
    ) -> Result<Vec<f32>> {
        let h = &self.hparams;
        let k = &self.kernels;
        let n = ub.tokens.len();
        let (d, hd) = (h.n_embd, h.head_dim);
        let kv_w = h.n_head_kv * hd;
        let group = h.n_head / h.n_head_kv;
        if let Some(&t) = ub.tokens.iter().find(|&&t| t as usize >= h.n_vocab) {
            return Err(Error::InvalidArgument(format!(
                "token {t} is outside the vocabulary of {}",
                h.n_vocab
            )));
        }
        let mut x = vec![0.0f32; n * d];
        let embd = self.weight(&self.token_embd);
        for (row, &t) in x.chunks_exact_mut(d).zip(ub.tokens) {
            embd.row_f32(t as usize, row)?;
        }
        let visible: Vec<Vec<usize>> = (0..n)
            .map(|i| {
                let mut v = Vec::new();
                kv.visible(ub.seq[i], ub.pos[i], &mut v);
                v
            })
            .collect();
        let mut xn = vec![0.0f32; n * d];
        let mut q = vec![0.0f32; n * d];
        let mut kk = vec![0.0f32; n * kv_w];
        let mut vv = vec![0.0f32; n * kv_w];
        let mut att = vec![0.0f32; n * d];
        let mut proj = vec![0.0f32; n * d];
        let mut gate = vec![0.0f32; n * h.n_ff];
        let mut up = vec![0.0f32; n * h.n_ff];
        let scale = 1.0 / (hd as f32).sqrt();
        let mut v_f32 = Vec::new();
        let norm_rows = |x: &[f32], w: &[f32], out: &mut [f32]| {
            for (xr, or) in x.chunks_exact(d).zip(out.chunks_exact_mut(d)) {
                rms_norm(xr, w, h.rms_eps, or);
            }
        };
        for (l, layer) in self.layers.iter().enumerate() {
            norm_rows(&x, &layer.attn_norm, &mut xn);
            matmul(k, workers, self.mat(&layer.wq), &xn, n, &mut q)?;
            matmul(k, workers, self.mat(&layer.wk), &xn, n, &mut kk)?;
            matmul(k, workers, self.mat(&layer.wv), &xn, n, &mut vv)?;
            for i in 0..n {
                h.rope.apply(&mut q[i * d..(i + 1) * d], ub.pos[i]);
                h.rope.apply(&mut kk[i * kv_w..(i + 1) * kv_w], ub.pos[i]);
            }
            let cache = &mut kv.layers[l];
            for i in 0..n {
                cache.k.store(k, ub.cells[i], &kk[i * kv_w..(i + 1) * kv_w]);
                cache.v.store(k, ub.cells[i], &vv[i * kv_w..(i + 1) * kv_w]);
            }
            kv.v_f32(l, kv.used_end(), &mut v_f32);
            let cache = &kv.layers[l];
            let round = matches!(cache.v, Rows::F16(_));
            let mut heads: Vec<&mut [f32]> = att.chunks_exact_mut(hd).collect();
            workers.for_each_mut(&mut heads, |idx, out| {
                let (i, head) = (idx / h.n_head, idx % h.n_head);
                let qh = &q[i * d + head * hd..i * d + (head + 1) * hd];
                let v = &v_f32;
                attend(
                    k,
                    cache,
                    v,
                    round,
                    kv_w,
                    head / group,
                    qh,
                    &visible[i],
                    scale,
                    out,
                );
            });
            matmul(k, workers, self.mat(&layer.wo), &att, n, &mut proj)?;
            for (a, b) in x.iter_mut().zip(&proj) {
                *a += b;
            }
            norm_rows(&x, &layer.ffn_norm, &mut xn);
            matmul(k, workers, self.mat(&layer.gate), &xn, n, &mut gate)?;
            matmul(k, workers, self.mat(&layer.up), &xn, n, &mut up)?;
            for (g, u) in gate.iter_mut().zip(&up) {
                *g = (*g / (1.0 + (-*g).exp())) * u;
            }
            matmul(k, workers, self.mat(&layer.down), &gate, n, &mut proj)?;
            for (a, b) in x.iter_mut().zip(&proj) {
                *a += b;
            }
        }
        let n_out = ub.outputs.len();
        if n_out == 0 {
            return Ok(Vec::new());
        }
        let mut last = vec![0.0f32; n_out * d];
        for (dst, &i) in last.chunks_exact_mut(d).zip(ub.outputs) {
            rms_norm(&x[i * d..(i + 1) * d], &self.output_norm, h.rms_eps, dst);
        }
        if ub.hidden {
            return Ok(last);
        }
        let mut logits = vec![0.0f32; n_out * h.n_vocab];
        matmul(
            k,
            workers,
            self.mat(&self.output),
            &last,
            n_out,
            &mut logits,
        )?;
        Ok(logits)
    }
}

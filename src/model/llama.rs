//! The llama family (llama, mistral, smollm, tinyllama, ...): token embedding,
//! then per layer RMSNorm, attention with RoPE and grouped KV heads over an f16
//! KV cache, residual, RMSNorm, SwiGLU feed-forward, residual; a final RMSNorm
//! and the output projection (the token embedding when `output.weight` is
//! absent). Numerics follow ggml's: activations quantized for each matrix
//! product as its kernels take them, f16 K/V, f16 queries and attention
//! weights in the products with them, RMS sums in f64.

use std::ops::Range;
use std::sync::Arc;

use half::f16;
use half::slice::HalfFloatSliceExt;

use super::matmul::{matvec, Weight};
use crate::backend::cpu::Kernels;
use crate::error::{Error, Result};
use crate::gguf::GgufFile;
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
    pub rope_dim: usize,
    pub rope_base: f32,
    pub rms_eps: f32,
    pub n_ctx_train: usize,
}

#[derive(Clone, Debug)]
struct Tensor {
    dtype: DType,
    rows: usize,
    cols: usize,
    range: Range<usize>,
}

struct Layer {
    attn_norm: Vec<f32>,
    wq: Tensor,
    wk: Tensor,
    wv: Tensor,
    wo: Tensor,
    ffn_norm: Vec<f32>,
    gate: Tensor,
    up: Tensor,
    down: Tensor,
}

/// A loaded llama-family model. Weights stay in the file's memory.
pub struct LlamaModel {
    file: Arc<GgufFile>,
    pub hparams: HParams,
    token_embd: Tensor,
    output_norm: Vec<f32>,
    output: Tensor,
    layers: Vec<Layer>,
}

fn tensor(file: &GgufFile, name: &str) -> Result<Tensor> {
    let info = file.tensor(name).ok_or_else(|| Error::MissingTensor {
        name: name.to_string(),
    })?;
    let dtype = DType::of_tensor(info.ggml_type, name)?;
    let cols = info.shape.first().copied().unwrap_or(1) as usize;
    let rows = info.shape.iter().skip(1).product::<u64>() as usize;
    let start = (file.data_offset() + info.offset) as usize;
    Ok(Tensor {
        dtype,
        rows,
        cols,
        range: start..start + info.n_bytes as usize,
    })
}

/// A small tensor (a norm's weights) as f32, read once at load.
fn vector(file: &GgufFile, t: &Tensor) -> Result<Vec<f32>> {
    let mut v = vec![0.0; t.cols * t.rows];
    crate::tensor::convert::dequantize(t.dtype, &file.bytes()[t.range.clone()], &mut v)?;
    Ok(v)
}

impl LlamaModel {
    pub fn load(file: Arc<GgufFile>) -> Result<LlamaModel> {
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
        let head_dim = n_embd / n_head.max(1);
        let token_embd = tensor(&file, "token_embd.weight")?;
        let hparams = HParams {
            n_layer: u("block_count")?,
            n_embd,
            n_head,
            n_head_kv,
            n_ff: u("feed_forward_length")?,
            n_vocab: token_embd.rows,
            head_dim,
            rope_dim: u("rope.dimension_count").unwrap_or(head_dim),
            rope_base: md.get_f32("llama.rope.freq_base").unwrap_or(10000.0),
            rms_eps: md.get_f32("llama.attention.layer_norm_rms_epsilon")?,
            n_ctx_train: u("context_length")?,
        };
        if n_head == 0 || n_head_kv == 0 || n_head % n_head_kv != 0 || n_embd % n_head != 0 {
            return Err(Error::InvalidArgument(format!(
                "inconsistent attention shape: {n_embd} embedding, {n_head} heads, {n_head_kv} KV heads"
            )));
        }
        let layers = (0..hparams.n_layer)
            .map(|i| {
                let t = |n: &str| tensor(&file, &format!("blk.{i}.{n}.weight"));
                Ok(Layer {
                    attn_norm: vector(&file, &t("attn_norm")?)?,
                    wq: t("attn_q")?,
                    wk: t("attn_k")?,
                    wv: t("attn_v")?,
                    wo: t("attn_output")?,
                    ffn_norm: vector(&file, &t("ffn_norm")?)?,
                    gate: t("ffn_gate")?,
                    up: t("ffn_up")?,
                    down: t("ffn_down")?,
                })
            })
            .collect::<Result<Vec<_>>>()?;
        let output = match tensor(&file, "output.weight") {
            Ok(t) => t,
            Err(Error::MissingTensor { .. }) => token_embd.clone(),
            Err(e) => return Err(e),
        };
        Ok(LlamaModel {
            output_norm: vector(&file, &tensor(&file, "output_norm.weight")?)?,
            token_embd,
            output,
            layers,
            hparams,
            file,
        })
    }

    fn weight(&self, t: &Tensor) -> Weight<'_> {
        Weight {
            dtype: t.dtype,
            rows: t.rows,
            cols: t.cols,
            data: &self.file.bytes()[t.range.clone()],
        }
    }
}

/// The KV cache of one sequence: per layer, positions x (KV heads x head dim), f16.
pub struct KvCache {
    k: Vec<Vec<f16>>,
    v: Vec<Vec<f16>>,
    n_ctx: usize,
    width: usize,
    len: usize,
}

impl KvCache {
    pub fn new(h: &HParams, n_ctx: usize) -> KvCache {
        let width = h.n_head_kv * h.head_dim;
        KvCache {
            k: vec![vec![f16::ZERO; n_ctx * width]; h.n_layer],
            v: vec![vec![f16::ZERO; n_ctx * width]; h.n_layer],
            n_ctx,
            width,
            len: 0,
        }
    }

    /// Positions filled.
    pub fn len(&self) -> usize {
        self.len
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    pub fn clear(&mut self) {
        self.len = 0;
    }
}

fn rms_norm(x: &[f32], w: &[f32], eps: f32, out: &mut [f32]) {
    let sum: f64 = x.iter().map(|&v| (v * v) as f64).sum();
    let scale = 1.0 / ((sum / x.len() as f64) as f32 + eps).sqrt();
    for ((o, &v), &g) in out.iter_mut().zip(x).zip(w) {
        *o = (v * scale) * g;
    }
}

/// RoPE, llama's "normal" ordering (pairs of neighbours), with ggml's angle
/// recurrence (theta multiplied by base^(-2/dim) per pair).
fn rope(x: &mut [f32], head_dim: usize, rope_dim: usize, pos: usize, base: f32) {
    let theta_scale = base.powf(-2.0 / rope_dim as f32);
    for head in x.chunks_exact_mut(head_dim) {
        let mut theta = pos as f32;
        for i in (0..rope_dim).step_by(2) {
            let (s, c) = theta.sin_cos();
            let (a, b) = (head[i], head[i + 1]);
            head[i] = a * c - b * s;
            head[i + 1] = a * s + b * c;
            theta *= theta_scale;
        }
    }
}

impl LlamaModel {
    /// Runs one token at position `cache.len()`, appends its K/V to the cache,
    /// and returns the logits when `want_logits`.
    pub fn forward(
        &self,
        k: &Kernels,
        token: u32,
        cache: &mut KvCache,
        want_logits: bool,
    ) -> Result<Option<Vec<f32>>> {
        let h = &self.hparams;
        if token as usize >= h.n_vocab {
            return Err(Error::InvalidArgument(format!(
                "token {token} is outside the vocabulary of {}",
                h.n_vocab
            )));
        }
        let pos = cache.len;
        if pos >= cache.n_ctx {
            return Err(Error::InvalidArgument(format!(
                "the context is full ({} positions)",
                cache.n_ctx
            )));
        }
        let (d, hd) = (h.n_embd, h.head_dim);
        let kv_w = cache.width;
        let group = h.n_head / h.n_head_kv;
        let mut x = vec![0.0f32; d];
        self.weight(&self.token_embd)
            .row_f32(token as usize, &mut x)?;
        let mut xn = vec![0.0f32; d];
        let mut q = vec![0.0f32; d];
        let mut kk = vec![0.0f32; kv_w];
        let mut vv = vec![0.0f32; kv_w];
        let mut att = vec![0.0f32; d];
        let mut proj = vec![0.0f32; d];
        let mut gate = vec![0.0f32; h.n_ff];
        let mut up = vec![0.0f32; h.n_ff];
        let scale = 1.0 / (hd as f32).sqrt();
        let mut vrow = vec![0.0f32; hd];
        let mut qh = vec![f16::ZERO; hd];
        for (l, layer) in self.layers.iter().enumerate() {
            rms_norm(&x, &layer.attn_norm, h.rms_eps, &mut xn);
            matvec(k, &self.weight(&layer.wq), &xn, &mut q)?;
            matvec(k, &self.weight(&layer.wk), &xn, &mut kk)?;
            matvec(k, &self.weight(&layer.wv), &xn, &mut vv)?;
            rope(&mut q, hd, h.rope_dim, pos, h.rope_base);
            rope(&mut kk, hd, h.rope_dim, pos, h.rope_base);
            let (kc, vc) = (&mut cache.k[l], &mut cache.v[l]);
            for i in 0..kv_w {
                kc[pos * kv_w + i] = f16::from_f32(kk[i]);
                vc[pos * kv_w + i] = f16::from_f32(vv[i]);
            }
            let n = pos + 1;
            let mut scores = vec![0.0f32; n];
            let mut probs = vec![0.0f32; n];
            for head in 0..h.n_head {
                let kvh = head / group;
                for (dst, &v) in qh.iter_mut().zip(&q[head * hd..(head + 1) * hd]) {
                    *dst = f16::from_f32(v);
                }
                for (t, s) in scores.iter_mut().enumerate() {
                    let krow = &kc[t * kv_w + kvh * hd..t * kv_w + (kvh + 1) * hd];
                    *s = (k.vec_dot_f16)(krow, &qh) * scale;
                }
                let max = scores.iter().fold(f32::NEG_INFINITY, |m, &s| m.max(s));
                let mut sum = 0.0f64;
                for s in scores.iter_mut() {
                    *s = (*s - max).exp();
                    sum += *s as f64;
                }
                let inv = (1.0 / sum) as f32;
                // Attention weights rounded through f16, as ggml multiplies
                // them with the f16 V cache.
                for (p, &s) in probs.iter_mut().zip(&scores) {
                    *p = f16::from_f32(s * inv).to_f32();
                }
                let out = &mut att[head * hd..(head + 1) * hd];
                out.fill(0.0);
                for (t, &p) in probs.iter().enumerate() {
                    let start = t * kv_w + kvh * hd;
                    vc[start..start + hd].convert_to_f32_slice(&mut vrow);
                    for (o, &v) in out.iter_mut().zip(&vrow) {
                        *o += p * v;
                    }
                }
            }
            matvec(k, &self.weight(&layer.wo), &att, &mut proj)?;
            for (a, b) in x.iter_mut().zip(&proj) {
                *a += b;
            }
            rms_norm(&x, &layer.ffn_norm, h.rms_eps, &mut xn);
            matvec(k, &self.weight(&layer.gate), &xn, &mut gate)?;
            matvec(k, &self.weight(&layer.up), &xn, &mut up)?;
            for (g, u) in gate.iter_mut().zip(&up) {
                *g = (*g / (1.0 + (-*g).exp())) * u;
            }
            matvec(k, &self.weight(&layer.down), &gate, &mut proj)?;
            for (a, b) in x.iter_mut().zip(&proj) {
                *a += b;
            }
        }
        cache.len += 1;
        if !want_logits {
            return Ok(None);
        }
        rms_norm(&x, &self.output_norm, h.rms_eps, &mut xn);
        let mut logits = vec![0.0f32; h.n_vocab];
        matvec(k, &self.weight(&self.output), &xn, &mut logits)?;
        Ok(Some(logits))
    }
}

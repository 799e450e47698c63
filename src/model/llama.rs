//! The llama family (llama, mistral, smollm, tinyllama, ...): token embedding,
//! then per layer RMSNorm, attention with RoPE and grouped KV heads over the KV
//! cache, residual, RMSNorm, SwiGLU feed-forward, residual; a final RMSNorm
//! and the output projection (the token embedding when `output.weight` is
//! absent). Numerics follow ggml's: activations quantized for each matrix
//! product as its kernels take them, RMS sums in f64, attention in the
//! cache's types. A forward pass takes a micro-batch of tokens at once.

use std::any::Any;
use std::sync::Arc;

use super::weights::{matrix, shaped, table, tensor, vector, LoadSteps, Progress};
use super::{state_of, Architecture, Dims, MicroBatch};
use crate::backend::{Backend, Device, Matrix, Op, Rope, RopeKind};
use crate::error::{Error, Result};
use crate::gguf::GgufFile;
use crate::kv::{KvCache, KvLayout};

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
pub struct Llama {
    pub hparams: HParams,
    token_embd: Matrix,
    output_norm: Vec<f32>,
    /// `None`: tied to the token embedding.
    output: Option<Matrix>,
    layers: Vec<Layer>,
}

/// Scratch of one context's forward passes (llama2.c's `RunState`).
struct State {
    max_tokens: usize,
    x: Vec<f32>,
    xn: Vec<f32>,
    q: Vec<f32>,
    k: Vec<f32>,
    v: Vec<f32>,
    att: Vec<f32>,
    proj: Vec<f32>,
    gate: Vec<f32>,
    up: Vec<f32>,
    last: Vec<f32>,
}

fn hparams(file: &GgufFile, n_vocab: usize) -> Result<HParams> {
    let md = file.metadata();
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
    let freq_factors = match tensor(file, "rope_freqs.weight") {
        Ok(t) => Some(vector(file, &t, rope_dim / 2)?),
        Err(Error::MissingTensor { .. }) => None,
        Err(e) => return Err(e),
    };
    let n_layer = u("block_count")?;
    if n_layer == 0 {
        return Err(Error::InvalidArgument(
            "llama.block_count is 0: the model has no layers".into(),
        ));
    }
    let rms_eps = md.get_f32("llama.attention.layer_norm_rms_epsilon")?;
    if !(rms_eps.is_finite() && rms_eps > 0.0) {
        return Err(Error::InvalidArgument(format!(
            "llama.attention.layer_norm_rms_epsilon is {rms_eps}: it must be a positive number"
        )));
    }
    let base = md.get_f32("llama.rope.freq_base").unwrap_or(10000.0);
    if !(base.is_finite() && base > 0.0 && freq_scale.is_finite() && freq_scale > 0.0) {
        return Err(Error::InvalidArgument(format!(
            "rope base {base} and scale {freq_scale} must be positive numbers"
        )));
    }
    Ok(HParams {
        n_layer,
        n_embd,
        n_head,
        n_head_kv,
        n_ff: u("feed_forward_length")?,
        n_vocab,
        head_dim,
        rms_eps,
        n_ctx_train: u("context_length")?,
        rope: Rope {
            kind: RopeKind::Normal,
            head_dim,
            dim: rope_dim,
            base,
            freq_scale,
            freq_factors,
        },
    })
}

/// Binds the weights of `file` by name on `device`; `progress` hears the
/// fraction of weight bytes done and stops the load (an error) by
/// returning false.
pub(crate) fn load(
    file: &Arc<GgufFile>,
    device: &dyn Device,
    progress: Option<Progress>,
) -> Result<Box<dyn Architecture>> {
    let embd = tensor(file, "token_embd.weight")?;
    let h = hparams(file, embd.rows)?;
    let (d, kv_w) = (h.n_embd, h.n_head_kv * h.head_dim);
    let embd = shaped(embd, h.n_vocab, d)?;
    let mut steps = LoadSteps::new(file, progress)?;
    let bind = |name: &str, rows: usize, cols: usize| -> Result<Matrix> {
        matrix(device, file, &shaped(tensor(file, name)?, rows, cols)?)
    };
    let mut layers = Vec::new();
    for i in 0..h.n_layer {
        let name = |n: &str| format!("blk.{i}.{n}.weight");
        let layer = Layer {
            attn_norm: vector(file, &tensor(file, &name("attn_norm"))?, d)?,
            wq: bind(&name("attn_q"), d, d)?,
            wk: bind(&name("attn_k"), kv_w, d)?,
            wv: bind(&name("attn_v"), kv_w, d)?,
            wo: bind(&name("attn_output"), d, d)?,
            ffn_norm: vector(file, &tensor(file, &name("ffn_norm"))?, d)?,
            gate: bind(&name("ffn_gate"), h.n_ff, d)?,
            up: bind(&name("ffn_up"), h.n_ff, d)?,
            down: bind(&name("ffn_down"), d, h.n_ff)?,
        };
        let bytes: usize = [
            &layer.wq,
            &layer.wk,
            &layer.wv,
            &layer.wo,
            &layer.gate,
            &layer.up,
            &layer.down,
        ]
        .iter()
        .map(|m| m.size_bytes())
        .sum::<usize>()
            + 2 * d * 4;
        layers.push(layer);
        steps.step(bytes)?;
    }
    let output = match tensor(file, "output.weight") {
        Ok(t) => Some(matrix(device, file, &shaped(t, h.n_vocab, d)?)?),
        Err(Error::MissingTensor { .. }) => {
            // Tied output: the token embedding, read in place (llama.cpp
            // does not repack the input embedding either).
            if !device.supports_op(Op::MulMat(embd.dtype)) {
                return Err(Error::InvalidArgument(format!(
                    "tensor 'token_embd.weight' is {} and serves as the output: the device has no matrix product for it",
                    embd.dtype
                )));
            }
            None
        }
        Err(e) => return Err(e),
    };
    let output_norm = vector(file, &tensor(file, "output_norm.weight")?, d)?;
    let token_embd = table(device, file, &embd)?;
    steps.finish()?;
    Ok(Box::new(Llama {
        hparams: h,
        token_embd,
        output_norm,
        output,
        layers,
    }))
}

impl Architecture for Llama {
    fn name(&self) -> &'static str {
        "llama"
    }

    fn dims(&self) -> Dims {
        let h = &self.hparams;
        Dims {
            n_embd: h.n_embd,
            n_layer: h.n_layer,
            n_vocab: h.n_vocab,
            n_ctx_train: h.n_ctx_train,
        }
    }

    fn kv_layout(&self) -> Option<KvLayout> {
        let h = &self.hparams;
        Some(KvLayout {
            n_layer: h.n_layer,
            width: h.n_head_kv * h.head_dim,
            head_dim: h.head_dim,
        })
    }

    fn new_state(&self, max_tokens: usize) -> Result<Box<dyn Any + Send>> {
        let h = &self.hparams;
        let n = max_tokens;
        let buf = |width: usize| super::scratch(n, width);
        let kv_w = h.n_head_kv * h.head_dim;
        Ok(Box::new(State {
            max_tokens,
            x: buf(h.n_embd)?,
            xn: buf(h.n_embd)?,
            q: buf(h.n_embd)?,
            k: buf(kv_w)?,
            v: buf(kv_w)?,
            att: buf(h.n_embd)?,
            proj: buf(h.n_embd)?,
            gate: buf(h.n_ff)?,
            up: buf(h.n_ff)?,
            last: buf(h.n_embd)?,
        }))
    }

    fn decode(
        &self,
        be: &mut dyn Backend,
        kv: &mut KvCache,
        ub: &MicroBatch,
        state: &mut dyn Any,
        out: &mut Vec<f32>,
    ) -> Result<()> {
        let h = &self.hparams;
        let s: &mut State = state_of(state, self.name())?;
        let n = ub.tokens.len();
        if n > s.max_tokens {
            return Err(Error::InvalidArgument(format!(
                "a micro-batch of {n} tokens, more than the {} this context was made for",
                s.max_tokens
            )));
        }
        let (d, kv_w, ff) = (h.n_embd, h.n_head_kv * h.head_dim, h.n_ff);
        let x = &mut s.x[..n * d];
        let xn = &mut s.xn[..n * d];
        let q = &mut s.q[..n * d];
        let k = &mut s.k[..n * kv_w];
        let v = &mut s.v[..n * kv_w];
        let att = &mut s.att[..n * d];
        let proj = &mut s.proj[..n * d];
        let gate = &mut s.gate[..n * ff];
        let up = &mut s.up[..n * ff];
        let scale = 1.0 / (h.head_dim as f32).sqrt();

        be.get_rows(&self.token_embd, ub.tokens, x)?;
        for (l, layer) in self.layers.iter().enumerate() {
            // Attention.
            be.rms_norm(x, &layer.attn_norm, h.rms_eps, xn)?;
            be.mul_mat(&layer.wq, xn, n, q)?;
            be.mul_mat(&layer.wk, xn, n, k)?;
            be.mul_mat(&layer.wv, xn, n, v)?;
            be.rope(&h.rope, q, ub.pos)?;
            be.rope(&h.rope, k, ub.pos)?;
            kv.store(be, l, ub.cells, k, v)?;
            kv.attend(be, l, q, h.n_head, scale, ub.pos, ub.seq, att)?;
            be.mul_mat(&layer.wo, att, n, proj)?;
            be.add(x, proj)?;
            // Feed-forward (SwiGLU).
            be.rms_norm(x, &layer.ffn_norm, h.rms_eps, xn)?;
            be.mul_mat(&layer.gate, xn, n, gate)?;
            be.mul_mat(&layer.up, xn, n, up)?;
            be.silu_mul(gate, up)?;
            be.mul_mat(&layer.down, gate, n, proj)?;
            be.add(x, proj)?;
        }
        let n_out = ub.outputs.len();
        if n_out == 0 {
            return Ok(());
        }
        let last = &mut s.last[..n_out * d];
        for (dst, &i) in last.chunks_exact_mut(d).zip(ub.outputs) {
            be.rms_norm(&x[i * d..(i + 1) * d], &self.output_norm, h.rms_eps, dst)?;
        }
        if ub.hidden {
            out.extend_from_slice(last);
            return Ok(());
        }
        let start = out.len();
        out.resize(start + n_out * h.n_vocab, 0.0);
        let output = self.output.as_ref().unwrap_or(&self.token_embd);
        be.mul_mat(output, last, n_out, &mut out[start..])
    }

    fn shift_keys(
        &self,
        be: &mut dyn Backend,
        _layer: usize,
        row: &mut [f32],
        delta: i32,
    ) -> Result<()> {
        be.rope(&self.hparams.rope, row, &[delta])
    }

    fn repacked_matrices(&self) -> usize {
        self.layers
            .iter()
            .flat_map(|l| [&l.wq, &l.wk, &l.wv, &l.wo, &l.gate, &l.up, &l.down])
            .chain(self.output.as_ref())
            .filter(|m| m.is_repacked())
            .count()
    }
}

//! The decoder-only transformer that llama, Qwen, Gemma, Granite, SmolLM and
//! Phi-3 are variations of: token embedding, then per layer a pre-norm
//! attention block (Q/K/V products, separate or fused, optional biases and
//! per-head Q/K norms, RoPE, grouped KV heads over the cache, optionally a
//! sliding window) and a pre-norm gated feed-forward block (gate and up
//! separate or fused), each optionally post-normed and scaled before its
//! residual; a final norm and the output projection. The feed-forward may
//! be a mixture of experts instead (`moe.rs`: Qwen3-MoE, Granite MoE), and
//! attention a recurrent block in some layers (`short_conv.rs`: LFM2;
//! `delta_net.rs`: Qwen3.5), whose per-sequence states the context's memory
//! keeps beside the KV cells.
//!
//! An architecture file reads its own metadata keys and tensor names and
//! says which of these parts it has (`Recipe`, per-layer `LayerSpec`); the
//! forward pass here is written once and reads like the equations. Numerics
//! follow ggml's: each op as its graph has it, in the same order.
//!
//! `hparams.rs` reads the keys and the rotation, `layers.rs` binds the
//! weights; this file holds what a family says and the forward pass.

mod delta_net;
mod hparams;
mod layers;
mod moe;
mod per_layer;
mod short_conv;

use std::any::Any;

pub(crate) use delta_net::DeltaNetSpec;
pub(crate) use hparams::{common, factors, sliding_layers, uniform, Keys, Shape};
pub(crate) use layers::load;
pub(crate) use moe::{Gating, MoeSpec};
pub(crate) use short_conv::check_len as check_taps;

use super::{state_of, Architecture, Dims, MicroBatch};
use crate::backend::{Backend, Matrix, Rope};
use crate::error::{Error, Result};
use crate::kv::{KvLayout, KvRows, Memory, RecurrentLayout};
use layers::{Ffn, GateUp, Layer, Mixing, Qkv};

/// The feed-forward's gate activation.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Activation {
    /// silu(gate) · up (SwiGLU).
    Silu,
    /// gelu_tanh(gate) · up (GeGLU, Gemma).
    GeluTanh,
}

impl Activation {
    /// `gate = act(gate) * up`.
    fn apply(self, be: &mut dyn Backend, gate: &mut [f32], up: &[f32]) -> Result<()> {
        match self {
            Activation::Silu => be.silu_mul(gate, up),
            Activation::GeluTanh => be.gelu_mul(gate, up),
        }
    }
}

/// What one architecture adds to the plain pre-norm decoder.
#[derive(Clone, Debug, PartialEq)]
pub struct Recipe {
    pub rms_eps: f32,
    pub activation: Activation,
    /// Multiplies the token embeddings (Gemma: sqrt(n_embd); Granite).
    pub embd_scale: Option<f32>,
    /// Multiplies the queries after RoPE (Gemma 3); the scores are then not
    /// scaled again.
    pub q_scale: Option<f32>,
    /// Multiplies Q·K; default 1/sqrt(head_dim).
    pub kq_scale: f32,
    /// Multiplies each block's output before its residual (Granite).
    pub residual_scale: Option<f32>,
    /// Divides the logits (Granite's logit scale).
    pub logit_divisor: Option<f32>,
    /// c · tanh(logits / c) (Gemma 2's final soft-capping).
    pub logit_softcap: Option<f32>,
    /// LongRoPE's second set of factors (Phi-3), for contexts longer than
    /// the original training length.
    pub long_rope: Option<LongRope>,
}

/// LongRoPE's long factors: a context of more than `original_ctx` positions
/// rotates with `factors` instead of the layers' own (short) ones. As in the
/// reference, the length compared is the context size rounded up to a
/// multiple of 256 (llama.cpp pads every context so).
#[derive(Clone, Debug, PartialEq)]
pub struct LongRope {
    pub original_ctx: usize,
    pub factors: Vec<f32>,
}

impl LongRope {
    /// Whether a context of `n_ctx` positions takes the long factors.
    pub fn applies(&self, n_ctx: usize) -> bool {
        n_ctx.div_ceil(256).saturating_mul(256) > self.original_ctx
    }
}

impl Recipe {
    /// A plain decoder: SwiGLU, 1/sqrt(head_dim) scores, nothing else.
    pub fn plain(rms_eps: f32, shape: &Shape) -> Recipe {
        Recipe {
            rms_eps,
            activation: Activation::Silu,
            embd_scale: None,
            q_scale: None,
            kq_scale: 1.0 / (shape.head_dim as f32).sqrt(),
            residual_scale: None,
            logit_divisor: None,
            logit_softcap: None,
            long_rope: None,
        }
    }
}

/// What mixes a layer's tokens.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Mixer {
    /// Self-attention over the KV cache.
    Attention,
    /// LFM2's gated short convolution (`Parts::short_conv` taps), with a
    /// recurrent state per sequence; the layer's RoPE and window are unused.
    ShortConv,
    /// Qwen3.5's gated DeltaNet (`Parts::delta_net`), with a recurrent state
    /// per sequence; the layer's RoPE and window are unused.
    DeltaNet,
}

/// An attention layer's heads.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Heads {
    pub n_head: usize,
    pub n_head_kv: usize,
    /// Values per head (keys and values alike).
    pub head_dim: usize,
}

impl Heads {
    /// Query values per token.
    pub fn q_width(&self) -> usize {
        self.n_head * self.head_dim
    }

    /// Key (and value) values per token.
    pub fn kv_width(&self) -> usize {
        self.n_head_kv * self.head_dim
    }
}

/// What differs from layer to layer.
#[derive(Clone, Debug, PartialEq)]
pub struct LayerSpec {
    pub mixer: Mixer,
    /// `None`: this layer does not rotate (SmolLM3's no-RoPE layers).
    pub rope: Option<Rope>,
    /// Keys at most `window - 1` positions behind the query are seen
    /// (sliding-window layers); `None`: all of them.
    pub window: Option<u32>,
    /// The layer's heads where they are not the shape's (Gemma 4's global
    /// layers have wider heads than its sliding ones).
    pub heads: Option<Heads>,
    /// The layer attends over the keys and values an earlier layer stored
    /// and stores none of its own (Gemma 4's last layers).
    pub kv_from: Option<usize>,
}

/// Which optional tensors a family's layers carry.
#[derive(Clone, Copy, Debug, Default)]
pub struct Parts {
    /// `attn_{q,k,v}.bias`, read when the file has them (Qwen2).
    pub qkv_bias: bool,
    /// `attn_{q,k}_norm.weight`: per-head RMSNorm of Q and K (Qwen3, Gemma 3).
    pub qk_norm: bool,
    /// `post_attention_norm` and `post_ffw_norm` (Gemma 2/3).
    pub post_norms: bool,
    /// Fused products where the file has them (Phi-3): `attn_qkv` (rows Q,
    /// then K, then V) for the three of attention, and a `ffn_up` of twice
    /// the feed-forward's rows (gate, then up) without `ffn_gate`.
    pub fused: bool,
    /// A mixture of experts in every layer (from layer `dense_lead` on)
    /// instead of one feed-forward (`ffn_gate_inp`, `ffn_{gate,up,down}_exps`).
    pub experts: Option<MoeSpec>,
    /// Layers before it keep a dense feed-forward (LFM2-MoE's leading ones).
    pub dense_lead: usize,
    /// The taps of the short convolutions of `Mixer::ShortConv` layers.
    pub short_conv: Option<usize>,
    /// The sizes of the gated DeltaNets of `Mixer::DeltaNet` layers.
    pub delta_net: Option<DeltaNetSpec>,
    /// Q's product also gives the gates of the attention's output (Qwen3.5).
    pub gated_q: bool,
    /// The feed-forward's norm, where it is not `ffn_norm`.
    pub ffn_norm: Option<&'static str>,
    /// The final norm's tensor, where it is not `output_norm.weight`.
    pub output_norm: Option<&'static str>,
    /// Values are RMS-normed per head without a weight, and a layer without
    /// `attn_v` takes its keys (before their norm) as values (Gemma 4).
    pub value_norm: bool,
    /// Gemma 4's per-layer inputs (`per_layer_*`, `blk.N.{inp_gate,proj,
    /// post_norm}`), where the file has them.
    pub per_layer_inputs: bool,
    /// `blk.N.layer_output_scale`, a scalar multiplying each layer's
    /// output, where the file has it (Gemma 4).
    pub output_scale: bool,
    /// What the family's releases also take in that lamina does not run
    /// (Gemma's images and audio): named in `lamina info`.
    pub text_only: Option<&'static str>,
}

/// A loaded decoder of any of the families above.
pub struct Decoder {
    name: &'static str,
    pub shape: Shape,
    pub recipe: Recipe,
    token_embd: Matrix,
    output_norm: Vec<f32>,
    /// `None`: the token embedding, read in place.
    output: Option<Matrix>,
    /// The output is the token embedding (in place, or a repacked copy).
    output_tied: bool,
    layers: Vec<Layer>,
    /// The layer of each KV cache layer (the attention layers, in order).
    kv_layers: Vec<usize>,
    /// What the recurrent layers keep per sequence, if there are any.
    recurrent: Option<RecurrentLayout>,
    /// Each layer's RoPE with LongRoPE's long factors (empty without them).
    long_ropes: Vec<Option<Rope>>,
    /// Gemma 4's per-layer inputs' embedding and projection.
    per_layer: Option<per_layer::Inputs>,
    /// `Parts::text_only`, with the file's tensors of those inputs that
    /// are left unread, if it has any.
    text_only: Option<String>,
}

/// Scratch of one context's forward passes (llama2.c's `RunState`).
struct State {
    max_tokens: usize,
    /// The context is long enough for LongRoPE's long factors.
    long_rope: bool,
    x: Vec<f32>,
    xn: Vec<f32>,
    /// Q (and K) before their per-head norm.
    raw: Vec<f32>,
    q: Vec<f32>,
    k: Vec<f32>,
    v: Vec<f32>,
    att: Vec<f32>,
    proj: Vec<f32>,
    gate: Vec<f32>,
    up: Vec<f32>,
    /// A fused product's output before it is split (empty without one).
    fused: Vec<f32>,
    last: Vec<f32>,
    /// The mixture of experts' scratch (models with experts).
    moe: Option<moe::Scratch>,
    /// A short convolution's B, C, X and gated output (empty without one).
    bcx: Vec<f32>,
    conv_y: Vec<f32>,
    /// The gated DeltaNets' scratch (models with them).
    delta_net: Option<delta_net::Scratch>,
    /// The attention's output gates (models that gate it).
    q_gate: Vec<f32>,
    /// Per-layer inputs' scratch (models with them).
    per_layer: Option<per_layer::Scratch>,
}

impl Decoder {
    /// Whether some layer mixes its tokens as `f` says.
    fn has(&self, f: impl Fn(&Mixing) -> bool) -> bool {
        self.layers.iter().any(|l| f(&l.mixing))
    }

    /// The sizes of the model's gated DeltaNets, if it has any (every one
    /// has the same).
    fn delta_net_spec(&self) -> Option<DeltaNetSpec> {
        self.layers.iter().find_map(|l| match &l.mixing {
            Mixing::DeltaNet(dn) => Some(*dn.spec()),
            _ => None,
        })
    }

    /// The largest of `f` over the layers (0 without layers).
    fn widest(&self, f: impl Fn(&Layer) -> usize) -> usize {
        self.layers.iter().map(f).max().unwrap_or(0)
    }

    /// Layer `l`'s rotation (`None`: the layer does not rotate), with
    /// LongRoPE's long factors when the context takes them.
    fn rope(&self, l: usize, long: bool) -> Option<&Rope> {
        match self.long_ropes.get(l) {
            Some(rope) if long => rope.as_ref(),
            _ => self.layers[l].spec.rope.as_ref(),
        }
    }
}

impl Architecture for Decoder {
    fn name(&self) -> &'static str {
        self.name
    }

    fn dims(&self) -> Dims {
        let s = &self.shape;
        Dims {
            n_embd: s.n_embd,
            n_layer: s.n_layer,
            n_vocab: s.n_vocab,
            n_ctx_train: s.n_ctx_train,
        }
    }

    fn kv_layout(&self) -> Option<KvLayout> {
        Some(KvLayout {
            layers: self
                .kv_layers
                .iter()
                .map(|&l| {
                    let h = self.layers[l].heads;
                    KvRows {
                        width: h.kv_width(),
                        head_dim: h.head_dim,
                    }
                })
                .collect(),
        })
    }

    fn recurrent_layout(&self) -> Option<RecurrentLayout> {
        self.recurrent
    }

    fn new_state(&self, max_tokens: usize, n_ctx: usize) -> Result<Box<dyn Any + Send>> {
        let s = &self.shape;
        let buf = |width: usize| super::scratch(max_tokens, width);
        let qw = self.widest(|l| l.heads.q_width());
        let kvw = self.widest(|l| l.heads.kv_width());
        let ff = self.widest(|l| l.n_ff);
        Ok(Box::new(State {
            max_tokens,
            long_rope: self
                .recipe
                .long_rope
                .as_ref()
                .is_some_and(|l| l.applies(n_ctx)),
            x: buf(s.n_embd)?,
            xn: buf(s.n_embd)?,
            raw: buf(qw)?,
            q: buf(qw)?,
            k: buf(kvw)?,
            v: buf(kvw)?,
            att: buf(qw)?,
            proj: buf(s.n_embd)?,
            gate: buf(ff)?,
            up: buf(ff)?,
            fused: buf(self.widest(|l| l.fused_width()))?,
            last: buf(s.n_embd)?,
            moe: match self.layers.iter().find_map(|l| match &l.ffn {
                Ffn::Experts(e) => Some(*e.spec()),
                Ffn::Dense { .. } => None,
            }) {
                Some(spec) => Some(moe::Scratch::new(&spec, max_tokens, s.n_embd)?),
                None => None,
            },
            bcx: buf(if self.has(|m| matches!(m, Mixing::ShortConv(_))) {
                3 * s.n_embd
            } else {
                0
            })?,
            conv_y: buf(if self.has(|m| matches!(m, Mixing::ShortConv(_))) {
                s.n_embd
            } else {
                0
            })?,
            delta_net: match self.delta_net_spec() {
                Some(spec) => Some(delta_net::Scratch::new(&spec, max_tokens)?),
                None => None,
            },
            q_gate: buf(
                if self.has(|m| matches!(m, Mixing::Attention(a) if a.gated)) {
                    qw
                } else {
                    0
                },
            )?,
            per_layer: match &self.per_layer {
                Some(p) => Some(p.scratch(max_tokens, s.n_layer)?),
                None => None,
            },
        }))
    }

    fn decode(
        &self,
        be: &mut dyn Backend,
        memory: &mut Memory,
        ub: &MicroBatch,
        state: &mut dyn Any,
        out: &mut Vec<f32>,
    ) -> Result<()> {
        let (sh, r) = (&self.shape, &self.recipe);
        let s: &mut State = state_of(state, self.name())?;
        let n = ub.tokens.len();
        if n > s.max_tokens {
            return Err(Error::InvalidArgument(format!(
                "a micro-batch of {n} tokens, more than the {} this context was made for",
                s.max_tokens
            )));
        }
        let d = sh.n_embd;
        let x = &mut s.x[..n * d];
        let xn = &mut s.xn[..n * d];
        let proj = &mut s.proj[..n * d];
        let fused = &mut s.fused[..];
        let kq_scale = if r.q_scale.is_some() { 1.0 } else { r.kq_scale };

        be.get_rows(&self.token_embd, ub.tokens, x)?;
        if let Some(c) = r.embd_scale {
            be.scale(x, c)?;
        }
        if let (Some(inputs), Some(scratch)) = (&self.per_layer, s.per_layer.as_mut()) {
            inputs.prepare(be, ub.tokens, x, r.rms_eps, scratch)?;
        }
        for (l, layer) in self.layers.iter().enumerate() {
            // Attention, or a recurrent block.
            be.rms_norm(x, &layer.attn_norm, r.rms_eps, xn)?;
            match &layer.mixing {
                Mixing::Attention(a) => {
                    let h = layer.heads;
                    let (qw, kvw, hd) = (h.q_width(), h.kv_width(), h.head_dim);
                    let raw = &mut s.raw[..n * qw];
                    let q = &mut s.q[..n * qw];
                    let k = &mut s.k[..n * kvw];
                    let v = &mut s.v[..n * kvw];
                    let att = &mut s.att[..n * qw];
                    match &a.qkv {
                        Qkv::Separate([wq, wk, wv]) if a.gated => {
                            // Each head's queries, then its gates.
                            let all = &mut fused[..n * 2 * qw];
                            be.mul_mats(&[wq, wk, wv], xn, n, &mut [&mut *all, k, v])?;
                            let gates = &mut s.q_gate[..n * qw];
                            for ((pair, qh), gh) in all
                                .chunks_exact(2 * hd)
                                .zip(q.chunks_exact_mut(hd))
                                .zip(gates.chunks_exact_mut(hd))
                            {
                                qh.copy_from_slice(&pair[..hd]);
                                gh.copy_from_slice(&pair[hd..]);
                            }
                        }
                        Qkv::Separate([wq, wk, wv]) => {
                            be.mul_mats(&[wq, wk, wv], xn, n, &mut [q, k, v])?;
                        }
                        Qkv::KeysAsValues([wq, wk]) => {
                            be.mul_mats(&[wq, wk], xn, n, &mut [q, k])?;
                            v.copy_from_slice(k);
                        }
                        Qkv::QueryOnly(wq) => be.mul_mat(wq, xn, n, q)?,
                        Qkv::Fused(w) => {
                            let all = &mut fused[..n * (qw + 2 * kvw)];
                            be.mul_mat(w, xn, n, all)?;
                            for (t, row) in all.chunks_exact(qw + 2 * kvw).enumerate() {
                                let (rq, rest) = row.split_at(qw);
                                let (rk, rv) = rest.split_at(kvw);
                                q[t * qw..(t + 1) * qw].copy_from_slice(rq);
                                k[t * kvw..(t + 1) * kvw].copy_from_slice(rk);
                                v[t * kvw..(t + 1) * kvw].copy_from_slice(rv);
                            }
                        }
                    }
                    // Biases right after the products, as llama.cpp's build_qkv.
                    if let Some([bq, bk, bv]) = &a.bias {
                        be.add_bias(q, bq)?;
                        be.add_bias(k, bk)?;
                        be.add_bias(v, bv)?;
                    }
                    if let Some([qn, kn]) = &a.qk_norm {
                        raw.copy_from_slice(q);
                        be.rms_norm(raw, qn, r.rms_eps, q)?;
                        if a.stores {
                            let raw_k = &mut raw[..n * kvw];
                            raw_k.copy_from_slice(k);
                            be.rms_norm(raw_k, kn, r.rms_eps, k)?;
                        }
                    }
                    if let (Some(ones), true) = (&a.value_norm, a.stores) {
                        let raw_v = &mut raw[..n * kvw];
                        raw_v.copy_from_slice(v);
                        be.rms_norm(raw_v, ones, r.rms_eps, v)?;
                    }
                    if let Some(rope) = self.rope(l, s.long_rope) {
                        be.rope(rope, q, ub.pos)?;
                        if a.stores {
                            be.rope(rope, k, ub.pos)?;
                        }
                    }
                    if let Some(c) = r.q_scale {
                        be.scale(q, c)?;
                    }
                    if a.stores {
                        memory.kv.store(be, a.kv_layer, ub.cells, k, v)?;
                    }
                    memory.kv.attend(
                        be,
                        a.kv_layer,
                        q,
                        h.n_head,
                        kq_scale,
                        layer.spec.window,
                        ub.pos,
                        ub.seq,
                        att,
                    )?;
                    if a.gated {
                        let gates = &mut s.q_gate[..n * qw];
                        be.sigmoid(gates)?;
                        be.mul(att, gates)?;
                    }
                    be.mul_mat(&a.wo, att, n, proj)?;
                }
                Mixing::ShortConv(c) => {
                    let bcx = &mut s.bcx[..n * 3 * d];
                    let y = &mut s.conv_y[..n * d];
                    c.forward(be, xn, ub, &mut memory.recurrent, bcx, y, proj)?;
                }
                Mixing::DeltaNet(dn) => {
                    let scratch = s.delta_net.as_mut().ok_or_else(|| {
                        Error::InvalidArgument("a state without DeltaNet's scratch".into())
                    })?;
                    dn.forward(be, xn, ub, &mut memory.recurrent, r.rms_eps, scratch, proj)?;
                }
            }
            residual(be, x, proj, xn, layer.post_attn_norm.as_deref(), r)?;
            // Feed-forward.
            be.rms_norm(x, &layer.ffn_norm, r.rms_eps, xn)?;
            match &layer.ffn {
                Ffn::Dense { gate_up, down } => {
                    let ff = layer.n_ff;
                    let gate = &mut s.gate[..n * ff];
                    let up = &mut s.up[..n * ff];
                    match gate_up {
                        GateUp::Separate(wg, wu) => {
                            be.mul_mats(&[wg, wu], xn, n, &mut [gate, up])?;
                            r.activation.apply(be, gate, up)?;
                        }
                        GateUp::Fused(w) => {
                            let all = &mut fused[..n * 2 * ff];
                            be.mul_mat(w, xn, n, all)?;
                            for (t, row) in all.chunks_exact_mut(2 * ff).enumerate() {
                                let (g, u) = row.split_at_mut(ff);
                                r.activation.apply(be, g, u)?;
                                gate[t * ff..(t + 1) * ff].copy_from_slice(g);
                            }
                        }
                    }
                    be.mul_mat(down, gate, n, proj)?;
                }
                Ffn::Experts(experts) => {
                    let scratch = s.moe.as_mut().ok_or_else(|| {
                        Error::InvalidArgument("a state without the experts' scratch".into())
                    })?;
                    experts.forward(be, xn, n, proj, scratch)?;
                }
            }
            residual(be, x, proj, xn, layer.post_ffn_norm.as_deref(), r)?;
            if let (Some(input), Some(scratch)) = (&layer.per_layer, s.per_layer.as_mut()) {
                input.forward(be, l, x, n, r.rms_eps, scratch)?;
            }
            if let Some(c) = layer.output_scale {
                be.scale(x, c)?;
            }
        }
        let n_out = ub.outputs.len();
        if n_out == 0 {
            return Ok(());
        }
        let last = &mut s.last[..n_out * d];
        for (dst, &i) in last.chunks_exact_mut(d).zip(ub.outputs) {
            be.rms_norm(&x[i * d..(i + 1) * d], &self.output_norm, r.rms_eps, dst)?;
        }
        if ub.hidden {
            out.extend_from_slice(last);
            return Ok(());
        }
        let start = out.len();
        out.resize(start + n_out * sh.n_vocab, 0.0);
        let logits = &mut out[start..];
        let output = self.output.as_ref().unwrap_or(&self.token_embd);
        be.mul_mat(output, last, n_out, logits)?;
        if let Some(c) = r.logit_divisor {
            be.scale(logits, 1.0 / c)?;
        }
        if let Some(c) = r.logit_softcap {
            be.scale(logits, 1.0 / c)?;
            be.tanh(logits)?;
            be.scale(logits, c)?;
        }
        Ok(())
    }

    fn shift_keys(
        &self,
        be: &mut dyn Backend,
        state: &dyn Any,
        layer: usize,
        row: &mut [f32],
        delta: i32,
    ) -> Result<()> {
        let s: &State = state
            .downcast_ref()
            .ok_or_else(|| Error::InvalidArgument(format!("not a {} state", self.name)))?;
        // `layer` counts the KV cache's layers: the attention layers.
        let Some(&layer) = self.kv_layers.get(layer) else {
            return Err(Error::InvalidArgument(format!("no layer {layer} to shift")));
        };
        match self.rope(layer, s.long_rope) {
            Some(rope) => be.rope(rope, row, &[delta]),
            // Keys that were never rotated do not move.
            None => Ok(()),
        }
    }

    fn hyperparameters(&self) -> Vec<(&'static str, String)> {
        let (sh, r) = (&self.shape, &self.recipe);
        let mut h = vec![
            ("layers", sh.n_layer.to_string()),
            ("embedding", sh.n_embd.to_string()),
            (
                "attention",
                if sh.kv_heads_differ() {
                    format!(
                        "{} heads, KV heads per layer {:?}, of {}",
                        sh.n_head, sh.kv_layers, sh.head_dim
                    )
                } else {
                    format!(
                        "{} heads, {} KV heads of {}",
                        sh.n_head, sh.n_head_kv, sh.head_dim
                    )
                },
            ),
            ("feed-forward", format!("{} ({:?})", sh.n_ff, r.activation)),
            ("vocabulary", sh.n_vocab.to_string()),
            ("trained context", sh.n_ctx_train.to_string()),
            ("rms epsilon", r.rms_eps.to_string()),
            (
                "output",
                if !self.output_tied {
                    "own matrix"
                } else {
                    "tied to the token embedding"
                }
                .into(),
            ),
        ];
        // The distinct per-layer settings, with the layers that use each.
        let mut kinds: Vec<(&LayerSpec, Vec<usize>)> = Vec::new();
        for (i, l) in self.layers.iter().enumerate() {
            match kinds.iter_mut().find(|(s, _)| **s == l.spec) {
                Some((_, ls)) => ls.push(i),
                None => kinds.push((&l.spec, vec![i])),
            }
        }
        for (spec, layers) in kinds {
            let rope = match &spec.rope {
                Some(r) => format!(
                    "rope {:?} over {} dims, base {}, scale {}{}",
                    r.kind,
                    r.dim,
                    r.base,
                    r.freq_scale,
                    if r.freq_factors.is_some() {
                        ", rope_freqs factors"
                    } else {
                        ""
                    }
                ),
                None => "no rope".into(),
            };
            let window = spec
                .window
                .map_or("full attention".into(), |w| format!("sliding window {w}"));
            let which = if layers.len() == self.layers.len() {
                "all layers".to_string()
            } else {
                format!("layers {layers:?}")
            };
            let kind = match (spec.mixer, self.recurrent, self.delta_net_spec()) {
                (Mixer::ShortConv, Some(rl), _) => format!(
                    "short convolution of {} taps (a recurrent state per sequence)",
                    rl.width / sh.n_embd + 1
                ),
                (Mixer::DeltaNet, _, Some(dn)) => format!(
                    "gated DeltaNet, {} key heads and {} value heads of {}, convolution of {} taps (a recurrent state per sequence)",
                    dn.n_head_k, dn.n_head_v, dn.dim, dn.taps
                ),
                _ => {
                    let heads = spec.heads.map_or(String::new(), |h| {
                        format!(
                            "; {} heads, {} KV heads of {}",
                            h.n_head, h.n_head_kv, h.head_dim
                        )
                    });
                    let shared = spec.kv_from.map_or(String::new(), |from| {
                        format!("; the keys and values of layer {from}")
                    });
                    format!("{rope}; {window}{heads}{shared}")
                }
            };
            h.push(("layer kind", format!("{kind}: {which}")));
        }
        let scales = [
            ("embedding scale", r.embd_scale),
            ("query scale", r.q_scale),
            ("residual scale", r.residual_scale),
            ("logit divisor", r.logit_divisor),
            ("logit soft-cap", r.logit_softcap),
        ];
        h.extend(
            scales
                .into_iter()
                .filter_map(|(k, v)| v.map(|v| (k, v.to_string()))),
        );
        if r.q_scale.is_none() {
            h.push(("score scale", r.kq_scale.to_string()));
        }
        let first_experts = self
            .layers
            .iter()
            .enumerate()
            .find_map(|(i, l)| match &l.ffn {
                Ffn::Experts(e) => Some((i, e)),
                Ffn::Dense { .. } => None,
            });
        if let Some((first, e)) = first_experts {
            let m = e.spec();
            h.push((
                "experts",
                format!(
                    "{}{} used of {}, feed-forward {} each, {} gating{}{}{}",
                    if first > 0 {
                        format!("from layer {first}: ")
                    } else {
                        String::new()
                    },
                    m.n_used,
                    m.n_expert,
                    m.n_ff,
                    match m.gating {
                        Gating::Softmax => "softmax",
                        Gating::Sigmoid => "sigmoid",
                    },
                    if m.selection_bias {
                        ", a selection bias"
                    } else {
                        ""
                    },
                    if m.norm_weights {
                        ", weights renormalised"
                    } else {
                        ""
                    },
                    m.weights_scale
                        .map_or(String::new(), |c| format!(", weights times {c}"))
                ),
            ));
        }
        if let Some(p) = &self.per_layer {
            h.push(("per-layer inputs", p.describe()));
        }
        if self.layers.iter().any(|l| l.output_scale.is_some()) {
            h.push(("layer output scales", "blk.N.layer_output_scale".into()));
        }
        if self.has(|m| matches!(m, Mixing::Attention(a) if a.value_norm.is_some())) {
            h.push((
                "values",
                "RMS-normed per head; keys serve as values where a layer has no attn_v".into(),
            ));
        }
        if let Some(note) = &self.text_only {
            h.push(("inputs", note.clone()));
        }
        if let Some(long) = &r.long_rope {
            h.push((
                "long rope",
                format!(
                    "LongRoPE's long factors for contexts over {} positions",
                    long.original_ctx
                ),
            ));
        }
        h
    }

    fn repacked_matrices(&self) -> usize {
        self.layers
            .iter()
            .flat_map(|l| l.matrices())
            .chain(self.output.as_ref())
            .chain(self.per_layer.iter().map(|p| p.matrix()))
            .filter(|m| m.is_repacked())
            .count()
    }
}

/// `x += block`, the block's output first post-normed (into `tmp`) and
/// scaled where the recipe says.
fn residual(
    be: &mut dyn Backend,
    x: &mut [f32],
    block: &mut [f32],
    tmp: &mut [f32],
    post_norm: Option<&[f32]>,
    r: &Recipe,
) -> Result<()> {
    let out: &mut [f32] = match post_norm {
        Some(w) => {
            be.rms_norm(block, w, r.rms_eps, tmp)?;
            tmp
        }
        None => block,
    };
    if let Some(c) = r.residual_scale {
        be.scale(out, c)?;
    }
    be.add(x, out)
}

#[cfg(test)]
mod tests {
    use super::LongRope;
    #[cfg(target_family = "wasm")]
    use wasm_bindgen_test::wasm_bindgen_test as test;

    /// The reference's choice: the context size rounded up to 256 against
    /// the original length.
    #[test]
    fn long_rope_follows_the_padded_context_size() {
        let long = LongRope {
            original_ctx: 4096,
            factors: vec![],
        };
        assert!(!long.applies(4096));
        assert!(!long.applies(3841), "padded to 4096");
        assert!(long.applies(4097));
        let odd = LongRope {
            original_ctx: 4000,
            factors: vec![],
        };
        assert!(odd.applies(3900), "padded to 4096");
        assert!(!odd.applies(3840));
    }
}

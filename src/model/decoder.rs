//! The decoder-only transformer that llama, Qwen, Gemma, Granite and SmolLM
//! are variations of: token embedding, then per layer a pre-norm attention
//! block (Q/K/V products, optional biases and per-head Q/K norms, RoPE,
//! grouped KV heads over the cache, optionally a sliding window) and a
//! pre-norm gated feed-forward block, each optionally post-normed and
//! scaled before its residual; a final norm and the output projection.
//!
//! An architecture file reads its own metadata keys and tensor names and
//! says which of these parts it has (`Recipe`, per-layer `LayerSpec`); the
//! forward pass here is written once and reads like the equations. Numerics
//! follow ggml's: each op as its graph has it, in the same order.

use std::any::Any;
use std::sync::Arc;

use super::weights::{matrix, shaped, table, tensor, vector, LoadSteps, Progress, Tensor};
use super::{state_of, Architecture, Dims, MicroBatch};
use crate::backend::{Backend, Device, Matrix, Op, Rope, RopeKind};
use crate::error::{Error, Result};
use crate::gguf::{GgufFile, Metadata};
use crate::kv::{KvCache, KvLayout};

/// Reads `{arch}.{key}` metadata with the checks every architecture needs.
pub(crate) struct Keys<'a> {
    md: &'a Metadata,
    arch: &'static str,
}

impl<'a> Keys<'a> {
    pub fn new(file: &'a GgufFile, arch: &'static str) -> Keys<'a> {
        Keys {
            md: file.metadata(),
            arch,
        }
    }

    fn name(&self, key: &str) -> String {
        format!("{}.{key}", self.arch)
    }

    /// The raw value of a key, if the file has it.
    pub fn value(&self, key: &str) -> Option<&'a crate::gguf::Value> {
        self.md.get(&self.name(key))
    }

    /// A count or size the file must have.
    pub fn usize(&self, key: &str) -> Result<usize> {
        Ok(self.md.get_u32(&self.name(key))? as usize)
    }

    /// A count or size the file may leave out (a key of another type is an
    /// error, not a default).
    pub fn opt_usize(&self, key: &str) -> Result<Option<usize>> {
        if self.md.contains(&self.name(key)) {
            self.usize(key).map(Some)
        } else {
            Ok(None)
        }
    }

    pub fn opt_f32(&self, key: &str) -> Result<Option<f32>> {
        let name = self.name(key);
        if self.md.contains(&name) {
            self.md.get_f32(&name).map(Some)
        } else {
            Ok(None)
        }
    }

    pub fn opt_str(&self, key: &str) -> Result<Option<&'a str>> {
        let name = self.name(key);
        if self.md.contains(&name) {
            self.md.get_str(&name).map(Some)
        } else {
            Ok(None)
        }
    }

    /// A number that must be finite and above zero (an epsilon, a base, a
    /// multiplier), `default` when the file has none.
    pub fn positive(&self, key: &str, default: Option<f32>) -> Result<f32> {
        let v = match (self.opt_f32(key)?, default) {
            (Some(v), _) | (None, Some(v)) => v,
            (None, None) => {
                return Err(Error::MissingKey {
                    key: self.name(key),
                })
            }
        };
        if v.is_finite() && v > 0.0 {
            Ok(v)
        } else {
            Err(Error::InvalidArgument(format!(
                "{} is {v}: it must be a positive number",
                self.name(key)
            )))
        }
    }
}

/// The sizes of a decoder, checked against each other.
#[derive(Clone, Debug, PartialEq)]
pub struct Shape {
    pub n_layer: usize,
    pub n_embd: usize,
    pub n_head: usize,
    pub n_head_kv: usize,
    /// Values per attention head (keys and values alike).
    pub head_dim: usize,
    pub n_ff: usize,
    pub n_vocab: usize,
    pub n_ctx_train: usize,
}

impl Shape {
    /// The sizes every decoder's keys give: `block_count`,
    /// `embedding_length`, the head counts, `attention.key_length` (else the
    /// embedding over the heads), `feed_forward_length`, `context_length`.
    pub(crate) fn read(keys: &Keys, n_vocab: usize) -> Result<Shape> {
        let n_layer = keys.usize("block_count")?;
        if n_layer == 0 {
            return Err(Error::InvalidArgument(format!(
                "{} is 0: the model has no layers",
                keys.name("block_count")
            )));
        }
        let n_embd = keys.usize("embedding_length")?;
        let n_head = keys.usize("attention.head_count")?;
        let n_head_kv = keys.opt_usize("attention.head_count_kv")?.unwrap_or(n_head);
        if n_head == 0 || n_head_kv == 0 || n_head % n_head_kv != 0 {
            return Err(Error::InvalidArgument(format!(
                "inconsistent attention shape: {n_head} heads over {n_head_kv} KV heads"
            )));
        }
        let head_dim = match keys.opt_usize("attention.key_length")? {
            Some(k) => k,
            None if n_embd % n_head == 0 => n_embd / n_head,
            None => {
                return Err(Error::InvalidArgument(format!(
                    "an embedding of {n_embd} does not split into {n_head} heads"
                )))
            }
        };
        let value_dim = keys
            .opt_usize("attention.value_length")?
            .unwrap_or(head_dim);
        if head_dim == 0 || value_dim != head_dim {
            return Err(Error::InvalidArgument(format!(
                "heads of {head_dim} keys and {value_dim} values are not supported"
            )));
        }
        let n_ff = keys.usize("feed_forward_length")?;
        let n_ctx_train = keys.usize("context_length")?;
        // Sizes that overflow here would overflow every buffer later.
        let too_big = |v: usize| v > (1 << 24);
        if [n_layer, n_embd, n_head, head_dim, n_ff]
            .into_iter()
            .any(too_big)
        {
            return Err(Error::InvalidArgument(format!(
                "model sizes out of range: {n_layer} layers, {n_embd} wide, {n_head} heads of {head_dim}, feed-forward {n_ff}"
            )));
        }
        Ok(Shape {
            n_layer,
            n_embd,
            n_head,
            n_head_kv,
            head_dim,
            n_ff,
            n_vocab,
            n_ctx_train,
        })
    }

    /// Query values per token.
    pub fn q_width(&self) -> usize {
        self.n_head * self.head_dim
    }

    /// Key (and value) values per token.
    pub fn kv_width(&self) -> usize {
        self.n_head_kv * self.head_dim
    }
}

/// The feed-forward's gate activation.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Activation {
    /// silu(gate) · up (SwiGLU).
    Silu,
    /// gelu_tanh(gate) · up (GeGLU, Gemma).
    GeluTanh,
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
        }
    }
}

/// What differs from layer to layer.
#[derive(Clone, Debug, PartialEq)]
pub struct LayerSpec {
    /// `None`: this layer does not rotate (SmolLM3's no-RoPE layers).
    pub rope: Option<Rope>,
    /// Keys at most `window - 1` positions behind the query are seen
    /// (sliding-window layers); `None`: all of them.
    pub window: Option<u32>,
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
}

struct Layer {
    spec: LayerSpec,
    attn_norm: Vec<f32>,
    wq: Matrix,
    wk: Matrix,
    wv: Matrix,
    bias: Option<[Vec<f32>; 3]>,
    qk_norm: Option<[Vec<f32>; 2]>,
    wo: Matrix,
    post_attn_norm: Option<Vec<f32>>,
    ffn_norm: Vec<f32>,
    gate: Matrix,
    up: Matrix,
    down: Matrix,
    post_ffn_norm: Option<Vec<f32>>,
}

impl Layer {
    fn matrices(&self) -> [&Matrix; 7] {
        [
            &self.wq, &self.wk, &self.wv, &self.wo, &self.gate, &self.up, &self.down,
        ]
    }
}

/// A loaded decoder of any of the families above.
pub struct Decoder {
    name: &'static str,
    pub shape: Shape,
    pub recipe: Recipe,
    token_embd: Matrix,
    output_norm: Vec<f32>,
    /// `None`: tied to the token embedding.
    output: Option<Matrix>,
    layers: Vec<Layer>,
}

/// Loads a decoder from `file`: `spec(i)` gives layer `i`'s RoPE and window.
#[allow(clippy::too_many_arguments)]
pub(crate) fn load(
    name: &'static str,
    file: &Arc<GgufFile>,
    device: &dyn Device,
    progress: Option<Progress>,
    shape: Shape,
    recipe: Recipe,
    parts: Parts,
    spec: &dyn Fn(usize) -> LayerSpec,
) -> Result<Box<dyn Architecture>> {
    let (d, qw, kvw, ff) = (shape.n_embd, shape.q_width(), shape.kv_width(), shape.n_ff);
    let hd = shape.head_dim;
    let embd = shaped(tensor(file, "token_embd.weight")?, shape.n_vocab, d)?;
    let mut steps = LoadSteps::new(file, progress)?;
    let bind = |name: &str, rows: usize, cols: usize| -> Result<Matrix> {
        matrix(device, file, &shaped(tensor(file, name)?, rows, cols)?)
    };
    let vec_of =
        |name: &str, len: usize| -> Result<Vec<f32>> { vector(file, &tensor(file, name)?, len) };
    let mut layers = Vec::new();
    layers
        .try_reserve_exact(shape.n_layer)
        .map_err(|_| Error::InvalidArgument(format!("{} layers are too many", shape.n_layer)))?;
    for i in 0..shape.n_layer {
        let w = |n: &str| format!("blk.{i}.{n}.weight");
        let b = |n: &str| format!("blk.{i}.{n}.bias");
        let bias = if parts.qkv_bias && optional(file, &b("attn_q"))?.is_some() {
            Some([
                vec_of(&b("attn_q"), qw)?,
                vec_of(&b("attn_k"), kvw)?,
                vec_of(&b("attn_v"), kvw)?,
            ])
        } else {
            None
        };
        let qk_norm = if parts.qk_norm {
            Some([
                vec_of(&w("attn_q_norm"), hd)?,
                vec_of(&w("attn_k_norm"), hd)?,
            ])
        } else {
            None
        };
        let (post_attn_norm, post_ffn_norm) = if parts.post_norms {
            (
                Some(vec_of(&w("post_attention_norm"), d)?),
                Some(vec_of(&w("post_ffw_norm"), d)?),
            )
        } else {
            (None, None)
        };
        let layer = Layer {
            spec: spec(i),
            attn_norm: vec_of(&w("attn_norm"), d)?,
            wq: bind(&w("attn_q"), qw, d)?,
            wk: bind(&w("attn_k"), kvw, d)?,
            wv: bind(&w("attn_v"), kvw, d)?,
            bias,
            qk_norm,
            wo: bind(&w("attn_output"), d, qw)?,
            post_attn_norm,
            ffn_norm: vec_of(&w("ffn_norm"), d)?,
            gate: bind(&w("ffn_gate"), ff, d)?,
            up: bind(&w("ffn_up"), ff, d)?,
            down: bind(&w("ffn_down"), d, ff)?,
            post_ffn_norm,
        };
        steps.step(layer.matrices().iter().map(|m| m.size_bytes()).sum())?;
        layers.push(layer);
    }
    let output = match optional(file, "output.weight")? {
        Some(t) => Some(matrix(device, file, &shaped(t, shape.n_vocab, d)?)?),
        None => {
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
    };
    let output_norm = vec_of("output_norm.weight", d)?;
    let token_embd = table(device, file, &embd)?;
    steps.finish()?;
    Ok(Box::new(Decoder {
        name,
        shape,
        recipe,
        token_embd,
        output_norm,
        output,
        layers,
    }))
}

/// The tensor `name` if the file has it.
fn optional(file: &GgufFile, name: &str) -> Result<Option<Tensor>> {
    match tensor(file, name) {
        Ok(t) => Ok(Some(t)),
        Err(Error::MissingTensor { .. }) => Ok(None),
        Err(e) => Err(e),
    }
}

/// What every family reads first: its keys, the shape (the vocabulary from
/// the token embedding's rows), the plain recipe with the file's RMS
/// epsilon, and the rotation its layers use.
pub(crate) fn common<'a>(
    file: &'a GgufFile,
    arch: &'static str,
    kind: RopeKind,
) -> Result<(Keys<'a>, Shape, Recipe, Rope)> {
    let keys = Keys::new(file, arch);
    let shape = Shape::read(&keys, tensor(file, "token_embd.weight")?.rows)?;
    let recipe = Recipe::plain(
        keys.positive("attention.layer_norm_rms_epsilon", None)?,
        &shape,
    );
    let rope = rope(&keys, file, kind, shape.head_dim)?;
    Ok((keys, shape, recipe, rope))
}

/// Every layer alike: rotated by `rope`, seeing every position.
pub(crate) fn uniform(rope: &Rope) -> impl Fn(usize) -> LayerSpec + '_ {
    move |_| LayerSpec {
        rope: Some(rope.clone()),
        window: None,
    }
}

/// The rotation of a family's layers from `{arch}.rope.*`: the rotated
/// dimensions (default the whole head), the base (default 10000), linear
/// position scaling, and the per-pair factors of `rope_freqs.weight`.
pub(crate) fn rope(keys: &Keys, file: &GgufFile, kind: RopeKind, head_dim: usize) -> Result<Rope> {
    let dim = keys.opt_usize("rope.dimension_count")?.unwrap_or(head_dim);
    if dim == 0 || dim > head_dim || dim % 2 != 0 {
        return Err(Error::InvalidArgument(format!(
            "rope dimension {dim} does not fit heads of {head_dim}"
        )));
    }
    let freq_scale = match keys.opt_str("rope.scaling.type")? {
        None | Some("none") => 1.0,
        Some("linear") => 1.0 / keys.positive("rope.scaling.factor", Some(1.0))?,
        Some(other) => {
            return Err(Error::InvalidArgument(format!(
                "unsupported rope scaling type '{other}'"
            )))
        }
    };
    Ok(Rope {
        kind,
        head_dim,
        dim,
        base: keys.positive("rope.freq_base", Some(10000.0))?,
        freq_scale,
        freq_factors: freq_factors(file, dim)?,
    })
}

/// The rotation factors of `rope_freqs.weight` (Llama 3.x scaling, Phi-3's
/// LongRoPE), one per rotated pair, when the file has them.
fn freq_factors(file: &GgufFile, rope_dim: usize) -> Result<Option<Vec<f32>>> {
    match optional(file, "rope_freqs.weight")? {
        Some(t) => Ok(Some(vector(file, &t, rope_dim / 2)?)),
        None => Ok(None),
    }
}

/// Scratch of one context's forward passes (llama2.c's `RunState`).
struct State {
    max_tokens: usize,
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
    last: Vec<f32>,
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
        let s = &self.shape;
        Some(KvLayout {
            n_layer: s.n_layer,
            width: s.kv_width(),
            head_dim: s.head_dim,
        })
    }

    fn new_state(&self, max_tokens: usize) -> Result<Box<dyn Any + Send>> {
        let s = &self.shape;
        let buf = |width: usize| super::scratch(max_tokens, width);
        Ok(Box::new(State {
            max_tokens,
            x: buf(s.n_embd)?,
            xn: buf(s.n_embd)?,
            raw: buf(s.q_width())?,
            q: buf(s.q_width())?,
            k: buf(s.kv_width())?,
            v: buf(s.kv_width())?,
            att: buf(s.q_width())?,
            proj: buf(s.n_embd)?,
            gate: buf(s.n_ff)?,
            up: buf(s.n_ff)?,
            last: buf(s.n_embd)?,
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
        let (sh, r) = (&self.shape, &self.recipe);
        let s: &mut State = state_of(state, self.name())?;
        let n = ub.tokens.len();
        if n > s.max_tokens {
            return Err(Error::InvalidArgument(format!(
                "a micro-batch of {n} tokens, more than the {} this context was made for",
                s.max_tokens
            )));
        }
        let (d, qw, kvw, ff) = (sh.n_embd, sh.q_width(), sh.kv_width(), sh.n_ff);
        let x = &mut s.x[..n * d];
        let xn = &mut s.xn[..n * d];
        let raw = &mut s.raw[..n * qw];
        let q = &mut s.q[..n * qw];
        let k = &mut s.k[..n * kvw];
        let v = &mut s.v[..n * kvw];
        let att = &mut s.att[..n * qw];
        let proj = &mut s.proj[..n * d];
        let gate = &mut s.gate[..n * ff];
        let up = &mut s.up[..n * ff];
        let kq_scale = if r.q_scale.is_some() { 1.0 } else { r.kq_scale };

        be.get_rows(&self.token_embd, ub.tokens, x)?;
        if let Some(c) = r.embd_scale {
            be.scale(x, c)?;
        }
        for (l, layer) in self.layers.iter().enumerate() {
            // Attention.
            be.rms_norm(x, &layer.attn_norm, r.rms_eps, xn)?;
            match &layer.qk_norm {
                Some([qn, kn]) => {
                    be.mul_mat(&layer.wq, xn, n, raw)?;
                    be.rms_norm(raw, qn, r.rms_eps, q)?;
                    let raw_k = &mut raw[..n * kvw];
                    be.mul_mat(&layer.wk, xn, n, raw_k)?;
                    be.rms_norm(raw_k, kn, r.rms_eps, k)?;
                }
                None => {
                    be.mul_mat(&layer.wq, xn, n, q)?;
                    be.mul_mat(&layer.wk, xn, n, k)?;
                }
            }
            be.mul_mat(&layer.wv, xn, n, v)?;
            if let Some([bq, bk, bv]) = &layer.bias {
                be.add_bias(q, bq)?;
                be.add_bias(k, bk)?;
                be.add_bias(v, bv)?;
            }
            if let Some(rope) = &layer.spec.rope {
                be.rope(rope, q, ub.pos)?;
                be.rope(rope, k, ub.pos)?;
            }
            if let Some(c) = r.q_scale {
                be.scale(q, c)?;
            }
            kv.store(be, l, ub.cells, k, v)?;
            kv.attend(
                be,
                l,
                q,
                sh.n_head,
                kq_scale,
                layer.spec.window,
                ub.pos,
                ub.seq,
                att,
            )?;
            be.mul_mat(&layer.wo, att, n, proj)?;
            residual(be, x, proj, xn, layer.post_attn_norm.as_deref(), r)?;
            // Feed-forward.
            be.rms_norm(x, &layer.ffn_norm, r.rms_eps, xn)?;
            be.mul_mat(&layer.gate, xn, n, gate)?;
            be.mul_mat(&layer.up, xn, n, up)?;
            match r.activation {
                Activation::Silu => be.silu_mul(gate, up)?,
                Activation::GeluTanh => be.gelu_mul(gate, up)?,
            }
            be.mul_mat(&layer.down, gate, n, proj)?;
            residual(be, x, proj, xn, layer.post_ffn_norm.as_deref(), r)?;
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
        layer: usize,
        row: &mut [f32],
        delta: i32,
    ) -> Result<()> {
        let spec = &self
            .layers
            .get(layer)
            .ok_or_else(|| Error::InvalidArgument(format!("no layer {layer} to shift")))?
            .spec;
        match &spec.rope {
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
                format!("{} heads, {} KV heads of {}", sh.n_head, sh.n_head_kv, sh.head_dim),
            ),
            ("feed-forward", format!("{} ({:?})", sh.n_ff, r.activation)),
            ("vocabulary", sh.n_vocab.to_string()),
            ("trained context", sh.n_ctx_train.to_string()),
            ("rms epsilon", r.rms_eps.to_string()),
            ("output", if self.output.is_some() { "own matrix" } else { "tied to the token embedding" }.into()),
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
                    if r.freq_factors.is_some() { ", rope_freqs factors" } else { "" }
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
            h.push(("layer kind", format!("{rope}; {window}: {which}")));
        }
        let scales = [
            ("embedding scale", r.embd_scale),
            ("query scale", r.q_scale),
            ("residual scale", r.residual_scale),
            ("logit divisor", r.logit_divisor),
            ("logit soft-cap", r.logit_softcap),
        ];
        h.extend(scales.into_iter().filter_map(|(k, v)| v.map(|v| (k, v.to_string()))));
        if r.q_scale.is_none() {
            h.push(("score scale", r.kq_scale.to_string()));
        }
        h
    }

    fn repacked_matrices(&self) -> usize {
        self.layers
            .iter()
            .flat_map(|l| l.matrices())
            .chain(self.output.as_ref())
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

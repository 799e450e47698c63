//! A decoder layer's weights, bound by tensor name, and the whole model's
//! loading.

use std::sync::Arc;

use super::delta_net::DeltaNet;
use super::moe::Experts;
use super::per_layer::{Inputs, LayerInput};
use super::short_conv::ShortConv;
use super::{Decoder, Heads, LayerSpec, Mixer, Parts, Recipe, Shape};
use crate::backend::{Device, Matrix, Op};
use crate::error::{Error, Result};
use crate::gguf::GgufFile;
use crate::kv::RecurrentLayout;
use crate::model::weights::{
    matrix, named_matrix, named_vector, shaped, table, tensor, vector, LoadSteps, Progress, Tensor,
};
use crate::model::Architecture;

/// Q, K and V: three matrices, or one whose output rows are Q, K, V.
// One per layer: the size difference between the variants costs nothing.
#[allow(clippy::large_enum_variant)]
pub(super) enum Qkv {
    Separate([Matrix; 3]),
    Fused(Matrix),
    /// Q and K; the keys serve as values (Gemma 4 without `attn_v`).
    KeysAsValues([Matrix; 2]),
    /// Q alone: the layer reads an earlier layer's keys and values.
    QueryOnly(Matrix),
}

/// The feed-forward's gate and up: two matrices, or one whose output rows
/// are the gate's, then the up's.
pub(super) enum GateUp {
    Separate(Matrix, Matrix),
    Fused(Matrix),
}

/// The feed-forward: one gated network, or a mixture of experts.
// One per layer, so the variants' sizes differing costs nothing.
#[allow(clippy::large_enum_variant)]
pub(super) enum Ffn {
    Dense { gate_up: GateUp, down: Matrix },
    Experts(Experts),
}

/// Self-attention's weights.
pub(super) struct Attention {
    pub(super) qkv: Qkv,
    pub(super) bias: Option<[Vec<f32>; 3]>,
    pub(super) qk_norm: Option<[Vec<f32>; 2]>,
    pub(super) wo: Matrix,
    /// Q's product also gives a gate per query value (each head's queries,
    /// then its gates), which gates the attention's output through a
    /// sigmoid (Qwen3.5).
    pub(super) gated: bool,
    /// The KV cache layer the layer attends over: its own, or the one of
    /// the earlier layer it shares.
    pub(super) kv_layer: usize,
    /// The layer computes and stores keys and values (else it shares an
    /// earlier layer's).
    pub(super) stores: bool,
    /// Ones of a head's size: values are RMS-normed per head, unweighted.
    pub(super) value_norm: Option<Vec<f32>>,
}

/// What mixes a layer's tokens: attention over the KV cache, or a
/// recurrent block over each sequence's state.
// One per layer, so the variants' sizes differing costs nothing.
#[allow(clippy::large_enum_variant)]
pub(super) enum Mixing {
    Attention(Attention),
    ShortConv(ShortConv),
    DeltaNet(DeltaNet),
}

pub(super) struct Layer {
    pub(super) spec: LayerSpec,
    /// The attention's heads (the shape's unless the spec says otherwise).
    pub(super) heads: Heads,
    /// The dense feed-forward's size.
    pub(super) n_ff: usize,
    pub(super) attn_norm: Vec<f32>,
    pub(super) mixing: Mixing,
    pub(super) post_attn_norm: Option<Vec<f32>>,
    pub(super) ffn_norm: Vec<f32>,
    pub(super) ffn: Ffn,
    pub(super) post_ffn_norm: Option<Vec<f32>>,
    /// Gemma 4's per-layer input, added after the feed-forward.
    pub(super) per_layer: Option<LayerInput>,
    /// Multiplies the layer's output (Gemma 4's `layer_output_scale`).
    pub(super) output_scale: Option<f32>,
}

impl Layer {
    pub(super) fn matrices(&self) -> Vec<&Matrix> {
        let mut m: Vec<&Matrix> = match &self.mixing {
            Mixing::Attention(a) => {
                let mut m: Vec<&Matrix> = match &a.qkv {
                    Qkv::Separate(w) => w.iter().collect(),
                    Qkv::KeysAsValues(w) => w.iter().collect(),
                    Qkv::Fused(w) | Qkv::QueryOnly(w) => vec![w],
                };
                m.push(&a.wo);
                m
            }
            Mixing::ShortConv(c) => c.matrices().to_vec(),
            Mixing::DeltaNet(dn) => dn.matrices().to_vec(),
        };
        match &self.ffn {
            Ffn::Dense { gate_up, down } => {
                match gate_up {
                    GateUp::Separate(g, u) => m.extend([g, u]),
                    GateUp::Fused(w) => m.push(w),
                }
                m.push(down);
            }
            Ffn::Experts(e) => m.extend(e.matrices()),
        }
        if let Some(p) = &self.per_layer {
            m.extend(p.matrices());
        }
        m
    }

    /// Values per token a fused product writes before they are split (0:
    /// none).
    pub(super) fn fused_width(&self) -> usize {
        let h = self.heads;
        let qkv = match &self.mixing {
            Mixing::Attention(Attention {
                qkv: Qkv::Fused(_), ..
            }) => h.q_width() + 2 * h.kv_width(),
            Mixing::Attention(Attention { gated: true, .. }) => 2 * h.q_width(),
            _ => 0,
        };
        let gate_up = match self.ffn {
            Ffn::Dense {
                gate_up: GateUp::Fused(_),
                ..
            } => 2 * self.n_ff,
            _ => 0,
        };
        qkv.max(gate_up)
    }
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
    let d = shape.n_embd;
    let embd = shaped(tensor(file, "token_embd.weight")?, shape.n_vocab, d)?;
    let mut steps = LoadSteps::new(file, progress)?;
    let bind = |name: &str, rows: usize, cols: usize| named_matrix(device, file, name, rows, cols);
    let vec_of = |name: &str, len: usize| named_vector(file, name, len);
    let per_layer_width = match parts.per_layer_inputs {
        true => per_layer_width(file, name)?,
        false => 0,
    };
    let mut layers: Vec<Layer> = Vec::new();
    layers
        .try_reserve_exact(shape.n_layer)
        .map_err(|_| Error::InvalidArgument(format!("{} layers are too many", shape.n_layer)))?;
    let (mut n_attention, mut n_recurrent) = (0, 0);
    for i in 0..shape.n_layer {
        let w = |n: &str| format!("blk.{i}.{n}.weight");
        let b = |n: &str| format!("blk.{i}.{n}.bias");
        let layer_spec = spec(i);
        let heads = layer_spec.heads.unwrap_or(Heads {
            n_head: shape.n_head,
            n_head_kv: shape.n_head_kv_of(i),
            head_dim: shape.head_dim,
        });
        let (qw, kvw, hd) = (heads.q_width(), heads.kv_width(), heads.head_dim);
        let mixing = match layer_spec.mixer {
            Mixer::Attention => {
                if !shape.attends(i) {
                    return Err(Error::InvalidArgument(format!(
                        "layer {i} has no KV heads, and every {name} layer attends"
                    )));
                }
                let shared = match layer_spec.kv_from {
                    Some(from) => Some(shared_cache(&layers, i, from, &layer_spec, heads)?),
                    None => None,
                };
                let stores = shared.is_none();
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
                        // A layer that stores no keys has no use for their norm.
                        if stores {
                            vec_of(&w("attn_k_norm"), hd)?
                        } else {
                            Vec::new()
                        },
                    ])
                } else {
                    None
                };
                let fused_qkv = match optional(file, &w("attn_qkv"))? {
                    Some(t) if parts.fused => Some(t),
                    _ => None,
                };
                let q_rows = if parts.gated_q { 2 * qw } else { qw };
                let qkv = match fused_qkv {
                    Some(t) => Qkv::Fused(matrix(device, file, &shaped(t, qw + 2 * kvw, d)?)?),
                    None if !stores => Qkv::QueryOnly(bind(&w("attn_q"), q_rows, d)?),
                    None if parts.value_norm && optional(file, &w("attn_v"))?.is_none() => {
                        Qkv::KeysAsValues([
                            bind(&w("attn_q"), q_rows, d)?,
                            bind(&w("attn_k"), kvw, d)?,
                        ])
                    }
                    None => Qkv::Separate([
                        bind(&w("attn_q"), q_rows, d)?,
                        bind(&w("attn_k"), kvw, d)?,
                        bind(&w("attn_v"), kvw, d)?,
                    ]),
                };
                let kv_layer = match shared {
                    Some(kv_layer) => kv_layer,
                    None => {
                        n_attention += 1;
                        n_attention - 1
                    }
                };
                Mixing::Attention(Attention {
                    qkv,
                    bias,
                    qk_norm,
                    wo: bind(&w("attn_output"), d, qw)?,
                    gated: parts.gated_q,
                    kv_layer,
                    stores,
                    value_norm: parts.value_norm.then(|| vec![1.0; hd]),
                })
            }
            Mixer::ShortConv => {
                let len = parts.short_conv.ok_or_else(|| {
                    Error::InvalidArgument(format!(
                        "layer {i} is a short convolution, which {name} does not have"
                    ))
                })?;
                n_recurrent += 1;
                Mixing::ShortConv(ShortConv::load(device, file, i, d, len, n_recurrent - 1)?)
            }
            Mixer::DeltaNet => {
                let dn = parts.delta_net.ok_or_else(|| {
                    Error::InvalidArgument(format!(
                        "layer {i} is a gated DeltaNet, which {name} does not have"
                    ))
                })?;
                n_recurrent += 1;
                Mixing::DeltaNet(DeltaNet::load(device, file, i, d, dn, n_recurrent - 1)?)
            }
        };
        let ff = shape.n_ff_of(i);
        let (post_attn_norm, post_ffn_norm) = if parts.post_norms {
            (
                Some(vec_of(&w("post_attention_norm"), d)?),
                Some(vec_of(&w("post_ffw_norm"), d)?),
            )
        } else {
            (None, None)
        };
        let ffn = match parts.experts.filter(|_| i >= parts.dense_lead) {
            Some(spec) => Ffn::Experts(Experts::load(device, file, i, d, spec)?),
            None if ff == 0 => {
                return Err(Error::MissingKey {
                    key: format!("{name}.feed_forward_length"),
                })
            }
            None => {
                let gate_up = if parts.fused && optional(file, &w("ffn_gate"))?.is_none() {
                    GateUp::Fused(bind(&w("ffn_up"), 2 * ff, d)?)
                } else {
                    GateUp::Separate(bind(&w("ffn_gate"), ff, d)?, bind(&w("ffn_up"), ff, d)?)
                };
                Ffn::Dense {
                    gate_up,
                    down: bind(&w("ffn_down"), d, ff)?,
                }
            }
        };
        let per_layer = match per_layer_width {
            0 => None,
            width => Some(LayerInput::load(device, file, i, d, width)?),
        };
        let output_scale = match parts.output_scale {
            true => optional(file, &w("layer_output_scale"))?
                .map(|t| vector(file, &t, 1).map(|v| v[0]))
                .transpose()?,
            false => None,
        };
        let layer = Layer {
            spec: layer_spec,
            heads,
            n_ff: ff,
            attn_norm: vec_of(&w("attn_norm"), d)?,
            mixing,
            post_attn_norm,
            ffn_norm: vec_of(&w(parts.ffn_norm.unwrap_or("ffn_norm")), d)?,
            ffn,
            post_ffn_norm,
            per_layer,
            output_scale,
        };
        steps.step(layer.matrices().iter().map(|m| m.size_bytes()).sum())?;
        layers.push(layer);
    }
    let own_output = optional(file, "output.weight")?;
    let output_tied = own_output.is_none();
    let output = match own_output {
        Some(t) => Some(matrix(device, file, &shaped(t, shape.n_vocab, d)?)?),
        None => {
            if !device.supports_op(Op::MulMat(embd.dtype)) {
                return Err(Error::InvalidArgument(format!(
                    "tensor 'token_embd.weight' is {} and serves as the output: the device has no matrix product for it",
                    embd.dtype
                )));
            }
            // Tied output: where the device copies the embedding for products
            // (repacked, or into huge pages), the output gets its own copy,
            // as llama.cpp's duplicated output tensor does (lookups keep
            // reading the file's rows; the copy takes the place of the pages
            // the product read every token). Else the products read the
            // embedding in place.
            let packed = matrix(device, file, &embd)?;
            packed.is_copied().then_some(packed)
        }
    };
    let output_norm = vec_of(parts.output_norm.unwrap_or("output_norm.weight"), d)?;
    let token_embd = table(device, file, &embd)?;
    let per_layer = match per_layer_width {
        0 => None,
        width => Some(Inputs::load(
            device,
            file,
            shape.n_layer,
            d,
            shape.n_vocab,
            width,
        )?),
    };
    steps.finish()?;
    let long_ropes = match &recipe.long_rope {
        Some(long) => layers
            .iter()
            .map(|l| {
                l.spec.rope.clone().map(|mut r| {
                    r.freq_factors = Some(long.factors.clone());
                    r
                })
            })
            .collect(),
        None => Vec::new(),
    };
    Ok(Box::new(Decoder {
        name,
        shape,
        recipe,
        token_embd,
        output_norm,
        output,
        output_tied,
        kv_layers: layers
            .iter()
            .enumerate()
            .filter(|(_, l)| matches!(&l.mixing, Mixing::Attention(a) if a.stores))
            .map(|(i, _)| i)
            .collect(),
        recurrent: recurrent_layout(&layers)?,
        layers,
        long_ropes,
        per_layer,
        text_only: parts.text_only.map(|what| text_only_note(file, what)),
    }))
}

/// "text only" and what is not run, with the count of the file's tensors
/// that belong to it: an image or audio encoder's, as llama.cpp's
/// converter names them in a projector file (`v.`, `a.`, `mm.`), or as
/// a checkpoint does (`vision_tower`, `audio_tower`). They are not read.
fn text_only_note(file: &GgufFile, what: &str) -> String {
    let encoder = |name: &str| {
        ["v.", "a.", "mm."].iter().any(|p| name.starts_with(p))
            || name.contains("vision_tower")
            || name.contains("audio_tower")
    };
    match file.tensors().iter().filter(|t| encoder(&t.name)).count() {
        0 => format!("text only: {what} are not run"),
        n => format!("text only: {what} are not run (this file's {n} tensors of them are ignored)"),
    }
}

/// `embedding_length_per_layer_input`: the values of each layer's input
/// (0 or absent: the model has none).
fn per_layer_width(file: &GgufFile, name: &str) -> Result<usize> {
    let key = format!("{name}.embedding_length_per_layer_input");
    if !file.metadata().contains(&key) {
        return Ok(0);
    }
    let width = file.metadata().get_u32(&key)? as usize;
    if width > (1 << 20) {
        return Err(Error::InvalidArgument(format!(
            "{key} is {width}: out of range"
        )));
    }
    Ok(width)
}

/// The KV cache layer of `from`, which layer `i` shares: an earlier layer
/// that stores its keys and values, with the same heads, rotation and
/// window (else its cache would not read as `i`'s own).
fn shared_cache(
    layers: &[Layer],
    i: usize,
    from: usize,
    spec: &LayerSpec,
    heads: Heads,
) -> Result<usize> {
    let source = layers.get(from).filter(|_| from < i).ok_or_else(|| {
        Error::InvalidArgument(format!(
            "layer {i} shares the keys and values of layer {from}, which does not come before it"
        ))
    })?;
    match &source.mixing {
        Mixing::Attention(a)
            if a.stores
                && source.heads == heads
                && source.spec.rope == spec.rope
                && source.spec.window == spec.window =>
        {
            Ok(a.kv_layer)
        }
        _ => Err(Error::InvalidArgument(format!(
            "layer {i} shares the keys and values of layer {from}, which stores none of the same heads, rotation and window"
        ))),
    }
}

/// What the recurrent layers keep per sequence (`None`: there are none);
/// they must all keep the same number of values.
fn recurrent_layout(layers: &[Layer]) -> Result<Option<RecurrentLayout>> {
    let widths: Vec<usize> = layers
        .iter()
        .filter_map(|l| match &l.mixing {
            Mixing::Attention(_) => None,
            Mixing::ShortConv(c) => Some(c.state_width()),
            Mixing::DeltaNet(dn) => Some(dn.spec().state_width()),
        })
        .collect();
    match widths.first() {
        None => Ok(None),
        Some(&width) if widths.iter().all(|&w| w == width) => Ok(Some(RecurrentLayout {
            n_layer: widths.len(),
            width,
        })),
        Some(_) => Err(Error::InvalidArgument(format!(
            "recurrent layers keeping {widths:?} values per sequence: they must keep the same"
        ))),
    }
}

/// The tensor `name` if the file has it.
pub(super) fn optional(file: &GgufFile, name: &str) -> Result<Option<Tensor>> {
    match tensor(file, name) {
        Ok(t) => Ok(Some(t)),
        Err(Error::MissingTensor { .. }) => Ok(None),
        Err(e) => Err(e),
    }
}

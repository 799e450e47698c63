//! Gemma 4 (the dense text model: E2B, E4B and the dense 31B's shape):
//! Gemma 3's interleaving of sliding-window and global attention
//! (`sliding_window_pattern`, one flag per layer), with what Gemma 4 adds:
//!
//! - Heads of two sizes: the sliding layers' are `key_length_swa` wide and
//!   rotate `rope.dimension_count_swa` dims (base `rope.freq_base_swa`,
//!   default 10000, never scaled); the global layers' are `key_length` wide,
//!   rotate with the file's base and scaling, and divide each pair's angle
//!   by `rope_freqs` ("proportional" RoPE: the converter writes 1 for the
//!   rotated pairs and 1e30 for the others, which then stay put).
//! - Values RMS-normed per head without a weight; a layer without `attn_v`
//!   takes its keys (before their norm) as values. Scores are not scaled
//!   (Q/K norms already bound them).
//! - The last `attention.shared_kv_layers` layers compute queries only and
//!   attend over the cache of the last layer of their kind that stores one
//!   (the last sliding layer, or the last global one), as the reference
//!   does: they keep no cache of their own.
//! - Per-layer inputs (`decoder/per_layer.rs`) and `layer_output_scale`.
//! - `feed_forward_length` per layer (double-wide feed-forwards in the
//!   sharing layers of the E2B).
//!
//! As Gemma 3: embeddings times sqrt(n_embd), Q/K norms, post-norms, GeGLU,
//! NeoX RoPE, the final logit soft-cap. Gemma 4's mixture of experts
//! (26B-A4B: a router of its own beside a dense feed-forward) is refused
//! with an error naming it.

use std::sync::Arc;

use super::decoder::{self, Activation, Heads, LayerSpec, Mixer, Parts};
use super::weights::Progress;
use super::Architecture;
use crate::backend::{Device, Rope, RopeKind};
use crate::error::{Error, Result};
use crate::gguf::GgufFile;

pub(crate) fn load(
    file: &Arc<GgufFile>,
    device: &dyn Device,
    progress: Option<Progress>,
) -> Result<Box<dyn Architecture>> {
    let (keys, shape, mut recipe, global) = decoder::common(file, "gemma4", RopeKind::Neox)?;
    if let Some(t) = file
        .tensors()
        .iter()
        .find(|t| t.name.ends_with(".ffn_gate_inp.weight"))
    {
        return Err(Error::InvalidArgument(format!(
            "tensor '{}': Gemma 4's mixture of experts (26B-A4B) is not supported; its dense models are",
            t.name
        )));
    }
    recipe.activation = Activation::GeluTanh;
    recipe.embd_scale = Some((shape.n_embd as f32).sqrt());
    recipe.kq_scale = 1.0;
    recipe.logit_softcap = match keys.opt_f32("final_logit_softcapping")? {
        None | Some(0.0) => None,
        Some(_) => Some(keys.positive("final_logit_softcapping", None)?),
    };
    let window = keys.usize("attention.sliding_window")?;
    let window = (window > 0).then(|| window.min(u32::MAX as usize) as u32);
    // A file without the flags has no sliding layers (Gemma 4's converter
    // always writes them).
    let sliding = decoder::sliding_layers(&keys, shape.n_layer, 1)?;

    let head_swa = keys
        .opt_usize("attention.key_length_swa")?
        .unwrap_or(shape.head_dim);
    let value_swa = keys
        .opt_usize("attention.value_length_swa")?
        .unwrap_or(head_swa);
    if head_swa == 0 || value_swa != head_swa || head_swa > 1 << 24 {
        return Err(Error::InvalidArgument(format!(
            "sliding layers' heads of {head_swa} keys and {value_swa} values are not supported"
        )));
    }
    let rot_swa = keys
        .opt_usize("rope.dimension_count_swa")?
        .unwrap_or(global.dim);
    if rot_swa == 0 || rot_swa > head_swa || rot_swa % 2 != 0 {
        return Err(Error::InvalidArgument(format!(
            "{} is {rot_swa}: it does not fit sliding heads of {head_swa}",
            keys.name("rope.dimension_count_swa")
        )));
    }
    let local = Rope {
        head_dim: head_swa,
        dim: rot_swa,
        base: keys.positive("rope.freq_base_swa", Some(10000.0))?,
        freq_scale: 1.0,
        freq_factors: None,
        ..global.clone()
    };

    let n_shared = keys.opt_usize("attention.shared_kv_layers")?.unwrap_or(0);
    let n_storing = shape.n_layer.saturating_sub(n_shared);
    if n_shared > 0 && n_storing < 2 {
        return Err(Error::InvalidArgument(format!(
            "{} is {n_shared} of {} layers: the sharing layers need a sliding and a global layer before them",
            keys.name("attention.shared_kv_layers"),
            shape.n_layer
        )));
    }
    let kv_heads: Vec<usize> = (0..shape.n_layer).map(|i| shape.n_head_kv_of(i)).collect();
    let (n_head, head_dim, kv_heads_differ) =
        (shape.n_head, shape.head_dim, shape.kv_heads_differ());
    let spec = |i: usize| {
        // The reference's choice: the last storing layer is global, the one
        // before it sliding (checked at load: a layer shares only a cache
        // of its own kind).
        let kv_from = (i >= n_storing).then(|| n_storing - if sliding[i] { 2 } else { 1 });
        let heads = |head_dim: usize| Heads {
            n_head,
            n_head_kv: kv_heads[i],
            head_dim,
        };
        if sliding[i] {
            LayerSpec {
                mixer: Mixer::Attention,
                rope: Some(local.clone()),
                window,
                heads: Some(heads(head_swa)),
                kv_from,
            }
        } else {
            LayerSpec {
                mixer: Mixer::Attention,
                rope: Some(global.clone()),
                window: None,
                // Named where they differ from the model's count (the 31B's
                // global layers have fewer KV heads than its sliding ones).
                heads: kv_heads_differ.then(|| heads(head_dim)),
                kv_from,
            }
        }
    };
    let parts = Parts {
        qk_norm: true,
        post_norms: true,
        value_norm: true,
        per_layer_inputs: true,
        output_scale: true,
        text_only: Some(
            "images and audio (Gemma 4's vision and audio encoders, a separate mmproj file)",
        ),
        ..Parts::default()
    };
    decoder::load(
        "gemma4", file, device, progress, shape, recipe, parts, &spec,
    )
}

//! Gemma 3: a decoder whose layers interleave sliding-window attention
//! (`sliding_window` positions, RoPE base `rope.freq_base_swa`, default
//! 10000, never scaled) with global attention every `sliding_window_pattern`
//! layers (default 6: layers 5, 11, ... are global, with `rope.freq_base`
//! and the file's scaling). Embeddings times sqrt(n_embd); per-head RMSNorm
//! of Q and K before NeoX RoPE; Q scaled by 1/sqrt(head_dim) (the 27B by
//! 1/sqrt(n_embd / n_head)); RMSNorm after attention and after the GeGLU
//! feed-forward, before each residual; optional final logit soft-capping.
//! The norm weights in the file already include Gemma's "+1".

use std::sync::Arc;

use super::decoder::{self, Activation, LayerSpec, Mixer, Parts};
use super::weights::Progress;
use super::Architecture;
use crate::backend::{Device, Rope, RopeKind};
use crate::error::Result;
use crate::gguf::GgufFile;

/// Gemma 3's interleaving when the file does not give one.
const DEFAULT_PATTERN: usize = 6;

pub(crate) fn load(
    file: &Arc<GgufFile>,
    device: &dyn Device,
    progress: Option<Progress>,
) -> Result<Box<dyn Architecture>> {
    let (keys, shape, mut recipe, global) = decoder::common(file, "gemma3", RopeKind::Neox)?;
    recipe.activation = Activation::GeluTanh;
    recipe.embd_scale = Some((shape.n_embd as f32).sqrt());
    // gemma_pytorch's query_pre_attn_scalar: the 27B (62 layers) scales by
    // the embedding per head, the others by the head size.
    let per_head = if shape.n_layer == 62 {
        shape.n_embd / shape.n_head
    } else {
        shape.head_dim
    };
    recipe.q_scale = Some(1.0 / (per_head as f32).sqrt());
    recipe.logit_softcap = match keys.opt_f32("final_logit_softcapping")? {
        None | Some(0.0) => None,
        Some(_) => Some(keys.positive("final_logit_softcapping", None)?),
    };
    let window = keys
        .opt_usize("attention.sliding_window")?
        .filter(|&w| w > 0);
    let sliding = match window {
        Some(_) => decoder::sliding_layers(&keys, shape.n_layer, DEFAULT_PATTERN)?,
        None => vec![false; shape.n_layer],
    };
    let local = Rope {
        base: keys.positive("rope.freq_base_swa", Some(10000.0))?,
        freq_scale: 1.0,
        ..global.clone()
    };
    let window = window.map(|w| w.min(u32::MAX as usize) as u32);
    let spec = |i: usize| {
        if sliding[i] {
            LayerSpec {
                mixer: Mixer::Attention,
                rope: Some(local.clone()),
                window,
                heads: None,
                kv_from: None,
            }
        } else {
            LayerSpec {
                mixer: Mixer::Attention,
                rope: Some(global.clone()),
                window: None,
                heads: None,
                kv_from: None,
            }
        }
    };
    let parts = Parts {
        qk_norm: true,
        post_norms: true,
        text_only: Some("images (Gemma 3's vision encoder, a separate mmproj file)"),
        ..Parts::default()
    };
    decoder::load(
        "gemma3", file, device, progress, shape, recipe, parts, &spec,
    )
}

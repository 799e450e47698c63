//! Granite (3.x dense): the llama decoder with four multipliers from its
//! keys: on the token embeddings, on Q·K (instead of 1/sqrt(head_dim)), on
//! each block's output before its residual, and a divisor of the logits.
//! `rope.scaling.finetuned = false` turns RoPE off in every layer (the
//! reference reads the key as Granite's RoPE switch, on by default).
//! Granite MoE (`granitemoe`, 3.x 1B-A400M and 3B-A800M) is the same with a
//! mixture of experts in every layer (experts as wide as
//! `feed_forward_length`, weights renormalised), and a shared expert where
//! `expert_shared_feed_forward_length` is set.

use std::sync::Arc;

use super::decoder::{self, LayerSpec, Mixer, MoeSpec, Parts};
use super::weights::Progress;
use super::Architecture;
use crate::backend::{Device, RopeKind};
use crate::error::Result;
use crate::gguf::GgufFile;

/// Loads `arch` (the plain or the MoE family) from `file`.
pub(crate) fn load(
    arch: &'static str,
    file: &Arc<GgufFile>,
    device: &dyn Device,
    progress: Option<Progress>,
) -> Result<Box<dyn Architecture>> {
    let (keys, shape, mut recipe, rope) = decoder::common(file, arch, RopeKind::Normal)?;
    // llama.cpp reads 0 (or a missing key) as "no multiplier".
    let multiplier = |key: &str| -> Result<Option<f32>> {
        match keys.opt_f32(key)? {
            None | Some(0.0) => Ok(None),
            Some(_) => keys.positive(key, None).map(Some),
        }
    };
    recipe.embd_scale = multiplier("embedding_scale")?;
    if let Some(c) = multiplier("attention.scale")? {
        recipe.kq_scale = c;
    }
    recipe.residual_scale = multiplier("residual_scale")?;
    recipe.logit_divisor = Some(keys.positive("logit_scale", None)?);
    let uses_rope = keys.opt_bool("rope.scaling.finetuned")?.unwrap_or(true);
    let spec = |_: usize| LayerSpec {
        mixer: Mixer::Attention,
        rope: uses_rope.then(|| rope.clone()),
        window: None,
        heads: None,
        kv_from: None,
    };
    let experts = if arch == "granitemoe" {
        Some(MoeSpec {
            // The reference sizes Granite's experts by feed_forward_length.
            n_ff: shape.n_ff,
            shared_ff: keys
                .opt_usize("expert_shared_feed_forward_length")?
                .filter(|&w| w > 0),
            ..MoeSpec::read(&keys, true, |_| shape.n_ff)?
        })
    } else {
        None
    };
    let parts = Parts {
        experts,
        ..Parts::default()
    };
    decoder::load(arch, file, device, progress, shape, recipe, parts, &spec)
}

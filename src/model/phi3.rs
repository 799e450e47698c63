//! Phi-3 and Phi-4-mini: the llama decoder with fused products (one
//! `attn_qkv` for Q, K and V; one `ffn_up` for gate and up), NeoX RoPE with
//! LongRoPE's per-pair factors and `attn_factor`, and Q scaled by
//! 1/sqrt(head_dim) before attention. The file's sliding window is ignored,
//! as the reference ignores it. Of LongRoPE's two factor sets a context
//! takes the short one up to the original training length and the long one
//! beyond it, as the reference chooses (`decoder::LongRope`).

use std::sync::Arc;

use super::decoder::{self, Parts};
use super::weights::Progress;
use super::Architecture;
use crate::backend::{Device, RopeKind};
use crate::error::Result;
use crate::gguf::GgufFile;

pub(crate) fn load(
    file: &Arc<GgufFile>,
    device: &dyn Device,
    progress: Option<Progress>,
) -> Result<Box<dyn Architecture>> {
    let (keys, shape, mut recipe, mut rope) = decoder::common(file, "phi3", RopeKind::Neox)?;
    recipe.q_scale = Some(1.0 / (shape.head_dim as f32).sqrt());
    if let Some(short) = decoder::factors(file, "rope_factors_short.weight", rope.dim)? {
        rope.freq_factors = Some(short);
        if let Some(long) = decoder::factors(file, "rope_factors_long.weight", rope.dim)? {
            let original = keys.opt_usize("rope.scaling.original_context_length")?;
            recipe.long_rope = Some(decoder::LongRope {
                original_ctx: original.unwrap_or(shape.n_ctx_train),
                factors: long,
            });
        }
    }
    let parts = Parts {
        fused: true,
        ..Parts::default()
    };
    let spec = decoder::uniform(&rope);
    decoder::load("phi3", file, device, progress, shape, recipe, parts, &spec)
}

//! Qwen3-MoE: Qwen3's attention (per-head RMSNorm of Q and K, NeoX RoPE, no
//! biases) with a mixture of experts in every layer's feed-forward, the
//! picked experts' probabilities renormalised to sum to one.

use std::sync::Arc;

use super::decoder::{self, MoeSpec, Parts};
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
    let (keys, shape, recipe, rope) = decoder::common(file, "qwen3moe", RopeKind::Neox)?;
    let parts = Parts {
        qk_norm: true,
        experts: Some(MoeSpec::read(&keys, true, |n_used| shape.n_ff / n_used)?),
        ..Parts::default()
    };
    let spec = decoder::uniform(&rope);
    decoder::load(
        "qwen3moe", file, device, progress, shape, recipe, parts, &spec,
    )
}

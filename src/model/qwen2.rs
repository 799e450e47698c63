//! Qwen2 and Qwen2.5 (and DeepSeek-R1-Distill-Qwen): the llama decoder with
//! biases on the Q, K and V products and RoPE over the two halves of each
//! head (NeoX order).

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
    let (_, shape, recipe, rope) = decoder::common(file, "qwen2", RopeKind::Neox)?;
    let parts = Parts {
        qkv_bias: true,
        ..Parts::default()
    };
    let spec = decoder::uniform(&rope);
    decoder::load("qwen2", file, device, progress, shape, recipe, parts, &spec)
}

//! Qwen3: the llama decoder with an RMSNorm over each head of Q and of K
//! before RoPE (which turns the two halves of each head: NeoX order), and
//! no biases.

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
    let (_, shape, recipe, rope) = decoder::common(file, "qwen3", RopeKind::Neox)?;
    let parts = Parts {
        qk_norm: true,
        ..Parts::default()
    };
    let spec = decoder::uniform(&rope);
    decoder::load("qwen3", file, device, progress, shape, recipe, parts, &spec)
}

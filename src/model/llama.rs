//! The llama family (llama 1-3.x, mistral, smollm, tinyllama, ...): the
//! plain pre-norm decoder with RMSNorm, RoPE on neighbouring pairs (Llama
//! 3.x's scaling through `rope_freqs.weight`), grouped KV heads and SwiGLU.

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
    let (_, shape, recipe, rope) = decoder::common(file, "llama", RopeKind::Normal)?;
    let spec = decoder::uniform(&rope);
    decoder::load(
        "llama",
        file,
        device,
        progress,
        shape,
        recipe,
        Parts::default(),
        &spec,
    )
}

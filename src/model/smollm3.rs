//! SmolLM3: the llama decoder where every fourth layer (the 4th, 8th, ...)
//! attends without RoPE, as llama.cpp's `n_no_rope_layer_step`.

use std::sync::Arc;

use super::decoder::{self, LayerSpec, Mixer, Parts};
use super::weights::Progress;
use super::Architecture;
use crate::backend::{Device, RopeKind};
use crate::error::Result;
use crate::gguf::GgufFile;

/// Layer i skips RoPE when (i + 1) is a multiple of this.
const NO_ROPE_LAYER_STEP: usize = 4;

pub(crate) fn load(
    file: &Arc<GgufFile>,
    device: &dyn Device,
    progress: Option<Progress>,
) -> Result<Box<dyn Architecture>> {
    let (_, shape, recipe, rope) = decoder::common(file, "smollm3", RopeKind::Normal)?;
    let spec = |i: usize| LayerSpec {
        mixer: Mixer::Attention,
        rope: ((i + 1) % NO_ROPE_LAYER_STEP != 0).then(|| rope.clone()),
        window: None,
        heads: None,
        kv_from: None,
    };
    decoder::load(
        "smollm3",
        file,
        device,
        progress,
        shape,
        recipe,
        Parts::default(),
        &spec,
    )
}

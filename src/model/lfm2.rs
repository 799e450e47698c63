//! LFM2 (Liquid): a hybrid of attention and short convolutions. Layers whose
//! `head_count_kv` entry is 0 mix tokens with a gated short convolution
//! (`shortconv.l_cache` taps) over a recurrent state per sequence; the
//! others attend with Qwen3's per-head Q/K norms and NeoX RoPE, over a
//! sliding window where the file gives one. Every layer's feed-forward is
//! SwiGLU; the final norm is `token_embd_norm`.

use std::sync::Arc;

use super::decoder::{self, LayerSpec, Mixer, Parts};
use super::weights::Progress;
use super::Architecture;
use crate::backend::{Device, RopeKind};
use crate::error::{Error, Result};
use crate::gguf::GgufFile;

pub(crate) fn load(
    file: &Arc<GgufFile>,
    device: &dyn Device,
    progress: Option<Progress>,
) -> Result<Box<dyn Architecture>> {
    let (keys, shape, recipe, rope) = decoder::common(file, "lfm2", RopeKind::Neox)?;
    let taps = decoder::check_taps(keys.usize("shortconv.l_cache")?)?;
    if !shape.kv_free.iter().any(|&free| free) {
        return Err(Error::InvalidArgument(
            "lfm2.attention.head_count_kv names no convolution layer (a 0 entry per layer)".into(),
        ));
    }
    let window = keys
        .opt_usize("attention.sliding_window")?
        .filter(|&w| w > 0)
        .map(|w| u32::try_from(w).unwrap_or(u32::MAX));
    let parts = Parts {
        qk_norm: true,
        short_conv: Some(taps),
        output_norm: Some("token_embd_norm.weight"),
        ..Parts::default()
    };
    let spec = |i: usize| {
        if shape.attends(i) {
            LayerSpec {
                mixer: Mixer::Attention,
                rope: Some(rope.clone()),
                window,
            }
        } else {
            LayerSpec {
                mixer: Mixer::ShortConv,
                rope: None,
                window: None,
            }
        }
    };
    let layers_shape = shape.clone();
    decoder::load(
        "lfm2",
        file,
        device,
        progress,
        layers_shape,
        recipe,
        parts,
        &spec,
    )
}

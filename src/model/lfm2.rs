//! LFM2 (Liquid): a hybrid of attention and short convolutions. Layers whose
//! `head_count_kv` entry is 0 mix tokens with a gated short convolution
//! (`shortconv.l_cache` taps) over a recurrent state per sequence; the
//! others attend with Qwen3's per-head Q/K norms and NeoX RoPE, over a
//! sliding window where the file gives one. The feed-forward is SwiGLU;
//! LFM2-MoE (`lfm2moe`) has a mixture of experts after its leading dense
//! layers, gated by sigmoids with a selection bias (`exp_probs_b`). The
//! final norm is `token_embd_norm`.

use std::sync::Arc;

use super::decoder::{self, Gating, LayerSpec, Mixer, MoeSpec, Parts};
use super::weights::Progress;
use super::Architecture;
use crate::backend::{Device, RopeKind};
use crate::error::{Error, Result};
use crate::gguf::GgufFile;

/// Loads `arch` (the plain or the MoE family) from `file`.
pub(crate) fn load(
    arch: &'static str,
    file: &Arc<GgufFile>,
    device: &dyn Device,
    progress: Option<Progress>,
) -> Result<Box<dyn Architecture>> {
    let (keys, shape, recipe, rope) = decoder::common(file, arch, RopeKind::Neox)?;
    let taps = decoder::check_taps(keys.usize("shortconv.l_cache")?)?;
    if !shape.some_layer_free_of_kv() {
        return Err(Error::InvalidArgument(format!(
            "{arch}.attention.head_count_kv names no convolution layer (a 0 entry per layer)"
        )));
    }
    let window = keys
        .opt_usize("attention.sliding_window")?
        .filter(|&w| w > 0)
        .map(|w| u32::try_from(w).unwrap_or(u32::MAX));
    let (experts, dense_lead) = if arch == "lfm2moe" {
        let spec = MoeSpec {
            gating: Gating::from_key(keys.usize("expert_gating_func")?)?,
            selection_bias: true,
            ..MoeSpec::read(&keys, true, |_| 0)?
        };
        if spec.n_ff == 0 {
            return Err(Error::MissingKey {
                key: format!("{arch}.expert_feed_forward_length"),
            });
        }
        let lead = keys.opt_usize("leading_dense_block_count")?.unwrap_or(0);
        (Some(spec), lead.min(shape.n_layer))
    } else {
        (None, 0)
    };
    let parts = Parts {
        qk_norm: true,
        short_conv: Some(taps),
        output_norm: Some("token_embd_norm.weight"),
        experts,
        dense_lead,
        ..Parts::default()
    };
    let spec = |i: usize| {
        if shape.attends(i) {
            LayerSpec {
                mixer: Mixer::Attention,
                rope: Some(rope.clone()),
                window,
                heads: None,
                kv_from: None,
            }
        } else {
            LayerSpec {
                mixer: Mixer::ShortConv,
                rope: None,
                window: None,
                heads: None,
                kv_from: None,
            }
        }
    };
    let layers_shape = shape.clone();
    decoder::load(
        arch,
        file,
        device,
        progress,
        layers_shape,
        recipe,
        parts,
        &spec,
    )
}

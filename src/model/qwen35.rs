//! Qwen3.5: a hybrid of gated DeltaNet (linear attention with a recurrent
//! state per sequence, `decoder/delta_net.rs`) and full attention, one
//! attention layer every `full_attention_interval` layers (or as
//! `attention.recurrent_layers` marks them). Attention layers have Qwen3's
//! per-head Q/K norms and an output gate from Q's product; their rotation
//! is interleaved multi-section RoPE, which on text (every section at the
//! token's position) is NeoX RoPE over `rope.dimension_count` dimensions.
//! The feed-forward's norm is `post_attention_norm`; Qwen3.5-MoE
//! (`qwen35moe`) has a mixture of experts there (softmax routing,
//! renormalised weights) and a shared expert gated per token by a sigmoid.
//! Multi-token-prediction
//! blocks past the trunk (`nextn_predict_layers`) are not run, as the
//! reference's default.

use std::sync::Arc;

use super::decoder::{self, DeltaNetSpec, Keys, LayerSpec, Mixer, MoeSpec, Parts};
use super::weights::Progress;
use super::Architecture;
use crate::backend::{Device, RopeKind};
use crate::error::{Error, Result};
use crate::gguf::{Array, GgufFile, Value};

/// Loads `arch` (the plain or the MoE family) from `file`.
pub(crate) fn load(
    arch: &'static str,
    file: &Arc<GgufFile>,
    device: &dyn Device,
    progress: Option<Progress>,
) -> Result<Box<dyn Architecture>> {
    let (keys, mut shape, recipe, rope) = decoder::common(file, arch, RopeKind::Neox)?;
    let nextn = keys.opt_usize("nextn_predict_layers")?.unwrap_or(0);
    if nextn >= shape.n_layer {
        return Err(Error::InvalidArgument(format!(
            "{arch}.nextn_predict_layers is {nextn} of {} blocks: no trunk is left",
            shape.n_layer
        )));
    }
    let n_layer_all = shape.n_layer;
    shape.n_layer -= nextn;
    check_text_sections(&keys, rope.dim)?;
    let spec = DeltaNetSpec {
        taps: keys.usize("ssm.conv_kernel")?,
        n_head_k: keys.usize("ssm.group_count")?,
        n_head_v: keys.usize("ssm.time_step_rank")?,
        dim: keys.usize("ssm.state_size")?,
    }
    .checked(keys.usize("ssm.inner_size")?)?;
    let recurrent = recurrent_layers(&keys, shape.n_layer, n_layer_all)?;
    let experts = if arch == "qwen35moe" {
        Some(MoeSpec {
            shared_ff: Some(
                keys.opt_usize("expert_shared_feed_forward_length")?
                    .filter(|&w| w > 0)
                    .unwrap_or(shape.n_ff),
            ),
            shared_gate: true,
            weights_scale: keys
                .opt_f32("expert_weights_scale")?
                .filter(|&c| c != 0.0 && c != 1.0),
            ..MoeSpec::read(&keys, true, |n_used| shape.n_ff / n_used)?
        })
    } else {
        None
    };
    let parts = Parts {
        experts,
        qk_norm: true,
        gated_q: true,
        delta_net: Some(spec),
        ffn_norm: Some("post_attention_norm"),
        ..Parts::default()
    };
    let layer = |i: usize| {
        if recurrent[i] {
            LayerSpec {
                mixer: Mixer::DeltaNet,
                rope: None,
                window: None,
                heads: None,
                kv_from: None,
            }
        } else {
            LayerSpec {
                mixer: Mixer::Attention,
                rope: Some(rope.clone()),
                window: None,
                heads: None,
                kv_from: None,
            }
        }
    };
    decoder::load(arch, file, device, progress, shape, recipe, parts, &layer)
}

/// Which of the trunk's layers are DeltaNets: `attention.recurrent_layers`
/// (one flag per block) where the file has it, else all but every
/// `full_attention_interval`-th (default 4).
fn recurrent_layers(keys: &Keys, n_layer: usize, n_layer_all: usize) -> Result<Vec<bool>> {
    let key = keys.name("attention.recurrent_layers");
    let flags: Option<Vec<bool>> = match keys.value("attention.recurrent_layers") {
        None => None,
        Some(Value::Array(Array::Bool(v))) => Some(v.clone()),
        Some(Value::Array(Array::U8(v))) => Some(v.iter().map(|&f| f != 0).collect()),
        Some(Value::Array(Array::I32(v))) => Some(v.iter().map(|&f| f != 0).collect()),
        Some(Value::Array(Array::U32(v))) => Some(v.iter().map(|&f| f != 0).collect()),
        Some(_) => {
            return Err(Error::InvalidArgument(format!(
                "{key} is not an array of flags"
            )))
        }
    };
    let layers = match flags {
        Some(f) if f.len() == n_layer_all => f[..n_layer].to_vec(),
        Some(f) => {
            return Err(Error::InvalidArgument(format!(
                "{key} has {} flags for {n_layer_all} blocks",
                f.len()
            )))
        }
        None => {
            let interval = keys.opt_usize("full_attention_interval")?.unwrap_or(4);
            if interval == 0 {
                return Err(Error::InvalidArgument(format!(
                    "{} is 0",
                    keys.name("full_attention_interval")
                )));
            }
            (0..n_layer).map(|i| (i + 1) % interval != 0).collect()
        }
    };
    Ok(layers)
}

/// Interleaved multi-section RoPE gives each rotated pair the position of
/// one of four sections; text puts the token's position in the first three
/// and 0 in the fourth. NeoX RoPE is the same rotation exactly when no pair
/// falls to the fourth: checked here, from `rope.dimension_sections`.
fn check_text_sections(keys: &Keys, rope_dim: usize) -> Result<()> {
    let key = keys.name("rope.dimension_sections");
    let sections: Vec<i64> = match keys.value("rope.dimension_sections") {
        None => return Ok(()),
        Some(Value::Array(Array::I32(v))) => v.iter().map(|&s| s as i64).collect(),
        Some(Value::Array(Array::U32(v))) => v.iter().map(|&s| s as i64).collect(),
        Some(_) => {
            return Err(Error::InvalidArgument(format!(
                "{key} is not an array of counts"
            )))
        }
    };
    let s = |i: usize| sections.get(i).copied().unwrap_or(0);
    let total: i64 = (0..4).map(s).sum();
    if (0..4).any(|i| s(i) < 0) || total <= 0 {
        return Err(Error::InvalidArgument(format!(
            "{key} is {sections:?}: counts of rotated pairs, some positive"
        )));
    }
    let to_fourth = (0..rope_dim as i64 / 2).map(|p| p % total).find(|&sector| {
        let first_three = (sector % 3 == 0 && sector < 3 * s(0))
            || (sector % 3 == 1 && sector < 3 * s(1))
            || (sector % 3 == 2 && sector < 3 * s(2));
        !first_three
    });
    match to_fourth {
        Some(sector) => Err(Error::InvalidArgument(format!(
            "{key} is {sections:?}: rotated pair {sector} takes the fourth section's position, \
             which text-only RoPE does not support"
        ))),
        None => Ok(()),
    }
}

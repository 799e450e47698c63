//! Requantizing a model file the way `llama-quantize --allow-requantize` does:
//! the same tensors converted (2-D+ weights, never norms or a few small special
//! tensors), the same output-tensor rule and fallbacks, the same tensor order
//! and metadata, so that the result is the file llama.cpp would write.

mod mix;

use std::cmp::Ordering;
use std::io::Write;

use mix::{Category, Counters, Mix, ModelFacts};

use crate::error::{Error, Result};
use crate::gguf::{GgufFile, GgufLayout, TensorInfo, Value};
use crate::tensor::{convert, DType, GgmlType};

/// A target file type, as `llama-quantize` names them.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Target {
    pub name: &'static str,
    /// llama.cpp's `llama_ftype`, stored as `general.file_type`.
    pub file_type: u32,
    /// The type most weights get.
    pub default: DType,
    /// A k-quant mixture's per-tensor rules (Q4_K_M, ...), or none: every
    /// weight gets `default` (the output aside).
    pub mix: Option<Mix>,
}

/// The targets lamina writes: plain and legacy types, Q6_K, and
/// llama-quantize's mixtures (Q2_K, Q3_K_S/M/L, Q4_K_S/M, Q5_K_S/M, and the
/// non-linear IQ4_NL and IQ4_XS, which need no importance matrix).
pub const TARGETS: &[Target] = &[
    Target {
        name: "F32",
        file_type: 0,
        default: DType::F32,
        mix: None,
    },
    Target {
        name: "F16",
        file_type: 1,
        default: DType::F16,
        mix: None,
    },
    Target {
        name: "BF16",
        file_type: 32,
        default: DType::BF16,
        mix: None,
    },
    Target {
        name: "Q4_0",
        file_type: 2,
        default: DType::Q4_0,
        mix: None,
    },
    Target {
        name: "Q4_1",
        file_type: 3,
        default: DType::Q4_1,
        mix: None,
    },
    Target {
        name: "Q5_0",
        file_type: 8,
        default: DType::Q5_0,
        mix: None,
    },
    Target {
        name: "Q5_1",
        file_type: 9,
        default: DType::Q5_1,
        mix: None,
    },
    Target {
        name: "Q8_0",
        file_type: 7,
        default: DType::Q8_0,
        mix: None,
    },
    Target {
        name: "Q6_K",
        file_type: 18,
        default: DType::Q6_K,
        mix: None,
    },
    Target {
        name: "Q2_K",
        file_type: 10,
        default: DType::Q2_K,
        mix: Some(Mix::Q2K),
    },
    Target {
        name: "Q3_K_S",
        file_type: 11,
        default: DType::Q3_K,
        mix: Some(Mix::Q3KS),
    },
    Target {
        name: "Q3_K_M",
        file_type: 12,
        default: DType::Q3_K,
        mix: Some(Mix::Q3KM),
    },
    Target {
        name: "Q3_K_L",
        file_type: 13,
        default: DType::Q3_K,
        mix: Some(Mix::Q3KL),
    },
    Target {
        name: "Q4_K_S",
        file_type: 14,
        default: DType::Q4_K,
        mix: Some(Mix::Q4KS),
    },
    Target {
        name: "Q4_K_M",
        file_type: 15,
        default: DType::Q4_K,
        mix: Some(Mix::Q4KM),
    },
    Target {
        name: "Q5_K_S",
        file_type: 16,
        default: DType::Q5_K,
        mix: Some(Mix::Q5KS),
    },
    Target {
        name: "Q5_K_M",
        file_type: 17,
        default: DType::Q5_K,
        mix: Some(Mix::Q5KM),
    },
    Target {
        name: "IQ4_NL",
        file_type: 25,
        default: DType::IQ4_NL,
        mix: Some(Mix::IQ4),
    },
    Target {
        name: "IQ4_XS",
        file_type: 30,
        default: DType::IQ4_XS,
        mix: Some(Mix::IQ4),
    },
];

impl Target {
    pub fn from_name(name: &str) -> Result<Target> {
        TARGETS
            .iter()
            .find(|t| t.name.eq_ignore_ascii_case(name))
            .copied()
            .ok_or_else(|| {
                let names: Vec<&str> = TARGETS.iter().map(|t| t.name).collect();
                Error::InvalidArgument(format!(
                    "unknown quantization type '{name}'; supported: {}",
                    names.join(", ")
                ))
            })
    }
}

/// What happens to one tensor.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TensorPlan {
    pub name: String,
    pub from: GgmlType,
    pub to: GgmlType,
}

/// ggml's dimension count: trailing dimensions of 1 do not count.
fn n_dims(shape: &[u64]) -> usize {
    shape.iter().rposition(|&d| d > 1).map_or(1, |i| i + 1)
}

/// Whether llama-quantize would convert this tensor at all.
fn is_quantizable(t: &TensorInfo) -> bool {
    const NEVER: &[&str] = &[
        "_norm.weight",
        "ffn_gate_inp.weight",
        "ssm_conv1d.weight",
        "time_mix_first.weight",
        "time_mix_w1.weight",
        "time_mix_w2.weight",
        "time_mix_decay_w1.weight",
        "time_mix_decay_w2.weight",
        "time_mix_lerp_fused.weight",
        "attn_rel_b.weight",
    ];
    t.name.ends_with("weight")
        && n_dims(&t.shape) >= 2
        && !NEVER.iter().any(|s| t.name.contains(s))
        && t.name != "position_embd.weight"
        && t.name != "token_types.weight"
}

/// llama.cpp's choice for one weight: the output tensor (or the token embedding
/// standing in for it) gets Q6_K unless its rows are not whole blocks of the
/// target (then Q8_0); a mixture's rules pick the others' types; and a type
/// whose blocks do not divide the rows falls back to a close type that does
/// (F16 when none does).
fn choose_type(
    target: Target,
    t: &TensorInfo,
    is_output: bool,
    facts: &ModelFacts,
    counters: &mut Counters,
) -> DType {
    let row = t.shape.first().copied().unwrap_or(1);
    let mut ty = target.default;
    if !ty.is_quantized() {
        return ty;
    }
    if is_output {
        if row % ty.block_size() as u64 != 0 {
            ty = DType::Q8_0;
        } else if ty != DType::Q8_0 {
            ty = DType::Q6_K;
        }
    } else if let Some(mix) = target.mix {
        ty = mix::mix_type(mix, ty, Category::of(&t.name), facts, counters);
    }
    if row % ty.block_size() as u64 != 0 {
        ty = match ty {
            DType::Q2_K | DType::Q3_K => DType::Q4_0,
            DType::Q4_K => DType::Q5_0,
            DType::Q5_K => DType::Q5_1,
            DType::Q6_K => DType::Q8_0,
            DType::IQ4_XS => DType::IQ4_NL,
            // A 32-block type has nothing smaller to fall back to.
            other => other,
        };
        if row % ty.block_size() as u64 != 0 {
            ty = DType::F16;
        }
    }
    ty
}

/// The model facts the mixtures' rules read, from `{arch}.*` keys.
fn model_facts(file: &GgufFile) -> ModelFacts {
    let md = file.metadata();
    let arch = md.get_str("general.architecture").unwrap_or("");
    let u = |k: &str| md.get_u32(&format!("{arch}.{k}")).ok().map(|v| v as usize);
    let n_layer = u("block_count").unwrap_or(0);
    let n_head = u("attention.head_count").unwrap_or(1);
    let n_head_kv = u("attention.head_count_kv").unwrap_or(n_head).max(1);
    ModelFacts {
        n_layer,
        n_gqa: n_head / n_head_kv,
        is_70b: matches!(arch, "llama" | "qwen2") && n_layer == 80,
    }
}

/// The layer of a `blk.N.` tensor, or -1.
fn layer_of(name: &str) -> i64 {
    name.strip_prefix("blk.")
        .map(|rest| rest.split('.').next().unwrap_or(""))
        .and_then(|n| n.parse().ok())
        .unwrap_or(-1)
}

/// llama.cpp's tensor order: by layer (unnumbered tensors first), then by name.
fn llama_order(a: &str, b: &str) -> Ordering {
    layer_of(a).cmp(&layer_of(b)).then_with(|| a.cmp(b))
}

/// The conversion of every tensor, in the order they will be written.
pub fn plan(file: &GgufFile, target: Target) -> Result<Vec<TensorPlan>> {
    let has_output = file.tensor("output.weight").is_some();
    let mut tensors: Vec<&TensorInfo> = file.tensors().iter().collect();
    tensors.sort_by(|a, b| llama_order(&a.name, &b.name));
    let facts = model_facts(file);
    let mut counters = Counters {
        n_attn_v: tensors
            .iter()
            .filter(|t| Category::of(&t.name) == Category::AttnV)
            .count(),
        ..Counters::default()
    };
    tensors
        .into_iter()
        .map(|t| {
            let to = if is_quantizable(t) {
                let is_output =
                    t.name == "output.weight" || (!has_output && t.name == "token_embd.weight");
                let ty = choose_type(target, t, is_output, &facts, &mut counters);
                if !convert::can_quantize(ty) {
                    return Err(Error::InvalidArgument(format!(
                        "{} would make tensor '{}' {ty}, which lamina cannot quantize to yet",
                        target.name, t.name
                    )));
                }
                ty.ggml_type()
            } else {
                t.ggml_type
            };
            Ok(TensorPlan {
                name: t.name.clone(),
                from: t.ggml_type,
                to,
            })
        })
        .collect()
}

/// Converts one tensor's data (dequantize to f32, quantize to the new type).
fn convert_tensor(file: &GgufFile, info: &TensorInfo, to: DType) -> Result<Vec<u8>> {
    let from = DType::of_tensor(info.ggml_type, &info.name)?;
    if !convert::can_quantize(to) {
        return Err(Error::InvalidArgument(format!(
            "cannot quantize tensor '{}' to {to}",
            info.name
        )));
    }
    let n = info.n_elements() as usize;
    let values = convert::to_f32(from, file.tensor_data(info)?, n)?;
    convert::from_f32(to, &values)
}

/// `file` requantized to `target`, as the bytes of a GGUF file.
/// `progress(done, total)` is called after each tensor.
pub fn requantize(
    file: &GgufFile,
    target: Target,
    progress: impl FnMut(usize, usize),
) -> Result<Vec<u8>> {
    requantize_with(file, target, &crate::parallel::Workers::new(1)?, progress)
}

/// `requantize` with tensors converted on `workers` (a few at a time, so
/// progress still moves; the output is the same for any number of threads).
pub fn requantize_with(
    file: &GgufFile,
    target: Target,
    workers: &crate::parallel::Workers,
    progress: impl FnMut(usize, usize),
) -> Result<Vec<u8>> {
    requantize_to(file, target, workers, Vec::new(), progress)
}

/// Writes `file` requantized to `target` into `out`, one tensor at a time:
/// what is held at once is a few converted tensors (two per thread), never
/// the whole output. Returns `out`.
pub fn requantize_to<W: Write>(
    file: &GgufFile,
    target: Target,
    workers: &crate::parallel::Workers,
    out: W,
    mut progress: impl FnMut(usize, usize),
) -> Result<W> {
    let plan = plan(file, target)?;
    let mut layout = GgufLayout::new();
    layout.set_version(file.version())?;
    const REPLACED: &[&str] = &[
        "general.quantization_version",
        "general.file_type",
        "split.no",
        "split.count",
        "split.tensors.count",
    ];
    for (key, value) in file.metadata().iter() {
        if !REPLACED.contains(&key) {
            layout.add_metadata(key, value.clone())?;
        }
    }
    // llama.cpp sets these last (ggml's current quantization format is 2).
    layout.add_metadata("general.quantization_version", Value::U32(2))?;
    layout.add_metadata("general.file_type", Value::U32(target.file_type))?;

    let info = |p: &TensorPlan| {
        file.tensor(&p.name).ok_or_else(|| Error::MissingTensor {
            name: p.name.clone(),
        })
    };
    for p in &plan {
        layout.add_tensor(p.name.clone(), p.to, &info(p)?.shape)?;
    }
    let mut stream = layout.stream_to(out)?;
    let group = workers.n_threads() * 2;
    for (g, chunk) in plan.chunks(group).enumerate() {
        let converted = workers.map(chunk.len(), |i| -> Result<Option<Vec<u8>>> {
            let p = &chunk[i];
            if p.to == p.from {
                return Ok(None);
            }
            convert_tensor(file, info(p)?, DType::of_tensor(p.to, &p.name)?).map(Some)
        });
        for (p, data) in chunk.iter().zip(converted) {
            match data? {
                None => stream.write_tensor(&p.name, file.tensor_data(info(p)?)?)?,
                Some(data) => stream.write_tensor(&p.name, &data)?,
            }
        }
        progress((g * group + chunk.len()).min(plan.len()), plan.len());
    }
    stream.finish()
}

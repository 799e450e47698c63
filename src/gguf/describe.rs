//! A description of a GGUF file for people and scripts: what `lamina info` prints
//! and what the JavaScript `modelInfo()` returns. Long arrays (a vocabulary) are
//! summarised by their type, length and first elements.

use std::collections::BTreeMap;
use std::fmt::Write as _;

use serde_json::{json, Map, Number, Value as Json};

use super::{Array, GgufFile, Metadata, TensorInfo, Value};

/// Arrays longer than this are summarised.
pub const ARRAY_SUMMARY_LIMIT: usize = 32;
/// Elements shown at the head of a summarised array.
const ARRAY_HEAD: usize = 8;

/// The JSON form: `{"version", "metadata": {..}, "tensors": [{"name", "type",
/// "shape", "offset", "bytes", "part"}], "alignment", "data_offset",
/// "file_bytes", "parts": [{"path", "bytes", "tensors"}], "totals":
/// {"tensors", "elements", "bytes", "by_type": {..}}}`. A split model has
/// one entry in `parts` per file (an unsplit one, one); `file_bytes` is
/// their sum, a tensor's `offset` is within its part's data section.
pub fn to_json(file: &GgufFile) -> Json {
    json!({
        "version": file.version(),
        "alignment": file.alignment(),
        "data_offset": file.data_offset(),
        "file_bytes": file.file_len(),
        "parts": parts(file).iter().map(|p| json!({
            "path": p.path,
            "bytes": p.bytes,
            "tensors": p.tensors,
        })).collect::<Vec<_>>(),
        "metadata": metadata_json(file.metadata()),
        "tensors": file.tensors().iter().map(tensor_json).collect::<Vec<_>>(),
        "totals": totals_json(file.tensors()),
    })
}

/// One file of the model, as described.
struct PartSummary {
    path: Option<String>,
    bytes: u64,
    tensors: usize,
}

fn parts(file: &GgufFile) -> Vec<PartSummary> {
    let paths = file.paths();
    (0..file.part_count())
        .map(|i| PartSummary {
            path: (paths.len() == file.part_count()).then(|| paths[i].display().to_string()),
            bytes: file.part_len(i),
            tensors: file.tensors().iter().filter(|t| t.part == i).count(),
        })
        .collect()
}

fn metadata_json(metadata: &Metadata) -> Json {
    let mut map = Map::new();
    for (key, value) in metadata.iter() {
        map.insert(key.to_string(), value_json(value));
    }
    Json::Object(map)
}

fn tensor_json(t: &TensorInfo) -> Json {
    json!({
        "name": t.name,
        "type": t.ggml_type.name(),
        "shape": t.shape,
        "offset": t.offset,
        "bytes": t.n_bytes,
        "part": t.part,
    })
}

fn totals_json(tensors: &[TensorInfo]) -> Json {
    let (elements, bytes, by_type) = totals(tensors);
    json!({
        "tensors": tensors.len(),
        "elements": elements,
        "bytes": bytes,
        "by_type": by_type,
    })
}

/// Elements, bytes, and tensor count per type name.
fn totals(tensors: &[TensorInfo]) -> (u64, u64, BTreeMap<&'static str, usize>) {
    let mut by_type = BTreeMap::new();
    let (mut elements, mut bytes) = (0u64, 0u64);
    for t in tensors {
        elements = elements.saturating_add(t.n_elements());
        bytes = bytes.saturating_add(t.n_bytes);
        *by_type.entry(t.ggml_type.name()).or_insert(0) += 1;
    }
    (elements, bytes, by_type)
}

fn float_json(v: f64) -> Json {
    // JSON has no NaN or infinity; those are given as strings.
    Number::from_f64(v).map_or_else(|| Json::String(v.to_string()), Json::Number)
}

fn value_json(value: &Value) -> Json {
    match value {
        Value::U8(v) => json!(v),
        Value::I8(v) => json!(v),
        Value::U16(v) => json!(v),
        Value::I16(v) => json!(v),
        Value::U32(v) => json!(v),
        Value::I32(v) => json!(v),
        Value::U64(v) => json!(v),
        Value::I64(v) => json!(v),
        // Through the shortest decimal form, so 1e-5f32 reads 0.00001, not 9.99..e-6.
        Value::F32(v) => float_json(v.to_string().parse().unwrap_or(f64::NAN)),
        Value::F64(v) => float_json(*v),
        Value::Bool(v) => json!(v),
        Value::String(s) => json!(s),
        Value::Array(a) => array_json(a),
    }
}

fn array_json(array: &Array) -> Json {
    let elements = |n: usize| -> Vec<Json> {
        (0..n.min(array.len()))
            .filter_map(|i| array.get(i))
            .map(|v| value_json(&v))
            .collect()
    };
    if array.len() <= ARRAY_SUMMARY_LIMIT {
        Json::Array(elements(ARRAY_SUMMARY_LIMIT))
    } else {
        json!({
            "type": "array",
            "element_type": array.element_type().name(),
            "len": array.len(),
            "head": elements(ARRAY_HEAD),
        })
    }
}

/// The human form printed by `lamina info`.
pub fn to_text(file: &GgufFile) -> String {
    let mut out = String::new();
    let md = file.metadata();
    let _ = writeln!(
        out,
        "GGUF v{}: {} metadata keys, {} tensors, alignment {}, data at offset {}, {} bytes",
        file.version(),
        md.len(),
        file.tensors().len(),
        file.alignment(),
        file.data_offset(),
        file.file_len()
    );
    let split = file.part_count() > 1;
    if split {
        let _ = writeln!(out, "\nparts ({}):", file.part_count());
        for (i, p) in parts(file).iter().enumerate() {
            let _ = writeln!(
                out,
                "  {:>3}  {}  {} bytes, {} tensors",
                i + 1,
                p.path.as_deref().unwrap_or("(from memory)"),
                p.bytes,
                p.tensors
            );
        }
    }
    let _ = writeln!(out, "\nmetadata:");
    let key_width = md.iter().map(|(k, _)| k.len()).max().unwrap_or(0);
    for (key, value) in md.iter() {
        let _ = writeln!(
            out,
            "  {key:<key_width$}  {:<16}  {}",
            value_type_label(value),
            value
        );
    }
    let tensors = file.tensors();
    let _ = writeln!(out, "\ntensors:");
    let name_width = tensors
        .iter()
        .map(|t| t.name.len())
        .max()
        .unwrap_or(4)
        .max(4);
    let _ = writeln!(
        out,
        "  {:>4}  {:<name_width$}  {:<7}  {:<24}  {:>12}  {:>12}{}",
        "#",
        "name",
        "type",
        "shape",
        "offset",
        "bytes",
        if split { "  part" } else { "" }
    );
    for (i, t) in tensors.iter().enumerate() {
        let shape = format!("{:?}", t.shape);
        let part = if split {
            format!("  {:>4}", t.part + 1)
        } else {
            String::new()
        };
        let _ = writeln!(
            out,
            "  {i:>4}  {:<name_width$}  {:<7}  {shape:<24}  {:>12}  {:>12}{part}",
            t.name,
            t.ggml_type.name(),
            t.offset,
            t.n_bytes
        );
    }
    let (elements, bytes, by_type) = totals(tensors);
    let types: Vec<String> = by_type.iter().map(|(t, n)| format!("{n} {t}")).collect();
    let _ = writeln!(
        out,
        "\ntotals: {} tensors ({}), {} elements, {} bytes of tensor data",
        tensors.len(),
        types.join(", "),
        elements,
        bytes
    );
    out
}

fn value_type_label(value: &Value) -> String {
    match value {
        Value::Array(a) => format!("[{}; {}]", a.element_type(), a.len()),
        v => v.value_type().name().to_string(),
    }
}

/// llama.cpp's name for a `general.file_type` value (its `llama_ftype`), as
/// llama-bench prints it in the model type.
pub fn file_type_name(file_type: u32) -> Option<&'static str> {
    Some(match file_type {
        0 => "all F32",
        1 => "F16",
        2 => "Q4_0",
        3 => "Q4_1",
        7 => "Q8_0",
        8 => "Q5_0",
        9 => "Q5_1",
        10 => "Q2_K - Medium",
        11 => "Q3_K - Small",
        12 => "Q3_K - Medium",
        13 => "Q3_K - Large",
        14 => "Q4_K - Small",
        15 => "Q4_K - Medium",
        16 => "Q5_K - Small",
        17 => "Q5_K - Medium",
        18 => "Q6_K",
        19 => "IQ2_XXS - 2.0625 bpw",
        20 => "IQ2_XS - 2.3125 bpw",
        21 => "Q2_K - Small",
        22 => "IQ3_XS - 3.3 bpw",
        23 => "IQ3_XXS - 3.0625 bpw",
        24 => "IQ1_S - 1.5625 bpw",
        25 => "IQ4_NL - 4.5 bpw",
        26 => "IQ3_S - 3.4375 bpw",
        27 => "IQ3_S mix - 3.66 bpw",
        28 => "IQ2_S - 2.5 bpw",
        29 => "IQ2_M - 2.7 bpw",
        30 => "IQ4_XS - 4.25 bpw",
        31 => "IQ1_M - 1.75 bpw",
        32 => "BF16",
        36 => "TQ1_0 - 1.69 bpw ternary",
        37 => "TQ2_0 - 2.06 bpw ternary",
        38 => "MXFP4 MoE",
        _ => return None,
    })
}

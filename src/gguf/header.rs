//! Parsing and validating the GGUF header: magic, version, metadata, tensor infos,
//! and the layout of the data section.

use std::collections::HashSet;

use super::reader::Reader;
use super::value::{Array, Value, ValueType};
use super::{Metadata, TensorInfo};
use crate::error::{Error, Result};
use crate::tensor::GgmlType;

pub const MAGIC: &[u8; 4] = b"GGUF";
pub const DEFAULT_ALIGNMENT: u64 = 32;
/// No real file needs more; a larger value only serves to push data out of range.
pub const MAX_ALIGNMENT: u64 = 1 << 20;
/// ggml tensors have at most four dimensions.
pub const MAX_DIMS: u32 = 4;
/// Arrays of arrays deeper than this are refused (no real file nests at all;
/// deep nesting would only exhaust the stack).
pub const MAX_ARRAY_DEPTH: usize = 8;
pub const ALIGNMENT_KEY: &str = "general.alignment";

/// Everything before the data section, checked against the file's length.
#[derive(Clone, Debug)]
pub struct Header {
    pub version: u32,
    pub metadata: Metadata,
    pub tensors: Vec<TensorInfo>,
    pub alignment: u64,
    /// Where the data section starts; tensor offsets are relative to it.
    pub data_offset: u64,
}

/// Checks the first four bytes; the caller passes at least four, or the whole file.
pub fn check_magic(prefix: &[u8]) -> Result<()> {
    if prefix.len() < 4 || &prefix[..4] != MAGIC {
        return Err(Error::NotGguf {
            found: prefix[..prefix.len().min(4)].to_vec(),
        });
    }
    Ok(())
}

fn check_version(version: u32) -> Result<()> {
    match version {
        2 | 3 => Ok(()),
        1 => Err(Error::UnsupportedVersion {
            version,
            why: "version 1 files predate GGUF's 64-bit counts; convert the model again",
        }),
        v if v.swap_bytes() == 2 || v.swap_bytes() == 3 => Err(Error::UnsupportedVersion {
            version,
            why: "this is a big-endian GGUF file; only little-endian files are supported",
        }),
        _ => Err(Error::UnsupportedVersion {
            version,
            why: "only versions 2 and 3 are supported",
        }),
    }
}

/// Parses the header from `buf`, a prefix of (or the whole of) a file of
/// `file_len` bytes. A prefix too short gives `Error::Truncated`.
pub fn parse(buf: &[u8], file_len: u64) -> Result<Header> {
    check_magic(&buf[..buf.len().min(4)])?;
    let mut r = Reader::new(buf, file_len);
    r.take(4, || "magic".into())?;
    let version = r.u32(|| "version".into())?;
    check_version(version)?;

    // Each tensor info takes at least 24 bytes (name length, n_dims, type,
    // offset); each key-value pair at least 13 (key length, type, one byte).
    let n_tensors = r.count(24, || "tensor count".into())?;
    let n_kv = r.count(13, || "metadata key-value count".into())?;

    let metadata = read_metadata(&mut r, n_kv)?;
    let alignment = alignment_of(&metadata)?;
    let tensors = read_tensor_infos(&mut r, n_tensors)?;

    let data_offset = align_up(r.pos(), alignment).ok_or(Error::BadAlignment {
        alignment,
        why: "the data section offset overflows",
    })?;
    let header = Header {
        version,
        metadata,
        tensors,
        alignment,
        data_offset,
    };
    check_layout(&header, file_len)?;
    Ok(header)
}

fn read_metadata(r: &mut Reader, n_kv: u64) -> Result<Metadata> {
    let mut metadata = Metadata::default();
    for i in 0..n_kv {
        let key = r.string(|| format!("metadata key #{i}"))?;
        let type_id = r.u32(|| format!("type of metadata key '{key}'"))?;
        let value_type = ValueType::from_id(type_id).ok_or_else(|| Error::BadValueType {
            key: key.clone(),
            type_id,
        })?;
        let value = read_value(r, &key, value_type)?;
        // Stored once in the list and once in the index.
        r.charge(key.len() as u64 * 2 + 96)?;
        metadata.insert(key, value)?;
    }
    Ok(metadata)
}

fn read_value(r: &mut Reader, key: &str, value_type: ValueType) -> Result<Value> {
    let what = || format!("value of metadata key '{key}'");
    Ok(match value_type {
        ValueType::U8 => Value::U8(u8::from_le_bytes(r.array(what)?)),
        ValueType::I8 => Value::I8(i8::from_le_bytes(r.array(what)?)),
        ValueType::U16 => Value::U16(u16::from_le_bytes(r.array(what)?)),
        ValueType::I16 => Value::I16(i16::from_le_bytes(r.array(what)?)),
        ValueType::U32 => Value::U32(u32::from_le_bytes(r.array(what)?)),
        ValueType::I32 => Value::I32(i32::from_le_bytes(r.array(what)?)),
        ValueType::F32 => Value::F32(f32::from_le_bytes(r.array(what)?)),
        ValueType::U64 => Value::U64(u64::from_le_bytes(r.array(what)?)),
        ValueType::I64 => Value::I64(i64::from_le_bytes(r.array(what)?)),
        ValueType::F64 => Value::F64(f64::from_le_bytes(r.array(what)?)),
        ValueType::Bool => Value::Bool(decode_bool(r.array::<1>(what)?[0], key)?),
        ValueType::String => Value::String(r.string(what)?),
        ValueType::Array => Value::Array(read_array(r, key, 0)?),
    })
}

fn decode_bool(byte: u8, key: &str) -> Result<bool> {
    match byte {
        0 => Ok(false),
        1 => Ok(true),
        b => Err(Error::InvalidValue {
            what: format!("metadata key '{key}'"),
            detail: format!("bool byte is {b}, not 0 or 1"),
        }),
    }
}

/// Reads `count` fixed-size little-endian elements in one bounds check.
fn fixed<T, const N: usize>(
    r: &mut Reader,
    key: &str,
    count: u64,
    decode: impl Fn([u8; N]) -> T,
) -> Result<Vec<T>> {
    let bytes = r.take(count * N as u64, || {
        format!("{count} elements of array '{key}'")
    })?;
    r.charge(count * std::mem::size_of::<T>() as u64)?;
    Ok(bytes
        .chunks_exact(N)
        .map(|c| {
            let mut raw = [0u8; N];
            raw.copy_from_slice(c);
            decode(raw)
        })
        .collect())
}

fn read_array(r: &mut Reader, key: &str, depth: usize) -> Result<Array> {
    let type_id = r.u32(|| format!("element type of array '{key}'"))?;
    let element_type = ValueType::from_id(type_id).ok_or_else(|| Error::BadValueType {
        key: key.to_string(),
        type_id,
    })?;
    let count = r.count(element_type.min_encoded_size(), || {
        format!("length of array '{key}' (of {element_type})")
    })?;
    Ok(match element_type {
        ValueType::U8 => Array::U8(fixed(r, key, count, u8::from_le_bytes)?),
        ValueType::I8 => Array::I8(fixed(r, key, count, i8::from_le_bytes)?),
        ValueType::U16 => Array::U16(fixed(r, key, count, u16::from_le_bytes)?),
        ValueType::I16 => Array::I16(fixed(r, key, count, i16::from_le_bytes)?),
        ValueType::U32 => Array::U32(fixed(r, key, count, u32::from_le_bytes)?),
        ValueType::I32 => Array::I32(fixed(r, key, count, i32::from_le_bytes)?),
        ValueType::F32 => Array::F32(fixed(r, key, count, f32::from_le_bytes)?),
        ValueType::U64 => Array::U64(fixed(r, key, count, u64::from_le_bytes)?),
        ValueType::I64 => Array::I64(fixed(r, key, count, i64::from_le_bytes)?),
        ValueType::F64 => Array::F64(fixed(r, key, count, f64::from_le_bytes)?),
        ValueType::Bool => {
            let raw = fixed(r, key, count, |[b]: [u8; 1]| b)?;
            Array::Bool(
                raw.into_iter()
                    .map(|b| decode_bool(b, key))
                    .collect::<Result<_>>()?,
            )
        }
        ValueType::String => {
            r.charge(count * std::mem::size_of::<String>() as u64)?;
            let mut items = Vec::with_capacity(count as usize);
            for i in 0..count {
                items.push(r.string(|| format!("element {i} of array '{key}'"))?);
            }
            Array::String(items)
        }
        ValueType::Array => {
            if depth + 1 >= MAX_ARRAY_DEPTH {
                return Err(Error::NestingTooDeep {
                    key: key.to_string(),
                    max: MAX_ARRAY_DEPTH,
                });
            }
            r.charge(count * std::mem::size_of::<Array>() as u64)?;
            let mut items = Vec::with_capacity(count as usize);
            for _ in 0..count {
                items.push(read_array(r, key, depth + 1)?);
            }
            Array::Array(items)
        }
    })
}

fn alignment_of(metadata: &Metadata) -> Result<u64> {
    let alignment = match metadata.get(ALIGNMENT_KEY) {
        None => return Ok(DEFAULT_ALIGNMENT),
        Some(Value::U32(a)) => *a as u64,
        Some(other) => {
            return Err(Error::WrongType {
                key: ALIGNMENT_KEY.into(),
                found: other.type_description(),
                expected: "u32",
            })
        }
    };
    if alignment == 0 || !alignment.is_power_of_two() {
        return Err(Error::BadAlignment {
            alignment,
            why: "it must be a power of two",
        });
    }
    if alignment > MAX_ALIGNMENT {
        return Err(Error::BadAlignment {
            alignment,
            why: "it is larger than 1 MiB",
        });
    }
    Ok(alignment)
}

fn read_tensor_infos(r: &mut Reader, n_tensors: u64) -> Result<Vec<TensorInfo>> {
    r.charge(n_tensors * std::mem::size_of::<TensorInfo>() as u64)?;
    let mut tensors = Vec::with_capacity(n_tensors as usize);
    let mut names = HashSet::new();
    for i in 0..n_tensors {
        let name = r.string(|| format!("name of tensor #{i}"))?;
        let n_dims = r.u32(|| format!("dimension count of tensor '{name}'"))?;
        if n_dims > MAX_DIMS {
            return Err(Error::TooManyDims {
                tensor: name,
                n_dims,
                max: MAX_DIMS,
            });
        }
        let mut shape = Vec::with_capacity(n_dims as usize);
        for d in 0..n_dims {
            shape.push(r.u64(|| format!("dimension {d} of tensor '{name}'"))?);
        }
        let type_id = r.u32(|| format!("type of tensor '{name}'"))?;
        let ggml_type = GgmlType::from_id(type_id).ok_or_else(|| Error::UnknownTensorType {
            tensor: name.clone(),
            type_id,
        })?;
        let offset = r.u64(|| format!("data offset of tensor '{name}'"))?;
        let n_bytes = tensor_bytes(&name, &shape, ggml_type)?;
        r.charge(name.len() as u64 * 2 + 64)?;
        if !names.insert(name.clone()) {
            return Err(Error::DuplicateTensor { name });
        }
        tensors.push(TensorInfo {
            name,
            shape,
            ggml_type,
            offset,
            n_bytes,
            part: 0,
        });
    }
    Ok(tensors)
}

/// The bytes a tensor of this shape and type takes, with every product checked.
pub fn tensor_bytes(name: &str, shape: &[u64], ggml_type: GgmlType) -> Result<u64> {
    let bad = |detail: String| Error::BadShape {
        tensor: name.to_string(),
        shape: shape.to_vec(),
        detail,
    };
    // ggml keeps dimensions in int64_t.
    if let Some(d) = shape.iter().find(|&&d| d > i64::MAX as u64) {
        return Err(bad(format!("has a dimension ({d}) beyond the int64 range")));
    }
    let row_len = shape.first().copied().unwrap_or(1);
    let row_bytes = ggml_type.row_bytes(row_len).ok_or_else(|| {
        bad(format!(
            "has rows of {row_len} elements, not a multiple of {}'s block of {}",
            ggml_type,
            ggml_type.block_size()
        ))
    })?;
    let mut total = row_bytes;
    let mut elements = row_len;
    for &d in shape.iter().skip(1) {
        total = total
            .checked_mul(d)
            .ok_or_else(|| bad("has a byte size that overflows 64 bits".into()))?;
        elements = elements
            .checked_mul(d)
            .filter(|&e| e <= i64::MAX as u64)
            .ok_or_else(|| bad("has an element count that overflows int64".into()))?;
    }
    Ok(total)
}

pub fn align_up(offset: u64, alignment: u64) -> Option<u64> {
    Some(offset.checked_add(alignment - 1)? & !(alignment - 1))
}

/// Every tensor's data is aligned, inside the file, and overlaps no other.
fn check_layout(header: &Header, file_len: u64) -> Result<()> {
    let mut ranges = Vec::with_capacity(header.tensors.len());
    for t in &header.tensors {
        if t.offset % header.alignment != 0 {
            return Err(Error::TensorMisaligned {
                tensor: t.name.clone(),
                offset: t.offset,
                alignment: header.alignment,
            });
        }
        let start = header.data_offset.checked_add(t.offset);
        let end = start.and_then(|s| s.checked_add(t.n_bytes));
        match (start, end) {
            (Some(start), Some(end)) if end <= file_len => ranges.push((start, end, &t.name)),
            _ => {
                return Err(Error::TensorOutOfRange {
                    tensor: t.name.clone(),
                    start: start.unwrap_or(u64::MAX),
                    end: end.unwrap_or(u64::MAX),
                    file_len,
                })
            }
        }
    }
    ranges.retain(|&(start, end, _)| end > start);
    ranges.sort_unstable();
    for pair in ranges.windows(2) {
        let (_, first_end, first) = pair[0];
        let (second_start, _, second) = pair[1];
        if second_start < first_end {
            return Err(Error::TensorOverlap {
                first: first.clone(),
                second: second.clone(),
            });
        }
    }
    Ok(())
}

//! Writing GGUF files in the layout llama.cpp writes and reads: header, metadata,
//! tensor infos, zero padding to the alignment, then each tensor's data padded to
//! the alignment, in the order the tensors were added.

use std::borrow::Cow;
use std::io::{Read, Write};

use super::header::{self, ALIGNMENT_KEY, DEFAULT_ALIGNMENT, MAX_ALIGNMENT, MAX_DIMS};
use super::value::{Array, Value};
use super::{Metadata, TensorInfo};
use crate::error::{Error, Result};
use crate::tensor::GgmlType;

/// A GGUF file's header: version, metadata and tensor infos. Written first,
/// before the tensors' data, which `GgufWriter` holds in memory and
/// `TensorStream` takes one tensor at a time.
#[derive(Clone, Debug)]
pub struct GgufLayout {
    version: u32,
    metadata: Metadata,
    tensors: Vec<TensorInfo>,
    alignment: u64,
}

impl Default for GgufLayout {
    fn default() -> Self {
        GgufLayout::new()
    }
}

impl GgufLayout {
    /// A version 3 file with the default alignment of 32.
    pub fn new() -> GgufLayout {
        GgufLayout {
            version: 3,
            metadata: Metadata::default(),
            tensors: Vec::new(),
            alignment: DEFAULT_ALIGNMENT,
        }
    }

    /// Writes a version 2 or 3 file (the two share one layout).
    pub fn set_version(&mut self, version: u32) -> Result<()> {
        if !(2..=3).contains(&version) {
            return Err(Error::InvalidArgument(format!(
                "cannot write GGUF version {version}; versions 2 and 3 are supported"
            )));
        }
        self.version = version;
        Ok(())
    }

    /// Adds a metadata entry. `general.alignment` (a u32 power of two) also sets
    /// the alignment used for the data.
    pub fn add_metadata(&mut self, key: impl Into<String>, value: Value) -> Result<()> {
        let key = key.into();
        if key == ALIGNMENT_KEY {
            match value {
                Value::U32(a) if a.is_power_of_two() && a as u64 <= MAX_ALIGNMENT => {
                    self.alignment = a as u64
                }
                _ => {
                    return Err(Error::InvalidArgument(format!(
                        "{ALIGNMENT_KEY} must be a u32 power of two up to {MAX_ALIGNMENT}, got {value:?}"
                    )))
                }
            }
        }
        self.metadata.insert(key, value)
    }

    /// Declares the next tensor; returns the bytes its data takes.
    pub fn add_tensor(
        &mut self,
        name: impl Into<String>,
        ggml_type: GgmlType,
        shape: &[u64],
    ) -> Result<u64> {
        let name = name.into();
        let n_bytes = self.check_tensor(&name, ggml_type, shape)?;
        self.push_tensor(name, ggml_type, shape, n_bytes);
        Ok(n_bytes)
    }

    /// The bytes a new tensor takes, if it can be added.
    fn check_tensor(&self, name: &str, ggml_type: GgmlType, shape: &[u64]) -> Result<u64> {
        if shape.len() > MAX_DIMS as usize {
            return Err(Error::TooManyDims {
                tensor: name.to_string(),
                n_dims: shape.len() as u32,
                max: MAX_DIMS,
            });
        }
        let n_bytes = header::tensor_bytes(name, shape, ggml_type)?;
        if self.tensors.iter().any(|t| t.name == name) {
            return Err(Error::DuplicateTensor {
                name: name.to_string(),
            });
        }
        Ok(n_bytes)
    }

    fn push_tensor(&mut self, name: String, ggml_type: GgmlType, shape: &[u64], n_bytes: u64) {
        self.tensors.push(TensorInfo {
            name,
            shape: shape.to_vec(),
            ggml_type,
            offset: 0, // assigned when writing: the alignment may still change
            n_bytes,
            part: 0,
        });
    }

    /// Writes the header to `out` and returns the stream that takes the
    /// tensors' data, in the order they were declared.
    pub fn stream_to<W: Write>(self, mut out: W) -> Result<TensorStream<W>> {
        let mut header = Vec::new();
        self.write_header_into(&mut header);
        out.write_all(&header).map_err(write_error)?;
        Ok(TensorStream {
            out,
            layout: self,
            next: 0,
        })
    }

    fn write_header_into(&self, out: &mut Vec<u8>) {
        out.extend_from_slice(header::MAGIC);
        out.extend_from_slice(&self.version.to_le_bytes());
        out.extend_from_slice(&(self.tensors.len() as u64).to_le_bytes());
        out.extend_from_slice(&(self.metadata.len() as u64).to_le_bytes());
        for (key, value) in self.metadata.iter() {
            put_string(out, key);
            out.extend_from_slice(&(value.value_type() as u32).to_le_bytes());
            put_value(out, value);
        }
        let mut offset = 0u64;
        for info in &self.tensors {
            put_string(out, &info.name);
            out.extend_from_slice(&(info.shape.len() as u32).to_le_bytes());
            for d in &info.shape {
                out.extend_from_slice(&d.to_le_bytes());
            }
            out.extend_from_slice(&(info.ggml_type as u32).to_le_bytes());
            out.extend_from_slice(&offset.to_le_bytes());
            offset += info.n_bytes + pad_len(info.n_bytes, self.alignment);
        }
        pad(out, self.alignment);
    }
}

fn write_error(e: std::io::Error) -> Error {
    Error::io("cannot write GGUF file", e)
}

/// The data part of a GGUF file being written, one tensor at a time, so a
/// file is written without holding its tensors in memory.
pub struct TensorStream<W: Write> {
    out: W,
    layout: GgufLayout,
    next: usize,
}

impl<W: Write> TensorStream<W> {
    /// Writes the next declared tensor's data (exactly its size) and the
    /// padding after it.
    pub fn write_tensor(&mut self, name: &str, data: &[u8]) -> Result<()> {
        let Some(info) = self.layout.tensors.get(self.next) else {
            return Err(Error::InvalidArgument(format!(
                "tensor '{name}' written after the {} declared ones",
                self.next
            )));
        };
        if info.name != name || info.n_bytes != data.len() as u64 {
            return Err(Error::InvalidArgument(format!(
                "tensor '{name}' ({} bytes) written where '{}' ({} bytes) was declared",
                data.len(),
                info.name,
                info.n_bytes
            )));
        }
        let n_pad = pad_len(info.n_bytes, self.layout.alignment);
        self.out.write_all(data).map_err(write_error)?;
        // Zeros from a reader, not an array: the alignment may be up to
        // 1 MiB, the whole of a wasm stack.
        std::io::copy(&mut std::io::repeat(0).take(n_pad), &mut self.out).map_err(write_error)?;
        self.next += 1;
        Ok(())
    }

    /// Checks that every declared tensor was written, flushes, and returns
    /// the writer.
    pub fn finish(mut self) -> Result<W> {
        if self.next != self.layout.tensors.len() {
            return Err(Error::InvalidArgument(format!(
                "{} of {} declared tensors were written",
                self.next,
                self.layout.tensors.len()
            )));
        }
        self.out.flush().map_err(write_error)?;
        Ok(self.out)
    }
}

/// A GGUF file built in memory: a layout and each tensor's data.
#[derive(Default)]
pub struct GgufWriter<'a> {
    layout: GgufLayout,
    data: Vec<Cow<'a, [u8]>>,
}

impl<'a> GgufWriter<'a> {
    /// A writer for a version 3 file with the default alignment of 32.
    pub fn new() -> GgufWriter<'a> {
        GgufWriter::default()
    }

    /// As `GgufLayout::set_version`.
    pub fn set_version(&mut self, version: u32) -> Result<()> {
        self.layout.set_version(version)
    }

    /// As `GgufLayout::add_metadata`.
    pub fn add_metadata(&mut self, key: impl Into<String>, value: Value) -> Result<()> {
        self.layout.add_metadata(key, value)
    }

    /// Adds a tensor; `data` must be exactly the bytes its shape and type take.
    pub fn add_tensor(
        &mut self,
        name: impl Into<String>,
        ggml_type: GgmlType,
        shape: &[u64],
        data: impl Into<Cow<'a, [u8]>>,
    ) -> Result<()> {
        let name = name.into();
        let data = data.into();
        let n_bytes = self.layout.check_tensor(&name, ggml_type, shape)?;
        if n_bytes != data.len() as u64 {
            return Err(Error::InvalidArgument(format!(
                "tensor '{name}' of type {ggml_type} and shape {shape:?} takes {n_bytes} bytes, {} were given",
                data.len()
            )));
        }
        self.layout.push_tensor(name, ggml_type, shape, n_bytes);
        self.data.push(data);
        Ok(())
    }

    /// The file as bytes.
    pub fn to_bytes(&self) -> Vec<u8> {
        let mut out = Vec::new();
        self.layout.write_header_into(&mut out);
        for data in &self.data {
            out.extend_from_slice(data);
            pad(&mut out, self.layout.alignment);
        }
        out
    }

    /// Writes the file to `w`.
    pub fn write_to(&self, mut w: impl Write) -> Result<()> {
        w.write_all(&self.to_bytes()).map_err(write_error)
    }
}

fn pad_len(len: u64, alignment: u64) -> u64 {
    (alignment - len % alignment) % alignment
}

fn pad(out: &mut Vec<u8>, alignment: u64) {
    let n = pad_len(out.len() as u64, alignment);
    out.resize(out.len() + n as usize, 0);
}

fn put_string(out: &mut Vec<u8>, s: &str) {
    out.extend_from_slice(&(s.len() as u64).to_le_bytes());
    out.extend_from_slice(s.as_bytes());
}

fn put_value(out: &mut Vec<u8>, value: &Value) {
    match value {
        Value::U8(v) => out.extend_from_slice(&v.to_le_bytes()),
        Value::I8(v) => out.extend_from_slice(&v.to_le_bytes()),
        Value::U16(v) => out.extend_from_slice(&v.to_le_bytes()),
        Value::I16(v) => out.extend_from_slice(&v.to_le_bytes()),
        Value::U32(v) => out.extend_from_slice(&v.to_le_bytes()),
        Value::I32(v) => out.extend_from_slice(&v.to_le_bytes()),
        Value::F32(v) => out.extend_from_slice(&v.to_le_bytes()),
        Value::U64(v) => out.extend_from_slice(&v.to_le_bytes()),
        Value::I64(v) => out.extend_from_slice(&v.to_le_bytes()),
        Value::F64(v) => out.extend_from_slice(&v.to_le_bytes()),
        Value::Bool(v) => out.push(*v as u8),
        Value::String(s) => put_string(out, s),
        Value::Array(a) => put_array(out, a),
    }
}

fn put_array(out: &mut Vec<u8>, array: &Array) {
    out.extend_from_slice(&(array.element_type() as u32).to_le_bytes());
    out.extend_from_slice(&(array.len() as u64).to_le_bytes());
    macro_rules! each_le {
        ($v:expr) => {
            for x in $v {
                out.extend_from_slice(&x.to_le_bytes());
            }
        };
    }
    match array {
        Array::U8(v) => out.extend_from_slice(v),
        Array::I8(v) => each_le!(v),
        Array::U16(v) => each_le!(v),
        Array::I16(v) => each_le!(v),
        Array::U32(v) => each_le!(v),
        Array::I32(v) => each_le!(v),
        Array::F32(v) => each_le!(v),
        Array::U64(v) => each_le!(v),
        Array::I64(v) => each_le!(v),
        Array::F64(v) => each_le!(v),
        Array::Bool(v) => out.extend(v.iter().map(|&b| b as u8)),
        Array::String(v) => v.iter().for_each(|s| put_string(out, s)),
        Array::Array(v) => v.iter().for_each(|a| put_array(out, a)),
    }
}

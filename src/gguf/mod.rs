//! The GGUF file format: parse (v2, v3) from a memory map, a file descriptor, an
//! owned buffer or streamed chunks, one file or a model split across several;
//! write (for tests, quantization and splitting).
//!
//! Every count, length and offset read from a file is checked against the file's
//! size before it is used: hostile input is an `Error`, never a panic and never an
//! allocation out of proportion to the file.

pub mod describe;
mod file;
mod header;
mod metadata;
mod reader;
pub mod split;
pub mod split_write;
mod stream;
mod value;
mod writer;

pub use file::GgufFile;
pub use header::{DEFAULT_ALIGNMENT, MAX_ALIGNMENT, MAX_ARRAY_DEPTH, MAX_DIMS};
pub use metadata::Metadata;
pub use stream::StreamLoader;
pub use value::{Array, Value, ValueType};
pub use writer::{GgufLayout, GgufWriter, TensorStream};

use crate::tensor::GgmlType;

/// One tensor's description from the header.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TensorInfo {
    pub name: String,
    /// Dimensions in ggml order: `shape[0]` is the row length.
    pub shape: Vec<u64>,
    pub ggml_type: GgmlType,
    /// Offset of the data from the start of the data section (of its part).
    pub offset: u64,
    /// Bytes of data, from the shape and type.
    pub n_bytes: u64,
    /// Which file of a split model holds the data: 0 for an unsplit file.
    pub part: usize,
}

impl TensorInfo {
    pub fn n_elements(&self) -> u64 {
        // Checked at parse time not to overflow.
        self.shape.iter().product()
    }
}

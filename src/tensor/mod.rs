//! ggml tensor types: the type ids GGUF files carry and their block geometry.
//!
//! The compute kernels (later) support a subset of these; the file format layer
//! knows them all so that any well-formed file can be read and described.

mod ggml_type;

pub use ggml_type::GgmlType;

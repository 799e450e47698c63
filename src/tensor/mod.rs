//! Tensor element types: the ggml type ids GGUF files carry (`GgmlType`), the
//! subset lamina computes with (`DType`), their block layouts, and reference
//! quantization and dequantization bit-exact with ggml's.

pub mod blocks;
pub mod convert;
mod dtype;
mod ggml_type;
pub mod quants;

pub use dtype::DType;
pub use ggml_type::GgmlType;

//! lamina: GGUF language models on the CPU, natively (aarch64 NEON/SVE, x86_64
//! AVX2) and as WebAssembly (SIMD128). See DESIGN.md for the map.

pub mod backend;
pub mod bench;
pub mod chat;
pub mod completion;
pub mod context;
pub mod embedding;
pub mod error;
pub mod gguf;
#[cfg(not(target_arch = "wasm32"))]
pub mod kernel_bench;
pub mod kv;
pub mod log;
pub mod lora;
pub mod memory;
pub mod model;
pub mod output_file;
pub mod parallel;
pub mod perplexity;
pub mod requantize;
pub mod sampling;
pub mod session;
pub mod stopwatch;
pub mod tensor;
pub mod tokenizer;

#[cfg(target_arch = "wasm32")]
pub mod wasm;

pub use error::{Error, Result};

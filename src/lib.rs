//! lamina: GGUF language models on the CPU, natively (aarch64 NEON/SVE, x86_64
//! AVX2) and as WebAssembly (SIMD128). See DESIGN.md for the map.

// The memory64 build's SIMD intrinsics are core's `wasm64` module, unstable
// (that build needs nightly anyway, for std).
#![cfg_attr(target_arch = "wasm64", feature(simd_wasm64))]

pub mod backend;
pub mod bench;
pub mod chat;
pub mod completion;
pub mod context;
pub mod embedding;
pub mod error;
pub mod gguf;
#[cfg(not(target_family = "wasm"))]
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

#[cfg(target_family = "wasm")]
pub mod wasm;

/// The WebAssembly intrinsics (SIMD, memory size) of the target built for:
/// the same functions, in a module named after the target.
#[cfg(target_arch = "wasm32")]
pub(crate) use core::arch::wasm32 as wasm_arch;
#[cfg(target_arch = "wasm64")]
pub(crate) use core::arch::wasm64 as wasm_arch;

pub use error::{Error, Result};

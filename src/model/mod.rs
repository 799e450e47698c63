//! Models: hyperparameters from metadata, weights bound by tensor name, and a
//! forward pass per architecture family. Today: `llama` (llama, mistral,
//! smollm, tinyllama, ...).

pub mod llama;
mod matmul;

pub use llama::LlamaModel;

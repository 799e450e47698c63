//! Models: hyperparameters from metadata, weights bound by tensor name, and a
//! forward pass per architecture family. Today: `llama` (llama, mistral,
//! smollm, tinyllama, ...).

mod attention;
pub mod llama;
mod matmul;
pub mod ops;

pub use llama::LlamaModel;

use std::sync::Arc;

use crate::backend::cpu::Kernels;
use crate::error::Result;
use crate::gguf::GgufFile;
use crate::tokenizer::Vocab;

/// A model ready to run: its vocabulary and its weights, bound for one CPU
/// variant's kernels.
pub struct Model {
    pub vocab: Vocab,
    pub llama: LlamaModel,
}

impl Model {
    /// Loads a llama-family model; `progress` hears 0..1 and cancels the load
    /// by returning false.
    pub fn load(
        file: Arc<GgufFile>,
        kernels: Kernels,
        progress: Option<llama::Progress>,
    ) -> Result<Model> {
        let vocab = Vocab::from_metadata(file.metadata())?;
        let llama = LlamaModel::load(file, kernels, progress)?;
        Ok(Model { vocab, llama })
    }

    /// The model's chat template (ChatML when it has none, as llama.cpp),
    /// with its BOS and EOS token texts.
    pub fn chat_template(&self) -> Result<crate::chat::ChatTemplate> {
        let text = |id: Option<u32>| {
            id.and_then(|t| self.vocab.token_text(t))
                .unwrap_or("")
                .to_string()
        };
        crate::chat::ChatTemplate::from_metadata(
            self.llama.file().metadata(),
            &text(self.vocab.bos),
            &text(self.vocab.eos),
        )
    }

    /// "llama 30 layers, 576 embd, Q4_1" style summary (llama-bench's model type).
    pub fn describe(&self) -> String {
        let h = &self.llama.hparams;
        let ftype = self
            .llama
            .file()
            .metadata()
            .get_u32("general.file_type")
            .ok()
            .and_then(crate::requantize::file_type_name)
            .unwrap_or("?");
        format!("llama {} layers, {} embd, {ftype}", h.n_layer, h.n_embd)
    }
}

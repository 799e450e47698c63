//! Models: hyperparameters from metadata, weights bound by tensor name, and a
//! forward pass per architecture family: `llama` (llama, mistral, smollm,
//! tinyllama, ...) generates; `bert` (MiniLM, bge, cross-encoders) encodes
//! for embeddings and reranking.

mod attention;
pub mod bert;
pub mod llama;
mod matmul;
pub mod ops;
mod weights;

pub use bert::BertModel;
pub use llama::LlamaModel;
pub use weights::Progress;

use std::sync::Arc;

use crate::backend::cpu::Kernels;
use crate::error::{Error, Result};
use crate::gguf::GgufFile;
use crate::tokenizer::Vocab;

/// The network of a model, by architecture.
pub enum Net {
    Llama(LlamaModel),
    Bert(BertModel),
}

/// A model ready to run: its vocabulary and its weights, bound for one CPU
/// variant's kernels.
pub struct Model {
    pub vocab: Vocab,
    pub net: Net,
}

impl Model {
    /// Loads a model of a supported architecture; `progress` hears 0..1 and
    /// cancels the load by returning false.
    pub fn load(
        file: Arc<GgufFile>,
        kernels: Kernels,
        progress: Option<Progress>,
    ) -> Result<Model> {
        let vocab = Vocab::from_metadata(file.metadata())?;
        let arch = file.metadata().get_str("general.architecture")?;
        let net = match arch {
            "llama" => Net::Llama(LlamaModel::load(file, kernels, progress)?),
            "bert" => Net::Bert(BertModel::load(file, kernels, progress)?),
            other => {
                return Err(Error::InvalidArgument(format!(
                    "unsupported model architecture '{other}' (supported: llama, bert)"
                )))
            }
        };
        Ok(Model { vocab, net })
    }

    /// The architecture's name (`general.architecture`).
    pub fn arch(&self) -> &'static str {
        match self.net {
            Net::Llama(_) => "llama",
            Net::Bert(_) => "bert",
        }
    }

    /// The generating network; an error for an encoder.
    pub fn llama(&self) -> Result<&LlamaModel> {
        match &self.net {
            Net::Llama(l) => Ok(l),
            Net::Bert(_) => Err(Error::InvalidArgument(
                "a bert model cannot generate text (it is an encoder): use it for embeddings or reranking".into(),
            )),
        }
    }

    pub fn file(&self) -> &Arc<GgufFile> {
        match &self.net {
            Net::Llama(l) => l.file(),
            Net::Bert(b) => b.file(),
        }
    }

    pub fn kernels(&self) -> &Kernels {
        match &self.net {
            Net::Llama(l) => l.kernels(),
            Net::Bert(b) => b.kernels(),
        }
    }

    /// Width of the hidden states (and of embeddings).
    pub fn n_embd(&self) -> usize {
        match &self.net {
            Net::Llama(l) => l.hparams.n_embd,
            Net::Bert(b) => b.hparams.n_embd,
        }
    }

    pub fn n_layer(&self) -> usize {
        match &self.net {
            Net::Llama(l) => l.hparams.n_layer,
            Net::Bert(b) => b.hparams.n_layer,
        }
    }

    /// Positions the model was trained with.
    pub fn n_ctx_train(&self) -> usize {
        match &self.net {
            Net::Llama(l) => l.hparams.n_ctx_train,
            Net::Bert(b) => b.hparams.n_ctx_train,
        }
    }

    /// `{arch}.pooling_type` from the metadata, when the file has one.
    pub fn pooling_type(&self) -> Option<u32> {
        self.file()
            .metadata()
            .get_u32(&format!("{}.pooling_type", self.arch()))
            .ok()
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
            self.file().metadata(),
            &text(self.vocab.bos),
            &text(self.vocab.eos),
        )
    }

    /// "llama 30 layers, 576 embd, Q4_1" style summary (llama-bench's model type).
    pub fn describe(&self) -> String {
        let ftype = self
            .file()
            .metadata()
            .get_u32("general.file_type")
            .ok()
            .and_then(crate::requantize::file_type_name)
            .unwrap_or("?");
        format!(
            "{} {} layers, {} embd, {ftype}",
            self.arch(),
            self.n_layer(),
            self.n_embd()
        )
    }
}

//! Models: one file per architecture behind the `Architecture` trait, each
//! reading its hyperparameters from its own metadata keys and binding its
//! weights by tensor name through the device (`weights.rs`). A forward pass
//! is a list of backend ops that reads like the architecture's equations;
//! the model code never names a CPU, an instruction set or a target.
//!
//! Adding an architecture: a file with a type that implements `Architecture`
//! and a loader, plus one line in `ARCHITECTURES`.

pub mod bert;
mod decoder;
mod gemma3;
mod gemma4;
mod granite;
mod lfm2;
pub mod llama;
mod phi3;
mod qwen2;
mod qwen3;
mod qwen35;
mod qwen3moe;
mod smollm3;
pub(crate) mod weights;

pub use weights::Progress;

use std::any::Any;
use std::sync::Arc;

use crate::backend::{Backend, Device};
use crate::error::{Error, Result};
use crate::gguf::GgufFile;
use crate::kv::{KvLayout, Memory, RecurrentLayout, SeqId};
use crate::tokenizer::Vocab;

/// The tokens of one forward pass, already placed in KV cells.
pub struct MicroBatch<'a> {
    pub tokens: &'a [u32],
    pub pos: &'a [i32],
    /// The sequence whose cells each token attends to (its first).
    pub seq: &'a [SeqId],
    pub cells: &'a [usize],
    /// Indices (into this micro-batch) of the tokens whose outputs are wanted.
    pub outputs: &'a [usize],
    /// Return the output tokens' hidden states (after the final norm)
    /// instead of their logits: embeddings.
    pub hidden: bool,
}

/// The sizes every architecture has, read from its own metadata keys.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Dims {
    /// Width of the hidden states (and of embeddings).
    pub n_embd: usize,
    pub n_layer: usize,
    /// Rows of the token embedding (and of logits).
    pub n_vocab: usize,
    /// Positions the model was trained with.
    pub n_ctx_train: usize,
}

/// Zeroed scratch of `n` rows of `width` values (the allocator zeroes it:
/// pages are touched only when used); an error when the size overflows.
pub(crate) fn scratch(n: usize, width: usize) -> Result<Vec<f32>> {
    let len = n.checked_mul(width).ok_or_else(|| {
        Error::InvalidArgument(format!("{n} tokens of {width} values are too many"))
    })?;
    Ok(vec![0.0; len])
}

/// What every architecture answers and runs. Optional members say what their
/// default does.
pub trait Architecture: Send + Sync {
    /// `general.architecture` ("llama", "bert", ...).
    fn name(&self) -> &'static str;
    /// The sizes every architecture has.
    fn dims(&self) -> Dims;
    /// The KV cache a decoder needs; `None` for an encoder (a sequence is
    /// encoded whole, nothing is kept).
    fn kv_layout(&self) -> Option<KvLayout>;
    /// What the recurrent layers keep per sequence. (optional) Default:
    /// `None`, no recurrent layers.
    fn recurrent_layout(&self) -> Option<RecurrentLayout> {
        None
    }
    /// Scratch space for micro-batches of up to `max_tokens` tokens
    /// (llama2.c's `RunState`): allocated once per context.
    /// `n_ctx`: the context's size, for what depends on it (LongRoPE's
    /// choice of factors).
    fn new_state(&self, max_tokens: usize, n_ctx: usize) -> Result<Box<dyn Any + Send>>;
    /// Runs a micro-batch through the decoder: stores its keys and values in
    /// its cells, advances its sequences' recurrent states, and appends to
    /// `out` one row per output token (logits, or hidden states with
    /// `ub.hidden`). (optional) Default: an error, for encoders.
    fn decode(
        &self,
        _be: &mut dyn Backend,
        _memory: &mut Memory,
        _ub: &MicroBatch,
        _state: &mut dyn Any,
        _out: &mut Vec<f32>,
    ) -> Result<()> {
        Err(Error::InvalidArgument(format!(
            "a {} model cannot generate text (it is an encoder): use it for embeddings or reranking",
            self.name()
        )))
    }
    /// The last layer's hidden states (`n_embd` per token) of a batch of
    /// whole sequences, appended to `out`: token `i` sits at `pos[i]` of
    /// `seq[i]` and attends to every token of its sequence. (optional)
    /// Default: an error, for decoders (they embed through `decode`).
    fn encode(
        &self,
        _be: &mut dyn Backend,
        _tokens: &[u32],
        _pos: &[i32],
        _seq: &[SeqId],
        _state: &mut dyn Any,
        _out: &mut Vec<f32>,
    ) -> Result<()> {
        Err(Error::InvalidArgument(format!(
            "a {} model is not an encoder",
            self.name()
        )))
    }
    /// Outputs of the classifier head rank pooling uses (0: none). (optional)
    fn n_labels(&self) -> usize {
        0
    }
    /// The classifier head on `n` hidden states: `n_labels` scores each,
    /// appended to `out`. (optional) Default: an error.
    fn classify(
        &self,
        _be: &mut dyn Backend,
        _cls: &[f32],
        _n: usize,
        _out: &mut Vec<f32>,
    ) -> Result<()> {
        Err(Error::InvalidArgument(format!(
            "rank pooling needs a classifier head (cls.weight, cls.output.weight): this {} model has none",
            self.name()
        )))
    }
    /// Re-rotates a cached key row of layer `layer` by `delta` positions
    /// (the context shift), as the context whose `state` it is rotates.
    /// (optional) Default: an error.
    fn shift_keys(
        &self,
        _be: &mut dyn Backend,
        _state: &dyn Any,
        _layer: usize,
        _row: &mut [f32],
        _delta: i32,
    ) -> Result<()> {
        Err(Error::InvalidArgument(format!(
            "a {} model cannot shift its cache",
            self.name()
        )))
    }
    /// Weight matrices the device keeps in a layout of its own. (optional)
    fn repacked_matrices(&self) -> usize {
        0
    }
    /// The hyperparameters as read from the file, named, for `lamina info`.
    /// (optional) Default: the sizes every architecture has.
    fn hyperparameters(&self) -> Vec<(&'static str, String)> {
        let d = self.dims();
        vec![
            ("layers", d.n_layer.to_string()),
            ("embedding", d.n_embd.to_string()),
            ("vocabulary", d.n_vocab.to_string()),
            ("trained context", d.n_ctx_train.to_string()),
        ]
    }
}

/// Loads an architecture from a file, binding its weights on a device.
type LoadFn = fn(&Arc<GgufFile>, &dyn Device, Option<Progress>) -> Result<Box<dyn Architecture>>;

/// The architectures lamina runs, by `general.architecture`. A file that
/// loads a plain family and its mixture-of-experts variant is told which.
const ARCHITECTURES: &[(&str, LoadFn)] = &[
    ("llama", llama::load),
    ("qwen2", qwen2::load),
    ("qwen3", qwen3::load),
    ("qwen3moe", qwen3moe::load),
    ("qwen35", |f, d, p| qwen35::load("qwen35", f, d, p)),
    ("qwen35moe", |f, d, p| qwen35::load("qwen35moe", f, d, p)),
    ("lfm2", |f, d, p| lfm2::load("lfm2", f, d, p)),
    ("lfm2moe", |f, d, p| lfm2::load("lfm2moe", f, d, p)),
    ("gemma3", gemma3::load),
    ("gemma4", gemma4::load),
    ("smollm3", smollm3::load),
    ("granite", |f, d, p| granite::load("granite", f, d, p)),
    ("granitemoe", |f, d, p| granite::load("granitemoe", f, d, p)),
    ("phi3", phi3::load),
    ("bert", bert::load),
];

/// A model ready to run: its vocabulary and its weights, bound on a device.
pub struct Model {
    pub vocab: Vocab,
    arch: Box<dyn Architecture>,
    file: Arc<GgufFile>,
    device: Arc<dyn Device>,
    /// A decoder with a KV cache (asked on every decode: the layout itself
    /// is a list, built once here).
    generates: bool,
}

impl Model {
    /// Loads a model of a supported architecture with its weights bound on
    /// `device`; `progress` hears 0..1 and cancels the load by returning
    /// false. A tensor whose type the device cannot compute with is refused
    /// here, naming it.
    pub fn load(
        file: Arc<GgufFile>,
        device: Arc<dyn Device>,
        progress: Option<Progress>,
    ) -> Result<Model> {
        file.check_complete()?;
        let vocab = Vocab::from_metadata(file.metadata())?;
        let name = file.metadata().get_str("general.architecture")?;
        let Some((_, load)) = ARCHITECTURES.iter().find(|(n, _)| *n == name) else {
            let known: Vec<&str> = ARCHITECTURES.iter().map(|(n, _)| *n).collect();
            return Err(Error::InvalidArgument(format!(
                "unsupported model architecture '{name}' (supported: {})",
                known.join(", ")
            )));
        };
        let arch = load(&file, device.as_ref(), progress)?;
        let n_vocab = arch.dims().n_vocab;
        // As llama.cpp, which shapes the embedding from the vocabulary: a
        // token without a row, or a row no token can reach, is a broken file.
        if n_vocab != vocab.len() {
            return Err(Error::InvalidArgument(format!(
                "the vocabulary has {} tokens but the token embedding {n_vocab} rows",
                vocab.len()
            )));
        }
        let model = Model {
            vocab,
            generates: arch.kv_layout().is_some(),
            arch,
            file,
            device,
        };
        if crate::log::log_enabled() {
            let tensors = model.file.tensors();
            crate::log_info!(
                "model: {} ({} layers, {} embd, {} tokens in the vocabulary, context {} trained), {} tensors, {:.2} MiB, on {}",
                model.arch_name(),
                model.n_layer(),
                model.n_embd(),
                model.n_vocab(),
                model.n_ctx_train(),
                tensors.len(),
                tensors.iter().map(|t| t.n_bytes).sum::<u64>() as f64 / (1u64 << 20) as f64,
                model.device.description()
            );
        }
        Ok(model)
    }

    pub fn arch(&self) -> &dyn Architecture {
        self.arch.as_ref()
    }

    /// The architecture's name (`general.architecture`).
    pub fn arch_name(&self) -> &'static str {
        self.arch.name()
    }

    pub fn file(&self) -> &Arc<GgufFile> {
        &self.file
    }

    /// The device the weights are bound on.
    pub fn device(&self) -> &Arc<dyn Device> {
        &self.device
    }

    /// Whether the model generates (a decoder with a KV cache).
    pub fn can_generate(&self) -> bool {
        self.generates
    }

    /// Width of the hidden states (and of embeddings).
    pub fn n_embd(&self) -> usize {
        self.arch.dims().n_embd
    }

    pub fn n_layer(&self) -> usize {
        self.arch.dims().n_layer
    }

    pub fn n_vocab(&self) -> usize {
        self.arch.dims().n_vocab
    }

    /// Positions the model was trained with.
    pub fn n_ctx_train(&self) -> usize {
        self.arch.dims().n_ctx_train
    }

    /// An error unless every token is inside the vocabulary.
    pub fn check_tokens(&self, tokens: &[u32]) -> Result<()> {
        let n_vocab = self.n_vocab();
        match tokens.iter().find(|&&t| t as usize >= n_vocab) {
            Some(&t) => Err(Error::InvalidArgument(format!(
                "token {t} is outside the vocabulary of {n_vocab}"
            ))),
            None => Ok(()),
        }
    }

    /// `{arch}.pooling_type` from the metadata, when the file has one.
    pub fn pooling_type(&self) -> Option<u32> {
        self.file()
            .metadata()
            .get_u32(&format!("{}.pooling_type", self.arch_name()))
            .ok()
    }
}

/// The state a forward pass was given, as the architecture's own type.
pub(crate) fn state_of<'a, T: 'static>(state: &'a mut dyn Any, arch: &str) -> Result<&'a mut T> {
    state.downcast_mut::<T>().ok_or_else(|| {
        Error::InvalidArgument(format!(
            "a forward pass of a {arch} model was given another model's state"
        ))
    })
}

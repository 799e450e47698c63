//! LoRA adapters as llama.cpp reads them (GGUF files written by its
//! `convert_lora_to_gguf.py`): `general.type` "adapter", `adapter.type`
//! "lora", `adapter.lora.alpha`, and for each adapted weight `NAME.lora_a`
//! (rank rows of the weight's input width) and `NAME.lora_b` (the weight's
//! output rows of rank values). A context applies any number of them, each
//! with its own scale: `W·x + scale · alpha/rank · B·(A·x)`.
//!
//! - `backend.rs`: the backend a forward pass sees with adapters applied

pub(crate) mod backend;

use std::collections::HashMap;
use std::sync::Arc;

use crate::backend::Matrix;
use crate::error::{Error, Result};
use crate::gguf::GgufFile;
use crate::model::weights::{matrix, table, tensor};
use crate::model::Model;

/// One adapted weight's low-rank pair.
pub(crate) struct LoraPair {
    /// Rank rows of the weight's input width (for the token embedding: a
    /// table of one rank-wide row per token).
    pub a: Matrix,
    /// The weight's output rows of rank values.
    pub b: Matrix,
}

/// A loaded adapter, for the model it was checked against.
pub struct LoraAdapter {
    path: String,
    alpha: f32,
    pairs: HashMap<String, LoraPair>,
    /// The token embedding's pair, applied to the look-up.
    embedding: Option<(String, LoraPair)>,
    /// Keeps the adapter's mapped or read bytes alive.
    _file: Arc<GgufFile>,
}

impl std::fmt::Debug for LoraAdapter {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LoraAdapter")
            .field("path", &self.path)
            .field("alpha", &self.alpha)
            .field("weights", &self.n_weights())
            .finish()
    }
}

/// An adapter applied by a context, at a scale.
#[derive(Clone, Debug)]
pub struct ActiveLora {
    pub adapter: Arc<LoraAdapter>,
    pub scale: f32,
}

impl LoraAdapter {
    /// Reads the adapter in `file` for `model`. Every check is made before
    /// anything is used: the file is a LoRA adapter of the model's
    /// architecture, every pair is complete, names a weight of the model and
    /// has its shapes. `path` is how the adapter is reported back.
    pub fn load(file: Arc<GgufFile>, model: &Model, path: &str) -> Result<LoraAdapter> {
        let bad = |why: String| Error::InvalidArgument(format!("LoRA adapter {path}: {why}"));
        let md = file.metadata();
        let text = |key: &str| md.get_str(key).ok().map(str::to_string).unwrap_or_default();
        if text("general.type") != "adapter" {
            return Err(bad(format!(
                "general.type is {:?}, expected \"adapter\"",
                text("general.type")
            )));
        }
        if text("adapter.type") != "lora" {
            return Err(bad(format!(
                "adapter.type is {:?}, expected \"lora\"",
                text("adapter.type")
            )));
        }
        let arch = text("general.architecture");
        if arch != model.arch_name() {
            return Err(bad(format!(
                "made for a {arch:?} model, this model is {:?}",
                model.arch_name()
            )));
        }
        let alpha = if md.contains("adapter.lora.alpha") {
            let a = md
                .get_f32("adapter.lora.alpha")
                .map_err(|e| bad(e.to_string()))?;
            if !a.is_finite() {
                return Err(bad(format!("adapter.lora.alpha is {a}")));
            }
            a
        } else {
            0.0
        };

        // Pair up the tensors by the weight they change.
        let mut halves: HashMap<String, [Option<String>; 2]> = HashMap::new();
        for info in file.tensors() {
            let name = info.name.as_str();
            if let Some(base) = name.strip_suffix(".lora_a") {
                halves.entry(base.to_string()).or_default()[0] = Some(name.to_string());
            } else if let Some(base) = name.strip_suffix(".lora_b") {
                halves.entry(base.to_string()).or_default()[1] = Some(name.to_string());
            } else if name.ends_with("_norm.weight") {
                continue; // norm adapters are ignored, as in llama.cpp
            } else {
                return Err(bad(format!(
                    "tensor '{name}' is neither a lora_a nor a lora_b"
                )));
            }
        }
        if halves.is_empty() {
            return Err(bad("it has no lora_a/lora_b tensors".into()));
        }
        let device = model.device();
        let base_file = model.file();
        let mut pairs = HashMap::new();
        let mut embedding = None;
        let mut names: Vec<&String> = halves.keys().collect();
        names.sort();
        for base in names {
            let [Some(a_name), Some(b_name)] = &halves[base] else {
                return Err(bad(format!("the pair for '{base}' is missing a half")));
            };
            let w = tensor(base_file, base).map_err(|_| {
                bad(format!(
                    "'{base}' is not a weight of this model (another base model?)"
                ))
            })?;
            // Experts are bound one matrix per expert: a pair for the whole
            // 3-D tensor would find no product to join.
            if base.ends_with("_exps.weight") {
                return Err(bad(format!(
                    "'{base}' holds a mixture's experts: adapters for experts are not supported"
                )));
            }
            let a = tensor(&file, a_name)?;
            let b = tensor(&file, b_name)?;
            let is_embedding = base.ends_with("token_embd.weight");
            // Shapes as rows x columns: W is out x in; A is rank x in; B is
            // out x rank. The token embedding's pair is flipped: A is
            // vocabulary x rank, B is width x rank.
            let fits = if is_embedding {
                a.rows == w.rows && b.rows == w.cols && a.cols == b.cols
            } else {
                a.cols == w.cols && b.rows == w.rows && a.rows == b.cols
            };
            if !fits || a.rows == 0 || b.cols == 0 {
                return Err(bad(format!(
                    "'{base}' is {}x{} but its pair is {}x{} and {}x{} (another base model?)",
                    w.rows, w.cols, a.rows, a.cols, b.rows, b.cols
                )));
            }
            if is_embedding {
                let pair = LoraPair {
                    a: table(device.as_ref(), &file, &a)?,
                    b: matrix(device.as_ref(), &file, &b)?,
                };
                embedding = Some((base.clone(), pair));
            } else {
                let pair = LoraPair {
                    a: matrix(device.as_ref(), &file, &a)?,
                    b: matrix(device.as_ref(), &file, &b)?,
                };
                pairs.insert(base.clone(), pair);
            }
        }
        crate::log_info!(
            "lora: {path}: {} weights, alpha {alpha}",
            pairs.len() + usize::from(embedding.is_some())
        );
        Ok(LoraAdapter {
            path: path.to_string(),
            alpha,
            pairs,
            embedding,
            _file: file,
        })
    }

    /// How the adapter was named when loaded.
    pub fn path(&self) -> &str {
        &self.path
    }

    pub fn alpha(&self) -> f32 {
        self.alpha
    }

    /// The number of weights it changes.
    pub fn n_weights(&self) -> usize {
        self.pairs.len() + usize::from(self.embedding.is_some())
    }

    pub(crate) fn pair(&self, weight: &str) -> Option<&LoraPair> {
        self.pairs.get(weight)
    }

    pub(crate) fn embedding(&self, table: &str) -> Option<&LoraPair> {
        match &self.embedding {
            Some((name, pair)) if name == table => Some(pair),
            _ => None,
        }
    }

    /// The factor of a pair's product: `scale · alpha / rank`, or `scale`
    /// when the file gives no alpha (llama.cpp's rule).
    pub(crate) fn scale_of(&self, pair: &LoraPair, scale: f32) -> f32 {
        if self.alpha != 0.0 {
            scale * self.alpha / pair.b.cols() as f32
        } else {
            scale
        }
    }
}

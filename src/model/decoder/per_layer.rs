//! Gemma 4's per-layer inputs. Besides the residual stream, every layer
//! gets a small input of its own per token (`width` values; 256 in the
//! E2B/E4B releases), made once per micro-batch from two sources:
//!
//! - a second embedding of the token (`per_layer_token_embd`, every layer's
//!   input in one row, times sqrt(width)), read as rows in place: it is the
//!   largest tensor of the file, and only the batch's rows are touched;
//! - the scaled token embedding projected onto the same values
//!   (`per_layer_model_proj`, times 1/sqrt(n_embd)), RMS-normed per layer
//!   (`per_layer_proj_norm`).
//!
//! Their sum times 1/sqrt(2) is the inputs. After its feed-forward, layer
//! l gates its input by its output (gelu(`inp_gate` · x) · input), projects
//! that back to the embedding (`proj`), RMS-norms it (`post_norm`) and adds
//! it to the residual. Every op is the reference's, in its order.

use std::sync::Arc;

use crate::backend::{Backend, Device, Matrix};
use crate::error::{Error, Result};
use crate::gguf::GgufFile;
use crate::model::weights::{named_matrix, named_vector, shaped, table, tensor};

/// The model's part: the second embedding and the projection.
pub(super) struct Inputs {
    embd: Matrix,
    proj: Matrix,
    norm: Vec<f32>,
    width: usize,
    n_layer: usize,
    n_embd: usize,
}

/// One layer's part: its gate, its projection back and their norm.
pub(super) struct LayerInput {
    gate: Matrix,
    proj: Matrix,
    post_norm: Vec<f32>,
}

/// A context's buffers for the inputs (sized for its micro-batches).
pub(super) struct Scratch {
    /// Per token, every layer's input (`n_layer` x `width`).
    inputs: Vec<f32>,
    /// The looked-up rows and the projection, before they are summed.
    looked_up: Vec<f32>,
    projected: Vec<f32>,
    /// One layer's gate and its slice of the inputs (per token, `width`).
    gate: Vec<f32>,
    input: Vec<f32>,
    /// One layer's output, before and after its norm (per token, `n_embd`).
    out: Vec<f32>,
    normed: Vec<f32>,
    width: usize,
    n_layer: usize,
}

impl Inputs {
    /// The inputs of `n_layer` layers of `width` values each.
    pub(super) fn load(
        device: &dyn Device,
        file: &Arc<GgufFile>,
        n_layer: usize,
        n_embd: usize,
        n_vocab: usize,
        width: usize,
    ) -> Result<Inputs> {
        let all = n_layer.checked_mul(width).ok_or_else(|| {
            Error::InvalidArgument(format!(
                "per-layer inputs of {width} values for {n_layer} layers are too many"
            ))
        })?;
        let embd = shaped(tensor(file, "per_layer_token_embd.weight")?, n_vocab, all)?;
        Ok(Inputs {
            embd: table(device, file, &embd)?,
            proj: named_matrix(device, file, "per_layer_model_proj.weight", all, n_embd)?,
            norm: named_vector(file, "per_layer_proj_norm.weight", width)?,
            width,
            n_layer,
            n_embd,
        })
    }

    /// The projection (the embedding is read as rows, never multiplied).
    pub(super) fn matrix(&self) -> &Matrix {
        &self.proj
    }

    /// For `lamina info`.
    pub(super) fn describe(&self) -> String {
        format!(
            "{} values per layer and token (per_layer_token_embd {}, {} MiB, read in place)",
            self.width,
            self.embd.dtype(),
            self.embd.size_bytes() >> 20
        )
    }

    pub(super) fn scratch(&self, max_tokens: usize, n_layer: usize) -> Result<Scratch> {
        let buf = |w: usize| crate::model::scratch(max_tokens, w);
        let all = n_layer * self.width;
        Ok(Scratch {
            inputs: buf(all)?,
            looked_up: buf(all)?,
            projected: buf(all)?,
            gate: buf(self.width)?,
            input: buf(self.width)?,
            out: buf(self.n_embd)?,
            normed: buf(self.n_embd)?,
            width: self.width,
            n_layer,
        })
    }

    /// Every layer's inputs for `tokens`, whose scaled embeddings are `x`.
    pub(super) fn prepare(
        &self,
        be: &mut dyn Backend,
        tokens: &[u32],
        x: &[f32],
        eps: f32,
        s: &mut Scratch,
    ) -> Result<()> {
        let n = tokens.len();
        let all = n * self.n_layer * self.width;
        let looked_up = &mut s.looked_up[..all];
        be.get_rows(&self.embd, tokens, looked_up)?;
        be.scale(looked_up, (self.width as f32).sqrt())?;
        let projected = &mut s.projected[..all];
        be.mul_mat(&self.proj, x, n, projected)?;
        be.scale(projected, 1.0 / (self.n_embd as f32).sqrt())?;
        let inputs = &mut s.inputs[..all];
        be.rms_norm(projected, &self.norm, eps, inputs)?;
        be.add(inputs, looked_up)?;
        be.scale(inputs, std::f32::consts::FRAC_1_SQRT_2)
    }
}

impl LayerInput {
    pub(super) fn load(
        device: &dyn Device,
        file: &Arc<GgufFile>,
        layer: usize,
        n_embd: usize,
        width: usize,
    ) -> Result<LayerInput> {
        let w = |n: &str| format!("blk.{layer}.{n}.weight");
        Ok(LayerInput {
            gate: named_matrix(device, file, &w("inp_gate"), width, n_embd)?,
            proj: named_matrix(device, file, &w("proj"), n_embd, width)?,
            post_norm: named_vector(file, &w("post_norm"), n_embd)?,
        })
    }

    pub(super) fn matrices(&self) -> [&Matrix; 2] {
        [&self.gate, &self.proj]
    }

    /// Adds layer `layer`'s input, gated by its output `x` (`n` tokens), to
    /// `x`.
    pub(super) fn forward(
        &self,
        be: &mut dyn Backend,
        layer: usize,
        x: &mut [f32],
        n: usize,
        eps: f32,
        s: &mut Scratch,
    ) -> Result<()> {
        let (w, per_token) = (s.width, s.n_layer * s.width);
        let gate = &mut s.gate[..n * w];
        be.mul_mat(&self.gate, x, n, gate)?;
        let input = &mut s.input[..n * w];
        for (dst, src) in input
            .chunks_exact_mut(w)
            .zip(s.inputs.chunks_exact(per_token))
        {
            dst.copy_from_slice(&src[layer * w..(layer + 1) * w]);
        }
        // gelu(gate) · input: ggml's GELU then its product, which is what
        // GeGLU computes.
        be.gelu_mul(gate, input)?;
        let d = x.len() / n.max(1);
        let out = &mut s.out[..n * d];
        be.mul_mat(&self.proj, gate, n, out)?;
        let normed = &mut s.normed[..n * d];
        be.rms_norm(out, &self.post_norm, eps, normed)?;
        be.add(x, normed)
    }
}

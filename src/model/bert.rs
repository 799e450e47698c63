//! BERT encoders (all-MiniLM, bge, ms-marco cross-encoders, ...): token,
//! token-type (row 0 for every token, as llama.cpp) and learned position
//! embeddings, LayerNorm; per layer biased Q/K/V projections, attention over
//! the other tokens of the same sequence (not causal, no KV cache: a
//! sequence is encoded whole), output projection, residual, LayerNorm, a GELU
//! feed-forward, residual, LayerNorm. The last layer's output is the hidden
//! state that pooling reads; rank pooling adds the classifier head
//! (`cls.*`: dense + tanh, then `cls.output.*`).

use std::sync::Arc;

use super::attention::attend;
use super::matmul::{matmul, MatRef};
use super::ops::{gelu, layer_norm};
use super::weights::{tensor, vector, weight, LoadSteps, Progress, Tensor};
use crate::backend::cpu::Kernels;
use crate::context::kv_cache::{LayerKv, Rows, SeqId};
use crate::error::{Error, Result};
use crate::gguf::GgufFile;
use crate::parallel::Workers;

/// Hyperparameters from `bert.*` metadata.
#[derive(Clone, Debug, PartialEq)]
pub struct BertHParams {
    pub n_layer: usize,
    pub n_embd: usize,
    pub n_head: usize,
    pub head_dim: usize,
    pub n_ff: usize,
    pub n_vocab: usize,
    pub eps: f32,
    /// Positions the model was trained with (its position embeddings).
    pub n_ctx_train: usize,
}

struct Norm {
    w: Vec<f32>,
    b: Vec<f32>,
}

/// A matrix and its bias.
struct Linear {
    w: Tensor,
    b: Vec<f32>,
}

struct Layer {
    q: Linear,
    k: Linear,
    v: Linear,
    out: Linear,
    attn_norm: Norm,
    up: Linear,
    down: Linear,
    out_norm: Norm,
}

/// The classifier of rank pooling: `out · tanh(dense · h_cls + b) + b_out`.
struct Classifier {
    dense: Linear,
    out: Linear,
}

pub struct BertModel {
    file: Arc<GgufFile>,
    pub hparams: BertHParams,
    kernels: Kernels,
    token_embd: Tensor,
    /// Token-type row 0, added to every token.
    type_embd: Vec<f32>,
    pos_embd: Tensor,
    embd_norm: Norm,
    layers: Vec<Layer>,
    classifier: Option<Classifier>,
}

impl BertModel {
    pub fn load(
        file: Arc<GgufFile>,
        kernels: Kernels,
        progress: Option<Progress>,
    ) -> Result<BertModel> {
        let md = file.metadata();
        let u = |k: &str| md.get_u32(&format!("bert.{k}")).map(|v| v as usize);
        let n_embd = u("embedding_length")?;
        let n_head = u("attention.head_count")?;
        if n_head == 0 || n_embd % n_head != 0 {
            return Err(Error::InvalidArgument(format!(
                "inconsistent attention shape: {n_embd} embedding, {n_head} heads"
            )));
        }
        let token_embd = tensor(&file, "token_embd.weight")?;
        let hparams = BertHParams {
            n_layer: u("block_count")?,
            n_embd,
            n_head,
            head_dim: n_embd / n_head,
            n_ff: u("feed_forward_length")?,
            n_vocab: token_embd.rows,
            eps: md.get_f32("bert.attention.layer_norm_epsilon")?,
            n_ctx_train: u("context_length")?,
        };
        let h = &hparams;
        let mut steps = LoadSteps::new(&file, progress)?;
        let shaped = |name: &str, rows: usize, cols: usize| -> Result<Tensor> {
            let t = tensor(&file, name)?;
            if (t.rows, t.cols) != (rows, cols) {
                return Err(Error::InvalidArgument(format!(
                    "tensor '{name}' is {}x{}, expected {rows}x{cols}",
                    t.rows, t.cols
                )));
            }
            Ok(t)
        };
        let norm = |name: &str| -> Result<Norm> {
            Ok(Norm {
                w: vector(&file, &tensor(&file, &format!("{name}.weight"))?, n_embd)?,
                b: vector(&file, &tensor(&file, &format!("{name}.bias"))?, n_embd)?,
            })
        };
        let linear = |name: &str, rows: usize, cols: usize| -> Result<Linear> {
            Ok(Linear {
                w: shaped(&format!("{name}.weight"), rows, cols)?,
                b: vector(&file, &tensor(&file, &format!("{name}.bias"))?, rows)?,
            })
        };
        shaped("token_embd.weight", h.n_vocab, n_embd)?;
        let types = shaped(
            "token_types.weight",
            tensor(&file, "token_types.weight")?.rows,
            n_embd,
        )?;
        let mut type_embd = vec![0.0; n_embd];
        weight(&file, &types).row_f32(0, &mut type_embd)?;
        let pos_embd = shaped("position_embd.weight", h.n_ctx_train, n_embd)?;
        let embd_norm = norm("token_embd_norm")?;
        let mut layers = Vec::with_capacity(h.n_layer);
        for i in 0..h.n_layer {
            let p = |n: &str| format!("blk.{i}.{n}");
            let layer = Layer {
                q: linear(&p("attn_q"), n_embd, n_embd)?,
                k: linear(&p("attn_k"), n_embd, n_embd)?,
                v: linear(&p("attn_v"), n_embd, n_embd)?,
                out: linear(&p("attn_output"), n_embd, n_embd)?,
                attn_norm: norm(&p("attn_output_norm"))?,
                up: linear(&p("ffn_up"), h.n_ff, n_embd)?,
                down: linear(&p("ffn_down"), n_embd, h.n_ff)?,
                out_norm: norm(&p("layer_output_norm"))?,
            };
            let bytes = [
                &layer.q,
                &layer.k,
                &layer.v,
                &layer.out,
                &layer.up,
                &layer.down,
            ]
            .iter()
            .map(|l| l.w.range.len())
            .sum();
            layers.push(layer);
            steps.step(bytes)?;
        }
        let classifier = match tensor(&file, "cls.weight") {
            Ok(_) => {
                let out = tensor(&file, "cls.output.weight")?;
                Some(Classifier {
                    dense: linear("cls", n_embd, n_embd)?,
                    out: linear("cls.output", out.rows, n_embd)?,
                })
            }
            Err(Error::MissingTensor { .. }) => None,
            Err(e) => return Err(e),
        };
        steps.finish()?;
        Ok(BertModel {
            file,
            hparams,
            kernels,
            token_embd,
            type_embd,
            pos_embd,
            embd_norm,
            layers,
            classifier,
        })
    }

    pub fn kernels(&self) -> &Kernels {
        &self.kernels
    }

    pub fn file(&self) -> &Arc<GgufFile> {
        &self.file
    }

    /// Whether the model has the classifier head rank pooling needs.
    pub fn has_classifier(&self) -> bool {
        self.classifier.is_some()
    }

    /// Outputs of the classifier head (one per label).
    pub fn n_labels(&self) -> usize {
        self.classifier.as_ref().map_or(0, |c| c.out.w.rows)
    }

    /// `out = x·Wᵀ + b` for `n` rows.
    fn linear(
        &self,
        workers: &Workers,
        l: &Linear,
        x: &[f32],
        n: usize,
        out: &mut [f32],
    ) -> Result<()> {
        let w = weight(&self.file, &l.w);
        matmul(&self.kernels, workers, MatRef::Mapped(w), x, n, out)?;
        for row in out.chunks_exact_mut(l.w.rows) {
            for (o, &b) in row.iter_mut().zip(&l.b) {
                *o += b;
            }
        }
        Ok(())
    }

    /// The last layer's hidden states (`n_embd` per token) of a batch of
    /// whole sequences: token `i` sits at position `pos[i]` of sequence
    /// `seq[i]` and attends to every token of its sequence.
    pub(crate) fn encode(
        &self,
        workers: &Workers,
        tokens: &[u32],
        pos: &[i32],
        seq: &[SeqId],
    ) -> Result<Vec<f32>> {
        let h = &self.hparams;
        let (n, d, hd) = (tokens.len(), h.n_embd, h.head_dim);
        if let Some(&t) = tokens.iter().find(|&&t| t as usize >= h.n_vocab) {
            return Err(Error::InvalidArgument(format!(
                "token {t} is outside the vocabulary of {}",
                h.n_vocab
            )));
        }
        if let Some(&p) = pos.iter().find(|&&p| p < 0 || p as usize >= h.n_ctx_train) {
            return Err(Error::InvalidArgument(format!(
                "position {p} is outside the model's {} positions",
                h.n_ctx_train
            )));
        }
        let mut x = vec![0.0f32; n * d];
        let (embd, positions) = (
            weight(&self.file, &self.token_embd),
            weight(&self.file, &self.pos_embd),
        );
        let mut pos_row = vec![0.0f32; d];
        for ((row, &t), &p) in x.chunks_exact_mut(d).zip(tokens).zip(pos) {
            embd.row_f32(t as usize, row)?;
            positions.row_f32(p as usize, &mut pos_row)?;
            for ((v, &ty), &ps) in row.iter_mut().zip(&self.type_embd).zip(&pos_row) {
                *v = (*v + ty) + ps;
            }
        }
        let norm_rows = |x: &mut [f32], norm: &Norm| {
            let mut tmp = vec![0.0f32; d];
            for row in x.chunks_exact_mut(d) {
                layer_norm(row, &norm.w, &norm.b, h.eps, &mut tmp);
                row.copy_from_slice(&tmp);
            }
        };
        norm_rows(&mut x, &self.embd_norm);
        // Which tokens each token sees: those of its own sequence.
        let peers: Vec<Vec<usize>> = (0..n)
            .map(|i| (0..n).filter(|&j| seq[j] == seq[i]).collect())
            .collect();
        let scale = 1.0 / (hd as f32).sqrt();
        let mut q = vec![0.0f32; n * d];
        let mut kk = vec![0.0f32; n * d];
        let mut vv = vec![0.0f32; n * d];
        let mut att = vec![0.0f32; n * d];
        let mut proj = vec![0.0f32; n * d];
        let mut ff = vec![0.0f32; n * h.n_ff];
        for layer in &self.layers {
            self.linear(workers, &layer.q, &x, n, &mut q)?;
            self.linear(workers, &layer.k, &x, n, &mut kk)?;
            self.linear(workers, &layer.v, &x, n, &mut vv)?;
            // The batch's own keys, as f32 "cells" 0..n for the attention.
            let keys = LayerKv {
                k: Rows::F32(std::mem::take(&mut kk)),
                v: Rows::F32(Vec::new()),
            };
            let mut heads: Vec<&mut [f32]> = att.chunks_exact_mut(hd).collect();
            workers.for_each_mut(&mut heads, |idx, out| {
                let (i, head) = (idx / h.n_head, idx % h.n_head);
                let qh = &q[i * d + head * hd..i * d + (head + 1) * hd];
                attend(
                    &self.kernels,
                    &keys,
                    &vv,
                    false,
                    d,
                    head,
                    qh,
                    &peers[i],
                    scale,
                    out,
                );
            });
            if let Rows::F32(k) = keys.k {
                kk = k;
            }
            self.linear(workers, &layer.out, &att, n, &mut proj)?;
            for (p, &r) in proj.iter_mut().zip(&x) {
                *p += r;
            }
            norm_rows(&mut proj, &layer.attn_norm);
            self.linear(workers, &layer.up, &proj, n, &mut ff)?;
            gelu(&mut ff);
            self.linear(workers, &layer.down, &ff, n, &mut x)?;
            for (v, &r) in x.iter_mut().zip(&proj) {
                *v += r;
            }
            norm_rows(&mut x, &layer.out_norm);
        }
        Ok(x)
    }

    /// The classifier head on `n` hidden states (the sequences' first
    /// tokens): `n_labels` scores each. An error without a head.
    pub(crate) fn classify(&self, workers: &Workers, cls: &[f32], n: usize) -> Result<Vec<f32>> {
        let c = self.classifier.as_ref().ok_or_else(|| {
            Error::InvalidArgument("the model has no classifier head (cls.weight)".into())
        })?;
        let mut dense = vec![0.0f32; n * self.hparams.n_embd];
        self.linear(workers, &c.dense, cls, n, &mut dense)?;
        for v in dense.iter_mut() {
            *v = v.tanh();
        }
        let mut scores = vec![0.0f32; n * c.out.w.rows];
        self.linear(workers, &c.out, &dense, n, &mut scores)?;
        Ok(scores)
    }
}

//! BERT encoders (all-MiniLM, bge, ms-marco cross-encoders, ...): token,
//! token-type (row 0 for every token, as llama.cpp) and learned position
//! embeddings, LayerNorm; per layer biased Q/K/V projections, attention over
//! the other tokens of the same sequence (not causal, no KV cache: a
//! sequence is encoded whole), output projection, residual, LayerNorm, a GELU
//! feed-forward, residual, LayerNorm. The last layer's output is the hidden
//! state that pooling reads; rank pooling adds the classifier head
//! (`cls.*`: dense + tanh, then `cls.output.*`).

use std::any::Any;
use std::sync::Arc;

use super::weights::{matrix, shaped, table, tensor, vector, LoadSteps, Progress};
use super::{state_of, Architecture, Dims};
use crate::backend::{AttentionArgs, Backend, CacheRows, Device, Matrix};
use crate::error::{Error, Result};
use crate::gguf::GgufFile;
use crate::kv::{KvLayout, SeqId, MAX_SEQUENCES};

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
    w: Matrix,
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

pub struct Bert {
    pub hparams: BertHParams,
    token_embd: Matrix,
    /// Token-type row 0, added to every token.
    type_embd: Vec<f32>,
    pos_embd: Matrix,
    embd_norm: Norm,
    layers: Vec<Layer>,
    classifier: Option<Classifier>,
}

/// Scratch of one context's encodes.
struct State {
    max_tokens: usize,
    x: Vec<f32>,
    pos_rows: Vec<f32>,
    q: Vec<f32>,
    k: Vec<f32>,
    v: Vec<f32>,
    att: Vec<f32>,
    proj: Vec<f32>,
    ff: Vec<f32>,
    pos_ids: Vec<u32>,
    seq_bits: Vec<u64>,
}

pub(crate) fn load(
    file: &Arc<GgufFile>,
    device: &dyn Device,
    progress: Option<Progress>,
) -> Result<Box<dyn Architecture>> {
    let md = file.metadata();
    let u = |k: &str| md.get_u32(&format!("bert.{k}")).map(|v| v as usize);
    let n_embd = u("embedding_length")?;
    let n_head = u("attention.head_count")?;
    if n_head == 0 || n_embd % n_head != 0 {
        return Err(Error::InvalidArgument(format!(
            "inconsistent attention shape: {n_embd} embedding, {n_head} heads"
        )));
    }
    let embd = tensor(file, "token_embd.weight")?;
    let h = BertHParams {
        n_layer: u("block_count")?,
        n_embd,
        n_head,
        head_dim: n_embd / n_head,
        n_ff: u("feed_forward_length")?,
        n_vocab: embd.rows,
        eps: md.get_f32("bert.attention.layer_norm_epsilon")?,
        n_ctx_train: u("context_length")?,
    };
    if h.n_layer == 0 {
        return Err(Error::InvalidArgument(
            "bert.block_count is 0: the model has no layers".into(),
        ));
    }
    if !(h.eps.is_finite() && h.eps > 0.0) {
        return Err(Error::InvalidArgument(format!(
            "bert.attention.layer_norm_epsilon is {}: it must be a positive number",
            h.eps
        )));
    }
    let mut steps = LoadSteps::new(file, progress)?;
    let norm = |name: &str| -> Result<Norm> {
        Ok(Norm {
            w: vector(file, &tensor(file, &format!("{name}.weight"))?, n_embd)?,
            b: vector(file, &tensor(file, &format!("{name}.bias"))?, n_embd)?,
        })
    };
    let linear = |name: &str, rows: usize, cols: usize| -> Result<Linear> {
        let w = shaped(tensor(file, &format!("{name}.weight"))?, rows, cols)?;
        Ok(Linear {
            w: matrix(device, file, &w)?,
            b: vector(file, &tensor(file, &format!("{name}.bias"))?, rows)?,
        })
    };
    let token_embd = table(device, file, &shaped(embd, h.n_vocab, n_embd)?)?;
    let types = tensor(file, "token_types.weight")?;
    let types = shaped(types.clone(), types.rows, n_embd)?;
    let mut type_embd = vec![0.0; n_embd];
    crate::tensor::convert::dequantize(
        types.dtype,
        types
            .bytes(file)
            .get(..types.dtype.bytes_for(n_embd))
            .ok_or_else(|| Error::InvalidArgument("token_types.weight has no rows".into()))?,
        &mut type_embd,
    )?;
    let pos_embd = table(
        device,
        file,
        &shaped(tensor(file, "position_embd.weight")?, h.n_ctx_train, n_embd)?,
    )?;
    let embd_norm = norm("token_embd_norm")?;
    let mut layers = Vec::new();
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
        .map(|l| l.w.size_bytes())
        .sum();
        layers.push(layer);
        steps.step(bytes)?;
    }
    let classifier = match tensor(file, "cls.weight") {
        Ok(_) => {
            let out = tensor(file, "cls.output.weight")?;
            Some(Classifier {
                dense: linear("cls", n_embd, n_embd)?,
                out: linear("cls.output", out.rows, n_embd)?,
            })
        }
        Err(Error::MissingTensor { .. }) => None,
        Err(e) => return Err(e),
    };
    steps.finish()?;
    Ok(Box::new(Bert {
        hparams: h,
        token_embd,
        type_embd,
        pos_embd,
        embd_norm,
        layers,
        classifier,
    }))
}

impl Bert {
    /// `out = x·Wᵀ + b` for `n` rows.
    fn linear(
        be: &mut dyn Backend,
        l: &Linear,
        x: &[f32],
        n: usize,
        out: &mut [f32],
    ) -> Result<()> {
        be.mul_mat(&l.w, x, n, out)?;
        be.add_bias(out, &l.b)
    }
}

impl Architecture for Bert {
    fn name(&self) -> &'static str {
        "bert"
    }

    fn dims(&self) -> Dims {
        let h = &self.hparams;
        Dims {
            n_embd: h.n_embd,
            n_layer: h.n_layer,
            n_vocab: h.n_vocab,
            n_ctx_train: h.n_ctx_train,
        }
    }

    fn kv_layout(&self) -> Option<KvLayout> {
        None
    }

    fn new_state(&self, max_tokens: usize, _n_ctx: usize) -> Result<Box<dyn Any + Send>> {
        let h = &self.hparams;
        let n = max_tokens.min(h.n_ctx_train);
        let buf = |width: usize| super::scratch(n, width);
        Ok(Box::new(State {
            max_tokens: n,
            x: buf(h.n_embd)?,
            pos_rows: buf(h.n_embd)?,
            q: buf(h.n_embd)?,
            k: buf(h.n_embd)?,
            v: buf(h.n_embd)?,
            att: buf(h.n_embd)?,
            proj: buf(h.n_embd)?,
            ff: buf(h.n_ff)?,
            pos_ids: vec![0; n],
            seq_bits: vec![0; n],
        }))
    }

    fn encode(
        &self,
        be: &mut dyn Backend,
        tokens: &[u32],
        pos: &[i32],
        seq: &[SeqId],
        state: &mut dyn Any,
        out: &mut Vec<f32>,
    ) -> Result<()> {
        let h = &self.hparams;
        let s: &mut State = state_of(state, self.name())?;
        let (n, d) = (tokens.len(), h.n_embd);
        if n > s.max_tokens || pos.len() != n || seq.len() != n {
            return Err(Error::InvalidArgument(format!(
                "an encode of {n} tokens ({} positions, {} sequence ids), at most {}",
                pos.len(),
                seq.len(),
                s.max_tokens
            )));
        }
        if let Some(&p) = pos.iter().find(|&&p| p < 0 || p as usize >= h.n_ctx_train) {
            return Err(Error::InvalidArgument(format!(
                "position {p} is outside the model's {} positions",
                h.n_ctx_train
            )));
        }
        if let Some(&q) = seq.iter().find(|&&q| q as usize >= MAX_SEQUENCES) {
            return Err(Error::InvalidArgument(format!(
                "sequence id {q} is out of range (at most {MAX_SEQUENCES} sequences)"
            )));
        }
        let x = &mut s.x[..n * d];
        let pos_rows = &mut s.pos_rows[..n * d];
        let q = &mut s.q[..n * d];
        let k = &mut s.k[..n * d];
        let v = &mut s.v[..n * d];
        let att = &mut s.att[..n * d];
        let proj = &mut s.proj[..n * d];
        let ff = &mut s.ff[..n * h.n_ff];
        let pos_ids = &mut s.pos_ids[..n];
        let seq_bits = &mut s.seq_bits[..n];
        for ((id, bit), (&p, &q)) in pos_ids
            .iter_mut()
            .zip(seq_bits.iter_mut())
            .zip(pos.iter().zip(seq))
        {
            *id = p as u32;
            *bit = 1u64 << q;
        }

        // Embeddings: (token + type) + position, then LayerNorm.
        be.get_rows(&self.token_embd, tokens, x)?;
        be.add_bias(x, &self.type_embd)?;
        be.get_rows(&self.pos_embd, pos_ids, pos_rows)?;
        be.add(x, pos_rows)?;
        be.layer_norm(x, &self.embd_norm.w, &self.embd_norm.b, h.eps)?;
        let scale = 1.0 / (h.head_dim as f32).sqrt();
        for layer in &self.layers {
            Self::linear(be, &layer.q, x, n, q)?;
            Self::linear(be, &layer.k, x, n, k)?;
            Self::linear(be, &layer.v, x, n, v)?;
            // Every token of the batch is a "cell" the others of its
            // sequence see (not causal).
            let args = AttentionArgs {
                q,
                k: CacheRows::F32(k, d),
                v: CacheRows::F32(v, d),
                n_head: h.n_head,
                n_head_kv: h.n_head,
                head_dim: h.head_dim,
                scale,
                cell_pos: pos,
                cell_seqs: seq_bits,
                query_pos: pos,
                query_seq: seq,
                causal: false,
                window: None,
            };
            be.attention(&args, att)?;
            Self::linear(be, &layer.out, att, n, proj)?;
            be.add(proj, x)?;
            be.layer_norm(proj, &layer.attn_norm.w, &layer.attn_norm.b, h.eps)?;
            Self::linear(be, &layer.up, proj, n, ff)?;
            be.gelu(ff)?;
            Self::linear(be, &layer.down, ff, n, x)?;
            be.add(x, proj)?;
            be.layer_norm(x, &layer.out_norm.w, &layer.out_norm.b, h.eps)?;
        }
        out.extend_from_slice(x);
        Ok(())
    }

    fn n_labels(&self) -> usize {
        self.classifier.as_ref().map_or(0, |c| c.out.w.rows())
    }

    fn classify(
        &self,
        be: &mut dyn Backend,
        cls: &[f32],
        n: usize,
        out: &mut Vec<f32>,
    ) -> Result<()> {
        let Some(c) = self.classifier.as_ref() else {
            return Err(Error::InvalidArgument(format!(
                "rank pooling needs a classifier head (cls.weight, cls.output.weight): this {} model has none",
                self.name()
            )));
        };
        let mut dense = vec![0.0f32; n * self.hparams.n_embd];
        Self::linear(be, &c.dense, cls, n, &mut dense)?;
        be.tanh(&mut dense)?;
        let start = out.len();
        out.resize(start + n * c.out.w.rows(), 0.0);
        Self::linear(be, &c.out, &dense, n, &mut out[start..])
    }

    fn repacked_matrices(&self) -> usize {
        self.layers
            .iter()
            .flat_map(|l| [&l.q.w, &l.k.w, &l.v.w, &l.out.w, &l.up.w, &l.down.w])
            .filter(|m| m.is_repacked())
            .count()
    }
}

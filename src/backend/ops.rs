//! Parameters of the backend's operations that are more than a slice: rotary
//! embeddings, cache rows, and an attention call.

use half::f16;

use crate::error::{Error, Result};
use crate::tensor::blocks::{BlockQ8_0, QK};

/// Which elements RoPE rotates together.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RopeKind {
    /// Neighbours (2i, 2i+1): llama's ordering.
    Normal,
    /// Halves (i, i + dim/2): GPT-NeoX's ordering.
    Neox,
}

/// Rotary embedding parameters, from the model's metadata.
#[derive(Clone, Debug, PartialEq)]
pub struct Rope {
    pub kind: RopeKind,
    pub head_dim: usize,
    /// Leading dimensions of each head that rotate (the rest pass through).
    pub dim: usize,
    pub base: f32,
    /// Position scale (1 / linear scaling factor).
    pub freq_scale: f32,
    /// Per-pair divisors of the angle (llama 3.1's `rope_freqs.weight`).
    pub freq_factors: Option<Vec<f32>>,
    /// Multiplies the sines and cosines (ggml's `attn_factor`: LongRoPE's
    /// `rope.scaling.attn_factor`); 1 for most models.
    pub attn_factor: f32,
}

/// How rows of a cache (K or V) are stored.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CacheType {
    F16,
    F32,
    Q8_0,
}

impl CacheType {
    pub fn from_name(name: &str) -> Result<CacheType> {
        match name.to_ascii_lowercase().as_str() {
            "f16" => Ok(CacheType::F16),
            "f32" => Ok(CacheType::F32),
            "q8_0" => Ok(CacheType::Q8_0),
            _ => Err(Error::InvalidArgument(format!(
                "unsupported KV cache type '{name}' (supported: f16, f32, q8_0)"
            ))),
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            CacheType::F16 => "f16",
            CacheType::F32 => "f32",
            CacheType::Q8_0 => "q8_0",
        }
    }

    /// Bytes of one row of `width` values.
    pub fn bytes_per_row(self, width: usize) -> usize {
        match self {
            CacheType::F16 => width * 2,
            CacheType::F32 => width * 4,
            CacheType::Q8_0 => width / QK * std::mem::size_of::<BlockQ8_0>(),
        }
    }
}

/// Rows of `width` values in a cache's type, read-only.
#[derive(Clone, Copy)]
pub enum CacheRows<'a> {
    F16(&'a [f16], usize),
    F32(&'a [f32], usize),
    Q8_0(&'a [BlockQ8_0], usize),
}

/// Rows of `width` values in a cache's type, to write.
pub enum CacheRowsMut<'a> {
    F16(&'a mut [f16], usize),
    F32(&'a mut [f32], usize),
    Q8_0(&'a mut [BlockQ8_0], usize),
}

impl CacheRows<'_> {
    pub fn cache_type(&self) -> CacheType {
        match self {
            CacheRows::F16(..) => CacheType::F16,
            CacheRows::F32(..) => CacheType::F32,
            CacheRows::Q8_0(..) => CacheType::Q8_0,
        }
    }

    /// Values per row.
    pub fn width(&self) -> usize {
        match *self {
            CacheRows::F16(_, w) | CacheRows::F32(_, w) | CacheRows::Q8_0(_, w) => w,
        }
    }

    /// Whole rows held.
    pub fn rows(&self) -> usize {
        match *self {
            CacheRows::F16(v, w) => v.len() / w.max(1),
            CacheRows::F32(v, w) => v.len() / w.max(1),
            CacheRows::Q8_0(v, w) => v.len() * QK / w.max(1),
        }
    }
}

/// One attention call over a micro-batch: `n` query tokens (`q`: rows of
/// `n_head x head_dim`) against `cells` cached positions (`k`, `v`: rows of
/// `n_head_kv x head_dim`). Query token `i` of sequence `query_seq[i]` at
/// `query_pos[i]` sees cell `c` when `cell_seqs[c]` has bit `query_seq[i]`
/// and, for causal attention, `cell_pos[c] <= query_pos[i]`; with a sliding
/// window, also `query_pos[i] - cell_pos[c] < window`.
pub struct AttentionArgs<'a> {
    pub q: &'a [f32],
    pub k: CacheRows<'a>,
    pub v: CacheRows<'a>,
    pub n_head: usize,
    pub n_head_kv: usize,
    pub head_dim: usize,
    pub scale: f32,
    pub cell_pos: &'a [i32],
    /// Sequences that see each cell, one bit per sequence.
    pub cell_seqs: &'a [u64],
    pub query_pos: &'a [i32],
    pub query_seq: &'a [u32],
    pub causal: bool,
    /// Sliding window: a query at p sees cells at p - window + 1 ..= p only.
    pub window: Option<u32>,
}

impl AttentionArgs<'_> {
    /// Checks every length against the shape; an error names the mismatch.
    pub fn check(&self, out_len: usize) -> Result<()> {
        let n = self.query_pos.len();
        let cells = self.cell_pos.len();
        let kv_w = self.n_head_kv * self.head_dim;
        let bad = |what: String| Err(Error::InvalidArgument(format!("attention: {what}")));
        if self.n_head == 0 || self.n_head_kv == 0 || self.n_head % self.n_head_kv != 0 {
            return bad(format!(
                "{} heads over {} KV heads",
                self.n_head, self.n_head_kv
            ));
        }
        if self.q.len() != n * self.n_head * self.head_dim || out_len != self.q.len() {
            return bad(format!(
                "{} query values and {out_len} outputs for {n} tokens of {} heads of {}",
                self.q.len(),
                self.n_head,
                self.head_dim
            ));
        }
        if self.query_seq.len() != n || self.cell_seqs.len() != cells {
            return bad("positions and sequences differ in length".into());
        }
        if self.query_seq.iter().any(|&s| s >= 64) {
            return bad("a sequence id is 64 or more".into());
        }
        for (what, rows) in [("K", &self.k), ("V", &self.v)] {
            if rows.width() != kv_w || rows.rows() < cells {
                return bad(format!(
                    "{what} holds {} rows of {}, expected {cells} rows of {kv_w}",
                    rows.rows(),
                    rows.width()
                ));
            }
            if rows.cache_type() == CacheType::Q8_0 && self.head_dim % QK != 0 {
                return bad(format!(
                    "a q8_0 {what} needs heads that are a multiple of {QK}"
                ));
            }
        }
        Ok(())
    }
}

/// One run of gated DeltaNet (Qwen3.5's linear attention) over `n` tokens
/// of one sequence. Row `t` of `qkv` holds token `t`'s queries, then its
/// keys (`n_head_k` heads of `dim` each, both already L2-normalised), then
/// its values (`n_head_v` heads of `dim`); value head `h` reads query and
/// key head `h % n_head_k`, as the reference tiles them. `g` (the log of
/// each head's decay, at most 0) and `beta` (each head's write strength)
/// have one value per token and value head.
///
/// Per head the state is a `dim x dim` matrix S, stored by output column:
/// `state[h][j * dim + i]` = S[i][j]. Each token decays S by exp(g), writes
/// the value's difference from what S recalls for the key, scaled by beta,
/// along the key, and reads the output as S's recall for the query over
/// sqrt(dim). Outputs are rows of `n_head_v x dim` per token.
pub struct DeltaNetArgs<'a> {
    pub qkv: &'a [f32],
    pub g: &'a [f32],
    pub beta: &'a [f32],
    pub n_head_k: usize,
    pub n_head_v: usize,
    pub dim: usize,
}

impl DeltaNetArgs<'_> {
    /// Values per token of `qkv`.
    pub fn row_width(&self) -> usize {
        (2 * self.n_head_k + self.n_head_v) * self.dim
    }

    /// The number of tokens, after checking every length against the
    /// shape (an error names the mismatch).
    pub fn check(&self, state_len: usize, out_len: usize) -> Result<usize> {
        let bad = |what: String| Err(Error::InvalidArgument(format!("gated_delta_net: {what}")));
        let (hk, hv, d) = (self.n_head_k, self.n_head_v, self.dim);
        if hk == 0 || d == 0 || hv % hk != 0 {
            return bad(format!("{hv} value heads over {hk} key heads of {d}"));
        }
        let width = self.row_width();
        if self.qkv.len() % width != 0 {
            return bad(format!("{} inputs are not rows of {width}", self.qkv.len()));
        }
        let n = self.qkv.len() / width;
        if self.g.len() != n * hv || self.beta.len() != n * hv {
            return bad(format!(
                "{} decays and {} strengths for {n} tokens of {hv} heads",
                self.g.len(),
                self.beta.len()
            ));
        }
        if Some(state_len) != hv.checked_mul(d * d) || out_len != n * hv * d {
            return bad(format!(
                "a state of {state_len} and {out_len} outputs for {n} tokens of {hv} heads of {d}"
            ));
        }
        Ok(n)
    }
}

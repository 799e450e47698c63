//! Causal attention of one query head over the KV cells a token sees, in
//! ggml's numerics (flash attention off): Q·K with the query in the K cache's
//! type (f16 queries against an f16 cache), a softmax in f32 with an f64 sum,
//! attention weights rounded to f16 before they meet an f16 V cache.

use half::f16;
use half::slice::HalfFloatSliceExt;

use crate::backend::cpu::Kernels;
use crate::context::kv_cache::{LayerKv, Rows};
use crate::tensor::blocks::{Block, BlockQ8_0, QK};

/// The query converted once for its dot products with the cached keys.
enum Query {
    F16(Vec<f16>),
    F32(Vec<f32>),
    Q8_0(Vec<BlockQ8_0>),
}

/// out = softmax(scale · q·Kᵀ) · V over `cells`, for query head `q` reading
/// KV head `kv_head`. `v` is the layer's V rows as f32 (`width` per cell);
/// `round_probs` rounds the attention weights through f16 first, as ggml
/// does when they meet an f16 V cache.
#[allow(clippy::too_many_arguments)]
pub fn attend(
    k: &Kernels,
    layer: &LayerKv,
    v: &[f32],
    round_probs: bool,
    width: usize,
    kv_head: usize,
    q: &[f32],
    cells: &[usize],
    scale: f32,
    out: &mut [f32],
) {
    let hd = q.len();
    let off = kv_head * hd;
    let query = match &layer.k {
        Rows::F16(_) => Query::F16(q.iter().map(|&v| f16::from_f32(v)).collect()),
        Rows::F32(_) => Query::F32(q.to_vec()),
        Rows::Q8_0(_) => {
            let mut b = vec![BlockQ8_0::zeroed(); hd / QK];
            (k.quantize_q8_0)(q, &mut b);
            Query::Q8_0(b)
        }
    };
    let mut scores: Vec<f32> = cells
        .iter()
        .map(|&c| {
            let start = c * width + off;
            let dot = match (&layer.k, &query) {
                (Rows::F16(kc), Query::F16(qh)) => (k.vec_dot_f16)(&kc[start..start + hd], qh),
                (Rows::F32(kc), Query::F32(qf)) => (k.vec_dot_f32)(&kc[start..start + hd], qf),
                (Rows::Q8_0(kc), Query::Q8_0(qb)) => {
                    (k.vec_dot_q8_0_q8_0)(&kc[start / QK..(start + hd) / QK], qb)
                }
                _ => 0.0,
            };
            dot * scale
        })
        .collect();
    let max = scores.iter().fold(f32::NEG_INFINITY, |m, &s| m.max(s));
    let mut sum = 0.0f64;
    for s in scores.iter_mut() {
        *s = (*s - max).exp();
        sum += *s as f64;
    }
    let inv = (1.0 / sum) as f32;
    for s in scores.iter_mut() {
        *s *= inv;
    }
    if round_probs {
        let mut h = vec![f16::ZERO; scores.len()];
        h.convert_from_f32_slice(&scores);
        h.convert_to_f32_slice(&mut scores);
    }
    out.fill(0.0);
    for (&c, &p) in cells.iter().zip(&scores) {
        let start = c * width + off;
        for (o, &x) in out.iter_mut().zip(&v[start..start + hd]) {
            *o += p * x;
        }
    }
}

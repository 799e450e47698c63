//! Attention of each query head over the cached positions its token sees, in
//! ggml's numerics (flash attention off): Q·K with the query in the K cache's
//! type (f16 queries against an f16 cache), a softmax in f32 with an f64 sum,
//! attention weights rounded to f16 before they meet an f16 V cache, and the
//! weighted sum read straight from the V rows in their stored type (no
//! conversion of the cache per token; for f16 caches one kernel call per
//! head goes over all its cells, keeping the sums in registers). The
//! (token, head) pairs are split into pieces, one scratch each, kept between
//! calls.

use half::f16;
use half::slice::HalfFloatSliceExt;

use super::kernels::Kernels;
use crate::backend::ops::{AttentionArgs, CacheRows};
use crate::error::{Error, Result};
use crate::parallel::Workers;
use crate::tensor::blocks::{Block, BlockQ8_0, QK};

/// One piece's scratch.
#[derive(Default)]
pub(super) struct AttnPiece {
    out: Vec<f32>,
    scores: Vec<f32>,
    /// Cells the current token sees, in cell order.
    visible: Vec<u32>,
    /// The token `visible` was built for.
    visible_for: Option<usize>,
    /// The query rounded to f16, held as f32.
    q16: Vec<f32>,
    q8: Vec<BlockQ8_0>,
    /// The weights rounded to f16, held as f32.
    probs16: Vec<f32>,
    /// f16 staging for those roundings (the `half` crate's slice
    /// conversions are vectorized; its one-value ones dispatch per call).
    half: Vec<f16>,
}

impl AttnPiece {
    /// Grows the buffers for `tasks` heads of `hd` values over `cells` cells.
    fn reserve(&mut self, tasks: usize, hd: usize, cells: usize) {
        fn grow<T: Clone>(v: &mut Vec<T>, len: usize, fill: T) {
            if v.len() < len {
                v.resize(len, fill);
            }
        }
        grow(&mut self.out, tasks * hd, 0.0);
        grow(&mut self.scores, cells, 0.0);
        if self.visible.capacity() < cells {
            self.visible.reserve(cells - self.visible.len());
        }
        grow(&mut self.q16, hd, 0.0);
        grow(&mut self.q8, hd.div_ceil(QK), BlockQ8_0::zeroed());
        grow(&mut self.probs16, cells, 0.0);
        grow(&mut self.half, cells.max(hd), f16::ZERO);
    }
}

pub(super) fn attention(
    k: &Kernels,
    workers: &Workers,
    pieces: &mut Vec<AttnPiece>,
    min_cells: usize,
    a: &AttentionArgs,
    out: &mut [f32],
) -> Result<()> {
    a.check(out.len())?;
    let n = a.query_pos.len();
    let hd = a.head_dim;
    let tasks = n * a.n_head;
    let cells = a.cell_pos.len();
    let wanted = workers.pieces(tasks).max(1);
    let per_piece = tasks.div_ceil(wanted).max(1);
    let n_pieces = tasks.div_ceil(per_piece);
    if pieces.len() < n_pieces {
        pieces.resize_with(n_pieces, AttnPiece::default);
    }
    for p in pieces[..n_pieces].iter_mut() {
        p.reserve(per_piece, hd, cells.max(min_cells));
        p.visible_for = None;
    }
    workers.for_each_mut(&mut pieces[..n_pieces], |p, piece| {
        let first = p * per_piece;
        // The outputs leave the piece while its other buffers are in use.
        let mut dst = std::mem::take(&mut piece.out);
        for t in first..(first + per_piece).min(tasks) {
            let (i, head) = (t / a.n_head, t % a.n_head);
            let o = (t - first) * hd;
            head_attention(k, a, i, head, piece, &mut dst[o..o + hd]);
        }
        piece.out = dst;
    });
    for (p, piece) in pieces[..n_pieces].iter().enumerate() {
        let first = p * per_piece;
        let count = per_piece.min(tasks - first);
        out[first * hd..(first + count) * hd].copy_from_slice(&piece.out[..count * hd]);
    }
    Ok(())
}

/// Whether query token `i` sees cell `c`.
fn sees(a: &AttentionArgs, i: usize, c: usize) -> bool {
    let (p, q) = (a.cell_pos[c], a.query_pos[i]);
    a.cell_seqs[c] & (1u64 << a.query_seq[i]) != 0
        && (!a.causal || p <= q)
        && a.window.is_none_or(|w| (q as i64 - p as i64) < w as i64)
}

/// out = softmax(scale · q·Kᵀ) · V for head `head` of token `i`.
fn head_attention(
    k: &Kernels,
    a: &AttentionArgs,
    i: usize,
    head: usize,
    s: &mut AttnPiece,
    out: &mut [f32],
) {
    let hd = a.head_dim;
    let kv_w = a.n_head_kv * hd;
    let off = (head / (a.n_head / a.n_head_kv)) * hd;
    if s.visible_for != Some(i) {
        s.visible.clear();
        s.visible.extend(
            (0..a.cell_pos.len())
                .filter(|&c| sees(a, i, c))
                .map(|c| c as u32),
        );
        s.visible_for = Some(i);
    }
    let q = &a.q[(i * a.n_head + head) * hd..(i * a.n_head + head + 1) * hd];
    let scores = &mut s.scores[..s.visible.len()];
    match a.k {
        CacheRows::F16(kc, _) => {
            // The query in f16, as ggml converts it, held as f32 (exactly).
            let (qh, qf) = (&mut s.half[..hd], &mut s.q16[..hd]);
            qh.convert_from_f32_slice(q);
            qh.convert_to_f32_slice(qf);
            (k.scores_f16)(kc, kv_w, off, &s.visible, qf, scores);
            for sc in scores.iter_mut() {
                *sc *= a.scale;
            }
        }
        CacheRows::F32(kc, _) => {
            if let Some(scores_f32) = k.scores_f32 {
                scores_f32(kc, kv_w, off, &s.visible, q, scores);
            } else {
                for (sc, &c) in scores.iter_mut().zip(&s.visible) {
                    let start = c as usize * kv_w + off;
                    *sc = (k.vec_dot_f32)(&kc[start..start + hd], q);
                }
            }
            for sc in scores.iter_mut() {
                *sc *= a.scale;
            }
        }
        CacheRows::Q8_0(kc, _) => {
            let qb = &mut s.q8[..hd / QK];
            (k.quantize_q8_0)(q, qb);
            for (sc, &c) in scores.iter_mut().zip(&s.visible) {
                let start = c as usize * kv_w + off;
                *sc = (k.vec_dot_q8_0_q8_0)(&kc[start / QK..(start + hd) / QK], qb) * a.scale;
            }
        }
    }
    let max = scores.iter().fold(f32::NEG_INFINITY, |m, &s| m.max(s));
    let mut sum = 0.0f64;
    for sc in scores.iter_mut() {
        *sc = (*sc - max).exp();
        sum += *sc as f64;
    }
    let inv = (1.0 / sum) as f32;
    for sc in scores.iter_mut() {
        *sc *= inv;
    }
    match a.v {
        CacheRows::F16(vc, _) => {
            // ggml rounds the weights through f16 when they meet an f16 V.
            let (ph, h) = (&mut s.half[..scores.len()], &mut s.probs16[..scores.len()]);
            ph.convert_from_f32_slice(scores);
            ph.convert_to_f32_slice(h);
            (k.wsum_f16)(vc, kv_w, off, &s.visible, h, out);
        }
        CacheRows::F32(vc, _) => {
            if let Some(wsum_f32) = k.wsum_f32 {
                wsum_f32(vc, kv_w, off, &s.visible, scores, out);
            } else {
                out.fill(0.0);
                for (&c, &p) in s.visible.iter().zip(scores.iter()) {
                    let start = c as usize * kv_w + off;
                    (k.axpy_f32)(p, &vc[start..start + hd], out);
                }
            }
        }
        CacheRows::Q8_0(vc, _) => {
            out.fill(0.0);
            for (&c, &p) in s.visible.iter().zip(scores.iter()) {
                let start = (c as usize * kv_w + off) / QK;
                for (o, b) in out.chunks_exact_mut(QK).zip(&vc[start..start + hd / QK]) {
                    let d = b.d.to_f32();
                    for (x, &q) in o.iter_mut().zip(&b.qs) {
                        *x += p * (q as f32 * d);
                    }
                }
            }
        }
    }
}

/// Stores one row (`src`) as row `row` of a cache, in its type.
pub(super) fn set_row(
    k: &Kernels,
    src: &[f32],
    dst: crate::backend::ops::CacheRowsMut,
    row: usize,
) -> Result<()> {
    use crate::backend::ops::CacheRowsMut as R;
    let w = src.len();
    let bad = |width: usize, have: usize| {
        Error::InvalidArgument(format!(
            "cannot store a row of {w} values as row {row} of a cache of {have} values in rows of {width}"
        ))
    };
    match dst {
        R::F16(v, width) => {
            let len = v.len();
            let d = v
                .get_mut(row * width..(row + 1) * width)
                .filter(|_| width == w)
                .ok_or_else(|| bad(width, len))?;
            for (d, &s) in d.iter_mut().zip(src) {
                *d = f16::from_f32(s);
            }
        }
        R::F32(v, width) => {
            let len = v.len();
            v.get_mut(row * width..(row + 1) * width)
                .filter(|_| width == w)
                .ok_or_else(|| bad(width, len))?
                .copy_from_slice(src);
        }
        R::Q8_0(v, width) => {
            let len = v.len() * QK;
            if width != w || w % QK != 0 {
                return Err(bad(width, len));
            }
            let d = v
                .get_mut(row * width / QK..(row + 1) * width / QK)
                .ok_or_else(|| bad(width, len))?;
            (k.quantize_q8_0)(src, d);
        }
    }
    Ok(())
}

/// Reads row `row` of a cache as f32.
pub(super) fn get_row(src: CacheRows, row: usize, out: &mut [f32]) -> Result<()> {
    let w = src.width();
    if out.len() != w || row >= src.rows() {
        return Err(Error::InvalidArgument(format!(
            "cannot read row {row} of a cache of {} rows of {w} into {} values",
            src.rows(),
            out.len()
        )));
    }
    match src {
        CacheRows::F16(v, _) => {
            use half::slice::HalfFloatSliceExt;
            v[row * w..(row + 1) * w].convert_to_f32_slice(out);
        }
        CacheRows::F32(v, _) => out.copy_from_slice(&v[row * w..(row + 1) * w]),
        CacheRows::Q8_0(v, _) => {
            for (o, b) in out.chunks_exact_mut(QK).zip(&v[row * w / QK..]) {
                let d = b.d.to_f32();
                for (x, &q) in o.iter_mut().zip(&b.qs) {
                    *x = q as f32 * d;
                }
            }
        }
    }
    Ok(())
}

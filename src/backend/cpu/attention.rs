//! Attention of each query head over the cached positions its token sees, in
//! ggml's numerics (flash attention off): Q·K with the query in the K cache's
//! type (f16 queries against an f16 cache), a softmax in f32 with an f64 sum,
//! attention weights rounded to f16 before they meet an f16 V cache, and the
//! weighted sum read straight from the V rows in their stored type (no
//! conversion of the cache per token; for f16 caches one kernel call per
//! group of heads sharing a KV head goes over all its cells, widening each
//! row once for the group and keeping the sums in registers). The (token,
//! group) units are split into pieces, one scratch each, kept between calls.
//! Non-causal attention over f32 rows (encoders) goes in blocks of queries
//! instead (`attention_blocks.rs`).

use half::f16;

use super::attention_blocks::Blocks;
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
}

impl AttnPiece {
    /// Grows the buffers for `heads` heads of `hd` values in all, over
    /// `cells` cells, taken `group` heads at a time.
    fn reserve(&mut self, heads: usize, group: usize, hd: usize, cells: usize) {
        fn grow<T: Clone>(v: &mut Vec<T>, len: usize, fill: T) {
            if v.len() < len {
                v.resize(len, fill);
            }
        }
        grow(&mut self.out, heads * hd, 0.0);
        grow(&mut self.scores, group * cells, 0.0);
        if self.visible.capacity() < cells {
            self.visible.reserve(cells - self.visible.len());
        }
        grow(&mut self.q16, group * hd, 0.0);
        grow(&mut self.q8, hd.div_ceil(QK), BlockQ8_0::zeroed());
        grow(&mut self.probs16, group * cells, 0.0);
    }
}

/// The attention's scratch, kept between calls.
#[derive(Default)]
pub(super) struct AttnScratch {
    pieces: Vec<AttnPiece>,
    blocks: Blocks,
}

pub(super) fn attention(
    k: &Kernels,
    workers: &Workers,
    scratch: &mut AttnScratch,
    min_cells: usize,
    a: &AttentionArgs,
    out: &mut [f32],
) -> Result<()> {
    a.check(out.len())?;
    if scratch.blocks.attend(k, workers, a, out) {
        return Ok(());
    }
    let pieces = &mut scratch.pieces;
    let n = a.query_pos.len();
    let hd = a.head_dim;
    let units = Units::new(a, workers.n_threads());
    let tasks = n * units.per_token;
    let cells = a.cell_pos.len();
    let wanted = workers.pieces(tasks).max(1);
    let per_piece = tasks.div_ceil(wanted).max(1);
    let n_pieces = tasks.div_ceil(per_piece);
    if pieces.len() < n_pieces {
        pieces.resize_with(n_pieces, AttnPiece::default);
    }
    let heads_per_piece = per_piece * units.heads;
    for p in pieces[..n_pieces].iter_mut() {
        p.reserve(heads_per_piece, units.heads, hd, cells.max(min_cells));
        p.visible_for = None;
    }
    // Units are (token, KV head, group of its query heads) in the order of
    // the outputs, so a piece's outputs are one run of `out`.
    let first_head =
        |t: usize| (t / units.per_token) * a.n_head + units.first_head(t % units.per_token);
    workers.for_each_mut(&mut pieces[..n_pieces], |p, piece| {
        let first = p * per_piece;
        let end = (first + per_piece).min(tasks);
        // The outputs leave the piece while its other buffers are in use.
        let mut dst = std::mem::take(&mut piece.out);
        let base = first_head(first);
        for t in first..end {
            let (i, u) = (t / units.per_token, t % units.per_token);
            let heads = units.heads_of(u);
            let o = (first_head(t) - base) * hd;
            group_attention(
                k,
                a,
                i,
                heads.clone(),
                piece,
                &mut dst[o..o + heads.len() * hd],
            );
        }
        piece.out = dst;
    });
    for (p, piece) in pieces[..n_pieces].iter().enumerate() {
        let first = p * per_piece;
        let end = (first + per_piece).min(tasks);
        let from = first_head(first) * hd;
        // (`first_head(tasks)` is the end of the outputs.)
        let to = first_head(end) * hd;
        out[from..to].copy_from_slice(&piece.out[..to - from]);
    }
    Ok(())
}

/// How a token's query heads are split into units of work: the heads of
/// one KV head together (each cached row then read and widened once for
/// all of them), in smaller groups only when there would otherwise be
/// fewer units than threads.
struct Units {
    /// Query heads per KV head.
    group: usize,
    /// Query heads per unit (the last of a KV head's units may have fewer).
    heads: usize,
    /// Units per KV head.
    per_group: usize,
    /// Units per token.
    per_token: usize,
}

impl Units {
    fn new(a: &AttentionArgs, threads: usize) -> Units {
        let group = a.n_head / a.n_head_kv;
        let n = a.query_pos.len().max(1);
        let mut splits = 1;
        while splits < group && n * a.n_head_kv * splits < threads {
            splits += 1;
        }
        let heads = group.div_ceil(splits);
        let per_group = group.div_ceil(heads);
        Units {
            group,
            heads,
            per_group,
            per_token: a.n_head_kv * per_group,
        }
    }

    /// The first query head of unit `u` of a token.
    fn first_head(&self, u: usize) -> usize {
        (u / self.per_group) * self.group + (u % self.per_group) * self.heads
    }

    /// The query heads of unit `u` of a token.
    fn heads_of(&self, u: usize) -> std::ops::Range<usize> {
        let first = self.first_head(u);
        let group_end = (u / self.per_group + 1) * self.group;
        first..(first + self.heads).min(group_end)
    }
}

/// Whether query token `i` sees cell `c`.
pub(super) fn sees(a: &AttentionArgs, i: usize, c: usize) -> bool {
    let (p, q) = (a.cell_pos[c], a.query_pos[i]);
    a.cell_seqs[c] & (1u64 << a.query_seq[i]) != 0
        && (!a.causal || p <= q)
        && a.window.is_none_or(|w| (q as i64 - p as i64) < w as i64)
}

/// out = softmax(scale · q·Kᵀ) · V for the query heads `heads` of token `i`,
/// which share one KV head (`out` holds their rows back to back).
fn group_attention(
    k: &Kernels,
    a: &AttentionArgs,
    i: usize,
    heads: std::ops::Range<usize>,
    s: &mut AttnPiece,
    out: &mut [f32],
) {
    let hd = a.head_dim;
    let kv_w = a.n_head_kv * hd;
    let off = (heads.start / (a.n_head / a.n_head_kv)) * hd;
    let g = heads.len();
    if s.visible_for != Some(i) {
        s.visible.clear();
        s.visible.extend(
            (0..a.cell_pos.len())
                .filter(|&c| sees(a, i, c))
                .map(|c| c as u32),
        );
        s.visible_for = Some(i);
    }
    let nv = s.visible.len();
    let q = &a.q[(i * a.n_head + heads.start) * hd..(i * a.n_head + heads.end) * hd];
    let scores = &mut s.scores[..g * nv];
    match a.k {
        CacheRows::F16(kc, _) => {
            // The queries in f16, as ggml converts them, held as f32 (exactly).
            let qf = &mut s.q16[..g * hd];
            (k.round_f16)(q, qf);
            let qf = &*qf;
            match k.scores_f16_heads {
                Some(heads_fn) => heads_fn(kc, kv_w, off, &s.visible, qf, scores, g),
                None => {
                    for (qh, sh) in qf.chunks_exact(hd).zip(scores.chunks_exact_mut(nv.max(1))) {
                        (k.scores_f16)(kc, kv_w, off, &s.visible, qh, &mut sh[..nv]);
                    }
                }
            }
            for sc in scores.iter_mut() {
                *sc *= a.scale;
            }
        }
        CacheRows::F32(kc, _) => {
            for (q, scores) in q.chunks_exact(hd).zip(scores.chunks_exact_mut(nv.max(1))) {
                let scores = &mut scores[..nv];
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
        }
        CacheRows::Q8_0(kc, _) => {
            let qb = &mut s.q8[..hd / QK];
            for (q, scores) in q.chunks_exact(hd).zip(scores.chunks_exact_mut(nv.max(1))) {
                (k.quantize_q8_0)(q, qb);
                for (sc, &c) in scores[..nv].iter_mut().zip(&s.visible) {
                    let start = c as usize * kv_w + off;
                    *sc = (k.vec_dot_q8_0_q8_0)(&kc[start / QK..(start + hd) / QK], qb) * a.scale;
                }
            }
        }
    }
    if nv > 0 {
        // Scores to weights with the vectorised polynomial exp (within 2 ulp
        // of libm's) and an f64 sum, as encoders' blocks do: one libm call
        // per cell and head took 13% of a token's time at depth 1024.
        for head_scores in scores.chunks_exact_mut(nv) {
            (k.softmax_poly)(head_scores);
        }
    }
    match a.v {
        CacheRows::F16(vc, _) => {
            // ggml rounds the weights through f16 when they meet an f16 V.
            let h = &mut s.probs16[..g * nv];
            (k.round_f16)(scores, h);
            let h = &*h;
            match k.wsum_f16_heads {
                Some(heads_fn) => heads_fn(vc, kv_w, off, &s.visible, h, out, g),
                None => {
                    for (p, o) in h.chunks_exact(nv.max(1)).zip(out.chunks_exact_mut(hd)) {
                        (k.wsum_f16)(vc, kv_w, off, &s.visible, &p[..nv], o);
                    }
                }
            }
            if nv == 0 {
                out.fill(0.0);
            }
        }
        CacheRows::F32(vc, _) => {
            for (p, out) in scores.chunks_exact(nv.max(1)).zip(out.chunks_exact_mut(hd)) {
                let p = &p[..nv];
                if let Some(wsum_f32) = k.wsum_f32 {
                    wsum_f32(vc, kv_w, off, &s.visible, p, out);
                } else {
                    out.fill(0.0);
                    for (&c, &p) in s.visible.iter().zip(p) {
                        let start = c as usize * kv_w + off;
                        (k.axpy_f32)(p, &vc[start..start + hd], out);
                    }
                }
            }
            if nv == 0 {
                out.fill(0.0);
            }
        }
        CacheRows::Q8_0(vc, _) => {
            out.fill(0.0);
            for (p, out) in scores.chunks_exact(nv.max(1)).zip(out.chunks_exact_mut(hd)) {
                for (&c, &p) in s.visible.iter().zip(&p[..nv]) {
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

//! Attention over f32 K and V rows for queries that see the same cells (an
//! encoder's tokens, which see their whole sequence), in blocks: per KV head
//! and block of up to `BLOCK` such queries, the scores are one product of
//! the queries with the keys, the softmax runs per row, and the outputs are
//! one product of the weights with the values (`gemm_f32`). One query at a
//! time (`attention.rs`) each score is a dot product one head wide, whose
//! reduction across vector lanes costs as much as its multiplies when heads
//! are short (MiniLM's are 32 wide); in a product every lane is an output
//! and nothing is reduced.
//!
//! Numerics: a score sums its products in dimension order, one multiply and
//! one add each (the one-query path sums as the variant's `vec_dot_f32`);
//! the softmax takes the polynomial exp (`softmax_poly`, within 2 ulp of
//! the one-query path's library exp, and vectorised as ggml's is); the
//! weighted sums add the cells in order from zero, one multiply and one add
//! each, as `wsum_f32` does. Every variant gives the same bits.

use std::ops::Range;

use super::attention::sees;
use super::kernels::Kernels;
use super::rows::GemmShape;
use crate::backend::ops::{AttentionArgs, CacheRows};
use crate::parallel::Workers;

/// Queries per block: enough that the keys, transposed once per block,
/// serve many rows of the product, few enough that a block's scores over
/// a long sequence stay small (32 × 512 cells is 64 KiB).
const BLOCK: usize = 32;

/// Consecutive query tokens that see the same cells (at most `BLOCK`).
struct Run {
    tokens: Range<usize>,
    /// Where the run's cells are in `Blocks::cells`.
    cells: Range<usize>,
}

/// The blocked path's plan and scratch, kept between calls.
#[derive(Default)]
pub(super) struct Blocks {
    runs: Vec<Run>,
    /// Every run's visible cells, back to back.
    cells: Vec<u32>,
    pieces: Vec<BlockPiece>,
}

/// One piece's scratch.
#[derive(Default)]
struct BlockPiece {
    /// The keys of a unit's KV head, transposed: head width × cells.
    keys: Vec<f32>,
    /// The values of a unit's KV head: cells × head width.
    values: Vec<f32>,
    /// One head's scores for a block: queries × cells.
    scores: Vec<f32>,
    /// The outputs of the piece's units, one after another, each as
    /// (token, head of the group, head width).
    out: Vec<f32>,
}

fn grow(v: &mut Vec<f32>, len: usize) {
    if v.len() < len {
        v.resize(len, 0.0);
    }
}

impl Blocks {
    /// Attention for `a` in blocks, into `out`, when the caches are f32 and
    /// the attention is not causal (in a causal batch each query sees cells
    /// of its own); otherwise nothing is written and the answer is false
    /// (the caller then attends one query at a time). `a` is checked by the
    /// caller. Every non-causal batch over f32 rows goes this way, however
    /// short its sequences: a token's output depends only on its query and
    /// the cells it sees, so a sequence gets the same bits alone as in any
    /// batch.
    pub(super) fn attend(
        &mut self,
        k: &Kernels,
        workers: &Workers,
        a: &AttentionArgs,
        out: &mut [f32],
    ) -> bool {
        let (keys, values) = match (&a.k, &a.v) {
            (CacheRows::F32(keys, _), CacheRows::F32(values, _)) => (*keys, *values),
            _ => return false,
        };
        if a.causal {
            return false;
        }
        self.plan(a);
        let (hd, g) = (a.head_dim, a.n_head / a.n_head_kv);
        let units = self.runs.len() * a.n_head_kv;
        if units == 0 {
            return true;
        }
        let n_pieces = workers.pieces(units).max(1);
        let per_piece = units.div_ceil(n_pieces);
        let n_pieces = units.div_ceil(per_piece);
        if self.pieces.len() < n_pieces {
            self.pieces.resize_with(n_pieces, BlockPiece::default);
        }
        let (runs, cells) = (&self.runs, &self.cells);
        workers.for_each_mut(&mut self.pieces[..n_pieces], |p, piece| {
            let units = p * per_piece..((p + 1) * per_piece).min(units);
            let len: usize = units
                .clone()
                .map(|u| runs[u / a.n_head_kv].tokens.len() * g * hd)
                .sum();
            grow(&mut piece.out, len);
            let mut at = 0;
            for u in units {
                let run = &runs[u / a.n_head_kv];
                let size = run.tokens.len() * g * hd;
                let unit = UnitArgs {
                    a,
                    keys,
                    values,
                    tokens: run.tokens.clone(),
                    cells: &cells[run.cells.clone()],
                    kv_head: u % a.n_head_kv,
                };
                unit.attend(k, piece, at..at + size);
                at += size;
            }
        });
        for (p, piece) in self.pieces[..n_pieces].iter().enumerate() {
            let mut at = 0;
            for u in p * per_piece..((p + 1) * per_piece).min(units) {
                let first_head = (u % a.n_head_kv) * g;
                for i in self.runs[u / a.n_head_kv].tokens.clone() {
                    let dst = (i * a.n_head + first_head) * hd;
                    out[dst..dst + g * hd].copy_from_slice(&piece.out[at..at + g * hd]);
                    at += g * hd;
                }
            }
        }
        true
    }

    /// Splits the queries into runs of consecutive tokens that see the same
    /// cells.
    fn plan(&mut self, a: &AttentionArgs) {
        let n = a.query_pos.len();
        self.runs.clear();
        self.cells.clear();
        for i in 0..n {
            let start = self.cells.len();
            self.cells.extend(
                (0..a.cell_pos.len())
                    .filter(|&c| sees(a, i, c))
                    .map(|c| c as u32),
            );
            if let Some(last) = self.runs.last_mut() {
                if last.tokens.len() < BLOCK
                    && self.cells[last.cells.clone()] == self.cells[start..]
                {
                    self.cells.truncate(start);
                    last.tokens.end = i + 1;
                    continue;
                }
            }
            self.runs.push(Run {
                tokens: i..i + 1,
                cells: start..self.cells.len(),
            });
        }
    }
}

/// One unit of work: a run of queries and one KV head (all its query heads).
struct UnitArgs<'a> {
    a: &'a AttentionArgs<'a>,
    keys: &'a [f32],
    values: &'a [f32],
    tokens: Range<usize>,
    cells: &'a [u32],
    kv_head: usize,
}

impl UnitArgs<'_> {
    /// The unit's outputs into `piece.out[dst]`, as (token, head of the
    /// group, head width).
    fn attend(&self, k: &Kernels, piece: &mut BlockPiece, dst: Range<usize>) {
        let a = self.a;
        let (hd, g, nv, m) = (
            a.head_dim,
            a.n_head / a.n_head_kv,
            self.cells.len(),
            self.tokens.len(),
        );
        let kv_w = a.n_head_kv * hd;
        let off = self.kv_head * hd;
        grow(&mut piece.keys, hd * nv);
        grow(&mut piece.values, nv * hd);
        grow(&mut piece.scores, m * nv);
        let (keys, values) = (&mut piece.keys[..hd * nv], &mut piece.values[..nv * hd]);
        for (j, &c) in self.cells.iter().enumerate() {
            let row = c as usize * kv_w + off;
            for (d, &x) in self.keys[row..row + hd].iter().enumerate() {
                keys[d * nv + j] = x;
            }
            values[j * hd..(j + 1) * hd].copy_from_slice(&self.values[row..row + hd]);
        }
        let scores = &mut piece.scores[..m * nv];
        let out = &mut piece.out[dst];
        let q_stride = a.n_head * hd;
        for h in 0..g {
            let head = self.kv_head * g + h;
            let q = &a.q[(self.tokens.start * a.n_head + head) * hd..];
            let s_shape = GemmShape {
                m,
                n: nv,
                k: hd,
                lda: q_stride,
                ldb: nv,
                ldc: nv,
            };
            (k.gemm_f32)(&s_shape, q, keys, scores);
            if nv > 0 {
                for row in scores.chunks_exact_mut(nv) {
                    for s in row.iter_mut() {
                        *s *= a.scale;
                    }
                    (k.softmax_poly)(row);
                }
            }
            let o_shape = GemmShape {
                m,
                n: hd,
                k: nv,
                lda: nv,
                ldb: hd,
                ldc: g * hd,
            };
            (k.gemm_f32)(&o_shape, scores, values, &mut out[h * hd..]);
        }
    }
}

//! Q8_0 weights interleaved at load, eight rows at a time, for variants with
//! a kernel that multiplies eight rows at once (x86, NEON with dotprod,
//! SIMD128), as `repack_q5_0` does
//! for Q5_0. Q8_0 is what SmolLM2 and Gemma files keep their token embedding
//! in, what llama-quantize's K_M mixtures give some `attn_v`, and the type of
//! whole Q8_0 models.
//!
//! A group block holds, for one column block of eight rows, their scales and
//! their quants interleaved eight bytes at a time: exactly the eight blocks'
//! bytes. Rows that do not fill a last group stay plain Q8_0 and go through
//! `vec_dot`.
//!
//! NEON with dotprod and without i8mm takes a second layout,
//! `BlockQ8_0x8i4`: the same bytes in runs of four, so a 16-byte load holds
//! four values of four rows, one row per lane, which SDOT by element
//! multiplies by four values of an activation row, or of each row of an
//! activation quad (`act_rows::BlockQ8_0x4`) with one load. On the eight-byte
//! runs SDOT leaves each row's sum in two lanes, and the activations are
//! broadcast per row.
//!
//! Per row and block the kernels compute the exact integer sum and add it
//! with one FMA by d(w)·d(a), as the scalar twin here does; the twin equals
//! row-by-row `vec_dot` within rounding. wasm's kernel, without a fused
//! multiply-add, rounds the product first (within the bound
//! `simd128::q4_1_x8_tile` states).

use std::ops::Range;

use half::f16;

use super::act_rows::{ActRows, BlockQ8_0x2, BlockQ8_0x4};
use super::interleaved::{GroupBlock, GroupGemmFn, Interleaved, PlainGroup, ROWS};
use super::kernels::{InterleavedGemmFn, Kernels, VecDotFn};
use super::repack::check_gemm;
use crate::error::{Error, Result};
use crate::tensor::blocks::{BlockQ8_0, QK};

/// One column block of eight Q8_0 rows.
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct BlockQ8_0x8 {
    pub d: [f16; ROWS],
    /// `qs[64 k + 8 r + t]`: value 8k + t of row r.
    pub qs: [i8; QK * ROWS],
}

const _: () = assert!(std::mem::size_of::<BlockQ8_0x8>() == ROWS * 34);

impl GroupBlock for BlockQ8_0x8 {
    type Row = BlockQ8_0;
    type Act = BlockQ8_0;

    fn interleave(rows: [&BlockQ8_0; ROWS]) -> BlockQ8_0x8 {
        let mut g = BlockQ8_0x8 {
            d: [f16::ZERO; ROWS],
            qs: [0; QK * ROWS],
        };
        for (r, b) in rows.iter().enumerate() {
            g.d[r] = b.d;
            for k in 0..QK / 8 {
                let at = 64 * k + 8 * r;
                g.qs[at..at + 8].copy_from_slice(&b.qs[8 * k..8 * k + 8]);
            }
        }
        g
    }
}

/// A Q8_0 weight matrix in groups of eight interleaved rows.
pub type RepackedQ8_0 = Interleaved<BlockQ8_0x8>;

impl PlainGroup for BlockQ8_0x8 {
    fn kernels(k: &Kernels) -> (GroupGemmFn<Self>, VecDotFn<Self::Row, Self::Act>) {
        (k.gemm_q8_0_x8.unwrap_or(gemm_q8_0_x8), k.vec_dot_q8_0_q8_0)
    }
}

impl RepackedQ8_0 {
    /// Whether a product of `n` activation rows takes them in pairs as well
    /// (`product_rows_pairs`): where the variant has an SMMLA kernel
    /// (neon-i8mm's), from two rows on.
    pub fn wants_pairs(k: &Kernels, n: usize) -> bool {
        n >= 2 && k.gemm_q8_0_x8_pairs.is_some()
    }

    /// `product_rows` with the activation rows also in pairs: `pairs` is
    /// `act_rows::interleave_rows` of `x`. Only where `wants_pairs`.
    pub fn product_rows_pairs(
        &self,
        k: &Kernels,
        x: &[BlockQ8_0],
        pairs: &[BlockQ8_0x2],
        n: usize,
        rows: Range<usize>,
        out: &mut [f32],
    ) -> Result<()> {
        let gemm = k.gemm_q8_0_x8_pairs.filter(|_| Self::wants_pairs(k, n));
        self.arranged_through(k, gemm, "pairs", x, pairs, n, rows, out)
    }
}

impl<G: GroupBlock<Row = BlockQ8_0, Act = BlockQ8_0>> Interleaved<G> {
    /// `rows_through` with `gemm`, a kernel that also takes the activation
    /// rows arranged as `acts` (`act_rows::interleave_rows` of `x`; `what`
    /// names them in errors); `None` where the variant takes no such
    /// arrangement for `n` rows, an error.
    #[allow(clippy::too_many_arguments)] // the product's operands
    fn arranged_through<A: ActRows>(
        &self,
        k: &Kernels,
        gemm: Option<InterleavedGemmFn<G, A>>,
        what: &str,
        x: &[BlockQ8_0],
        acts: &[A],
        n: usize,
        rows: Range<usize>,
        out: &mut [f32],
    ) -> Result<()> {
        let Some(gemm) = gemm else {
            return Err(Error::InvalidArgument(format!(
                "the {} kernels take no activation {what} for {n} rows of Q8_0",
                k.variant
            )));
        };
        if acts.len() != n / A::ROWS * (self.cols() / QK) {
            return Err(Error::InvalidArgument(format!(
                "{} activation {what}' blocks for {n} rows of {} values",
                acts.len(),
                self.cols()
            )));
        }
        let gemm = |group: &[G], x: &[BlockQ8_0], n, out: &mut [f32], stride| {
            gemm(group, acts, x, n, out, stride)
        };
        self.rows_through(gemm, k.vec_dot_q8_0_q8_0, x, n, rows, out)
    }
}

/// One group of eight rows times `n` activation rows (the scalar twin):
/// output `r` of activation row `i` goes to `out[i * stride + r]`. Each
/// block's exact sum is added with one FMA by d(w)·d(a).
pub fn gemm_q8_0_x8(
    group: &[BlockQ8_0x8],
    x: &[BlockQ8_0],
    n: usize,
    out: &mut [f32],
    stride: usize,
) {
    gemm_twin(
        group,
        x,
        n,
        out,
        stride,
        |b| &b.d,
        |b, r, j| b.qs[64 * (j / 8) + 8 * r + j % 8],
    );
}

/// The twins' loop over a group of either layout: `d(block)` gives the
/// rows' scales, `q(block, r, j)` row r's value j.
fn gemm_twin<G>(
    group: &[G],
    x: &[BlockQ8_0],
    n: usize,
    out: &mut [f32],
    stride: usize,
    d: impl Fn(&G) -> &[f16; ROWS],
    q: impl Fn(&G, usize, usize) -> i8,
) {
    check_gemm(group, x, n, out, stride, ROWS);
    let per_row = group.len();
    for i in 0..n {
        let xi = &x[i * per_row..(i + 1) * per_row];
        let mut acc = [0f32; ROWS];
        for (b, y) in group.iter().zip(xi) {
            let dy = y.d.to_f32();
            for (r, acc) in acc.iter_mut().enumerate() {
                let sum: i32 = (0..QK).map(|j| q(b, r, j) as i32 * y.qs[j] as i32).sum();
                *acc = (sum as f32).mul_add(d(b)[r].to_f32() * dy, *acc);
            }
        }
        out[i * stride..i * stride + ROWS].copy_from_slice(&acc);
    }
}

/// One column block of eight Q8_0 rows in runs of four bytes.
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct BlockQ8_0x8i4 {
    pub d: [f16; ROWS],
    /// `qs[32 c + 4 r + t]`: value 4c + t of row r.
    pub qs: [i8; QK * ROWS],
}

const _: () = assert!(std::mem::size_of::<BlockQ8_0x8i4>() == ROWS * 34);

impl GroupBlock for BlockQ8_0x8i4 {
    type Row = BlockQ8_0;
    type Act = BlockQ8_0;

    fn interleave(rows: [&BlockQ8_0; ROWS]) -> BlockQ8_0x8i4 {
        let mut g = BlockQ8_0x8i4 {
            d: [f16::ZERO; ROWS],
            qs: [0; QK * ROWS],
        };
        for (r, b) in rows.iter().enumerate() {
            g.d[r] = b.d;
            for c in 0..QK / 4 {
                let at = 32 * c + 4 * r;
                g.qs[at..at + 4].copy_from_slice(&b.qs[4 * c..4 * c + 4]);
            }
        }
        g
    }
}

/// A Q8_0 weight matrix in groups of eight rows in runs of four bytes.
pub type RepackedQ8_0x8i4 = Interleaved<BlockQ8_0x8i4>;

impl PlainGroup for BlockQ8_0x8i4 {
    fn kernels(k: &Kernels) -> (GroupGemmFn<Self>, VecDotFn<Self::Row, Self::Act>) {
        (
            k.gemm_q8_0_x8i4.unwrap_or(gemm_q8_0_x8i4),
            k.vec_dot_q8_0_q8_0,
        )
    }
}

impl RepackedQ8_0x8i4 {
    /// Whether a product of `n` activation rows takes them in quads as well
    /// (`product_rows_quads`): where the variant has a kernel for them, from
    /// four rows on.
    pub fn wants_quads(k: &Kernels, n: usize) -> bool {
        n >= 4 && k.gemm_q8_0_x8i4_quads.is_some()
    }

    /// `product_rows` with the activation rows also in quads: `quads` is
    /// `act_rows::interleave_rows` of `x`. Only where `wants_quads`.
    pub fn product_rows_quads(
        &self,
        k: &Kernels,
        x: &[BlockQ8_0],
        quads: &[BlockQ8_0x4],
        n: usize,
        rows: Range<usize>,
        out: &mut [f32],
    ) -> Result<()> {
        let gemm = k.gemm_q8_0_x8i4_quads.filter(|_| Self::wants_quads(k, n));
        self.arranged_through(k, gemm, "quads", x, quads, n, rows, out)
    }
}

/// `gemm_q8_0_x8` for the runs of four (the scalar twin).
pub fn gemm_q8_0_x8i4(
    group: &[BlockQ8_0x8i4],
    x: &[BlockQ8_0],
    n: usize,
    out: &mut [f32],
    stride: usize,
) {
    gemm_twin(
        group,
        x,
        n,
        out,
        stride,
        |b| &b.d,
        |b, r, j| b.qs[32 * (j / 4) + 4 * r + j % 4],
    );
}

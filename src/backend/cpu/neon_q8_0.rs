//! Q8_0 on eight rows in runs of four bytes (`repack_q8_0::BlockQ8_0x8i4`)
//! with dotprod and without i8mm (neon-dotprod): a 16-byte load holds four
//! values of four rows, one row per lane, so SDOT by element multiplies it
//! by four values of an activation vector and each lane ends as one row's
//! sum. On the eight-byte runs a row's sum took two lanes: twice the
//! accumulators to clear per block, a pairwise add, and activations
//! broadcast per row. With the activation rows in quads
//! (`act_rows::BlockQ8_0x4`, arranged once per product), one 16-byte load
//! holds four values of four rows: it serves four SDOTs by element, one per
//! activation row, and the quad's scales come in one load, as in
//! `neon_q4_0`.
//!
//! Integer sums are exact and each block's is added with one FMA by
//! d(w)·d(a), as the scalar twin (`repack_q8_0::gemm_q8_0_x8i4`) does, so
//! results equal it bit for bit.

use std::arch::aarch64::*;

use super::act_rows::BlockQ8_0x4;
use super::group_tiles::{by_take, gemm_in_row_block_tiles, gemm_in_tiles};
use super::neon::{f16x8_to_f32, fp16};
use super::neon_q4_0::sdot_by_element;
use super::repack_q8_0::BlockQ8_0x8i4;
use crate::tensor::blocks::BlockQ8_0;

// Safety. The safe wrappers below are private to the CPU backend and
// reachable only through the table `neon::dotprod_kernels` builds after
// detecting dotprod. Their frames (`gemm_in_tiles`,
// `gemm_in_row_block_tiles`) check the shapes and slice every activation
// row or quad to the group's length before a tile runs, which the tiles'
// unchecked indexing relies on.

pub(super) fn gemm_q8_0_x8i4(
    group: &[BlockQ8_0x8i4],
    x: &[BlockQ8_0],
    n: usize,
    out: &mut [f32],
    stride: usize,
) {
    gemm_in_tiles(group, x, n, out, stride, |take, xs, res| {
        // SAFETY: see the module's safety note: dotprod is present, every
        // `xs` row holds `group.len()` blocks, and `res` is typed.
        unsafe { by_take!(take, rows_tile(group, xs, res)) }
    });
}

/// The product with the activation rows also in quads: one quad to a tile
/// (its four rows' sums and totals fill sixteen registers); rows past the
/// last quad go through `gemm_q8_0_x8i4`.
pub(super) fn gemm_q8_0_x8i4_quads(
    group: &[BlockQ8_0x8i4],
    quads: &[BlockQ8_0x4],
    x: &[BlockQ8_0],
    n: usize,
    out: &mut [f32],
    stride: usize,
) {
    gemm_in_row_block_tiles::<1, _, _, 8>(
        group,
        quads,
        x,
        n,
        out,
        stride,
        |_, qs, res| {
            // SAFETY: as in `gemm_q8_0_x8i4`: the quad holds `group.len()`
            // blocks.
            unsafe { quad_tile(group, qs[0], res) }
        },
        |x, n, out| gemm_q8_0_x8i4(group, x, n, out, stride),
    );
}

/// Rows 0..4 and 4..8 of a group block's values 4c..4c + 4, for `c` in
/// pairs: `(c, rows 0..4), (c, rows 4..8), (c + 1, ...), (c + 1, ...)`.
///
/// # Safety
/// NEON only (always present); `c` must be even and below 8.
#[inline(always)]
unsafe fn runs(b: &BlockQ8_0x8i4, c: usize) -> [int8x16_t; 4] {
    let w = vld1q_s8_x4(b.qs.as_ptr().add(32 * c));
    [w.0, w.1, w.2, w.3]
}

/// Adds block `b`'s sums against the activation values in `y` (values
/// 16v..16v + 16 in vector v) to `s` (rows 0..4, rows 4..8).
///
/// # Safety
/// The CPU must have dotprod (inlined into tiles that have it).
#[inline(always)]
unsafe fn row_block(b: &BlockQ8_0x8i4, y: [int8x16_t; 2], s: &mut [int32x4_t; 2]) {
    for (v, y) in y.into_iter().enumerate() {
        let [w0, w1, w2, w3] = runs(b, 4 * v);
        let [w4, w5, w6, w7] = runs(b, 4 * v + 2);
        s[0] = sdot_by_element::<0>(s[0], w0, y);
        s[1] = sdot_by_element::<0>(s[1], w1, y);
        s[0] = sdot_by_element::<1>(s[0], w2, y);
        s[1] = sdot_by_element::<1>(s[1], w3, y);
        s[0] = sdot_by_element::<2>(s[0], w4, y);
        s[1] = sdot_by_element::<2>(s[1], w5, y);
        s[0] = sdot_by_element::<3>(s[0], w6, y);
        s[1] = sdot_by_element::<3>(s[1], w7, y);
    }
}

/// The group's eight rows times the first `A` (1..=4) rows of `xs`:
/// `res[a][r]` = row r · activation row a.
///
/// # Safety
/// The CPU must have dotprod; each of the first `A` rows of `xs` must hold
/// at least `group.len()` blocks (indexed unchecked).
#[target_feature(enable = "dotprod")]
unsafe fn rows_tile<const A: usize>(
    group: &[BlockQ8_0x8i4],
    xs: &[&[BlockQ8_0]; 4],
    res: &mut [[f32; 8]; 4],
) {
    let mut acc = [[vdupq_n_f32(0.0); 2]; A];
    for (bi, b) in group.iter().enumerate() {
        let (dlo, dhi) = f16x8_to_f32(b.d.as_ptr());
        for (a, acc) in acc.iter_mut().enumerate() {
            let y = xs.get_unchecked(a).get_unchecked(bi);
            let v = vld1q_s8_x2(y.qs.as_ptr());
            let mut s = [vdupq_n_s32(0); 2];
            row_block(b, [v.0, v.1], &mut s);
            let dy = fp16(y.d);
            acc[0] = vfmaq_f32(acc[0], vcvtq_f32_s32(s[0]), vmulq_n_f32(dlo, dy));
            acc[1] = vfmaq_f32(acc[1], vcvtq_f32_s32(s[1]), vmulq_n_f32(dhi, dy));
        }
    }
    for (res, acc) in res.iter_mut().zip(&acc) {
        vst1q_f32(res.as_mut_ptr(), acc[0]);
        vst1q_f32(res.as_mut_ptr().add(4), acc[1]);
    }
}

/// The group's eight rows times one quad of activation rows: `res[j][r]` =
/// row r · row j of the quad. Per block and four values, one load of the
/// quad and one of each half of the rows serve eight SDOTs by element.
///
/// # Safety
/// The CPU must have dotprod; `quads` must hold at least `group.len()`
/// blocks (indexed unchecked).
#[target_feature(enable = "dotprod")]
unsafe fn quad_tile(group: &[BlockQ8_0x8i4], quads: &[BlockQ8_0x4], res: &mut [[f32; 8]; 8]) {
    // acc[j]: activation row j times rows 0..4 and rows 4..8.
    let mut acc = [[vdupq_n_f32(0.0); 2]; 4];
    for (bi, b) in group.iter().enumerate() {
        let y = quads.get_unchecked(bi);
        let mut s = [[vdupq_n_s32(0); 2]; 4];
        for c in (0..8).step_by(2) {
            // Values 4c.. and 4(c + 1).. of the four activation rows, four
            // bytes of each.
            let q = vld1q_s8_x2(y.qs.as_ptr().add(16 * c));
            let [w0, w1, w2, w3] = runs(b, c);
            for (y, w) in [(q.0, [w0, w1]), (q.1, [w2, w3])] {
                for (h, w) in w.into_iter().enumerate() {
                    s[0][h] = sdot_by_element::<0>(s[0][h], w, y);
                    s[1][h] = sdot_by_element::<1>(s[1][h], w, y);
                    s[2][h] = sdot_by_element::<2>(s[2][h], w, y);
                    s[3][h] = sdot_by_element::<3>(s[3][h], w, y);
                }
            }
        }
        let (dlo, dhi) = f16x8_to_f32(b.d.as_ptr());
        let dy = vld1q_f32(y.d.as_ptr());
        let dw = [
            [vmulq_laneq_f32::<0>(dlo, dy), vmulq_laneq_f32::<0>(dhi, dy)],
            [vmulq_laneq_f32::<1>(dlo, dy), vmulq_laneq_f32::<1>(dhi, dy)],
            [vmulq_laneq_f32::<2>(dlo, dy), vmulq_laneq_f32::<2>(dhi, dy)],
            [vmulq_laneq_f32::<3>(dlo, dy), vmulq_laneq_f32::<3>(dhi, dy)],
        ];
        for ((acc, s), dw) in acc.iter_mut().zip(&s).zip(&dw) {
            for h in 0..2 {
                acc[h] = vfmaq_f32(acc[h], vcvtq_f32_s32(s[h]), dw[h]);
            }
        }
    }
    for (res, acc) in res.iter_mut().zip(&acc) {
        vst1q_f32(res.as_mut_ptr(), acc[0]);
        vst1q_f32(res.as_mut_ptr().add(4), acc[1]);
    }
}

//! aarch64 group kernels with i8mm (SMMLA) for prompt batches: eight
//! interleaved rows times pairs of activation rows. SMMLA multiplies a
//! vector holding eight bytes of two weight rows by one holding eight bytes
//! of two activation rows and adds the 2x2 result: 32 multiply-adds per
//! instruction, twice SDOT's. The eight-row layouts (`repack_q8_0`, and
//! Q4_0's 8x8, `repack::BlockQ4_0x8`) already hold eight bytes of two rows
//! per 16-byte load, so the weights go to SMMLA as loaded (Q4_0's nibbles
//! once unpacked). The activations come in pairs arranged once per product
//! (`act_rows`), SMMLA's shape, with their scales in its lane order: zipped
//! by the kernel, they were zipped again for every group of eight weight
//! rows. Q8_0's tiles take two pairs, Q4_0's four (unpacking the nibbles
//! costs as much as one pair's products), in two passes of four rows.
//!
//! A lone activation row (every generated token, or the odd last row of a
//! batch) would leave half of each SMMLA unused, so it goes through the
//! layout's SDOT kernel (`neon_groups`).
//!
//! Integer sums are exact and the float steps are the scalar twin's, lane
//! by lane, so every result equals the twin's bit for bit.

use std::arch::aarch64::*;
use std::arch::asm;

use super::act_rows::BlockQ8_0x2;
use super::group_tiles::{by_take, gemm_in_row_block_tiles};
use super::neon::{f16x8_to_f32, fp16x4};
use super::neon_groups::{self, q4_0_sixteenths};
use super::repack::BlockQ4_0x8;
use super::repack_q8_0::BlockQ8_0x8;
use crate::tensor::blocks::BlockQ8_0;

// Safety. The safe wrappers below are private to the crate's CPU backend
// and reachable only through the table `neon::i8mm_kernels` builds after
// detecting i8mm and dotprod; their frame (`gemm_in_row_block_tiles`)
// checks the shapes and slices every activation pair to the group's length
// before a tile runs, which the tiles' unchecked indexing relies on.

pub(super) fn gemm_q8_0_x8_pairs(
    group: &[BlockQ8_0x8],
    pairs: &[BlockQ8_0x2],
    x: &[BlockQ8_0],
    n: usize,
    out: &mut [f32],
    stride: usize,
) {
    // Two pairs to a tile: the weights need no unpacking, and their eight
    // rows keep eight accumulators per pair.
    gemm_in_row_block_tiles::<2, _, _, 8>(
        group,
        pairs,
        x,
        n,
        out,
        stride,
        |take, ps, res| {
            // SAFETY: see the module's safety note: i8mm is present, every
            // `ps` entry holds `group.len()` blocks, and `res` is typed.
            unsafe {
                match take {
                    1 => tile_q8_0_x8_pairs::<1>(group, ps, res),
                    _ => tile_q8_0_x8_pairs::<2>(group, ps, res),
                }
            }
        },
        |x, n, out| neon_groups::gemm_q8_0_x8(group, x, n, out, stride),
    );
}

pub(super) fn gemm_q4_0_x8_pairs(
    group: &[BlockQ4_0x8],
    pairs: &[BlockQ8_0x2],
    x: &[BlockQ8_0],
    n: usize,
    out: &mut [f32],
    stride: usize,
) {
    // Up to four pairs to a tile: unpacking the nibbles costs as much as
    // the products for one pair. An odd last row is the one left.
    gemm_in_row_block_tiles::<4, _, _, 8>(
        group,
        pairs,
        x,
        n,
        out,
        stride,
        |take, ps, res| {
            // SAFETY: as in `gemm_q8_0_x8_pairs`.
            unsafe { by_take!(take, tile_q4_0_x8(group, ps, res)) }
        },
        |x, _, out| neon_groups::gemv_q4_0_x8(group, x, out),
    );
}

/// SMMLA: `acc` += the 2x2 product of `w` (two rows of eight bytes) and the
/// transpose of `y` (two rows of eight bytes); lanes (w0·y0, w0·y1, w1·y0,
/// w1·y1).
///
/// # Safety
/// The CPU must have i8mm (the asm touches registers only).
#[inline(always)]
pub(super) unsafe fn smmla(acc: int32x4_t, w: int8x16_t, y: int8x16_t) -> int32x4_t {
    let mut acc = acc;
    asm!("smmla {acc:v}.4s, {w:v}.16b, {y:v}.16b",
        acc = inout(vreg) acc, w = in(vreg) w, y = in(vreg) y,
        options(pure, nomem, nostack));
    acc
}

/// The eight rows' scales of a group block in SMMLA's lane order, per row
/// pair h: (d(2h), d(2h), d(2h + 1), d(2h + 1)).
///
/// # Safety
/// NEON only (always present); FCVTL is base aarch64.
#[inline(always)]
unsafe fn row_pair_scales(d: &[half::f16; 8]) -> [float32x4_t; 4] {
    let (lo, hi) = f16x8_to_f32(d.as_ptr());
    [
        vzip1q_f32(lo, lo),
        vzip2q_f32(lo, lo),
        vzip1q_f32(hi, hi),
        vzip2q_f32(hi, hi),
    ]
}

/// Stores `acc[p][h]` (row pair h times activation pair p, lanes in SMMLA's
/// order) as `res[a][r]`, for row pairs `first..first + H`.
///
/// # Safety
/// NEON only (always present); the stores go through checked slices of
/// the typed `res`.
#[inline(always)]
unsafe fn store_pairs<const P: usize, const H: usize, const A: usize>(
    acc: &[[float32x4_t; H]; P],
    first: usize,
    res: &mut [[f32; 8]; A],
) {
    for (p, acc) in acc.iter().enumerate() {
        for (g, acc) in acc.chunks_exact(2).enumerate() {
            // UZP1 keeps the even lanes (activation 2p), UZP2 the odd ones:
            // rows 2(first + 2g)..+4 of each.
            let at = 2 * first + 4 * g;
            vst1q_f32(
                res[2 * p][at..at + 4].as_mut_ptr(),
                vuzp1q_f32(acc[0], acc[1]),
            );
            vst1q_f32(
                res[2 * p + 1][at..at + 4].as_mut_ptr(),
                vuzp2q_f32(acc[0], acc[1]),
            );
        }
    }
}

/// Eight repacked Q4_0 rows times `P` (1..=4) activation pairs, in two
/// passes of four rows: each pass unpacks its four rows' nibbles once per
/// block for all `P` pairs (as 16·(q − 8), `q4_0_sixteenths`), so SMMLA
/// gives 16·S, converted exactly with four fraction bits; S·d(w)·d(a) is
/// then added, as `repack::gemv_q4_0_x8i8` (and `vec_dot`) do: results
/// equal it bit for bit. `res[2p + j]` gets row j of pair p.
///
/// # Safety
/// The CPU must have i8mm; each of the first `P` entries of `ps` must hold
/// at least `group.len()` blocks (indexed unchecked).
#[target_feature(enable = "i8mm")]
pub(super) unsafe fn tile_q4_0_x8<const P: usize>(
    group: &[BlockQ4_0x8],
    ps: &[&[BlockQ8_0x2]; 4],
    res: &mut [[f32; 8]; 8],
) {
    for half in 0..2 {
        // Row pairs 2·half and 2·half + 1.
        let mut acc = [[vdupq_n_f32(0.0); 2]; P];
        for (bi, b) in group.iter().enumerate() {
            // In bounds: `half` < 2, and a block holds eight scales.
            let d = b.d.as_ptr().add(4 * half).cast::<[half::f16; 4]>();
            let d = fp16x4(&*d);
            let dw = [vzip1q_f32(d, d), vzip2q_f32(d, d)];
            // w[j][c]: values 8c..8c + 8 of rows 2h and 2h + 1, h = 2·half + j
            // (bytes 8k.. hold values 8k.. in the low nibbles, 16 + 8k.. in
            // the high ones).
            let w: [[int8x16_t; 4]; 2] = std::array::from_fn(|j| {
                let at = 16 * (2 * half + j);
                let [lo0, hi0] = q4_0_sixteenths(vld1q_u8(b.qs.as_ptr().add(at)));
                let [lo1, hi1] = q4_0_sixteenths(vld1q_u8(b.qs.as_ptr().add(64 + at)));
                [lo0, lo1, hi0, hi1]
            });
            for (p, acc) in acc.iter_mut().enumerate() {
                let y = ps.get_unchecked(p).get_unchecked(bi);
                let q = vld1q_s8_x4(y.qs.as_ptr());
                let dy = vld1q_f32(y.d.as_ptr());
                for ((acc, w), dw) in acc.iter_mut().zip(&w).zip(dw) {
                    let mut s = vdupq_n_s32(0);
                    for (w, y) in w.iter().zip([q.0, q.1, q.2, q.3]) {
                        s = smmla(s, *w, y);
                    }
                    let scaled = vmulq_f32(vmulq_f32(vcvtq_n_f32_s32::<4>(s), dw), dy);
                    *acc = vaddq_f32(*acc, scaled);
                }
            }
        }
        store_pairs(&acc, 2 * half, res);
    }
}

/// Eight repacked Q8_0 rows times `P` (1 or 2) activation pairs: per
/// block, row and activation the exact sum, added with one FMA by
/// d(w)·d(a) as `repack_q8_0::gemm_q8_0_x8` does, so results equal it bit
/// for bit.
///
/// # Safety
/// The CPU must have i8mm; each of the first `P` entries of `ps` must hold
/// at least `group.len()` blocks (indexed unchecked).
#[target_feature(enable = "i8mm")]
unsafe fn tile_q8_0_x8_pairs<const P: usize>(
    group: &[BlockQ8_0x8],
    ps: &[&[BlockQ8_0x2]; 4],
    res: &mut [[f32; 8]; 8],
) {
    let mut acc = [[vdupq_n_f32(0.0); 4]; P];
    for (bi, b) in group.iter().enumerate() {
        let ys: [&BlockQ8_0x2; P] = std::array::from_fn(|p| ps.get_unchecked(p).get_unchecked(bi));
        let y: [[int8x16_t; 4]; P] = ys.map(|y| {
            let q = vld1q_s8_x4(y.qs.as_ptr());
            [q.0, q.1, q.2, q.3]
        });
        let dy: [float32x4_t; P] = ys.map(|y| vld1q_f32(y.d.as_ptr()));
        for (h, dw) in row_pair_scales(&b.d).iter().enumerate() {
            let mut s = [vdupq_n_s32(0); P];
            for k in 0..4 {
                // Values 8k..8k + 8 of rows 2h and 2h + 1.
                let w = vld1q_s8(b.qs.as_ptr().add(64 * k + 16 * h));
                for (s, y) in s.iter_mut().zip(&y) {
                    *s = smmla(*s, w, y[k]);
                }
            }
            for p in 0..P {
                acc[p][h] = vfmaq_f32(acc[p][h], vcvtq_f32_s32(s[p]), vmulq_f32(*dw, dy[p]));
            }
        }
    }
    store_pairs(&acc, 0, res);
}

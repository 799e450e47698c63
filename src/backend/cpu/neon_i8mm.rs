//! aarch64 group kernels with i8mm (SMMLA) for prompt batches: eight
//! interleaved rows times pairs of activation rows. SMMLA multiplies a
//! vector holding eight bytes of two weight rows by one holding eight bytes
//! of two activation rows and adds the 2x2 result: 32 multiply-adds per
//! instruction, twice SDOT's. The eight-row layouts (`repack_q8_0`, and
//! Q4_0's 8x8, `repack::BlockQ4_0x8`) already hold eight bytes of two rows
//! per 16-byte load, so the weights go to SMMLA as loaded (Q4_0's nibbles
//! once unpacked); each activation row pair is zipped into that shape once
//! per block and serves all four weight row pairs.
//!
//! A lone activation row (every generated token) would leave half of each
//! SMMLA unused, so it stays on the SDOT tile (`neon_groups`).
//!
//! Integer sums are exact and the float steps are the scalar twin's, lane
//! by lane, so every result equals the twin's bit for bit.

use std::arch::aarch64::*;
use std::arch::asm;

use super::group_tiles::gemm_in_tiles;
use super::neon::{f16x8_to_f32, fp16};
use super::neon_groups::{gemm_tile_q8_0_x8, q4_0_sixteenths, q4_0_x8_row};
use super::repack::BlockQ4_0x8;
use super::repack_q8_0::BlockQ8_0x8;
use crate::tensor::blocks::BlockQ8_0;

// Safety. The safe wrappers below are private to the crate's CPU backend
// and reachable only through the table `neon::i8mm_kernels` builds after
// detecting i8mm and dotprod; `gemm_in_tiles` checks the shapes
// (`check_gemm`) and slices every activation row to the group's length
// before a tile runs, which the tiles' unchecked indexing relies on.

pub(super) fn gemm_q8_0_x8(
    group: &[BlockQ8_0x8],
    x: &[BlockQ8_0],
    n: usize,
    out: &mut [f32],
    stride: usize,
) {
    gemm_in_tiles(group, x, n, out, stride, |take, xs, res| {
        // SAFETY: see the module's safety note: i8mm and dotprod are
        // present, every `xs` row holds `group.len()` blocks (a short
        // tile repeats its last row, so a third row has a fourth to pair
        // with), and `res` is typed.
        unsafe {
            match take {
                1 => gemm_tile_q8_0_x8::<1>(group, xs, res),
                2 => tile_q8_0_x8::<1>(group, xs, res),
                _ => tile_q8_0_x8::<2>(group, xs, res),
            }
        }
    });
}

pub(super) fn gemm_q4_0_x8(
    group: &[BlockQ4_0x8],
    x: &[BlockQ8_0],
    n: usize,
    out: &mut [f32],
    stride: usize,
) {
    gemm_in_tiles(group, x, n, out, stride, |take, xs, res| {
        // SAFETY: as in `gemm_q8_0_x8`.
        unsafe {
            match take {
                1 => q4_0_x8_row(group, xs[0], &mut res[0]),
                2 => tile_q4_0_x8::<1>(group, xs, res),
                _ => tile_q4_0_x8::<2>(group, xs, res),
            }
        }
    });
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

/// Two activation blocks' 32 quants as SMMLA's second operand: vector k
/// holds values 8k..8k + 8 of `y0`, then of `y1`.
///
/// # Safety
/// NEON only (always present); the loads stay inside the typed blocks.
#[inline(always)]
unsafe fn zipped_pair(y0: &BlockQ8_0, y1: &BlockQ8_0) -> [int8x16_t; 4] {
    let a = vld1q_s8_x2(y0.qs.as_ptr());
    let b = vld1q_s8_x2(y1.qs.as_ptr());
    let (a, b) = (
        [vreinterpretq_s64_s8(a.0), vreinterpretq_s64_s8(a.1)],
        [vreinterpretq_s64_s8(b.0), vreinterpretq_s64_s8(b.1)],
    );
    [
        vreinterpretq_s8_s64(vzip1q_s64(a[0], b[0])),
        vreinterpretq_s8_s64(vzip2q_s64(a[0], b[0])),
        vreinterpretq_s8_s64(vzip1q_s64(a[1], b[1])),
        vreinterpretq_s8_s64(vzip2q_s64(a[1], b[1])),
    ]
}

/// The scales of an activation pair in SMMLA's lane order: (d0, d1, d0, d1).
///
/// # Safety
/// NEON only (always present).
#[inline(always)]
unsafe fn pair_scales(y0: &BlockQ8_0, y1: &BlockQ8_0) -> float32x4_t {
    let d = vset_lane_f32::<1>(fp16(y1.d), vdup_n_f32(fp16(y0.d)));
    vcombine_f32(d, d)
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
/// order) as `res[a][r]`.
///
/// # Safety
/// NEON only (always present); the stores go to the typed `res`.
#[inline(always)]
unsafe fn store_pairs<const P: usize>(acc: &[[float32x4_t; 4]; P], res: &mut [[f32; 8]; 4]) {
    for (p, acc) in acc.iter().enumerate() {
        // UZP1 keeps the even lanes (activation 2p), UZP2 the odd ones.
        let first = [vuzp1q_f32(acc[0], acc[1]), vuzp1q_f32(acc[2], acc[3])];
        let second = [vuzp2q_f32(acc[0], acc[1]), vuzp2q_f32(acc[2], acc[3])];
        for (a, halves) in [(2 * p, first), (2 * p + 1, second)] {
            vst1q_f32(res[a].as_mut_ptr(), halves[0]);
            vst1q_f32(res[a].as_mut_ptr().add(4), halves[1]);
        }
    }
}

/// Eight repacked Q8_0 rows times `P` (1 or 2) pairs of activation rows:
/// per block, row and activation the exact sum, added with one FMA by
/// d(w)·d(a) as `repack_q8_0::gemm_q8_0_x8` does, so results equal it bit
/// for bit.
///
/// # Safety
/// The CPU must have i8mm; each of the first `2P` rows of `xs` must hold at
/// least `group.len()` blocks (indexed unchecked).
#[target_feature(enable = "i8mm")]
unsafe fn tile_q8_0_x8<const P: usize>(
    group: &[BlockQ8_0x8],
    xs: &[&[BlockQ8_0]; 4],
    res: &mut [[f32; 8]; 4],
) {
    let mut acc = [[vdupq_n_f32(0.0); 4]; P];
    for (bi, b) in group.iter().enumerate() {
        let act = |j: usize| xs.get_unchecked(j).get_unchecked(bi);
        let y: [[int8x16_t; 4]; P] =
            std::array::from_fn(|p| zipped_pair(act(2 * p), act(2 * p + 1)));
        let dy: [float32x4_t; P] = std::array::from_fn(|p| pair_scales(act(2 * p), act(2 * p + 1)));
        let dw = row_pair_scales(&b.d);
        for (h, dw) in dw.iter().enumerate() {
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
    store_pairs(&acc, res);
}

/// Eight repacked Q4_0 rows times `P` (1 or 2) pairs of activation rows.
/// The nibbles are unpacked as 16·(q − 8) (`q4_0_sixteenths`), so SMMLA
/// gives 16·S, converted exactly with four fraction bits; S·d(w)·d(a) is
/// then added, as `repack::gemv_q4_0_x8i8` (and `vec_dot`) do: results
/// equal it bit for bit.
///
/// # Safety
/// As `tile_q8_0_x8`.
#[target_feature(enable = "i8mm")]
unsafe fn tile_q4_0_x8<const P: usize>(
    group: &[BlockQ4_0x8],
    xs: &[&[BlockQ8_0]; 4],
    res: &mut [[f32; 8]; 4],
) {
    let mut acc = [[vdupq_n_f32(0.0); 4]; P];
    for (bi, b) in group.iter().enumerate() {
        let act = |j: usize| xs.get_unchecked(j).get_unchecked(bi);
        let y: [[int8x16_t; 4]; P] =
            std::array::from_fn(|p| zipped_pair(act(2 * p), act(2 * p + 1)));
        let dy: [float32x4_t; P] = std::array::from_fn(|p| pair_scales(act(2 * p), act(2 * p + 1)));
        let dw = row_pair_scales(&b.d);
        for (h, dw) in dw.iter().enumerate() {
            let mut s = [vdupq_n_s32(0); P];
            for k in 0..2 {
                // Bytes 8k..8k + 8 of rows 2h and 2h + 1: values 8k.. in
                // the low nibbles, 16 + 8k.. in the high ones.
                let [lo, hi] = q4_0_sixteenths(vld1q_u8(b.qs.as_ptr().add(64 * k + 16 * h)));
                for (s, y) in s.iter_mut().zip(&y) {
                    *s = smmla(*s, lo, y[k]);
                    *s = smmla(*s, hi, y[2 + k]);
                }
            }
            for p in 0..P {
                let scaled = vmulq_f32(vmulq_f32(vcvtq_n_f32_s32::<4>(s[p]), *dw), dy[p]);
                acc[p][h] = vaddq_f32(acc[p][h], scaled);
            }
        }
    }
    store_pairs(&acc, res);
}

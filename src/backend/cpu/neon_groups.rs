//! aarch64 group kernels (SDOT): eight interleaved rows times up to four
//! activation rows, on the layouts of `repack_q8_0`, `repack_q4_1`,
//! `repack_q5_0`, `repack_q4_k` and `repack_q6_k`, and one activation row
//! on Q4_0's eight-row layout (`repack::BlockQ4_0x8`). A
//! 16-byte load of a group holds eight bytes of two rows, so one SDOT
//! against eight activation bytes loaded twice (LD1R) leaves two lanes per
//! row; a pairwise add per run gives the eight rows' sums in two vectors,
//! and the scales and the float combination are then done for eight rows
//! at once. This is what llama.cpp's repacked GEMV does on ARM, and what
//! one-row dots cannot: the activations are loaded once per eight rows.
//!
//! Integer sums are exact and the float steps are the scalar twins' (in
//! the `repack_*` modules), lane by lane, so every result equals
//! the twin's bit for bit.

use std::arch::aarch64::*;

use super::group_tiles::{by_take, gemm_in_tiles, gemm_sums_in_tiles};
use super::neon::{f16x8_to_f32, fp16, sdot16};
use super::repack::{check_gemv, BlockQ4_0x8, X8I8_FLIP};
use super::repack_q4_1::BlockQ4_1x8;
use super::repack_q4_k::BlockQ4Kx8;
use super::repack_q5_0::BlockQ5_0x8;
use super::repack_q6_k::BlockQ6Kx8;
use super::repack_q8_0::BlockQ8_0x8;
use crate::tensor::blocks::{BlockQ8K, BlockQ8_0, BlockQ8_1};

// Safety. The safe wrappers below are private and reachable only through
// the tables `neon::dotprod_kernels` builds after detecting dotprod;
// `gemm_in_tiles` checks the shapes (`check_gemm`) and slices every
// activation row to the group's length before a tile runs, so the tiles'
// indexing stays in bounds (the Q8_0 tile's indexes them unchecked, a
// GEMV's innermost loop).

pub(super) fn gemm_q8_0_x8(
    group: &[BlockQ8_0x8],
    x: &[BlockQ8_0],
    n: usize,
    out: &mut [f32],
    stride: usize,
) {
    gemm_in_tiles(group, x, n, out, stride, |take, xs, res| {
        // SAFETY: see the module's safety note: dotprod is present, every
        // `xs` row holds `group.len()` blocks, and `res` is typed.
        unsafe { by_take!(take, gemm_tile_q8_0_x8(group, xs, res)) }
    });
}

pub(super) fn gemm_q4_1_x8(
    group: &[BlockQ4_1x8],
    x: &[BlockQ8_1],
    n: usize,
    out: &mut [f32],
    stride: usize,
) {
    gemm_in_tiles(group, x, n, out, stride, |take, xs, res| {
        // SAFETY: as in `gemm_q8_0_x8`.
        unsafe { by_take!(take, gemm_tile_q4_1_x8(group, xs, res)) }
    });
}

pub(super) fn gemm_q5_0_x8(
    group: &[BlockQ5_0x8],
    x: &[BlockQ8_0],
    sums: &[i32],
    n: usize,
    out: &mut [f32],
    stride: usize,
) {
    // The activation sums serve kernels that take the values unsigned; this
    // one makes them signed in the weights' vectors.
    gemm_sums_in_tiles(group, x, sums, n, out, stride, |take, xs, _, res| {
        // SAFETY: as in `gemm_q8_0_x8`.
        unsafe { by_take!(take, gemm_tile_q5_0_x8(group, xs, res)) }
    });
}

pub(super) fn gemm_q4_k_x8(
    group: &[BlockQ4Kx8],
    x: &[BlockQ8K],
    n: usize,
    out: &mut [f32],
    stride: usize,
) {
    gemm_in_tiles(group, x, n, out, stride, |take, xs, res| {
        // SAFETY: as in `gemm_q8_0_x8`.
        unsafe { by_take!(take, gemm_tile_q4_k_x8(group, xs, res)) }
    });
}

pub(super) fn gemm_q6_k_x8(
    group: &[BlockQ6Kx8],
    x: &[BlockQ8K],
    n: usize,
    out: &mut [f32],
    stride: usize,
) {
    gemm_in_tiles(group, x, n, out, stride, |take, xs, res| {
        // SAFETY: as in `gemm_q8_0_x8`.
        unsafe { by_take!(take, gemm_tile_q6_k_x8(group, xs, res)) }
    });
}

/// Q4_0's eight-row GEMV (every generated token where the layout is 8x8:
/// the neon-i8mm table, whose prompt kernel is `neon_i8mm::gemm_q4_0_x8_pairs`).
pub(super) fn gemv_q4_0_x8(group: &[BlockQ4_0x8], x: &[BlockQ8_0], out: &mut [f32]) {
    check_gemv(group, x, out, 8);
    let mut res = [0f32; 8];
    // SAFETY: see the module's safety note: dotprod is present and `x`
    // holds `group.len()` blocks (checked above); `res` is typed.
    unsafe { q4_0_x8_row(group, x, &mut res) };
    out[..8].copy_from_slice(&res);
}

const _: () = assert!(
    X8I8_FLIP == 0x88,
    "the unpacking below takes flipped nibbles"
);

/// Sixteen bytes of Q4_0's eight-row layout (nibbles stored XOR 8,
/// `repack::X8I8_FLIP`: q − 8 modulo 16) as 16·(q − 8), signed: the low
/// nibbles, then the high ones. Shifted into the top four bits, or masked
/// there, q − 8 modulo 16 is 16·(q − 8) as an i8: two instructions, where
/// subtracting 8 from each half takes four. The factor 16 leaves exactly in
/// the conversion to float (four fraction bits).
///
/// # Safety
/// NEON only (always present).
#[inline(always)]
pub(super) unsafe fn q4_0_sixteenths(v: uint8x16_t) -> [int8x16_t; 2] {
    [
        vreinterpretq_s8_u8(vshlq_n_u8::<4>(v)),
        vreinterpretq_s8_u8(vandq_u8(v, vdupq_n_u8(0xF0))),
    ]
}

/// Eight repacked Q4_0 rows times one activation row. A 16-byte load holds
/// eight bytes of rows 2h and 2h + 1 (values 8k.. in the low nibbles, 16 +
/// 8k.. in the high ones); SDOT against those activation bytes, loaded
/// twice, leaves two lanes per row. Per block the exact sum S is scaled as
/// `repack::gemv_q4_0_x8i8` (and `vec_dot`) scale it, S·d(w)·d(a), then
/// added: results equal it bit for bit.
///
/// # Safety
/// The CPU must have dotprod; `x` must hold at least `group.len()` blocks
/// (zipped, so any length is memory-safe).
#[target_feature(enable = "dotprod")]
unsafe fn q4_0_x8_row(group: &[BlockQ4_0x8], x: &[BlockQ8_0], res: &mut [f32; 8]) {
    let mut acc = [vdupq_n_f32(0.0); 2];
    for (b, y) in group.iter().zip(x) {
        // Activation values 8c..8c + 8 in both halves of vector c.
        let ya = twice_x4(y.qs.as_ptr());
        let mut s = [vdupq_n_s32(0); 4];
        for k in 0..2 {
            let q = vld1q_u8_x4(b.qs.as_ptr().add(64 * k));
            for (s, q) in s.iter_mut().zip([q.0, q.1, q.2, q.3]) {
                let [lo, hi] = q4_0_sixteenths(q);
                *s = sdot16(*s, lo, ya[k]);
                *s = sdot16(*s, hi, ya[2 + k]);
            }
        }
        let (lo, hi) = rows_of(&s);
        let (dlo, dhi) = f16x8_to_f32(b.d.as_ptr());
        let dy = fp16(y.d);
        let scaled = |s, dw| vmulq_n_f32(vmulq_f32(vcvtq_n_f32_s32::<4>(s), dw), dy);
        acc[0] = vaddq_f32(acc[0], scaled(lo, dlo));
        acc[1] = vaddq_f32(acc[1], scaled(hi, dhi));
    }
    vst1q_f32(res.as_mut_ptr(), acc[0]);
    vst1q_f32(res.as_mut_ptr().add(4), acc[1]);
}

/// Eight bytes at `p`, in both halves of a vector (LD1R).
///
/// # Safety
/// `p` must be valid for reading 8 bytes.
#[inline(always)]
unsafe fn twice(p: *const i8) -> int8x16_t {
    vreinterpretq_s8_s64(vld1q_dup_s64(p.cast()))
}

/// Bytes 8k..8k + 8 at `p` in both halves of vector k, k < 4: 32
/// activation bytes in one LD4R, where `twice` takes four LD1R and their
/// address arithmetic.
///
/// # Safety
/// `p` must be valid for reading 32 bytes.
#[inline(always)]
unsafe fn twice_x4(p: *const i8) -> [int8x16_t; 4] {
    let v = vld4q_dup_s64(p.cast());
    [
        vreinterpretq_s8_s64(v.0),
        vreinterpretq_s8_s64(v.1),
        vreinterpretq_s8_s64(v.2),
        vreinterpretq_s8_s64(v.3),
    ]
}

/// Four SDOT lane pairs (rows 2h and 2h + 1, two lanes each) to the eight
/// rows' sums: rows 0..4 and rows 4..8.
///
/// # Safety
/// NEON only (always present).
#[inline(always)]
unsafe fn rows_of(s: &[int32x4_t; 4]) -> (int32x4_t, int32x4_t) {
    (vpaddq_s32(s[0], s[1]), vpaddq_s32(s[2], s[3]))
}

/// Sixteen bytes widened to two vectors of eight 16-bit lanes.
///
/// # Safety
/// NEON only (always present).
#[inline(always)]
unsafe fn widen_halves(v: uint8x16_t) -> [int16x8_t; 2] {
    [
        vreinterpretq_s16_u16(vmovl_u8(vget_low_u8(v))),
        vreinterpretq_s16_u16(vmovl_high_u8(v)),
    ]
}

/// Eight repacked Q8_0 rows times `A` (1..=4) activation rows: per block
/// and row the exact sum, added with one FMA by d(w)·d(a) as
/// `repack_q8_0::gemm_q8_0_x8` does, so results equal it bit for bit.
///
/// # Safety
/// The CPU must have dotprod; each of the first `A` rows of `xs` must hold
/// at least `group.len()` blocks (indexed unchecked).
#[target_feature(enable = "dotprod")]
unsafe fn gemm_tile_q8_0_x8<const A: usize>(
    group: &[BlockQ8_0x8],
    xs: &[&[BlockQ8_0]; 4],
    res: &mut [[f32; 8]; 4],
) {
    let mut acc = [[vdupq_n_f32(0.0); 2]; A];
    for (bi, b) in group.iter().enumerate() {
        let act = |j: usize| xs.get_unchecked(j).get_unchecked(bi);
        let mut s = [[vdupq_n_s32(0); 4]; A];
        // Activation rows two at a time: their 32 bytes in eight vectors,
        // the group block's 256 (reloaded per pair) in four at a time.
        for pair in 0..A.div_ceil(2) {
            let rows = [2 * pair, (2 * pair + 1).min(A - 1)];
            let y = rows.map(|j| twice_x4(act(j).qs.as_ptr()));
            for k in 0..4 {
                // Values 8k..8k + 8 of the eight rows, two rows per vector.
                let w = vld1q_s8_x4(b.qs.as_ptr().add(64 * k));
                let w = [w.0, w.1, w.2, w.3];
                for (t, &j) in rows.iter().enumerate().take(A - 2 * pair) {
                    for (s, w) in s[j].iter_mut().zip(w) {
                        *s = sdot16(*s, w, y[t][k]);
                    }
                }
            }
        }
        let (dlo, dhi) = f16x8_to_f32(b.d.as_ptr());
        for (j, (acc, s)) in acc.iter_mut().zip(&s).enumerate() {
            let dy = fp16(act(j).d);
            let (lo, hi) = rows_of(s);
            acc[0] = vfmaq_f32(acc[0], vcvtq_f32_s32(lo), vmulq_n_f32(dlo, dy));
            acc[1] = vfmaq_f32(acc[1], vcvtq_f32_s32(hi), vmulq_n_f32(dhi, dy));
        }
    }
    for (res, acc) in res.iter_mut().zip(&acc) {
        vst1q_f32(res.as_mut_ptr(), acc[0]);
        vst1q_f32(res.as_mut_ptr().add(4), acc[1]);
    }
}

/// Eight repacked Q4_1 rows times `A` (1..=4) activation rows. The nibbles
/// (0..15) are valid signed bytes, so SDOT takes them as they are against
/// the activations: each row's exact block sum, added with one FMA by
/// d(w)·d(a), and the minimums' terms m·s with one FMA into a second sum,
/// as `repack_q4_1::gemm_q4_1_x8` does: results equal it bit for bit.
///
/// # Safety
/// As `gemm_tile_q8_0_x8`.
#[target_feature(enable = "dotprod")]
unsafe fn gemm_tile_q4_1_x8<const A: usize>(
    group: &[BlockQ4_1x8],
    xs: &[&[BlockQ8_1]; 4],
    res: &mut [[f32; 8]; 4],
) {
    let low_mask = vdupq_n_u8(0x0F);
    let mut dots = [[vdupq_n_f32(0.0); 2]; A];
    let mut mins = [[vdupq_n_f32(0.0); 2]; A];
    for (bi, b) in group.iter().enumerate() {
        let act = |j: usize| xs.get_unchecked(j).get_unchecked(bi);
        // w[k][nib][h]: values 16·nib + 8k.. of rows 2h and 2h + 1.
        let w: [[[int8x16_t; 4]; 2]; 2] = std::array::from_fn(|k| {
            let q = vld1q_u8_x4(b.qs.as_ptr().add(64 * k));
            let q = [q.0, q.1, q.2, q.3];
            [
                q.map(|v| vreinterpretq_s8_u8(vandq_u8(v, low_mask))),
                q.map(|v| vreinterpretq_s8_u8(vshrq_n_u8::<4>(v))),
            ]
        });
        let (dlo, dhi) = f16x8_to_f32(b.d.as_ptr());
        let (mlo, mhi) = f16x8_to_f32(b.m.as_ptr());
        for j in 0..A {
            let y = act(j);
            // Activation bytes 8i..8i + 8 in both halves of vector i.
            let ya = twice_x4(y.qs.as_ptr());
            let mut s = [vdupq_n_s32(0); 4];
            for k in 0..2 {
                for (nib, w) in w[k].iter().enumerate() {
                    for (s, w) in s.iter_mut().zip(w) {
                        *s = sdot16(*s, *w, ya[2 * nib + k]);
                    }
                }
            }
            let (lo, hi) = rows_of(&s);
            let (dy, sy) = (fp16(y.d), fp16(y.s));
            dots[j][0] = vfmaq_f32(dots[j][0], vcvtq_f32_s32(lo), vmulq_n_f32(dlo, dy));
            dots[j][1] = vfmaq_f32(dots[j][1], vcvtq_f32_s32(hi), vmulq_n_f32(dhi, dy));
            mins[j][0] = vfmaq_n_f32(mins[j][0], mlo, sy);
            mins[j][1] = vfmaq_n_f32(mins[j][1], mhi, sy);
        }
    }
    for j in 0..A {
        vst1q_f32(res[j].as_mut_ptr(), vaddq_f32(dots[j][0], mins[j][0]));
        vst1q_f32(
            res[j].as_mut_ptr().add(4),
            vaddq_f32(dots[j][1], mins[j][1]),
        );
    }
}

/// TBL indices into a Q5_0 group's 32 `qh` bytes, per `2 × high + k` and
/// row pair `h`: byte `2 × high + k` of rows 2h (lanes 0..8) and 2h + 1
/// (lanes 8..16), the fifth bits of the values that vector `h` of half
/// `high`, chunk `k` holds (values 16·high + 8k + t, t = lane % 8).
const Q5_0_QH_INDEX: [[[u8; 16]; 4]; 4] = {
    let mut idx = [[[0u8; 16]; 4]; 4];
    let mut a = 0;
    while a < 4 {
        let mut h = 0;
        while h < 4 {
            let mut lane = 0;
            while lane < 16 {
                idx[a][h][lane] = (8 * h + 4 * (lane / 8) + a) as u8;
                lane += 1;
            }
            h += 1;
        }
        a += 1;
    }
    idx
};

/// Bit `lane % 8` in each lane: the fifth bit of value t sits at bit t of
/// its `qh` byte.
const LANE_BITS: [u8; 16] = [1, 2, 4, 8, 16, 32, 64, 128, 1, 2, 4, 8, 16, 32, 64, 128];

/// Eight repacked Q5_0 rows times `A` (1..=4) activation rows. Each value
/// is made signed in the weights' vector (the nibble, minus 16 where its
/// fifth bit is clear: the bit is found with TBL over the group's `qh` and
/// a lane test), so SDOT gives each row's exact block sum, added with one
/// FMA by d(w)·d(a) as `repack_q5_0::gemm_q5_0_x8` does: results equal it
/// bit for bit.
///
/// # Safety
/// As `gemm_tile_q8_0_x8`.
#[target_feature(enable = "dotprod")]
unsafe fn gemm_tile_q5_0_x8<const A: usize>(
    group: &[BlockQ5_0x8],
    xs: &[&[BlockQ8_0]; 4],
    res: &mut [[f32; 8]; 4],
) {
    let low = vdupq_n_u8(0x0F);
    let sixteen = vdupq_n_u8(16);
    let bits = vld1q_u8(LANE_BITS.as_ptr());
    let mut acc = [[vdupq_n_f32(0.0); 2]; A];
    for (bi, b) in group.iter().enumerate() {
        let qh = vld1q_u8_x2(b.qh.as_ptr());
        let mut s = [[vdupq_n_s32(0); 4]; A];
        for k in 0..2 {
            let v = vld1q_u8_x4(b.qs.as_ptr().add(64 * k));
            let v = [v.0, v.1, v.2, v.3];
            for high in 0..2 {
                let mut w = [vdupq_n_s8(0); 4];
                for (h, w) in w.iter_mut().enumerate() {
                    let nibble = if high == 1 {
                        vshrq_n_u8(v[h], 4)
                    } else {
                        vandq_u8(v[h], low)
                    };
                    let index = vld1q_u8(Q5_0_QH_INDEX[2 * high + k][h].as_ptr());
                    let set = vtstq_u8(vqtbl2q_u8(qh, index), bits);
                    *w = vreinterpretq_s8_u8(vsubq_u8(nibble, vbicq_u8(sixteen, set)));
                }
                for (j, s) in s.iter_mut().enumerate() {
                    let y = twice(xs[j][bi].qs.as_ptr().add(16 * high + 8 * k));
                    for (s, w) in s.iter_mut().zip(w) {
                        *s = sdot16(*s, w, y);
                    }
                }
            }
        }
        let (dlo, dhi) = f16x8_to_f32(b.d.as_ptr());
        for (j, (acc, s)) in acc.iter_mut().zip(&s).enumerate() {
            let dy = fp16(xs[j][bi].d);
            let (lo, hi) = rows_of(s);
            acc[0] = vfmaq_f32(acc[0], vcvtq_f32_s32(lo), vmulq_n_f32(dlo, dy));
            acc[1] = vfmaq_f32(acc[1], vcvtq_f32_s32(hi), vmulq_n_f32(dhi, dy));
        }
    }
    for (res, acc) in res.iter_mut().zip(&acc) {
        vst1q_f32(res.as_mut_ptr(), acc[0]);
        vst1q_f32(res.as_mut_ptr().add(4), acc[1]);
    }
}

/// Eight repacked Q4_K rows times `A` (1..=4) activation rows. Per run of
/// 32 values (one nibble half of 32 bytes per row) SDOT gives each row's
/// exact sum, multiplied by its scale in 32-bit lanes; the mins' sum takes
/// the activations' 16-sums. The float combination is
/// `repack_q4_k::gemm_q4_k_x8`'s, lane by lane, so results equal it bit
/// for bit.
///
/// # Safety
/// As `gemm_tile_q8_0_x8`.
#[target_feature(enable = "dotprod")]
unsafe fn gemm_tile_q4_k_x8<const A: usize>(
    group: &[BlockQ4Kx8],
    xs: &[&[BlockQ8K]; 4],
    res: &mut [[f32; 8]; 4],
) {
    let low = vdupq_n_u8(0x0F);
    let mut acc = [[vdupq_n_f32(0.0); 2]; A];
    for (bi, b) in group.iter().enumerate() {
        // dot[j]: rows 0..4 and 4..8 of Σ scale × run.
        let mut dot = [[vdupq_n_s32(0); 2]; A];
        for c in 0..4 {
            for high in [false, true] {
                let mut s = [[vdupq_n_s32(0); 4]; A];
                for k in 0..4 {
                    let v = vld1q_u8_x4(b.qs.as_ptr().add(256 * c + 64 * k));
                    let w = if high {
                        [
                            vshrq_n_u8(v.0, 4),
                            vshrq_n_u8(v.1, 4),
                            vshrq_n_u8(v.2, 4),
                            vshrq_n_u8(v.3, 4),
                        ]
                    } else {
                        [
                            vandq_u8(v.0, low),
                            vandq_u8(v.1, low),
                            vandq_u8(v.2, low),
                            vandq_u8(v.3, low),
                        ]
                    };
                    let at = 64 * c + 32 * high as usize + 8 * k;
                    for (j, s) in s.iter_mut().enumerate() {
                        let y = twice(xs[j][bi].qs.as_ptr().add(at));
                        for (s, w) in s.iter_mut().zip(w) {
                            *s = sdot16(*s, vreinterpretq_s8_u8(w), y);
                        }
                    }
                }
                // Sub-block 2c + high: its eight rows' scales, widened.
                let sc = vmovl_u8(vld1_u8(b.scales.as_ptr().add(8 * (2 * c + high as usize))));
                let sc = [
                    vreinterpretq_s32_u32(vmovl_u16(vget_low_u16(sc))),
                    vreinterpretq_s32_u32(vmovl_high_u16(sc)),
                ];
                for (dot, s) in dot.iter_mut().zip(&s) {
                    let (lo, hi) = rows_of(s);
                    dot[0] = vmlaq_s32(dot[0], lo, sc[0]);
                    dot[1] = vmlaq_s32(dot[1], hi, sc[1]);
                }
            }
        }
        // mins[16p + 2r + t] is row r's min of sub-block 2p + t: widened,
        // four rows per half.
        let m = vld1q_u8_x4(b.mins.as_ptr());
        let m = [
            widen_halves(m.0),
            widen_halves(m.1),
            widen_halves(m.2),
            widen_halves(m.3),
        ];
        let (dlo, dhi) = f16x8_to_f32(b.d.as_ptr());
        let (mlo, mhi) = f16x8_to_f32(b.dmin.as_ptr());
        for (j, (acc, dot)) in acc.iter_mut().zip(&dot).enumerate() {
            let y = &xs[j][bi];
            // Sub-block s's activation sum, for s = 0..8.
            let bs = vreinterpretq_s32_s16(vpaddq_s16(
                vld1q_s16(y.bsums.as_ptr()),
                vld1q_s16(y.bsums.as_ptr().add(8)),
            ));
            // Lanes (row, sub-block of the pair): four per quarter of rows.
            let mut q = [vdupq_n_s32(0); 4];
            for (p, m) in m.iter().enumerate() {
                let pair = vreinterpretq_s16_s32(match p {
                    0 => vdupq_laneq_s32::<0>(bs),
                    1 => vdupq_laneq_s32::<1>(bs),
                    2 => vdupq_laneq_s32::<2>(bs),
                    _ => vdupq_laneq_s32::<3>(bs),
                });
                q[0] = vmlal_s16(q[0], vget_low_s16(m[0]), vget_low_s16(pair));
                q[1] = vmlal_high_s16(q[1], m[0], pair);
                q[2] = vmlal_s16(q[2], vget_low_s16(m[1]), vget_low_s16(pair));
                q[3] = vmlal_high_s16(q[3], m[1], pair);
            }
            let mins = [vpaddq_s32(q[0], q[1]), vpaddq_s32(q[2], q[3])];
            let yd = y.d;
            for (half, (d, dmin)) in [(dlo, mlo), (dhi, mhi)].into_iter().enumerate() {
                let scaled = vmulq_f32(vmulq_n_f32(d, yd), vcvtq_f32_s32(dot[half]));
                let offset = vmulq_f32(vmulq_n_f32(dmin, yd), vcvtq_f32_s32(mins[half]));
                acc[half] = vaddq_f32(acc[half], vsubq_f32(scaled, offset));
            }
        }
    }
    for (res, acc) in res.iter_mut().zip(&acc) {
        vst1q_f32(res.as_mut_ptr(), acc[0]);
        vst1q_f32(res.as_mut_ptr().add(4), acc[1]);
    }
}

/// Eight scales of 16 bytes interleaved by pairs (`[16p + 2r + t]`: row
/// r's scale of sub-block 2p + t), for sub-block 2p + `odd`: rows 0..4 and
/// 4..8, widened to 32 bits.
///
/// # Safety
/// NEON only (always present).
#[inline(always)]
unsafe fn pair_scales(v: int8x16_t, odd: bool) -> [int32x4_t; 2] {
    let rows = vmovl_s8(vget_low_s8(if odd {
        vuzp2q_s8(v, v)
    } else {
        vuzp1q_s8(v, v)
    }));
    [vmovl_s16(vget_low_s16(rows)), vmovl_high_s16(rows)]
}

/// The unsigned six-bit values (0..63) of quarter `i` of a Q6_K half, from
/// its `ql` and `qh` bytes: the low nibbles of `ql` for quarters 0 and 1,
/// the high ones for 2 and 3, under bit pair `i` of `qh` (inserted with
/// SLI/SRI, which keep the other part of the byte).
///
/// # Safety
/// NEON only (always present).
#[inline(always)]
unsafe fn q6_values(i: usize, ql: uint8x16_t, qh: uint8x16_t) -> int8x16_t {
    let v = match i {
        0 => vsliq_n_u8::<4>(ql, vandq_u8(qh, vdupq_n_u8(3))),
        1 => vsliq_n_u8::<4>(ql, vandq_u8(vshrq_n_u8::<2>(qh), vdupq_n_u8(3))),
        2 => vsriq_n_u8::<4>(vandq_u8(qh, vdupq_n_u8(0x30)), ql),
        _ => vsriq_n_u8::<4>(vandq_u8(vshrq_n_u8::<2>(qh), vdupq_n_u8(0x30)), ql),
    };
    vreinterpretq_s8_u8(v)
}

/// Eight repacked Q6_K rows times `A` (1..=4) activation rows. SDOT takes
/// the unsigned values (0..63) per run of 16; the offset of 32 comes off
/// each run as 32 × the activations' 16-sum (`bsums`), which gives
/// `kquant_dot::q6_k`'s exact run sums, scaled per row in 32-bit lanes. The
/// float combination is `repack_q6_k::gemm_q6_k_x8`'s, lane by lane, so
/// results equal it bit for bit.
///
/// # Safety
/// As `gemm_tile_q8_0_x8`.
#[target_feature(enable = "dotprod")]
unsafe fn gemm_tile_q6_k_x8<const A: usize>(
    group: &[BlockQ6Kx8],
    xs: &[&[BlockQ8K]; 4],
    res: &mut [[f32; 8]; 4],
) {
    let mut acc = [[vdupq_n_f32(0.0); 2]; A];
    for (bi, b) in group.iter().enumerate() {
        let mut dot = [[vdupq_n_s32(0); 2]; A];
        for h in 0..2 {
            for i in 0..4 {
                // Values 128h + 32i.. of each row: sub-blocks 8h + 2i + t,
                // whose scales are pair 4h + i.
                let scales = vld1q_s8(b.scales.as_ptr().add(16 * (4 * h + i)));
                for t in 0..2 {
                    let mut s = [[vdupq_n_s32(0); 4]; A];
                    for k in 2 * t..2 * t + 2 {
                        let ql = vld1q_u8_x4(b.ql.as_ptr().add(512 * h + 64 * (4 * (i % 2) + k)));
                        let qh = vld1q_u8_x4(b.qh.as_ptr().add(256 * h + 64 * k));
                        let w = [
                            q6_values(i, ql.0, qh.0),
                            q6_values(i, ql.1, qh.1),
                            q6_values(i, ql.2, qh.2),
                            q6_values(i, ql.3, qh.3),
                        ];
                        for (j, s) in s.iter_mut().enumerate() {
                            let y = twice(xs[j][bi].qs.as_ptr().add(128 * h + 32 * i + 8 * k));
                            for (s, w) in s.iter_mut().zip(w) {
                                *s = sdot16(*s, w, y);
                            }
                        }
                    }
                    let sc = pair_scales(scales, t == 1);
                    let sub = 8 * h + 2 * i + t;
                    for (j, (dot, s)) in dot.iter_mut().zip(&s).enumerate() {
                        let offset = vdupq_n_s32(32 * xs[j][bi].bsums[sub] as i32);
                        let (lo, hi) = rows_of(s);
                        dot[0] = vmlaq_s32(dot[0], vsubq_s32(lo, offset), sc[0]);
                        dot[1] = vmlaq_s32(dot[1], vsubq_s32(hi, offset), sc[1]);
                    }
                }
            }
        }
        let (dlo, dhi) = f16x8_to_f32(b.d.as_ptr());
        for (j, (acc, dot)) in acc.iter_mut().zip(&dot).enumerate() {
            let yd = xs[j][bi].d;
            acc[0] = vaddq_f32(
                acc[0],
                vmulq_f32(vmulq_n_f32(dlo, yd), vcvtq_f32_s32(dot[0])),
            );
            acc[1] = vaddq_f32(
                acc[1],
                vmulq_f32(vmulq_n_f32(dhi, yd), vcvtq_f32_s32(dot[1])),
            );
        }
    }
    for (res, acc) in res.iter_mut().zip(&acc) {
        vst1q_f32(res.as_mut_ptr(), acc[0]);
        vst1q_f32(res.as_mut_ptr().add(4), acc[1]);
    }
}

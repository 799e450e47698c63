//! Q4_0 on the 4x4 interleaved layout (`repack::BlockQ4_0x4`, `X4I4`) with
//! dotprod: the GEMV of the neon-dotprod table, and its GEMM, which runs up
//! to four activation rows against each unpacked weight block.
//!
//! A 16-byte load of the layout holds four bytes of each of the four rows,
//! for four consecutive activation positions (low nibbles) and the four
//! sixteen places on (high nibbles). SDOT by element multiplies it by four
//! bytes of a loaded activation vector (`y.4b[k]`), so each activation
//! block is loaded once, as two vectors, instead of broadcast eight times.
//!
//! The nibbles, stored XOR 8, are unpacked as 16·(q − 8) in two
//! instructions (`nibbles_x16`); the factor 16 leaves in the conversion to float
//! (SCVTF with four fraction bits), which is exact, so the integer sums
//! and the float steps are the scalar twin's (`repack::gemv_q4_0_x4i4`)
//! and every result equals it bit for bit.
//!
//! With the activation rows in quads (`act_rows::BlockQ8_0x4`, arranged once
//! per product), a 16-byte activation load holds four bytes of four rows, so
//! it serves four SDOTs by element (one per row) where a row's own vector
//! serves four positions of one row: the same SDOTs, with one pointer and one
//! scale load per four rows, and eight rows per unpacked weight block.

use std::arch::aarch64::*;
use std::arch::asm;

use super::act_rows::BlockQ8_0x4;
use super::group_tiles::{by_take, gemm_in_row_block_tiles, gemm_in_tiles};
use super::neon::{fp16, fp16x4};
use super::repack::{check_gemv, BlockQ4_0x4};
use crate::tensor::blocks::BlockQ8_0;

// Safety. The safe wrappers below are private and reachable only through
// the tables `neon::dotprod_kernels` builds after detecting dotprod. Each
// checks its shapes first (`check_gemv`, or `check_gemm` in
// `gemm_in_tiles`, which also slices every activation row to the group's
// length), which is what the tile's unchecked indexing relies on.

pub(super) fn gemv_q4_0_x4i4(group: &[BlockQ4_0x4], x: &[BlockQ8_0], out: &mut [f32]) {
    check_gemv(group, x, out, 4);
    let mut res = [[0f32; 4]; 4];
    // SAFETY: see the module's safety note: dotprod is present and `x`
    // holds `group.len()` blocks (checked above); `res` is typed.
    unsafe { tile::<1>(group, &[x; 4], &mut res) };
    out[..4].copy_from_slice(&res[0]);
}

pub(super) fn gemm_q4_0_x4i4(
    group: &[BlockQ4_0x4],
    x: &[BlockQ8_0],
    n: usize,
    out: &mut [f32],
    stride: usize,
) {
    gemm_in_tiles(group, x, n, out, stride, |take, xs, res| {
        // SAFETY: as in `gemv_q4_0_x4i4`: every `xs` row holds
        // `group.len()` blocks (`gemm_in_tiles` sliced them).
        unsafe { by_take!(take, tile(group, xs, res)) }
    });
}

/// The product with the activation rows also in quads (`act_rows`,
/// `BlockQ8_0x4`: four bytes of four rows per 16-byte load): each loaded
/// activation vector serves four SDOTs by element, one per row, and its
/// scales come in one load. Two quads share each unpacked weight block;
/// rows past the last quad go through `gemm_q4_0_x4i4`.
pub(super) fn gemm_q4_0_x4i4_quads(
    group: &[BlockQ4_0x4],
    quads: &[BlockQ8_0x4],
    x: &[BlockQ8_0],
    n: usize,
    out: &mut [f32],
    stride: usize,
) {
    gemm_in_row_block_tiles::<2, _, _, 4>(
        group,
        quads,
        x,
        n,
        out,
        stride,
        |take, qs, res| {
            // SAFETY: see the module's safety note: dotprod is present, the
            // `qs` entries hold `group.len()` blocks, and `res` is typed.
            unsafe {
                if take == 2 {
                    quad_tile::<2>(group, qs, res)
                } else {
                    quad_tile::<1>(group, qs, res)
                }
            }
        },
        |x, n, out| gemm_q4_0_x4i4(group, x, n, out, stride),
    );
}

/// SDOT by element: each lane of `acc` gains the dot product of its four
/// bytes of `w` with bytes 4K..4K+3 of `y`.
///
/// # Safety
/// The CPU must have dotprod (the asm touches registers only).
#[inline(always)]
pub(super) unsafe fn sdot_by_element<const K: i32>(
    acc: int32x4_t,
    w: int8x16_t,
    y: int8x16_t,
) -> int32x4_t {
    let mut acc = acc;
    asm!("sdot {acc:v}.4s, {w:v}.16b, {y:v}.4b[{k}]",
        acc = inout(vreg) acc, w = in(vreg) w, y = in(vreg) y, k = const K,
        options(pure, nomem, nostack));
    acc
}

/// The low and the high nibbles q of 16 bytes as 16·(q − 8), signed:
/// the layout stores q XOR 8, which is q − 8 modulo 16, so shifted into
/// the top four bits it is 16·(q − 8) as an i8. A shift or a mask per
/// half, where unpacking to q − 8 takes a subtraction more.
///
/// # Safety
/// `p` must be valid for reading 16 bytes.
#[inline(always)]
unsafe fn nibbles_x16(p: *const u8) -> (int8x16_t, int8x16_t) {
    let v = vld1q_u8(p);
    (
        vreinterpretq_s8_u8(vshlq_n_u8::<4>(v)),
        vreinterpretq_s8_u8(vandq_u8(v, vdupq_n_u8(0xF0))),
    )
}

/// A group block's four rows as 16·(q − 8), four vectors of low and high
/// nibbles (`nibbles_x16`), and their scales.
///
/// # Safety
/// NEON only (always present); the loads stay inside the typed block.
#[inline(always)]
unsafe fn unpacked(b: &BlockQ4_0x4) -> ([(int8x16_t, int8x16_t); 4], float32x4_t) {
    let p = b.qs.as_ptr();
    let w = [
        nibbles_x16(p),
        nibbles_x16(p.add(16)),
        nibbles_x16(p.add(32)),
        nibbles_x16(p.add(48)),
    ];
    (w, fp16x4(&b.d))
}

/// The group's four rows times the first `A` rows of `xs`:
/// `res[a][r]` = row r · activation row a. Per block, the exact sum 16·S
/// of each (row, activation) pair is converted with four fraction bits
/// (S, exactly: |16·S| < 2^24), then scaled as the scalar twin scales it,
/// S·dw·dy, and added.
///
/// # Safety
/// The CPU must have dotprod. `A` must be 1..=4, and each of the first `A`
/// rows of `xs` at least `group.len()` blocks long (indexed unchecked).
#[target_feature(enable = "dotprod")]
unsafe fn tile<const A: usize>(
    group: &[BlockQ4_0x4],
    xs: &[&[BlockQ8_0]; 4],
    res: &mut [[f32; 4]; 4],
) {
    let mut acc = [vdupq_n_f32(0.0); A];
    for (bi, b) in group.iter().enumerate() {
        let (w, dw) = unpacked(b);
        for (a, acc) in acc.iter_mut().enumerate() {
            let y = xs.get_unchecked(a).get_unchecked(bi);
            let ylo = vld1q_s8(y.qs.as_ptr());
            let yhi = vld1q_s8(y.qs.as_ptr().add(16));
            let mut s = vdupq_n_s32(0);
            s = sdot_by_element::<0>(s, w[0].0, ylo);
            s = sdot_by_element::<0>(s, w[0].1, yhi);
            s = sdot_by_element::<1>(s, w[1].0, ylo);
            s = sdot_by_element::<1>(s, w[1].1, yhi);
            s = sdot_by_element::<2>(s, w[2].0, ylo);
            s = sdot_by_element::<2>(s, w[2].1, yhi);
            s = sdot_by_element::<3>(s, w[3].0, ylo);
            s = sdot_by_element::<3>(s, w[3].1, yhi);
            let scaled = vmulq_n_f32(vmulq_f32(vcvtq_n_f32_s32::<4>(s), dw), fp16(y.d));
            *acc = vaddq_f32(*acc, scaled);
        }
    }
    for (res, acc) in res.iter_mut().zip(acc) {
        vst1q_f32(res.as_mut_ptr(), acc);
    }
}

/// The group's four rows times `Q` (1 or 2) quads of activation rows:
/// `res[4q + j][r]` = row r · row j of quad q. Per block, the exact sum
/// 16·S of each (row, activation) pair is converted with four fraction bits
/// (S, exactly), then scaled as the scalar twin scales it, S·dw·dy, and
/// added, as `tile` does.
///
/// # Safety
/// The CPU must have dotprod. The first `Q` entries of `qs` must hold at
/// least `group.len()` blocks (indexed unchecked).
#[target_feature(enable = "dotprod")]
unsafe fn quad_tile<const Q: usize>(
    group: &[BlockQ4_0x4],
    qs: &[&[BlockQ8_0x4]; 4],
    res: &mut [[f32; 4]; 8],
) {
    // Two named accumulators, not an array indexed by a loop over the
    // quads: the compiler kept such an array in memory.
    let mut first = [vdupq_n_f32(0.0); 4];
    let mut second = [vdupq_n_f32(0.0); 4];
    for (bi, b) in group.iter().enumerate() {
        let (w, dw) = unpacked(b);
        quad_block(&w, dw, qs[0].get_unchecked(bi), &mut first);
        if Q == 2 {
            quad_block(&w, dw, qs[1].get_unchecked(bi), &mut second);
        }
    }
    for (j, acc) in first.iter().chain(&second[..4 * (Q - 1)]).enumerate() {
        vst1q_f32(res[j].as_mut_ptr(), *acc);
    }
}

/// One block of the four unpacked rows `w` (scales `dw`) times the quad
/// `y`, added to `acc` (one vector per activation row).
///
/// # Safety
/// The CPU must have dotprod (inlined into `quad_tile`, which has it).
#[inline(always)]
unsafe fn quad_block(
    w: &[(int8x16_t, int8x16_t); 4],
    dw: float32x4_t,
    y: &BlockQ8_0x4,
    acc: &mut [float32x4_t; 4],
) {
    let mut s = [vdupq_n_s32(0); 4];
    for (k, (wlo, whi)) in w.iter().enumerate() {
        // Values 4k.. (low nibbles) and 16 + 4k.. (high ones) of the four
        // activation rows, four bytes each.
        let lo = vld1q_s8(y.qs.as_ptr().add(16 * k));
        let hi = vld1q_s8(y.qs.as_ptr().add(64 + 16 * k));
        s[0] = sdot_by_element::<0>(sdot_by_element::<0>(s[0], *wlo, lo), *whi, hi);
        s[1] = sdot_by_element::<1>(sdot_by_element::<1>(s[1], *wlo, lo), *whi, hi);
        s[2] = sdot_by_element::<2>(sdot_by_element::<2>(s[2], *wlo, lo), *whi, hi);
        s[3] = sdot_by_element::<3>(sdot_by_element::<3>(s[3], *wlo, lo), *whi, hi);
    }
    let dy = vld1q_f32(y.d.as_ptr());
    let scaled = |s| vmulq_f32(vcvtq_n_f32_s32::<4>(s), dw);
    acc[0] = vaddq_f32(acc[0], vmulq_laneq_f32::<0>(scaled(s[0]), dy));
    acc[1] = vaddq_f32(acc[1], vmulq_laneq_f32::<1>(scaled(s[1]), dy));
    acc[2] = vaddq_f32(acc[2], vmulq_laneq_f32::<2>(scaled(s[2]), dy));
    acc[3] = vaddq_f32(acc[3], vmulq_laneq_f32::<3>(scaled(s[3]), dy));
}

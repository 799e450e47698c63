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

use std::arch::aarch64::*;
use std::arch::asm;

use super::group_tiles::{by_take, gemm_in_tiles};
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

/// SDOT by element: each lane of `acc` gains the dot product of its four
/// bytes of `w` with bytes 4K..4K+3 of `y`.
///
/// # Safety
/// The CPU must have dotprod (the asm touches registers only).
#[inline(always)]
unsafe fn sdot_by_element<const K: i32>(acc: int32x4_t, w: int8x16_t, y: int8x16_t) -> int32x4_t {
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
        let p = b.qs.as_ptr();
        let w = [
            nibbles_x16(p),
            nibbles_x16(p.add(16)),
            nibbles_x16(p.add(32)),
            nibbles_x16(p.add(48)),
        ];
        let dw = fp16x4(&b.d);
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

//! Scalar kernels: the reference every SIMD kernel is tested against, and the
//! fallback where a variant has no kernel of its own. Integer parts are exact;
//! per-block float scaling follows ggml's scalar code.

use half::f16;

use super::kquant_dot::{self, ScalarDots};
use crate::tensor::blocks::*;
use crate::tensor::quantize;

pub fn quantize_q8_0(x: &[f32], y: &mut [BlockQ8_0]) {
    quantize::q8_0(x, y)
}

pub fn quantize_q8_1(x: &[f32], y: &mut [BlockQ8_1]) {
    quantize::q8_1(x, y)
}

pub fn quantize_q8_k(x: &[f32], y: &mut [BlockQ8K]) {
    quantize::q8_k(x, y)
}

/// Q8_1 from a Q8_0 quantizer: the same scale and quants (ggml computes both
/// the same way), plus s = d × Σq with d before its rounding to f16.
#[inline(always)]
pub(crate) fn q8_1_from_q8_0(
    x: &[f32],
    y: &mut [BlockQ8_1],
    q8_0: impl Fn(&[f32], &mut [BlockQ8_0]),
) {
    for (x, b) in x.chunks_exact(QK).zip(y) {
        let mut t = [BlockQ8_0::zeroed()];
        q8_0(x, &mut t);
        b.d = t[0].d;
        b.qs = t[0].qs;
        let sum: i32 = b.qs.iter().map(|&q| q as i32).sum();
        let d = x.iter().fold(0.0f32, |a, &v| a.max(v.abs())) / 127.0;
        b.s = f16::from_f32(sum as f32 * d);
    }
}

/// Q8_K's scale: the value of largest magnitude (first on ties), -127 / it,
/// and the block's 16-value sums; `round_scaled` rounds iscale·x to nearest
/// even for a block of 256.
#[inline(always)]
pub(crate) fn q8_k_with(
    x: &[f32],
    y: &mut [BlockQ8K],
    round_scaled: impl Fn(&[f32], f32, &mut [i8; QK_K]),
) {
    for (x, b) in x.chunks_exact(QK_K).zip(y) {
        let (mut amax, mut max) = (0.0f32, 0.0f32);
        for &v in x {
            if v.abs() > amax {
                amax = v.abs();
                max = v;
            }
        }
        if amax == 0.0 {
            *b = BlockQ8K::zeroed();
            continue;
        }
        let iscale = -127.0 / max;
        round_scaled(x, iscale, &mut b.qs);
        for (sum, q) in b.bsums.iter_mut().zip(b.qs.chunks_exact(16)) {
            *sum = q.iter().map(|&q| q as i16).sum();
        }
        b.d = 1.0 / iscale;
    }
}

pub fn vec_dot_q4_0_q8_0(x: &[BlockQ4_0], y: &[BlockQ8_0]) -> f32 {
    debug_assert_eq!(x.len(), y.len());
    let mut sum = 0.0f32;
    for (x, y) in x.iter().zip(y) {
        let mut sumi = 0i32;
        for j in 0..QK / 2 {
            let v0 = (x.qs[j] & 0x0F) as i32 - 8;
            let v1 = (x.qs[j] >> 4) as i32 - 8;
            sumi += v0 * y.qs[j] as i32 + v1 * y.qs[j + QK / 2] as i32;
        }
        sum += sumi as f32 * x.d.to_f32() * y.d.to_f32();
    }
    sum
}

pub fn vec_dot_q4_1_q8_1(x: &[BlockQ4_1], y: &[BlockQ8_1]) -> f32 {
    debug_assert_eq!(x.len(), y.len());
    let mut sum = 0.0f32;
    for (x, y) in x.iter().zip(y) {
        let mut sumi = 0i32;
        for j in 0..QK / 2 {
            sumi += (x.qs[j] & 0x0F) as i32 * y.qs[j] as i32
                + (x.qs[j] >> 4) as i32 * y.qs[j + QK / 2] as i32;
        }
        sum += (x.d.to_f32() * y.d.to_f32()) * sumi as f32 + x.m.to_f32() * y.s.to_f32();
    }
    sum
}

/// The 32 five-bit values of a Q5 block, without the offset.
fn q5_values(qs: &[u8; 16], qh: [u8; 4]) -> [i32; 32] {
    let qh = u32::from_le_bytes(qh);
    let mut v = [0i32; 32];
    for j in 0..16 {
        v[j] = ((qs[j] & 0x0F) as u32 | (((qh >> j) & 1) << 4)) as i32;
        v[j + 16] = ((qs[j] >> 4) as u32 | (((qh >> (j + 16)) & 1) << 4)) as i32;
    }
    v
}

pub fn vec_dot_q5_0_q8_0(x: &[BlockQ5_0], y: &[BlockQ8_0]) -> f32 {
    debug_assert_eq!(x.len(), y.len());
    let mut sum = 0.0f32;
    for (x, y) in x.iter().zip(y) {
        let v = q5_values(&x.qs, x.qh);
        let sumi: i32 = v
            .iter()
            .zip(&y.qs)
            .map(|(&v, &q)| (v - 16) * q as i32)
            .sum();
        sum += sumi as f32 * x.d.to_f32() * y.d.to_f32();
    }
    sum
}

pub fn vec_dot_q5_1_q8_1(x: &[BlockQ5_1], y: &[BlockQ8_1]) -> f32 {
    debug_assert_eq!(x.len(), y.len());
    let mut sum = 0.0f32;
    for (x, y) in x.iter().zip(y) {
        let v = q5_values(&x.qs, x.qh);
        let sumi: i32 = v.iter().zip(&y.qs).map(|(&v, &q)| v * q as i32).sum();
        sum += (x.d.to_f32() * y.d.to_f32()) * sumi as f32 + x.m.to_f32() * y.s.to_f32();
    }
    sum
}

pub fn vec_dot_q8_0_q8_0(x: &[BlockQ8_0], y: &[BlockQ8_0]) -> f32 {
    debug_assert_eq!(x.len(), y.len());
    let mut sum = 0.0f32;
    for (x, y) in x.iter().zip(y) {
        let sumi: i32 =
            x.qs.iter()
                .zip(&y.qs)
                .map(|(&a, &b)| a as i32 * b as i32)
                .sum();
        sum += sumi as f32 * (x.d.to_f32() * y.d.to_f32());
    }
    sum
}

pub fn vec_dot_q4_k_q8_k(x: &[BlockQ4K], y: &[BlockQ8K]) -> f32 {
    debug_assert_eq!(x.len(), y.len());
    // SAFETY: the scalar primitives use no special instructions.
    unsafe { kquant_dot::q4_k::<ScalarDots>(x, y) }
}

pub fn vec_dot_q5_k_q8_k(x: &[BlockQ5K], y: &[BlockQ8K]) -> f32 {
    debug_assert_eq!(x.len(), y.len());
    // SAFETY: as above.
    unsafe { kquant_dot::q5_k::<ScalarDots>(x, y) }
}

pub fn vec_dot_q6_k_q8_k(x: &[BlockQ6K], y: &[BlockQ8K]) -> f32 {
    debug_assert_eq!(x.len(), y.len());
    // SAFETY: as above.
    unsafe { kquant_dot::q6_k::<ScalarDots>(x, y) }
}

pub fn vec_dot_f16(x: &[f16], y: &[f16]) -> f32 {
    debug_assert_eq!(x.len(), y.len());
    // ggml accumulates f16 dot products in double.
    let sum: f64 = x
        .iter()
        .zip(y)
        .map(|(a, b)| a.to_f32() as f64 * b.to_f32() as f64)
        .sum();
    sum as f32
}

/// The scalar twin of the SIMD `tile_f16` kernels: each output a plain dot
/// product accumulated in f64 (the SIMD tiles match it within rounding).
pub fn tile_f16(w: [&[f16]; 4], x: [&[f32]; 2]) -> [[f32; 2]; 4] {
    w.map(|wr| {
        x.map(|xr| {
            wr.iter()
                .zip(xr)
                .map(|(a, &b)| a.to_f32() as f64 * b as f64)
                .sum::<f64>() as f32
        })
    })
}

pub fn vec_dot_f32(x: &[f32], y: &[f32]) -> f32 {
    debug_assert_eq!(x.len(), y.len());
    x.iter().zip(y).map(|(a, b)| a * b).sum()
}

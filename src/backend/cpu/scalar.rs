//! Scalar kernels: the reference every SIMD kernel is tested against, and the
//! fallback where a variant has no kernel of its own. Integer parts are exact;
//! per-block float scaling follows ggml's scalar code.

use half::f16;

use crate::tensor::blocks::*;
use crate::tensor::dequantize::scale_min_k4;
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

/// Σ over the eight 32-value sub-blocks of scale × (q · y), and the correction
/// Σ min × (sum of y) from Q8_K's 16-value sums, for Q4_K and Q5_K.
fn k4_sums(scales: &[u8; 12], q: &[i32; QK_K], y: &BlockQ8K) -> (i32, i32) {
    let mut dot = 0i32;
    let mut mins = 0i32;
    for j in 0..8 {
        let (sc, m) = scale_min_k4(j, scales);
        let d: i32 = (0..32)
            .map(|l| q[32 * j + l] * y.qs[32 * j + l] as i32)
            .sum();
        dot += sc as i32 * d;
        mins += m as i32 * (y.bsums[2 * j] as i32 + y.bsums[2 * j + 1] as i32);
    }
    (dot, mins)
}

pub fn vec_dot_q4_k_q8_k(x: &[BlockQ4K], y: &[BlockQ8K]) -> f32 {
    debug_assert_eq!(x.len(), y.len());
    let mut sum = 0.0f32;
    for (x, y) in x.iter().zip(y) {
        let mut q = [0i32; QK_K];
        for (chunk, qs) in x.qs.chunks_exact(32).enumerate() {
            for l in 0..32 {
                q[64 * chunk + l] = (qs[l] & 0xF) as i32;
                q[64 * chunk + 32 + l] = (qs[l] >> 4) as i32;
            }
        }
        let (dot, mins) = k4_sums(&x.scales, &q, y);
        sum += x.d.to_f32() * y.d * dot as f32 - x.dmin.to_f32() * y.d * mins as f32;
    }
    sum
}

pub fn vec_dot_q5_k_q8_k(x: &[BlockQ5K], y: &[BlockQ8K]) -> f32 {
    debug_assert_eq!(x.len(), y.len());
    let mut sum = 0.0f32;
    for (x, y) in x.iter().zip(y) {
        let mut q = [0i32; QK_K];
        for (chunk, qs) in x.qs.chunks_exact(32).enumerate() {
            for l in 0..32 {
                let h1 = ((x.qh[l] >> (2 * chunk)) & 1) as i32;
                let h2 = ((x.qh[l] >> (2 * chunk + 1)) & 1) as i32;
                q[64 * chunk + l] = (qs[l] & 0xF) as i32 | (h1 << 4);
                q[64 * chunk + 32 + l] = (qs[l] >> 4) as i32 | (h2 << 4);
            }
        }
        let (dot, mins) = k4_sums(&x.scales, &q, y);
        sum += x.d.to_f32() * y.d * dot as f32 - x.dmin.to_f32() * y.d * mins as f32;
    }
    sum
}

pub fn vec_dot_q6_k_q8_k(x: &[BlockQ6K], y: &[BlockQ8K]) -> f32 {
    debug_assert_eq!(x.len(), y.len());
    let mut sum = 0.0f32;
    for (x, y) in x.iter().zip(y) {
        let mut dot = 0i32;
        for half in 0..2 {
            let ql = &x.ql[64 * half..];
            let qh = &x.qh[32 * half..];
            for l in 0..32 {
                let q = [
                    ((ql[l] & 0xF) | ((qh[l] & 3) << 4)) as i32 - 32,
                    ((ql[l + 32] & 0xF) | (((qh[l] >> 2) & 3) << 4)) as i32 - 32,
                    ((ql[l] >> 4) | (((qh[l] >> 4) & 3) << 4)) as i32 - 32,
                    ((ql[l + 32] >> 4) | (((qh[l] >> 6) & 3) << 4)) as i32 - 32,
                ];
                for (k, q) in q.into_iter().enumerate() {
                    let idx = 128 * half + 32 * k + l;
                    let scale = x.scales[8 * half + 2 * k + l / 16] as i32;
                    dot += scale * q * y.qs[idx] as i32;
                }
            }
        }
        sum += x.d.to_f32() * y.d * dot as f32;
    }
    sum
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

pub fn vec_dot_f32(x: &[f32], y: &[f32]) -> f32 {
    debug_assert_eq!(x.len(), y.len());
    x.iter().zip(y).map(|(a, b)| a * b).sum()
}

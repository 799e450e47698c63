//! Reference quantizers for the legacy block types and Q8_K, bit-exact with
//! ggml's `quantize_row_*_ref`: same selection of the scale, same rounding, same
//! order of float operations. Each takes `x.len() == y.len() * ELEMENTS`.

use half::f16;

use super::blocks::*;

/// The value with the largest magnitude (the first one on ties), and that magnitude.
fn signed_absmax(x: &[f32]) -> (f32, f32) {
    let (mut amax, mut max) = (0.0f32, 0.0f32);
    for &v in x {
        if amax < v.abs() {
            amax = v.abs();
            max = v;
        }
    }
    (max, amax)
}

fn min_max(x: &[f32]) -> (f32, f32) {
    let (mut min, mut max) = (f32::MAX, -f32::MAX);
    for &v in x {
        if v < min {
            min = v;
        }
        if v > max {
            max = v;
        }
    }
    (min, max)
}

fn inverse(d: f32) -> f32 {
    if d != 0.0 {
        1.0 / d
    } else {
        0.0
    }
}

/// C's float-to-int8 conversion (truncation) of an in-range value.
fn trunc_i8(v: f32) -> i8 {
    v as i32 as i8
}

pub fn q4_0(x: &[f32], y: &mut [BlockQ4_0]) {
    for (x, b) in x.chunks_exact(QK).zip(y) {
        let (max, _) = signed_absmax(x);
        let d = max / -8.0;
        let id = inverse(d);
        b.d = f16::from_f32(d);
        for j in 0..QK / 2 {
            let x0 = x[j] * id;
            let x1 = x[j + QK / 2] * id;
            let q0 = trunc_i8(x0 + 8.5).min(15) as u8;
            let q1 = trunc_i8(x1 + 8.5).min(15) as u8;
            b.qs[j] = q0 | (q1 << 4);
        }
    }
}

pub fn q4_1(x: &[f32], y: &mut [BlockQ4_1]) {
    for (x, b) in x.chunks_exact(QK).zip(y) {
        let (min, max) = min_max(x);
        let d = (max - min) / 15.0;
        let id = inverse(d);
        b.d = f16::from_f32(d);
        b.m = f16::from_f32(min);
        for j in 0..QK / 2 {
            let x0 = (x[j] - min) * id;
            let x1 = (x[j + QK / 2] - min) * id;
            let q0 = trunc_i8(x0 + 0.5).min(15) as u8;
            let q1 = trunc_i8(x1 + 0.5).min(15) as u8;
            b.qs[j] = q0 | (q1 << 4);
        }
    }
}

/// Packs 32 five-bit values: low nibbles in `qs`, fifth bits in `qh`.
fn pack_q5(q: impl Fn(usize) -> u8, qs: &mut [u8; 16]) -> [u8; 4] {
    let mut qh = 0u32;
    for j in 0..QK / 2 {
        let (q0, q1) = (q(j), q(j + QK / 2));
        qs[j] = (q0 & 0x0F) | ((q1 & 0x0F) << 4);
        qh |= (((q0 & 0x10) >> 4) as u32) << j;
        qh |= (((q1 & 0x10) >> 4) as u32) << (j + QK / 2);
    }
    qh.to_le_bytes()
}

pub fn q5_0(x: &[f32], y: &mut [BlockQ5_0]) {
    for (x, b) in x.chunks_exact(QK).zip(y) {
        let (max, _) = signed_absmax(x);
        let d = max / -16.0;
        let id = inverse(d);
        b.d = f16::from_f32(d);
        b.qh = pack_q5(|j| trunc_i8(x[j] * id + 16.5).min(31) as u8, &mut b.qs);
    }
}

pub fn q5_1(x: &[f32], y: &mut [BlockQ5_1]) {
    for (x, b) in x.chunks_exact(QK).zip(y) {
        let (min, max) = min_max(x);
        let d = (max - min) / 31.0;
        let id = inverse(d);
        b.d = f16::from_f32(d);
        b.m = f16::from_f32(min);
        // ggml converts straight to uint8 here, without a clamp.
        b.qh = pack_q5(|j| ((x[j] - min) * id + 0.5) as i32 as u8, &mut b.qs);
    }
}

fn absmax(x: &[f32]) -> f32 {
    x.iter().fold(0.0f32, |a, &v| a.max(v.abs()))
}

pub fn q8_0(x: &[f32], y: &mut [BlockQ8_0]) {
    for (x, b) in x.chunks_exact(QK).zip(y) {
        let d = absmax(x) / 127.0;
        let id = inverse(d);
        b.d = f16::from_f32(d);
        for (q, &v) in b.qs.iter_mut().zip(x) {
            *q = (v * id).round() as i8;
        }
    }
}

pub fn q8_1(x: &[f32], y: &mut [BlockQ8_1]) {
    for (x, b) in x.chunks_exact(QK).zip(y) {
        let d = absmax(x) / 127.0;
        let id = inverse(d);
        b.d = f16::from_f32(d);
        let mut sum = 0i32;
        for (q, &v) in b.qs.iter_mut().zip(x) {
            *q = (v * id).round() as i8;
            sum += *q as i32;
        }
        b.s = f16::from_f32(sum as f32 * d);
    }
}

/// ggml's `nearest_int`: round to nearest, ties to even, via the float trick
/// (valid for |v| <= 4194303, which every caller guarantees).
pub(crate) fn nearest_int(v: f32) -> i32 {
    let bits = (v + 12582912.0).to_bits() as i32;
    (bits & 0x007f_ffff) - 0x0040_0000
}

pub fn q8_k(x: &[f32], y: &mut [BlockQ8K]) {
    for (x, b) in x.chunks_exact(QK_K).zip(y) {
        let (max, amax) = {
            let (mut amax, mut max) = (0.0f32, 0.0f32);
            for &v in x {
                if v.abs() > amax {
                    amax = v.abs();
                    max = v;
                }
            }
            (max, amax)
        };
        if amax == 0.0 {
            *b = BlockQ8K::zeroed();
            continue;
        }
        let iscale = -127.0 / max;
        for (q, &v) in b.qs.iter_mut().zip(x) {
            *q = nearest_int(iscale * v).min(127) as i8;
        }
        for (sum, q) in b.bsums.iter_mut().zip(b.qs.chunks_exact(16)) {
            *sum = q.iter().map(|&q| q as i16).sum();
        }
        b.d = 1.0 / iscale;
    }
}

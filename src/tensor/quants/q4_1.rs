//! Q4_1: 4-bit blocks of 32 with a minimum.

use super::*;

block! {
    /// 4-bit with a minimum: x = d * q + m.
    BlockQ4_1: Q4_1, QK, 20 { d: f16, m: f16, qs: [u8; QK / 2] }
}

impl QuantType for BlockQ4_1 {
    type Dot = BlockQ8_1;
    const DEQUANTIZE: DequantizeFn<Self> = dequantize;
    const QUANTIZE: Option<QuantizeFn<Self>> = Some(quantize);
}

/// Blocks to f32, as ggml's `dequantize_row_q4_1` computes them.
pub fn dequantize(x: &[BlockQ4_1], y: &mut [f32]) {
    for (b, y) in x.iter().zip(y.chunks_exact_mut(QK)) {
        let (d, m) = (b.d.to_f32(), b.m.to_f32());
        for j in 0..QK / 2 {
            y[j] = (b.qs[j] & 0x0F) as f32 * d + m;
            y[j + QK / 2] = (b.qs[j] >> 4) as f32 * d + m;
        }
    }
}

/// f32 to blocks, as ggml's `quantize_row_q4_1_ref` computes them: the same
/// scale choice, rounding and order of float operations.
pub fn quantize(x: &[f32], y: &mut [BlockQ4_1]) {
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

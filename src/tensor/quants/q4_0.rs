//! Q4_0: 4-bit symmetric blocks of 32.

use super::*;

block! {
    /// 4-bit, symmetric: x = d * (q - 8).
    BlockQ4_0: Q4_0, QK, 18 { d: f16, qs: [u8; QK / 2] }
}

impl QuantType for BlockQ4_0 {
    type Dot = BlockQ8_0;
    const DEQUANTIZE: DequantizeFn<Self> = dequantize;
    const QUANTIZE: Option<QuantizeFn<Self>> = Some(quantize);
}

/// Blocks to f32, as ggml's `dequantize_row_q4_0` computes them.
pub fn dequantize(x: &[BlockQ4_0], y: &mut [f32]) {
    for (b, y) in x.iter().zip(y.chunks_exact_mut(QK)) {
        let d = b.d.to_f32();
        for j in 0..QK / 2 {
            y[j] = ((b.qs[j] & 0x0F) as i32 - 8) as f32 * d;
            y[j + QK / 2] = ((b.qs[j] >> 4) as i32 - 8) as f32 * d;
        }
    }
}

/// f32 to blocks, as ggml's `quantize_row_q4_0_ref` computes them: the same
/// scale choice, rounding and order of float operations.
pub fn quantize(x: &[f32], y: &mut [BlockQ4_0]) {
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

//! Q8_1: 8-bit blocks of 32 with their sum (the activations of the Q4_1
//! and Q5_1 dot products).

use super::*;

block! {
    /// 8-bit with `s` = d * sum(qs) (activations for Q4_1/Q5_1 dot products).
    BlockQ8_1: Q8_1, QK, 36 { d: f16, s: f16, qs: [i8; QK] }
}

impl QuantType for BlockQ8_1 {
    type Dot = BlockQ8_1;
    const DEQUANTIZE: DequantizeFn<Self> = dequantize;
    const QUANTIZE: Option<QuantizeFn<Self>> = Some(quantize);
}

/// Blocks to f32, as ggml's `dequantize_row_q8_1` computes them.
pub fn dequantize(x: &[BlockQ8_1], y: &mut [f32]) {
    for (b, y) in x.iter().zip(y.chunks_exact_mut(QK)) {
        let d = b.d.to_f32();
        for (y, &q) in y.iter_mut().zip(&b.qs) {
            *y = q as f32 * d;
        }
    }
}

/// f32 to blocks, as ggml's `quantize_row_q8_1_ref` computes them: the same
/// scale choice, rounding and order of float operations.
pub fn quantize(x: &[f32], y: &mut [BlockQ8_1]) {
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

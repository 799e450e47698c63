//! Q8_0: 8-bit symmetric blocks of 32 (weights, and the activations of
//! the Q4_0, Q5_0 and Q8_0 dot products).

use super::*;

block! {
    /// 8-bit, symmetric.
    BlockQ8_0: Q8_0, QK, 34 { d: f16, qs: [i8; QK] }
}

impl QuantType for BlockQ8_0 {
    type Dot = BlockQ8_0;
    const DEQUANTIZE: DequantizeFn<Self> = dequantize;
    const QUANTIZE: Option<QuantizeFn<Self>> = Some(quantize);
}

/// Blocks to f32, as ggml's `dequantize_row_q8_0` computes them.
pub fn dequantize(x: &[BlockQ8_0], y: &mut [f32]) {
    for (b, y) in x.iter().zip(y.chunks_exact_mut(QK)) {
        let d = b.d.to_f32();
        for (y, &q) in y.iter_mut().zip(&b.qs) {
            *y = q as f32 * d;
        }
    }
}

/// f32 to blocks, as ggml's `quantize_row_q8_0_ref` computes them: the same
/// scale choice, rounding and order of float operations.
pub fn quantize(x: &[f32], y: &mut [BlockQ8_0]) {
    for (x, b) in x.chunks_exact(QK).zip(y) {
        let d = absmax(x) / 127.0;
        let id = inverse(d);
        b.d = f16::from_f32(d);
        for (q, &v) in b.qs.iter_mut().zip(x) {
            *q = (v * id).round() as i8;
        }
    }
}

//! Q8_K: 8-bit super-blocks of 256 with sums of each 16 (the activations of
//! the k-quant dot products).

use super::*;

block! {
    /// 8-bit k-quant activations, with sums of each 16 values.
    BlockQ8K: Q8_K, QK_K, 292 { d: f32, qs: [i8; QK_K], bsums: [i16; QK_K / 16] }
}

impl QuantType for BlockQ8K {
    type Dot = BlockQ8K;
    const DEQUANTIZE: DequantizeFn<Self> = dequantize;
    const QUANTIZE: Option<QuantizeFn<Self>> = Some(quantize);
}

/// Blocks to f32, as ggml's `dequantize_row_q8_K` computes them.
pub fn dequantize(x: &[BlockQ8K], y: &mut [f32]) {
    for (b, y) in x.iter().zip(y.chunks_exact_mut(QK_K)) {
        for (y, &q) in y.iter_mut().zip(&b.qs) {
            *y = b.d * q as f32;
        }
    }
}

/// f32 to blocks, as ggml's `quantize_row_q8_K_ref` computes them: the same
/// scale choice, rounding and order of float operations.
pub fn quantize(x: &[f32], y: &mut [BlockQ8K]) {
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

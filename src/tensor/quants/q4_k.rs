//! Q4_K: 4-bit k-quant super-blocks of 256.

use super::*;

block! {
    /// 4-bit k-quant: 8 sub-blocks of 32 with 6-bit scales and mins.
    BlockQ4K: Q4_K, QK_K, 144 { d: f16, dmin: f16, scales: [u8; 12], qs: [u8; QK_K / 2] }
}

impl QuantType for BlockQ4K {
    type Dot = BlockQ8K;
    const DEQUANTIZE: DequantizeFn<Self> = dequantize;
    const QUANTIZE: Option<QuantizeFn<Self>> = Some(quantize);
}

/// Blocks to f32, as ggml's `dequantize_row_q4_K` computes them.
pub fn dequantize(x: &[BlockQ4K], y: &mut [f32]) {
    for (b, y) in x.iter().zip(y.chunks_exact_mut(QK_K)) {
        let (d, min) = (b.d.to_f32(), b.dmin.to_f32());
        for (chunk, (q, y)) in
            b.qs.chunks_exact(32)
                .zip(y.chunks_exact_mut(64))
                .enumerate()
        {
            let (sc1, m1) = scale_min_k4(2 * chunk, &b.scales);
            let (sc2, m2) = scale_min_k4(2 * chunk + 1, &b.scales);
            let (d1, m1) = (d * sc1 as f32, min * m1 as f32);
            let (d2, m2) = (d * sc2 as f32, min * m2 as f32);
            for l in 0..32 {
                y[l] = d1 * (q[l] & 0xF) as f32 - m1;
                y[l + 32] = d2 * (q[l] >> 4) as f32 - m2;
            }
        }
    }
}

/// f32 to blocks, as ggml's `quantize_row_q4_K_ref` computes them: the same
/// scale choice, rounding and order of float operations.
pub fn quantize(x: &[f32], y: &mut [BlockQ4K]) {
    for (x, b) in x.chunks_exact(QK_K).zip(y) {
        let (d, dmin, scales, l) = quantize_k_block(x, 15, -1.0, 20);
        b.d = d;
        b.dmin = dmin;
        b.scales = scales;
        for (chunk, q) in b.qs.chunks_exact_mut(32).enumerate() {
            for (i, q) in q.iter_mut().enumerate() {
                *q = l[64 * chunk + i] | (l[64 * chunk + i + 32] << 4);
            }
        }
    }
}

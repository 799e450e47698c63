//! Q5_K: 5-bit k-quant super-blocks of 256.

use super::*;

block! {
    /// 5-bit k-quant.
    BlockQ5K: Q5_K, QK_K, 176 { d: f16, dmin: f16, scales: [u8; 12], qh: [u8; QK_K / 8], qs: [u8; QK_K / 2] }
}

impl QuantType for BlockQ5K {
    type Dot = BlockQ8K;
    const DEQUANTIZE: DequantizeFn<Self> = dequantize;
    const QUANTIZE: Option<QuantizeFn<Self>> = Some(quantize);
}

/// Blocks to f32, as ggml's `dequantize_row_q5_K` computes them.
pub fn dequantize(x: &[BlockQ5K], y: &mut [f32]) {
    for (b, y) in x.iter().zip(y.chunks_exact_mut(QK_K)) {
        let (d, min) = (b.d.to_f32(), b.dmin.to_f32());
        for (chunk, (ql, y)) in
            b.qs.chunks_exact(32)
                .zip(y.chunks_exact_mut(64))
                .enumerate()
        {
            let (sc1, m1) = scale_min_k4(2 * chunk, &b.scales);
            let (sc2, m2) = scale_min_k4(2 * chunk + 1, &b.scales);
            let (d1, m1) = (d * sc1 as f32, min * m1 as f32);
            let (d2, m2) = (d * sc2 as f32, min * m2 as f32);
            let (u1, u2) = (1u8 << (2 * chunk), 2u8 << (2 * chunk));
            for l in 0..32 {
                let h1 = if b.qh[l] & u1 != 0 { 16 } else { 0 };
                let h2 = if b.qh[l] & u2 != 0 { 16 } else { 0 };
                y[l] = d1 * ((ql[l] & 0xF) + h1) as f32 - m1;
                y[l + 32] = d2 * ((ql[l] >> 4) + h2) as f32 - m2;
            }
        }
    }
}

/// f32 to blocks, as ggml's `quantize_row_q5_K_ref` computes them: the same
/// scale choice, rounding and order of float operations.
pub fn quantize(x: &[f32], y: &mut [BlockQ5K]) {
    for (x, b) in x.chunks_exact(QK_K).zip(y) {
        let (d, dmin, scales, l) = quantize_k_block(x, 31, -0.5, 15);
        b.d = d;
        b.dmin = dmin;
        b.scales = scales;
        b.qh = [0; 32];
        for (chunk, ql) in b.qs.chunks_exact_mut(32).enumerate() {
            let (m1, m2) = (1u8 << (2 * chunk), 2u8 << (2 * chunk));
            for j in 0..32 {
                let mut l1 = l[64 * chunk + j];
                if l1 > 15 {
                    l1 -= 16;
                    b.qh[j] |= m1;
                }
                let mut l2 = l[64 * chunk + j + 32];
                if l2 > 15 {
                    l2 -= 16;
                    b.qh[j] |= m2;
                }
                ql[j] = l1 | (l2 << 4);
            }
        }
    }
}

//! Q2_K: 2-bit k-quant super-blocks of 256 (read only: no quantizer yet).

use super::*;

block! {
    /// 2-bit k-quant: 16 sub-blocks of 16 with 4-bit scales and mins.
    BlockQ2K: Q2_K, QK_K, 84 { scales: [u8; QK_K / 16], qs: [u8; QK_K / 4], d: f16, dmin: f16 }
}

impl QuantType for BlockQ2K {
    type Dot = BlockQ8K;
    const DEQUANTIZE: DequantizeFn<Self> = dequantize;
    const QUANTIZE: Option<QuantizeFn<Self>> = None;
}

/// Blocks to f32, as ggml's `dequantize_row_q2_K` computes them.
pub fn dequantize(x: &[BlockQ2K], y: &mut [f32]) {
    for (b, y) in x.iter().zip(y.chunks_exact_mut(QK_K)) {
        let (d, min) = (b.d.to_f32(), b.dmin.to_f32());
        let mut out = 0;
        let mut is = 0;
        for half in 0..2 {
            let q = &b.qs[32 * half..32 * half + 32];
            for shift in [0, 2, 4, 6] {
                for part in 0..2 {
                    let sc = b.scales[is];
                    is += 1;
                    let dl = d * (sc & 0xF) as f32;
                    let ml = min * (sc >> 4) as f32;
                    for &q in &q[16 * part..16 * part + 16] {
                        y[out] = dl * ((q >> shift) & 3) as f32 - ml;
                        out += 1;
                    }
                }
            }
        }
    }
}

//! Q3_K: 3-bit k-quant super-blocks of 256 (read only: no quantizer yet).

use super::*;

block! {
    /// 3-bit k-quant: high bits in `hmask`, 6-bit scales packed in 12 bytes.
    BlockQ3K: Q3_K, QK_K, 110 { hmask: [u8; QK_K / 8], qs: [u8; QK_K / 4], scales: [u8; 12], d: f16 }
}

impl QuantType for BlockQ3K {
    type Dot = BlockQ8K;
    const DEQUANTIZE: DequantizeFn<Self> = dequantize;
    const QUANTIZE: Option<QuantizeFn<Self>> = None;
}

/// The sixteen 6-bit signed scales of a Q3_K block, unpacked from 12 bytes.
pub fn q3_k_scales(packed: &[u8; 12]) -> [i8; 16] {
    let mut out = [0i8; 16];
    for (j, s) in out.iter_mut().enumerate() {
        let low = if j < 8 {
            packed[j] & 0xF
        } else {
            packed[j - 8] >> 4
        };
        let high = (packed[8 + j % 4] >> (2 * (j / 4))) & 3;
        *s = ((low | (high << 4)) as i8).wrapping_sub(32);
    }
    out
}

/// Blocks to f32, as ggml's `dequantize_row_q3_K` computes them.
pub fn dequantize(x: &[BlockQ3K], y: &mut [f32]) {
    for (b, y) in x.iter().zip(y.chunks_exact_mut(QK_K)) {
        let d_all = b.d.to_f32();
        let scales = q3_k_scales(&b.scales);
        let mut out = 0;
        let mut is = 0;
        let mut m = 1u8;
        for half in 0..2 {
            let q = &b.qs[32 * half..32 * half + 32];
            for shift in [0, 2, 4, 6] {
                for part in 0..2 {
                    let dl = d_all * scales[is] as f32;
                    is += 1;
                    for l in 16 * part..16 * part + 16 {
                        let low = ((q[l] >> shift) & 3) as i32;
                        let high = if b.hmask[l] & m != 0 { 0 } else { 4 };
                        y[out] = dl * (low - high) as f32;
                        out += 1;
                    }
                }
                m <<= 1;
            }
        }
    }
}

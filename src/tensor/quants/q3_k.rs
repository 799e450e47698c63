//! Q3_K: 3-bit k-quant super-blocks of 256.

use super::*;

block! {
    /// 3-bit k-quant: high bits in `hmask`, 6-bit scales packed in 12 bytes.
    BlockQ3K: Q3_K, QK_K, 110 { hmask: [u8; QK_K / 8], qs: [u8; QK_K / 4], scales: [u8; 12], d: f16 }
}

impl QuantType for BlockQ3K {
    type Dot = BlockQ8K;
    const DEQUANTIZE: DequantizeFn<Self> = dequantize;
    const QUANTIZE: Option<QuantizeFn<Self>> = Some(quantize);
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

/// f32 to blocks, as ggml's `quantize_row_q3_K_ref` computes them: each run
/// of 16 fitted symmetrically (`make_q3_quants`), the scales stored as signed
/// 6-bit multiples of the largest, the values re-fitted to the stored scales
/// and split into two low bits and a high bit.
pub fn quantize(x: &[f32], y: &mut [BlockQ3K]) {
    for (x, b) in x.chunks_exact(QK_K).zip(y) {
        let mut l = [0i8; QK_K];
        let mut scales = [0.0f32; QK_K / 16];
        let (mut max_scale, mut amax) = (0.0f32, 0.0f32);
        for (j, s) in scales.iter_mut().enumerate() {
            *s = make_q3_quants(
                4,
                &x[16 * j..16 * j + 16],
                &mut l[16 * j..16 * j + 16],
                true,
            );
            if s.abs() > amax {
                amax = s.abs();
                max_scale = *s;
            }
        }
        b.scales = [0; 12];
        b.d = f16::ZERO;
        if max_scale != 0.0 {
            let iscale = -32.0 / max_scale;
            for (j, &s) in scales.iter().enumerate() {
                let q = (nearest_int(iscale * s).clamp(-32, 31) + 32) as u8;
                if j < 8 {
                    b.scales[j] = q & 0xF;
                } else {
                    b.scales[j - 8] |= (q & 0xF) << 4;
                }
                b.scales[8 + j % 4] |= (q >> 4) << (2 * (j / 4));
            }
            b.d = f16::from_f32(1.0 / iscale);
        }
        let stored = q3_k_scales(&b.scales);
        for (j, &sc) in stored.iter().enumerate() {
            let d = b.d.to_f32() * sc as f32;
            if d == 0.0 {
                continue;
            }
            for i in 16 * j..16 * j + 16 {
                l[i] = (nearest_int(x[i] / d).clamp(-4, 3) + 4) as i8;
            }
        }
        // High bits: value j's in bit j / 32 of hmask[j % 32].
        b.hmask = [0; QK_K / 8];
        let mut low = [0u8; QK_K];
        for (j, (&q, lo)) in l.iter().zip(low.iter_mut()).enumerate() {
            let q = q as u8;
            if q > 3 {
                b.hmask[j % 32] |= 1 << (j / 32);
            }
            *lo = q & 3;
        }
        pack_2bit(&low, &mut b.qs);
    }
}

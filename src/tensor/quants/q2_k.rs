//! Q2_K: 2-bit k-quant super-blocks of 256.

use super::*;

block! {
    /// 2-bit k-quant: 16 sub-blocks of 16 with 4-bit scales and mins.
    BlockQ2K: Q2_K, QK_K, 84 { scales: [u8; QK_K / 16], qs: [u8; QK_K / 4], d: f16, dmin: f16 }
}

impl QuantType for BlockQ2K {
    type Dot = BlockQ8K;
    const DEQUANTIZE: DequantizeFn<Self> = dequantize;
    const QUANTIZE: Option<QuantizeFn<Self>> = Some(quantize);
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

/// f32 to blocks, as ggml's `quantize_row_q2_K_ref` computes them: each run
/// of 16 fitted with a scale and a min (absolute-error search), the scales
/// and mins stored as 4-bit multiples of the largest, the values re-fitted
/// to the stored ones.
pub fn quantize(x: &[f32], y: &mut [BlockQ2K]) {
    const Q4SCALE: f32 = 15.0;
    for (x, b) in x.chunks_exact(QK_K).zip(y) {
        let mut l = [0u8; QK_K];
        let mut laux = [0u8; 16];
        let mut weights = [0.0f32; 16];
        let (mut scales, mut mins) = ([0.0f32; 16], [0.0f32; 16]);
        let (mut max_scale, mut max_min) = (0.0f32, 0.0f32);
        for j in 0..QK_K / 16 {
            let xs = &x[16 * j..16 * j + 16];
            for (w, &v) in weights.iter_mut().zip(xs) {
                *w = v.abs();
            }
            let ls = &mut l[16 * j..16 * j + 16];
            let (scale, min) =
                make_qkx2_quants(3, xs, &weights, ls, &mut laux, -0.5, 0.1, 15, true);
            scales[j] = scale;
            mins[j] = min;
            if scale > max_scale {
                max_scale = scale;
            }
            if min > max_min {
                max_min = min;
            }
        }
        b.scales = [0; QK_K / 16];
        b.d = f16::ZERO;
        b.dmin = f16::ZERO;
        if max_scale > 0.0 {
            let iscale = Q4SCALE / max_scale;
            for (s, &v) in b.scales.iter_mut().zip(&scales) {
                *s = nearest_int(iscale * v) as u8;
            }
            b.d = f16::from_f32(max_scale / Q4SCALE);
        }
        if max_min > 0.0 {
            let iscale = Q4SCALE / max_min;
            for (s, &v) in b.scales.iter_mut().zip(&mins) {
                *s |= (nearest_int(iscale * v) << 4) as u8;
            }
            b.dmin = f16::from_f32(max_min / Q4SCALE);
        }
        for j in 0..QK_K / 16 {
            let d = b.d.to_f32() * (b.scales[j] & 0xF) as f32;
            if d == 0.0 {
                continue;
            }
            let dm = b.dmin.to_f32() * (b.scales[j] >> 4) as f32;
            for i in 16 * j..16 * j + 16 {
                l[i] = nearest_int((x[i] + dm) / d).clamp(0, 3) as u8;
            }
        }
        pack_2bit(&l, &mut b.qs);
    }
}

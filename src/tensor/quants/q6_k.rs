//! Q6_K: 6-bit k-quant super-blocks of 256.

use super::*;

block! {
    /// 6-bit k-quant: 16 sub-blocks of 16 with 8-bit scales.
    BlockQ6K: Q6_K, QK_K, 210 { ql: [u8; QK_K / 2], qh: [u8; QK_K / 4], scales: [i8; QK_K / 16], d: f16 }
}

impl QuantType for BlockQ6K {
    type Dot = BlockQ8K;
    const DEQUANTIZE: DequantizeFn<Self> = dequantize;
    const QUANTIZE: Option<QuantizeFn<Self>> = Some(quantize);
}

/// Blocks to f32, as ggml's `dequantize_row_q6_K` computes them.
pub fn dequantize(x: &[BlockQ6K], y: &mut [f32]) {
    for (b, y) in x.iter().zip(y.chunks_exact_mut(QK_K)) {
        let d = b.d.to_f32();
        for half in 0..2 {
            let ql = &b.ql[64 * half..64 * half + 64];
            let qh = &b.qh[32 * half..32 * half + 32];
            let sc = &b.scales[8 * half..8 * half + 8];
            let y = &mut y[128 * half..128 * half + 128];
            for l in 0..32 {
                let is = l / 16;
                let q1 = ((ql[l] & 0xF) | ((qh[l] & 3) << 4)) as i32 - 32;
                let q2 = ((ql[l + 32] & 0xF) | (((qh[l] >> 2) & 3) << 4)) as i32 - 32;
                let q3 = ((ql[l] >> 4) | (((qh[l] >> 4) & 3) << 4)) as i32 - 32;
                let q4 = ((ql[l + 32] >> 4) | (((qh[l] >> 6) & 3) << 4)) as i32 - 32;
                y[l] = d * sc[is] as f32 * q1 as f32;
                y[l + 32] = d * sc[is + 2] as f32 * q2 as f32;
                y[l + 64] = d * sc[is + 4] as f32 * q3 as f32;
                y[l + 96] = d * sc[is + 6] as f32 * q4 as f32;
            }
        }
    }
}

/// f32 to blocks, as ggml's `quantize_row_q6_K_ref` computes them: the same
/// scale choice, rounding and order of float operations.
pub fn quantize(x: &[f32], y: &mut [BlockQ6K]) {
    for (x, b) in x.chunks_exact(QK_K).zip(y) {
        let mut l = [0i8; QK_K];
        let mut scales = [0f32; 16];
        let (mut max_scale, mut max_abs_scale) = (0.0f32, 0.0f32);
        for ib in 0..16 {
            let scale =
                make_qx_quants(32, &x[16 * ib..16 * ib + 16], &mut l[16 * ib..16 * ib + 16]);
            scales[ib] = scale;
            if scale.abs() > max_abs_scale {
                max_abs_scale = scale.abs();
                max_scale = scale;
            }
        }
        if max_abs_scale < GROUP_MAX_EPS {
            *b = BlockQ6K::zeroed();
            continue;
        }
        let iscale = -128.0 / max_scale;
        b.d = f16::from_f32(1.0 / iscale);
        for (s, &scale) in b.scales.iter_mut().zip(&scales) {
            *s = nearest_int(iscale * scale).min(127) as i8;
        }
        for j in 0..16 {
            let d = b.d.to_f32() * b.scales[j] as f32;
            if d == 0.0 {
                continue;
            }
            for i in 0..16 {
                let q = nearest_int(x[16 * j + i] / d).clamp(-32, 31);
                l[16 * j + i] = (q + 32) as i8;
            }
        }
        for half in 0..2 {
            let l = &l[128 * half..128 * half + 128];
            let ql = &mut b.ql[64 * half..64 * half + 64];
            for i in 0..32 {
                let q = |k: usize| l[i + 32 * k] as u8;
                ql[i] = (q(0) & 0xF) | ((q(2) & 0xF) << 4);
                ql[i + 32] = (q(1) & 0xF) | ((q(3) & 0xF) << 4);
            }
            let qh = &mut b.qh[32 * half..32 * half + 32];
            for i in 0..32 {
                let q = |k: usize| l[i + 32 * k] as u8;
                qh[i] = (q(0) >> 4) | ((q(1) >> 4) << 2) | ((q(2) >> 4) << 4) | ((q(3) >> 4) << 6);
            }
        }
    }
}

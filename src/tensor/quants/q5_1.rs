//! Q5_1: 5-bit blocks of 32 with a minimum.

use super::*;

use super::q5_0::{pack_q5, q5_high_bits};

block! {
    /// 5-bit with a minimum.
    BlockQ5_1: Q5_1, QK, 24 { d: f16, m: f16, qh: [u8; 4], qs: [u8; QK / 2] }
}

impl QuantType for BlockQ5_1 {
    type Dot = BlockQ8_1;
    const DEQUANTIZE: DequantizeFn<Self> = dequantize;
    const QUANTIZE: Option<QuantizeFn<Self>> = Some(quantize);
}

/// Blocks to f32, as ggml's `dequantize_row_q5_1` computes them.
pub fn dequantize(x: &[BlockQ5_1], y: &mut [f32]) {
    for (b, y) in x.iter().zip(y.chunks_exact_mut(QK)) {
        let (d, m) = (b.d.to_f32(), b.m.to_f32());
        let qh = u32::from_le_bytes(b.qh);
        for j in 0..QK / 2 {
            let (h0, h1) = q5_high_bits(qh, j);
            y[j] = ((b.qs[j] & 0x0F) | h0) as f32 * d + m;
            y[j + QK / 2] = ((b.qs[j] >> 4) | h1) as f32 * d + m;
        }
    }
}

/// f32 to blocks, as ggml's `quantize_row_q5_1_ref` computes them: the same
/// scale choice, rounding and order of float operations.
pub fn quantize(x: &[f32], y: &mut [BlockQ5_1]) {
    for (x, b) in x.chunks_exact(QK).zip(y) {
        let (min, max) = min_max(x);
        let d = (max - min) / 31.0;
        let id = inverse(d);
        b.d = f16::from_f32(d);
        b.m = f16::from_f32(min);
        // ggml converts straight to uint8 here, without a clamp.
        b.qh = pack_q5(|j| ((x[j] - min) * id + 0.5) as i32 as u8, &mut b.qs);
    }
}

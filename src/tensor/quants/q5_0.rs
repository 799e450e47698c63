//! Q5_0: 5-bit symmetric blocks of 32.

use super::*;

block! {
    /// 5-bit, symmetric; the fifth bits of the 32 values packed in `qh`.
    BlockQ5_0: Q5_0, QK, 22 { d: f16, qh: [u8; 4], qs: [u8; QK / 2] }
}

impl QuantType for BlockQ5_0 {
    type Dot = BlockQ8_0;
    const DEQUANTIZE: DequantizeFn<Self> = dequantize;
    const QUANTIZE: Option<QuantizeFn<Self>> = Some(quantize);
}

/// The fifth bits of value `j` and `j + 16` from a Q5 block's `qh`.
pub(super) fn q5_high_bits(qh: u32, j: usize) -> (u8, u8) {
    (
        (((qh >> j) << 4) & 0x10) as u8,
        ((qh >> (j + 12)) & 0x10) as u8,
    )
}

/// Packs 32 five-bit values: low nibbles in `qs`, fifth bits in `qh`.
pub(super) fn pack_q5(q: impl Fn(usize) -> u8, qs: &mut [u8; 16]) -> [u8; 4] {
    let mut qh = 0u32;
    for j in 0..QK / 2 {
        let (q0, q1) = (q(j), q(j + QK / 2));
        qs[j] = (q0 & 0x0F) | ((q1 & 0x0F) << 4);
        qh |= (((q0 & 0x10) >> 4) as u32) << j;
        qh |= (((q1 & 0x10) >> 4) as u32) << (j + QK / 2);
    }
    qh.to_le_bytes()
}

/// Blocks to f32, as ggml's `dequantize_row_q5_0` computes them.
pub fn dequantize(x: &[BlockQ5_0], y: &mut [f32]) {
    for (b, y) in x.iter().zip(y.chunks_exact_mut(QK)) {
        let d = b.d.to_f32();
        let qh = u32::from_le_bytes(b.qh);
        for j in 0..QK / 2 {
            let (h0, h1) = q5_high_bits(qh, j);
            y[j] = (((b.qs[j] & 0x0F) | h0) as i32 - 16) as f32 * d;
            y[j + QK / 2] = (((b.qs[j] >> 4) | h1) as i32 - 16) as f32 * d;
        }
    }
}

/// f32 to blocks, as ggml's `quantize_row_q5_0_ref` computes them: the same
/// scale choice, rounding and order of float operations.
pub fn quantize(x: &[f32], y: &mut [BlockQ5_0]) {
    for (x, b) in x.chunks_exact(QK).zip(y) {
        let (max, _) = signed_absmax(x);
        let d = max / -16.0;
        let id = inverse(d);
        b.d = f16::from_f32(d);
        b.qh = pack_q5(|j| trunc_i8(x[j] * id + 16.5).min(31) as u8, &mut b.qs);
    }
}

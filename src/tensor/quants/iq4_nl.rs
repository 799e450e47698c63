//! IQ4_NL: blocks of 32 indices into the non-linear 4-bit grid, one scale each.

use super::iq4::*;
use super::*;

block! {
    /// 4-bit non-linear: x = d * IQ4_LEVELS[q].
    BlockIQ4NL: IQ4_NL, QK, 18 { d: f16, qs: [u8; QK / 2] }
}

impl QuantType for BlockIQ4NL {
    type Dot = BlockQ8_0;
    const DEQUANTIZE: DequantizeFn<Self> = dequantize;
    const QUANTIZE: Option<QuantizeFn<Self>> = Some(quantize);
}

/// Blocks to f32, as ggml's `dequantize_row_iq4_nl` computes them.
pub fn dequantize(x: &[BlockIQ4NL], y: &mut [f32]) {
    for (b, y) in x.iter().zip(y.chunks_exact_mut(QK)) {
        unpack(&b.qs, b.d.to_f32(), y);
    }
}

/// f32 to blocks, as ggml's `quantize_iq4_nl` writes them without an
/// importance matrix (what `llama-quantize` produces): the searched scale is
/// stored, and the indices are chosen again for it.
pub fn quantize(x: &[f32], y: &mut [BlockIQ4NL]) {
    let mut l = [0u8; QK];
    for (x, b) in x.chunks_exact(QK).zip(y) {
        let d = best_scale(x);
        b.d = f16::from_f32(d);
        indices(x, d, &mut l);
        pack(&l, &mut b.qs);
    }
}

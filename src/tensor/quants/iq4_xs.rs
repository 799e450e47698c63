//! IQ4_XS: super-blocks of 256 on the non-linear 4-bit grid, with a 6-bit
//! signed scale per run of 32.

use super::iq4::*;
use super::*;

block! {
    /// 4-bit non-linear with 6-bit sub-scales: x = d * (ls - 32) * IQ4_LEVELS[q],
    /// `ls` split into a low nibble (`scales_l`) and two high bits (`scales_h`).
    BlockIQ4XS: IQ4_XS, QK_K, 136 {
        d: f16, scales_h: u16, scales_l: [u8; QK_K / 64], qs: [u8; QK_K / 2]
    }
}

impl QuantType for BlockIQ4XS {
    type Dot = BlockQ8K;
    const DEQUANTIZE: DequantizeFn<Self> = dequantize;
    const QUANTIZE: Option<QuantizeFn<Self>> = Some(quantize);
}

/// The 6-bit scale of run `ib` (0..8), minus 32.
pub fn iq4_xs_scale(b: &BlockIQ4XS, ib: usize) -> i32 {
    let low = (b.scales_l[ib / 2] >> (4 * (ib % 2))) & 0xF;
    let high = ((b.scales_h >> (2 * ib)) & 3) as u8;
    (low | (high << 4)) as i32 - 32
}

/// Blocks to f32, as ggml's `dequantize_row_iq4_xs` computes them.
pub fn dequantize(x: &[BlockIQ4XS], y: &mut [f32]) {
    for (b, y) in x.iter().zip(y.chunks_exact_mut(QK_K)) {
        let d = b.d.to_f32();
        for (ib, y) in y.chunks_exact_mut(32).enumerate() {
            let dl = d * iq4_xs_scale(b, ib) as f32;
            unpack(&b.qs[16 * ib..16 * ib + 16], dl, y);
        }
    }
}

/// f32 to blocks, as ggml's `quantize_iq4_xs` writes them without an
/// importance matrix: a scale searched per run, the runs' scales stored as
/// 6-bit multiples of the super-block's (the largest over -32), and the
/// indices chosen again for each stored scale.
pub fn quantize(x: &[f32], y: &mut [BlockIQ4XS]) {
    let mut l = [0u8; 32];
    for (x, b) in x.chunks_exact(QK_K).zip(y) {
        let mut scales = [0.0f32; QK_K / 32];
        for (s, run) in scales.iter_mut().zip(x.chunks_exact(32)) {
            *s = best_scale(run);
        }
        let (max_scale, _) = signed_absmax(&scales);
        let d = -max_scale / 32.0;
        b.d = f16::from_f32(d);
        let id = inverse(d);
        b.scales_h = 0;
        b.scales_l = [0; QK_K / 64];
        for (ib, run) in x.chunks_exact(32).enumerate() {
            let ls = nearest_int(id * scales[ib]).clamp(-32, 31);
            indices(run, d * ls as f32, &mut l);
            pack(&l, &mut b.qs[16 * ib..16 * ib + 16]);
            let ls = (ls + 32) as u8;
            b.scales_l[ib / 2] |= (ls & 0xF) << (4 * (ib % 2));
            b.scales_h |= ((ls >> 4) as u16) << (2 * ib);
        }
    }
}

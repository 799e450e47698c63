//! Repacked Q5_0's group kernels on wasm (SIMD128 and relaxed SIMD): a group
//! of eight rows (`BlockQ5_0x8`) times up to four activation rows at once,
//! each block's five-bit values decoded once for all of them. Q5_0 is what
//! llama-quantize's k-quant presets fall back to for rows whose width is not
//! a multiple of 256: most of Gemma 3 270M's Q4_K_M weights (640 wide).
//! Row by row, `vec_dot_q5_0_q8_0` spreads a block's fifth bits again for
//! every row and every activation row; it took 80% of Chromium's prompt
//! time for that model.
//!
//! The integer sums are exact. The tile scales them in `vec_dot`'s order,
//! `(sum · d(w)) · d(a)` added unfused, where the scalar group kernel adds
//! `sum × (d(w) · d(a))` with one fused multiply-add (SIMD128 has none): so
//! each output equals the scalar `vec_dot` of its row bit for bit, and a
//! model gives on every wasm build the ids it gave before the group kernels
//! (`native-tests/repack.rs` asserts the first).

#[cfg(target_feature = "simd128")]
mod imp {
    use crate::wasm_arch::*;

    use crate::backend::cpu::group_tiles::{by_take, gemm_sums_in_tiles};
    use crate::backend::cpu::repack_q5_0::BlockQ5_0x8;
    use crate::backend::cpu::simd128::{
        activation_offsets, lane_splat, load16, opaque, spread_fifth_bits, store16, unrolled,
        widened_half_sums, x8_half_load, ScaleWidening,
    };
    use crate::tensor::blocks::BlockQ8_0;

    // Safety: as in `simd128` (a module built with simd128, loads through
    // the bounds-checked `load16`); the frame checks the slices' lengths.

    /// How a wasm variant sums a group block's rows 4h..4h + 4 of values (as
    /// `FifthBits::half_values` gives them: value + 16, in 0..=31) against
    /// one activation block, in one vector.
    pub(in crate::backend::cpu) trait Q5_0GroupSums {
        fn half_sums(&self, u: &[[v128; 2]; 4], y: &[i8; 32]) -> v128;
    }

    /// The masks of a group block's decoding, made once per tile (`opaque`:
    /// V8 rebuilds a constant at each use in a loop).
    #[derive(Clone, Copy)]
    pub(in crate::backend::cpu) struct FifthBits {
        /// 0x0F in every byte.
        low: v128,
        /// Byte j holds bit j % 8.
        bits: v128,
        /// 0x10 in every byte.
        sixteen: v128,
    }

    impl FifthBits {
        #[inline(always)]
        pub(in crate::backend::cpu) fn new() -> Self {
            Self {
                low: opaque(u8x16_splat(0x0F)),
                bits: opaque(u8x16(
                    1, 2, 4, 8, 16, 32, 64, 128, 1, 2, 4, 8, 16, 32, 64, 128,
                )),
                sixteen: opaque(u8x16_splat(0x10)),
            }
        }

        /// Rows 4h..4h + 4 of a group block, values plus 16 (0..=31) as
        /// bytes, in the 8x8 layout's order: `u[j]` holds the values of
        /// load i's low nibbles (8k.., k = i / 4) and of its high nibbles
        /// (16 + 8k..), each eight of row 2(i % 4), then eight of row
        /// 2(i % 4) + 1, for the half's loads i (`x8_half_load`). Row r's
        /// fifth bits are `qh[4r..4r + 4]`: byte k for values 8k.., byte
        /// 2 + k for 16 + 8k...
        #[inline(always)]
        pub(in crate::backend::cpu) fn half_values(
            &self,
            b: &BlockQ5_0x8,
            h: usize,
        ) -> [[v128; 2]; 4] {
            // Written out (`unrolled!`): through `array::from_fn` V8 got
            // an outlined function filling the array in memory, 8% of
            // Chromium's time for Gemma 3.
            let mut u = [[u8x16_splat(0); 2]; 4];
            unrolled!(J in 0 1 2 3; {
                let i = x8_half_load(h, J);
                let (k, pair) = (i / 4, i % 4);
                let v = load16(&b.qs[16 * i..16 * i + 16]);
                let (r0, r1) = (8 * pair, 8 * pair + 4);
                let high = |at: usize| {
                    spread_fifth_bits(b.qh[r0 + at], b.qh[r1 + at], self.bits, self.sixteen)
                };
                u[J] = [
                    v128_or(v128_and(v, self.low), high(k)),
                    v128_or(v128_and(u16x8_shr(v, 4), self.low), high(2 + k)),
                ];
            });
            u
        }
    }

    /// A group's eight rows times the first `A` rows of `xs`: `res[a][r]`
    /// = row r · activation row a. Each block's sums of `u·y` (from `way`)
    /// less 16·Σy (from `ss`, the activation blocks' sums) are the exact
    /// integer sums, scaled and added as `vec_dot_q5_0_q8_0` does (see the
    /// module's note).
    #[inline(always)]
    pub(in crate::backend::cpu) fn q5_0_x8_tile<const A: usize>(
        group: &[BlockQ5_0x8],
        xs: &[&[BlockQ8_0]; 4],
        ss: &[&[i32]; 4],
        res: &mut [[f32; 8]; 4],
        fifth: FifthBits,
        way: &impl Q5_0GroupSums,
    ) {
        let xs: [&[BlockQ8_0]; A] = std::array::from_fn(|a| &xs[a][..group.len()]);
        let ss: [&[i32]; A] = std::array::from_fn(|a| &ss[a][..group.len()]);
        let mut acc = [[f32x4_splat(0.0); 2]; A];
        let widen = ScaleWidening::opaque();
        for (bi, b) in group.iter().enumerate() {
            let [dw] = widen.block_scales([&b.d]);
            let dy = widen.activation_scales::<A>(std::array::from_fn(|a| xs[a][bi].d));
            // 16·Σy over each row's block (|Σy| <= 32·128), a lane each.
            let e = activation_offsets::<A>(&ss, bi, 4);
            // Rows 0..4, then 4..8, as the other group tiles. Unrolled by
            // hand (V8 kept a loop's accumulators in memory).
            unrolled!(H in 0 1; {
                let u = fifth.half_values(b, H);
                unrolled!(I in 0 1 2 3; {
                    if I < A {
                        let s = way.half_sums(&u, &xs[I][bi].qs);
                        let q = f32x4_convert_i32x4(i32x4_sub(s, lane_splat(e, I)));
                        let dyi = lane_splat(dy, I);
                        acc[I][H] = f32x4_add(acc[I][H], f32x4_mul(f32x4_mul(q, dw[H]), dyi));
                    }
                });
            });
        }
        for (res, acc) in res.iter_mut().zip(acc) {
            store16(&mut res[..4], acc[0]);
            store16(&mut res[4..], acc[1]);
        }
    }

    /// SIMD128's sums: values and activations widened to i16 and multiplied
    /// in pairs, as SIMD128's repacked Q4_1 does (`widened_half_sums`).
    struct WidenedQ5_0;

    impl Q5_0GroupSums for WidenedQ5_0 {
        #[inline(always)]
        fn half_sums(&self, u: &[[v128; 2]; 4], y: &[i8; 32]) -> v128 {
            widened_half_sums(|j| u[j], y)
        }
    }

    /// SIMD128's group kernel (`Kernels::gemm_q5_0_x8`).
    pub(in crate::backend::cpu) fn gemm_q5_0_x8(
        group: &[BlockQ5_0x8],
        x: &[BlockQ8_0],
        sums: &[i32],
        n: usize,
        out: &mut [f32],
        stride: usize,
    ) {
        gemm_sums_in_tiles(group, x, sums, n, out, stride, |take, xs, ss, res| {
            let fifth = FifthBits::new();
            by_take!(take, q5_0_x8_tile(group, xs, ss, res, fifth, &WidenedQ5_0))
        });
    }
}

#[cfg(target_feature = "simd128")]
pub(super) use imp::gemm_q5_0_x8;
// The frame relaxed SIMD's kernel shares.
#[cfg(all(target_feature = "simd128", target_feature = "relaxed-simd"))]
pub(super) use imp::{q5_0_x8_tile, FifthBits, Q5_0GroupSums};

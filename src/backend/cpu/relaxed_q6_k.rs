//! Repacked Q6_K's group kernel on relaxed SIMD, as `relaxed_q4_k` is for
//! Q4_K: a group of eight rows (`BlockQ6Kx8`) times up to four activation
//! rows at once, each super-block's six-bit values and scales unpacked once
//! for all of them.
//!
//! A value goes to the dot unsigned (stored + 32, 0..=63, the 7-bit
//! operand); each 16-value sub-block's two dots are summed
//! (`DotForm::sum_dots`: 2·2·63·128 fits i16) and multiplied by the rows'
//! signed scales (`scale_mul`), and 32 × the rows' scaled sums of the
//! activations' 16-value sums (Q8_K's `bsums`) is taken off once per
//! super-block: `kquant_dot::q6_k`'s integer sum, exact, with its float
//! combination lane by lane, so results equal row-by-row `vec_dot` bit for
//! bit (`native-tests/repack.rs`).

#[cfg(all(target_feature = "simd128", target_feature = "relaxed-simd"))]
mod imp {
    use crate::wasm_arch::*;

    use crate::backend::cpu::group_tiles::{by_take, gemm_in_tiles};
    use crate::backend::cpu::relaxed_simd::{doubled_runs, pair_rows, DotForm};
    use crate::backend::cpu::repack_q6_k::BlockQ6Kx8;
    use crate::backend::cpu::simd128::{
        lane_splat, load16, opaque, store16, unrolled, ScaleWidening,
    };
    use crate::tensor::blocks::BlockQ8K;

    // Safety: as in `simd128` (a module built with simd128 and
    // relaxed-simd; loads through the bounds-checked `load16`); the frame
    // checks the slices' lengths.

    /// The group kernel (`Kernels::gemm_q6_k_x8`) in dot form `S`.
    pub(in crate::backend::cpu) fn gemm_q6_k_x8<S: DotForm>(
        group: &[BlockQ6Kx8],
        x: &[BlockQ8K],
        n: usize,
        out: &mut [f32],
        stride: usize,
    ) {
        gemm_in_tiles(group, x, n, out, stride, |take, xs, res| {
            let masks = Masks {
                low: opaque(u8x16_splat(0x0F)),
                pair: opaque(u8x16_splat(0x30)),
            };
            by_take!(take, q6_k_x8_tile(group, xs, res, masks, S::default()))
        });
    }

    /// The unpacking's byte masks, made once per tile (`opaque`).
    #[derive(Clone, Copy)]
    struct Masks {
        /// 0x0F: a nibble of `ql`.
        low: v128,
        /// 0x30: a bit pair of `qh` moved to bits 4 and 5.
        pair: v128,
    }

    /// A super-block's weights unpacked for a tile's activation rows.
    struct Unpacked {
        /// `w[32h + 4k + pair]`: the values (0..=63) of `ql` load
        /// `32h + 4k + pair` with their high bits: its low nibbles are
        /// values 128h + 8k.. of rows 2·pair and 2·pair + 1, its high
        /// nibbles values 128h + 64 + 8k...
        w: [[v128; 2]; 64],
        /// `scales[s][pair]`: rows 2·pair's and 2·pair + 1's scales of
        /// sub-block s, shaped by `DotForm::scale_lanes`.
        scales: [[v128; 4]; 16],
        /// `pairs[p][half]`: rows 4·half..4·half + 4's scales of
        /// sub-blocks 2p and 2p + 1, as i16 pairs.
        pairs: [[v128; 2]; 8],
    }

    #[inline(always)]
    fn unpack(b: &BlockQ6Kx8, m: Masks, form: impl DotForm) -> Unpacked {
        // Written out (`unrolled!`): through `array::from_fn` or
        // `array::map`, V8 got outlined functions filling the arrays.
        let mut w = [[u8x16_splat(0); 2]; 64];
        unrolled!(V in
            0 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16 17 18 19 20 21 22 23 24 25 26 27 28 29 30 31
            32 33 34 35 36 37 38 39 40 41 42 43 44 45 46 47 48 49 50 51 52 53 54 55 56 57 58 59 60 61 62 63; {
            let (h, k, pair) = (V / 32, V / 4 % 8, V % 4);
            let ql = load16(&b.ql[16 * V..16 * V + 16]);
            // `qh` load (h, k % 4, pair): bits 2i..2i + 2 of a byte are
            // the high bits of values l + 32i of the half, l its byte.
            let q = 16 * h + 4 * (k % 4) + pair;
            let qh = load16(&b.qh[16 * q..16 * q + 16]);
            // Bit pairs to bits 4 and 5: pair k / 4 for the low nibbles'
            // values (8k.. < 64), pair 2 + k / 4 for the high nibbles'.
            let (lo_bits, hi_bits) = if k < 4 {
                (u16x8_shl(qh, 4), qh)
            } else {
                (u16x8_shl(qh, 2), u16x8_shr(qh, 2))
            };
            w[V] = [
                v128_or(v128_and(ql, m.low), v128_and(lo_bits, m.pair)),
                v128_or(v128_and(u16x8_shr(ql, 4), m.low), v128_and(hi_bits, m.pair)),
            ];
        });
        let mut scales = [[u8x16_splat(0); 4]; 16];
        let mut pairs = [[u8x16_splat(0); 2]; 8];
        unrolled!(P in 0 1 2 3 4 5 6 7; {
            // Row r's scales of sub-blocks 2p and 2p + 1 at i16 lanes 2r
            // and 2r + 1 of (lo, hi).
            let v = load16(&b.scales[16 * P..16 * P + 16]);
            let (lo, hi) = (i16x8_extend_low_i8x16(v), i16x8_extend_high_i8x16(v));
            pairs[P] = [lo, hi];
            unrolled!(T in 0 1; {
                scales[2 * P + T] = [
                    form.scale_lanes(i16x8_shuffle::<
                        { T }, { T }, { T }, { T }, { 2 + T }, { 2 + T }, { 2 + T }, { 2 + T },
                    >(lo, hi)),
                    form.scale_lanes(i16x8_shuffle::<
                        { 4 + T }, { 4 + T }, { 4 + T }, { 4 + T }, { 6 + T }, { 6 + T }, { 6 + T }, { 6 + T },
                    >(lo, hi)),
                    form.scale_lanes(i16x8_shuffle::<
                        { 8 + T }, { 8 + T }, { 8 + T }, { 8 + T }, { 10 + T }, { 10 + T }, { 10 + T }, { 10 + T },
                    >(lo, hi)),
                    form.scale_lanes(i16x8_shuffle::<
                        { 12 + T }, { 12 + T }, { 12 + T }, { 12 + T }, { 14 + T }, { 14 + T }, { 14 + T }, { 14 + T },
                    >(lo, hi)),
                ];
            });
        });
        Unpacked { w, scales, pairs }
    }

    /// The group's eight rows times the first `A` rows of `xs`: `res[a][r]`
    /// = row r · activation row a.
    #[inline(always)]
    fn q6_k_x8_tile<const A: usize>(
        group: &[BlockQ6Kx8],
        xs: &[&[BlockQ8K]; 4],
        res: &mut [[f32; 8]; 4],
        masks: Masks,
        form: impl DotForm,
    ) {
        let xs: [&[BlockQ8K]; A] = std::array::from_fn(|a| &xs[a][..group.len()]);
        let mut acc = [[f32x4_splat(0.0); 2]; A];
        let widen = ScaleWidening::opaque();
        for (bi, b) in group.iter().enumerate() {
            let u = unpack(b, masks, form);
            let [d] = widen.block_scales([&b.d]);
            // Unrolled by hand, as the other group tiles (V8 kept a loop's
            // accumulators in memory).
            unrolled!(I in 0 1 2 3; {
                if I < A {
                    let y = &xs[I][bi];
                    let dots = sums(&u, y, form);
                    let yd = f32x4_splat(y.d);
                    for h in 0..2 {
                        // `kquant_dot::q6_k`'s steps: d·y.d·dot.
                        let term = f32x4_mul(f32x4_mul(d[h], yd), f32x4_convert_i32x4(dots[h]));
                        acc[I][h] = f32x4_add(acc[I][h], term);
                    }
                }
            });
        }
        for (res, acc) in res.iter_mut().zip(acc) {
            store16(&mut res[..4], acc[0]);
            store16(&mut res[4..], acc[1]);
        }
    }

    /// One activation super-block's exact sums against the unpacked
    /// weights: Σ scale·(Σ value·y − 32·bsum) for rows 0..4 and 4..8.
    #[inline(always)]
    fn sums(u: &Unpacked, y: &BlockQ8K, form: impl DotForm) -> [v128; 2] {
        // dots[pair]: lanes 0 and 1 hold row 2·pair's, 2 and 3 the next row's.
        let mut dots = [i32x4_splat(0); 4];
        unrolled!(H in 0 1; {
            // runs[2·nib + k / 4][k % 4]: activations 128h + 64·nib + 8k..,
            // in both halves.
            let at = 128 * H;
            let run = |from: usize| {
                doubled_runs(load16(&y.qs[from..from + 16]), load16(&y.qs[from + 16..from + 32]))
            };
            let runs = [run(at), run(at + 32), run(at + 64), run(at + 96)];
            // Sub-block 8h + 4·nib + kk: loads k = 2kk and 2kk + 1.
            unrolled!(KK in 0 1 2 3; {
                unrolled!(P in 0 1 2 3; {
                    unrolled!(N in 0 1; {
                        let (k0, k1) = (2 * KK, 2 * KK + 1);
                        let a = [runs[2 * N + k0 / 4][k0 % 4], runs[2 * N + k1 / 4][k1 % 4]];
                        let w = [u.w[32 * H + 4 * k0 + P][N], u.w[32 * H + 4 * k1 + P][N]];
                        let s = form.sum_dots(a, w);
                        let scale = u.scales[8 * H + 4 * N + KK][P];
                        dots[P] = i32x4_add(dots[P], form.scale_mul(s, scale));
                    });
                });
            });
        });
        // Σ scale·bsum per row: i32 lane p of each bsums vector holds
        // sub-blocks 2p and 2p + 1's sums.
        let b = [load16(&y.bsums[..8]), load16(&y.bsums[8..])];
        let mut offs = [i32x4_splat(0); 2];
        unrolled!(P in 0 1 2 3 4 5 6 7; {
            let bp = lane_splat(b[P / 4], P % 4);
            offs[0] = i32x4_add(offs[0], i32x4_dot_i16x8(u.pairs[P][0], bp));
            offs[1] = i32x4_add(offs[1], i32x4_dot_i16x8(u.pairs[P][1], bp));
        });
        [
            i32x4_sub(pair_rows(dots[0], dots[1]), i32x4_shl(offs[0], 5)),
            i32x4_sub(pair_rows(dots[2], dots[3]), i32x4_shl(offs[1], 5)),
        ]
    }
}

#[cfg(all(target_feature = "simd128", target_feature = "relaxed-simd"))]
pub(super) use imp::gemm_q6_k_x8;

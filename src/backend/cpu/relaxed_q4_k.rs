//! Repacked Q4_K's group kernel on relaxed SIMD: a group of eight rows
//! (`BlockQ4Kx8`) times up to four activation rows at once, each super-block's
//! nibbles, scales and mins unpacked once for all of them. Row by row (four
//! activation rows per weight row, `vec_dot4_q4_k_q8_k`) each row unpacks
//! its own and sums its lanes at the end of every sub-block.
//!
//! A 16-byte load of the layout holds eight bytes of two rows, as Q4_0's
//! 8x8 layout does: against eight activation bytes in both halves of a
//! vector each relaxed dot leaves two lanes per row. A sub-block's four
//! dots are summed (`DotForm::sum_dots`) and multiplied by the rows' 6-bit
//! scales (`scale_mul`: on the i16 form as they are widened), so every sub-block
//! adds to the same i32 lanes and the rows' lanes are paired once per
//! super-block. The mins meet the activations' 16-value sums the same way.
//! The integer sums are exact and the float combination is
//! `kquant_dot::q4_k`'s, lane by lane: results equal row-by-row `vec_dot`
//! bit for bit (`native-tests/repack.rs`).

#[cfg(all(target_feature = "simd128", target_feature = "relaxed-simd"))]
mod imp {
    use crate::wasm_arch::*;

    use crate::backend::cpu::group_tiles::{by_take, gemm_in_tiles};
    use crate::backend::cpu::relaxed_simd::{doubled_runs, pair_rows, DotForm};
    use crate::backend::cpu::repack_q4_k::BlockQ4Kx8;
    use crate::backend::cpu::simd128::{
        lane_splat, load16, load8, opaque, store16, unrolled, ScaleWidening,
    };
    use crate::tensor::blocks::BlockQ8K;

    // Safety: as in `simd128` (a module built with simd128 and
    // relaxed-simd; loads through the bounds-checked `load16` and `load8`);
    // the frame checks the slices' lengths.

    /// The group kernel (`Kernels::gemm_q4_k_x8`) in dot form `S`.
    pub(in crate::backend::cpu) fn gemm_q4_k_x8<S: DotForm>(
        group: &[BlockQ4Kx8],
        x: &[BlockQ8K],
        n: usize,
        out: &mut [f32],
        stride: usize,
    ) {
        gemm_in_tiles(group, x, n, out, stride, |take, xs, res| {
            by_take!(take, q4_k_x8_tile(group, xs, res, S::default()))
        });
    }

    /// A super-block's weights unpacked for a tile's activation rows.
    struct Unpacked {
        /// `w[16c + 4k + pair]`: the low and high nibbles of load `16c + 4k
        /// + pair`, values 64c + 8k.. (sub-block 2c) and 64c + 32 + 8k..
        /// (sub-block 2c + 1) of rows 2·pair and 2·pair + 1.
        w: [[v128; 2]; 64],
        /// `scales[s][pair]`: rows 2·pair's and 2·pair + 1's scales of
        /// sub-block s, shaped by `DotForm::scale_lanes`.
        scales: [[v128; 4]; 8],
        /// `mins[p][half]`: rows 4·half..4·half + 4's mins of sub-blocks
        /// 2p and 2p + 1, as i16 pairs.
        mins: [[v128; 2]; 4],
    }

    #[inline(always)]
    fn unpack(b: &BlockQ4Kx8, low: v128, form: impl DotForm) -> Unpacked {
        // Written out (`unrolled!`), not through `array::from_fn`: V8 got
        // an outlined function filling the array for that.
        let mut w = [[u8x16_splat(0); 2]; 64];
        unrolled!(V in
            0 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16 17 18 19 20 21 22 23 24 25 26 27 28 29 30 31
            32 33 34 35 36 37 38 39 40 41 42 43 44 45 46 47 48 49 50 51 52 53 54 55 56 57 58 59 60 61 62 63; {
            let v = load16(&b.qs[16 * V..16 * V + 16]);
            w[V] = [v128_and(v, low), v128_and(u16x8_shr(v, 4), low)];
        });
        let mut scales = [[u8x16_splat(0); 4]; 8];
        unrolled!(S in 0 1 2 3 4 5 6 7; {
            // Row r's scale in i16 lane r.
            let s = u16x8_extend_low_u8x16(load8(&b.scales[8 * S..8 * S + 8]));
            scales[S] = [
                form.scale_lanes(i16x8_shuffle::<0, 0, 0, 0, 1, 1, 1, 1>(s, s)),
                form.scale_lanes(i16x8_shuffle::<2, 2, 2, 2, 3, 3, 3, 3>(s, s)),
                form.scale_lanes(i16x8_shuffle::<4, 4, 4, 4, 5, 5, 5, 5>(s, s)),
                form.scale_lanes(i16x8_shuffle::<6, 6, 6, 6, 7, 7, 7, 7>(s, s)),
            ];
        });
        let mut mins = [[u8x16_splat(0); 2]; 4];
        unrolled!(P in 0 1 2 3; {
            let m = load16(&b.mins[16 * P..16 * P + 16]);
            mins[P] = [u16x8_extend_low_u8x16(m), u16x8_extend_high_u8x16(m)];
        });
        Unpacked { w, scales, mins }
    }

    /// The group's eight rows times the first `A` rows of `xs`: `res[a][r]`
    /// = row r · activation row a.
    #[inline(always)]
    fn q4_k_x8_tile<const A: usize>(
        group: &[BlockQ4Kx8],
        xs: &[&[BlockQ8K]; 4],
        res: &mut [[f32; 8]; 4],
        form: impl DotForm,
    ) {
        let xs: [&[BlockQ8K]; A] = std::array::from_fn(|a| &xs[a][..group.len()]);
        let mut acc = [[f32x4_splat(0.0); 2]; A];
        let low = opaque(u8x16_splat(0x0F));
        let widen = ScaleWidening::opaque();
        for (bi, b) in group.iter().enumerate() {
            let u = unpack(b, low, form);
            let [d, dmin] = widen.block_scales([&b.d, &b.dmin]);
            // Unrolled by hand, as the other group tiles (V8 kept a loop's
            // accumulators in memory).
            unrolled!(I in 0 1 2 3; {
                if I < A {
                    let y = &xs[I][bi];
                    let [dots, mins] = sums(&u, y, form);
                    let yd = f32x4_splat(y.d);
                    for h in 0..2 {
                        // `kquant_dot::q4_k`'s steps: d·y.d·dot − dmin·y.d·mins.
                        let pos = f32x4_mul(f32x4_mul(d[h], yd), f32x4_convert_i32x4(dots[h]));
                        let neg = f32x4_mul(f32x4_mul(dmin[h], yd), f32x4_convert_i32x4(mins[h]));
                        acc[I][h] = f32x4_add(acc[I][h], f32x4_sub(pos, neg));
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
    /// weights: Σ scale·run (rows 0..4 and 4..8) and Σ min·(sub-block's
    /// activation sum), likewise.
    #[inline(always)]
    fn sums(u: &Unpacked, y: &BlockQ8K, form: impl DotForm) -> [[v128; 2]; 2] {
        // dots[pair]: lanes 0 and 1 hold row 2·pair's, 2 and 3 the next row's.
        let mut dots = [i32x4_splat(0); 4];
        unrolled!(C in 0 1 2 3; {
            // runs[nib][k]: activations 64c + 32·nib + 8k.., in both halves.
            // (Arrays written out here and below: `array::map` became an
            // outlined function in V8.)
            let at = 64 * C;
            let runs = [
                doubled_runs(load16(&y.qs[at..at + 16]), load16(&y.qs[at + 16..at + 32])),
                doubled_runs(load16(&y.qs[at + 32..at + 48]), load16(&y.qs[at + 48..at + 64])),
            ];
            unrolled!(P in 0 1 2 3; {
                unrolled!(N in 0 1; {
                    let w = |k: usize| u.w[16 * C + 4 * k + P][N];
                    // Four dots of nibbles: 4·2·15·128 fits i16.
                    let s = form.sum_dots(runs[N], [w(0), w(1), w(2), w(3)]);
                    dots[P] = i32x4_add(dots[P], form.scale_mul(s, u.scales[2 * C + N][P]));
                });
            });
        });
        // b[s] = bsums[2s] + bsums[2s + 1]: sub-block s's activation sum
        // (|b| <= 32·128), so i32 lane p holds sub-blocks 2p and 2p + 1's.
        let (v0, v1) = (load16(&y.bsums[..8]), load16(&y.bsums[8..]));
        let b = i16x8_add(
            i16x8_shuffle::<0, 2, 4, 6, 8, 10, 12, 14>(v0, v1),
            i16x8_shuffle::<1, 3, 5, 7, 9, 11, 13, 15>(v0, v1),
        );
        let mut mins = [i32x4_splat(0); 2];
        unrolled!(P in 0 1 2 3; {
            let bp = lane_splat(b, P);
            mins[0] = i32x4_add(mins[0], i32x4_dot_i16x8(u.mins[P][0], bp));
            mins[1] = i32x4_add(mins[1], i32x4_dot_i16x8(u.mins[P][1], bp));
        });
        [
            [pair_rows(dots[0], dots[1]), pair_rows(dots[2], dots[3])],
            mins,
        ]
    }
}

#[cfg(all(target_feature = "simd128", target_feature = "relaxed-simd"))]
pub(super) use imp::gemm_q4_k_x8;

//! WebAssembly SIMD128 kernels (wasm32 and the memory64 build). Same names
//! and signatures as `scalar.rs`. Each block's integer dot product is exact
//! and is combined in the scalar kernel's order, so results equal the
//! scalar kernels' bit for bit; the exceptions are the group kernels of
//! repacked Q4_1 and Q8_0, whose twins fuse a multiply-add that wasm has
//! not (`q4_1_x8_tile` states the bound), and repacked Q5_0's
//! (`wasm_q5_0`), which takes the scalar `vec_dot`'s steps instead of the
//! fused ones of its group twin and equals `vec_dot` bit for bit.
//!
//! wasm has no run-time feature detection: this module is compiled (and the
//! variant offered) only when the module itself is built with simd128.

#[cfg(target_feature = "simd128")]
mod imp {
    use crate::wasm_arch::*;

    use crate::backend::cpu::group_tiles::{by_take, gemm_in_tiles};
    use crate::backend::cpu::iq4_dot;
    use crate::backend::cpu::kernels::Kernels;
    use crate::backend::cpu::kquant_dot::{self, IntDots};
    use crate::backend::cpu::repack::{check_gemv, BlockQ4_0x4};
    use crate::backend::cpu::repack_q4_1::BlockQ4_1x8;
    use crate::backend::cpu::repack_q8_0::BlockQ8_0x8;
    use crate::backend::cpu::scalar::{check_dot, check_dot4, check_quantize};
    use crate::backend::cpu::widen::f16_to_f32;
    use crate::tensor::blocks::*;
    use crate::tensor::quants::IQ4_LEVELS;

    // Safety: this module is compiled only with simd128 enabled for the
    // whole build (no wasm engine runs such a module without SIMD), so its
    // intrinsics need no run-time check; the only unsafe operations are
    // `v128_load`s, each of 16 bytes proven in bounds where it is made. Each
    // kernel checks its slices' lengths (the `check_*` functions of
    // `scalar.rs` and `repack.rs`) as every variant's does.

    pub(in crate::backend::cpu) fn kernels(base: Kernels) -> Kernels {
        Kernels {
            quantize_q8_0,
            quantize_q8_1,
            quantize_q8_k,
            vec_dot_q4_0_q8_0,
            vec_dot_q4_1_q8_1,
            vec_dot4_q4_1_q8_1: Some(vec_dot4_q4_1_q8_1),
            vec_dot_q5_0_q8_0,
            vec_dot_q5_1_q8_1,
            vec_dot_q8_0_q8_0,
            vec_dot4_q8_0_q8_0: Some(vec_dot4_q8_0_q8_0),
            vec_dot_f32,
            vec_dot_f16,
            vec_dot_q4_k_q8_k,
            vec_dot4_q4_k_q8_k: Some(vec_dot4_q4_k_q8_k),
            vec_dot_q5_k_q8_k,
            vec_dot_q6_k_q8_k,
            vec_dot4_q6_k_q8_k: Some(vec_dot4_q6_k_q8_k),
            vec_dot_q2_k_q8_k,
            vec_dot_q3_k_q8_k,
            vec_dot_iq4_nl_q8_0,
            vec_dot_iq4_xs_q8_k,
            gemv_q4_0_x4i4,
            gemm_q4_0_x4i4: Some(gemm_q4_0_x4i4),
            gemm_q4_1_x8: Some(gemm_q4_1_x8),
            gemm_q8_0_x8: Some(gemm_q8_0_x8),
            gemm_q5_0_x8: Some(crate::backend::cpu::wasm_q5_0::gemm_q5_0_x8),
            scores_f16,
            wsum_f16,
            scores_f16_heads: Some(scores_f16_heads),
            wsum_f16_heads: Some(wsum_f16_heads),
            silu_mul,
            round_f16,
            delta_net_columns,
            causal_conv,
            gemm_f32,
            softmax_poly,
            ..base
        }
    }

    /// `rows::gemm_f32`, four rows of `a` at a time (then fewer).
    fn gemm_f32(g: &crate::backend::cpu::rows::GemmShape, a: &[f32], b: &[f32], c: &mut [f32]) {
        crate::backend::cpu::rows::gemm_f32_in_row_groups(g, a, b, c, |take, a, c| {
            by_take!(take, gemm_rows_f32(g, a, b, c))
        });
    }

    /// `R` rows of the product from the first rows of `a` and `c`: 16
    /// columns per step (then 4), one lane per output, per `p` a multiply by
    /// `a[r][p]` and an add in the twin's order; the last columns (under 4)
    /// as the twin computes them. Loads and stores are bounds-checked slices.
    #[inline(always)]
    fn gemm_rows_f32<const R: usize>(
        g: &crate::backend::cpu::rows::GemmShape,
        a: &[f32],
        b: &[f32],
        c: &mut [f32],
    ) {
        let mut j = 0;
        while j + 4 <= g.n {
            let vecs = if j + 16 <= g.n { 4 } else { 1 };
            let mut acc = [[f32x4_splat(0.0); 4]; R];
            for p in 0..g.k {
                let row = &b[p * g.ldb + j..];
                let mut bv = [f32x4_splat(0.0); 4];
                for (v, b) in bv.iter_mut().enumerate().take(vecs) {
                    *b = load16(&row[4 * v..]);
                }
                for (r, acc) in acc.iter_mut().enumerate() {
                    let x = f32x4_splat(a[r * g.lda + p]);
                    for (a, &bv) in acc.iter_mut().zip(&bv).take(vecs) {
                        *a = f32x4_add(*a, f32x4_mul(x, bv));
                    }
                }
            }
            for (r, acc) in acc.iter().enumerate() {
                for (v, &a) in acc.iter().enumerate().take(vecs) {
                    store16(&mut c[r * g.ldc + j + 4 * v..], a);
                }
            }
            j += 4 * vecs;
        }
        crate::backend::cpu::rows::gemm_f32_columns(g, R, j, a, b, c);
    }

    /// `rows::causal_conv_sums` four channels at a time: a register starts
    /// at zero and adds the tap products in the twin's order (SIMD128 has no
    /// fused multiply-add), so the bits are the twin's; the last channels go
    /// through the twin's per-channel sums.
    fn causal_conv(taps: &[f32], state: &[f32], x: &[f32], out: &mut [f32]) {
        use crate::backend::cpu::rows;
        let n = rows::check_causal_conv(taps, state, x, out);
        let rows_ = state.len() / n;
        let mut ch = 0;
        while ch + 4 <= n {
            let mut acc = f32x4_splat(0.0);
            for k in 0..rows_ {
                let at = k * n + ch;
                acc = f32x4_add(acc, f32x4_mul(load16(&state[at..]), load16(&taps[at..])));
            }
            let last = load16(&taps[rows_ * n + ch..]);
            acc = f32x4_add(acc, f32x4_mul(load16(&x[ch..]), last));
            out[ch..ch + 4].copy_from_slice(&[
                f32x4_extract_lane::<0>(acc),
                f32x4_extract_lane::<1>(acc),
                f32x4_extract_lane::<2>(acc),
                f32x4_extract_lane::<3>(acc),
            ]);
            ch += 4;
        }
        rows::causal_conv_tail(taps, state, x, out, ch);
    }

    /// `rows::delta_net_columns`, two columns at a time (`delta_net_group`),
    /// the last one alone.
    fn delta_net_columns(
        cols: &mut [f32],
        k: &[f32],
        q: &[f32],
        decay: f32,
        v: &[f32],
        b: f32,
        read: &mut [f32],
    ) {
        crate::backend::cpu::rows::delta_net_in_groups::<2>(
            cols,
            k,
            q,
            decay,
            v,
            b,
            read,
            |pair, v| delta_net_group::<2>(pair, k, q, decay, v, b),
            |col, vc| delta_net_group::<1>(col, k, q, decay, &[vc], b)[0],
        );
    }

    /// `N` columns' `rows::delta_net_column` interleaved (columns of a
    /// multiple of 8): two registers per column hold `dot8`'s lanes 0-3 and
    /// 4-7 (SIMD128 has no fused multiply-add), and each column's lanes are
    /// added in `rows::sum8`'s order, so the bits are the scalar twin's;
    /// with two columns, four dependency chains run at once. Two sweeps
    /// instead of four.
    fn delta_net_group<const N: usize>(
        cols: &mut [f32],
        k: &[f32],
        q: &[f32],
        decay: f32,
        v: &[f32],
        b: f32,
    ) -> [f32; N] {
        let d = k.len();
        let store = |dst: &mut [f32], x: v128| {
            dst[..4].copy_from_slice(&[
                f32x4_extract_lane::<0>(x),
                f32x4_extract_lane::<1>(x),
                f32x4_extract_lane::<2>(x),
                f32x4_extract_lane::<3>(x),
            ])
        };
        let sum8 = |[lo, hi]: [v128; 2]| {
            let h = f32x4_add(lo, hi);
            (f32x4_extract_lane::<0>(h) + f32x4_extract_lane::<2>(h))
                + (f32x4_extract_lane::<1>(h) + f32x4_extract_lane::<3>(h))
        };
        let dv = f32x4_splat(decay);
        let mut recall = [[f32x4_splat(0.0); 2]; N];
        for i in (0..d).step_by(8) {
            let kk = [load16(&k[i..]), load16(&k[i + 4..])];
            for (j, acc) in recall.iter_mut().enumerate() {
                for h in 0..2 {
                    let at = j * d + i + 4 * h;
                    let s = f32x4_mul(load16(&cols[at..]), dv);
                    store(&mut cols[at..], s);
                    acc[h] = f32x4_add(acc[h], f32x4_mul(s, kk[h]));
                }
            }
        }
        let delta: [v128; N] = std::array::from_fn(|j| f32x4_splat((v[j] - sum8(recall[j])) * b));
        let mut read = [[f32x4_splat(0.0); 2]; N];
        for i in (0..d).step_by(8) {
            let kk = [load16(&k[i..]), load16(&k[i + 4..])];
            let qq = [load16(&q[i..]), load16(&q[i + 4..])];
            for (j, acc) in read.iter_mut().enumerate() {
                for h in 0..2 {
                    let at = j * d + i + 4 * h;
                    let s = f32x4_add(load16(&cols[at..]), f32x4_mul(kk[h], delta[j]));
                    store(&mut cols[at..], s);
                    acc[h] = f32x4_add(acc[h], f32x4_mul(s, qq[h]));
                }
            }
        }
        std::array::from_fn(|j| sum8(read[j]))
    }

    /// `gate = silu(gate) · up` four at a time: the scalar twin's steps
    /// (`rows::exp`, then a divide and a multiply) lane by lane, so bit-equal.
    fn silu_mul(gate: &mut [f32], up: &[f32]) {
        let mut gs = gate.chunks_exact_mut(4);
        let mut us = up.chunks_exact(4);
        for (g, u) in (&mut gs).zip(&mut us) {
            let x = load16(g);
            let silu = f32x4_div(x, f32x4_add(f32x4_splat(1.0), exp4(f32x4_neg(x))));
            let y = f32x4_mul(silu, load16(u));
            g.copy_from_slice(&[
                f32x4_extract_lane::<0>(y),
                f32x4_extract_lane::<1>(y),
                f32x4_extract_lane::<2>(y),
                f32x4_extract_lane::<3>(y),
            ]);
        }
        crate::backend::cpu::rows::silu_mul(gs.into_remainder(), us.remainder());
    }

    /// `rows::round_f16` four at a time, in integer steps (wasm has no f16
    /// conversion): `half`'s value for every f32, bit for bit (a NaN comes
    /// out quiet with its sign and the payload bits f16 keeps, as `half`
    /// makes it; the kernel test asks for a NaN of the same sign). Scalar,
    /// it was 3% of Chromium's prompt time (the queries and weights of
    /// attention over the f16 cache).
    fn round_f16(x: &[f32], out: &mut [f32]) {
        crate::backend::cpu::rows::check_round(x, out);
        let mut xs = x.chunks_exact(4);
        let mut outs = out.chunks_exact_mut(4);
        for (x, o) in (&mut xs).zip(&mut outs) {
            store16(o, round_f16x4(load16(x)));
        }
        crate::backend::cpu::rows::round_f16(xs.remainder(), outs.into_remainder());
    }

    /// Four f32 rounded to the nearest f16 (ties to even) and back.
    #[inline(always)]
    fn round_f16x4(b: v128) -> v128 {
        let a = v128_and(b, u32x4_splat(0x7FFF_FFFF));
        let sign = v128_xor(b, a);
        // |x| >= 2^-14, an f16 normal: the f32's mantissa rounded to ten
        // bits in place (the carry may step the exponent); past 65504
        // it rounds to 2^16 or more, which is f16's infinity.
        let odd = v128_and(u32x4_shr(a, 13), u32x4_splat(1));
        let normal = v128_and(
            i32x4_add(i32x4_add(a, u32x4_splat(0x0FFF)), odd),
            u32x4_splat(0xFFFF_E000),
        );
        let overflow = i32x4_gt(normal, u32x4_splat(0x477F_FFFF));
        let normal = v128_bitselect(u32x4_splat(0x7F80_0000), normal, overflow);
        // |x| < 2^-14, an f16 subnormal: a multiple of 2^-24, which is the
        // spacing of f32s in [0.5, 1), so adding 0.5 rounds it as f16 does
        // (ties to even) and taking 0.5 away again is exact.
        let half = f32x4_splat(0.5);
        let subnormal = f32x4_sub(f32x4_add(a, half), half);
        let tiny = i32x4_lt(a, u32x4_splat(0x3880_0000));
        let magnitude = v128_bitselect(subnormal, normal, tiny);
        // A NaN stays one, quiet, with its sign and its payload's top bits.
        let nan = i32x4_gt(a, u32x4_splat(0x7F80_0000));
        let quiet = v128_or(
            v128_and(b, u32x4_splat(0xFFFF_E000)),
            u32x4_splat(0x0040_0000),
        );
        v128_bitselect(quiet, v128_or(magnitude, sign), nan)
    }

    /// `rows::softmax_poly` eight values at a time: the maximum by
    /// `f32x4_pmax` (which keeps the running maximum over a NaN, as the
    /// twin's comparison does; a maximum is the same whatever the order),
    /// `exp4`, each chunk's values widened to f64 and added to the eight
    /// partial sums (two per register, in lane order, as value `j` goes to
    /// sum `j % 8`), the tail as the twin.
    fn softmax_poly(x: &mut [f32]) {
        use crate::backend::cpu::rows;
        let mut chunks = x.chunks_exact(4);
        let mut m4 = f32x4_splat(f32::NEG_INFINITY);
        for c in &mut chunks {
            m4 = f32x4_pmax(m4, load16(c));
        }
        let max = [
            f32x4_extract_lane::<0>(m4),
            f32x4_extract_lane::<1>(m4),
            f32x4_extract_lane::<2>(m4),
            f32x4_extract_lane::<3>(m4),
        ]
        .iter()
        .chain(chunks.remainder())
        .fold(f32::NEG_INFINITY, |m, &v| if v > m { v } else { m });
        let maxv = f32x4_splat(max);
        let mut acc = [f64x2_splat(0.0); 4];
        let full = x.len() / 8 * 8;
        for c in x[..full].chunks_exact_mut(8) {
            let e0 = exp4(f32x4_sub(load16(&c[..4]), maxv));
            let e1 = exp4(f32x4_sub(load16(&c[4..]), maxv));
            store16(&mut c[..4], e0);
            store16(&mut c[4..], e1);
            // (The high pair moved down, then widened.)
            let high = |v: v128| f64x2_promote_low_f32x4(i64x2_shuffle::<1, 1>(v, v));
            acc[0] = f64x2_add(acc[0], f64x2_promote_low_f32x4(e0));
            acc[1] = f64x2_add(acc[1], high(e0));
            acc[2] = f64x2_add(acc[2], f64x2_promote_low_f32x4(e1));
            acc[3] = f64x2_add(acc[3], high(e1));
        }
        let mut sums = [0f64; 8];
        for (i, a) in acc.iter().enumerate() {
            sums[2 * i] = f64x2_extract_lane::<0>(*a);
            sums[2 * i + 1] = f64x2_extract_lane::<1>(*a);
        }
        for (j, v) in x[full..].iter_mut().enumerate() {
            *v = rows::exp(*v - max);
            sums[j] += *v as f64;
        }
        let inv = (1.0 / rows::sum8_f64(sums)) as f32;
        let invv = f32x4_splat(inv);
        let mut chunks = x.chunks_exact_mut(4);
        for c in &mut chunks {
            store16(c, f32x4_mul(load16(c), invv));
        }
        for v in chunks.into_remainder() {
            *v *= inv;
        }
    }

    /// `rows::exp` on four lanes, step for step (wasm has no fused
    /// multiply-add in SIMD128, so every lane equals the scalar twin).
    #[inline(always)]
    fn exp4(x: v128) -> v128 {
        use crate::backend::cpu::rows::exp_consts::*;
        let x = f32x4_min(f32x4_max(x, f32x4_splat(LO)), f32x4_splat(HI));
        let n = f32x4_nearest(f32x4_mul(x, f32x4_splat(LOG2E)));
        let r = f32x4_sub(
            f32x4_sub(x, f32x4_mul(n, f32x4_splat(LN2_HI))),
            f32x4_mul(n, f32x4_splat(LN2_LO)),
        );
        let mut p = f32x4_splat(P[0]);
        for &c in &P[1..] {
            p = f32x4_add(f32x4_mul(p, r), f32x4_splat(c));
        }
        let e = f32x4_add(
            f32x4_add(f32x4_mul(p, f32x4_mul(r, r)), r),
            f32x4_splat(1.0),
        );
        let bits = i32x4_add(i32x4_trunc_sat_f32x4(n), i32x4_splat(127));
        f32x4_mul(e, i32x4_shl(bits, 23))
    }

    /// Σ a·b over 16 i8 lanes as four i32 partial sums.
    #[inline(always)]
    fn dot16(a: v128, b: v128) -> v128 {
        let lo = i32x4_dot_i16x8(i16x8_extend_low_i8x16(a), i16x8_extend_low_i8x16(b));
        let hi = i32x4_dot_i16x8(i16x8_extend_high_i8x16(a), i16x8_extend_high_i8x16(b));
        i32x4_add(lo, hi)
    }

    #[inline(always)]
    pub(in crate::backend::cpu) fn hsum_i32(v: v128) -> i32 {
        i32x4_extract_lane::<0>(v)
            + i32x4_extract_lane::<1>(v)
            + i32x4_extract_lane::<2>(v)
            + i32x4_extract_lane::<3>(v)
    }

    /// [Σ lanes of s[0], Σ s[1], Σ s[2], Σ s[3]]: four horizontal sums in one
    /// vector (integer adds, so exact in any order).
    #[inline(always)]
    pub(in crate::backend::cpu) fn hsum4_i32(s: [v128; 4]) -> v128 {
        let a = i32x4_add(
            i32x4_shuffle::<0, 4, 1, 5>(s[0], s[1]),
            i32x4_shuffle::<2, 6, 3, 7>(s[0], s[1]),
        );
        let b = i32x4_add(
            i32x4_shuffle::<0, 4, 1, 5>(s[2], s[3]),
            i32x4_shuffle::<2, 6, 3, 7>(s[2], s[3]),
        );
        i32x4_add(
            i32x4_shuffle::<0, 1, 4, 5>(a, b),
            i32x4_shuffle::<2, 3, 6, 7>(a, b),
        )
    }

    /// One f16 field of each of four blocks, widened, as a vector.
    #[inline(always)]
    pub(in crate::backend::cpu) fn widen4(h: [half::f16; 4]) -> v128 {
        f32x4(
            f16_to_f32(h[0]),
            f16_to_f32(h[1]),
            f16_to_f32(h[2]),
            f16_to_f32(h[3]),
        )
    }

    /// `sum[r]` of a four-row dot as an array.
    #[inline(always)]
    pub(in crate::backend::cpu) fn lanes(v: v128) -> [f32; 4] {
        [
            f32x4_extract_lane::<0>(v),
            f32x4_extract_lane::<1>(v),
            f32x4_extract_lane::<2>(v),
            f32x4_extract_lane::<3>(v),
        ]
    }

    /// The first 16 bytes of `p`; panics if it holds fewer. Every caller
    /// passes a part of a typed array or of a `chunks_exact` chunk, whose
    /// length the compiler knows, so the check is folded away.
    #[inline(always)]
    pub(in crate::backend::cpu) fn load16<T>(p: &[T]) -> v128 {
        assert!(
            std::mem::size_of_val(p) >= 16,
            "a 16-byte load from a shorter slice"
        );
        // SAFETY: the slice holds at least 16 bytes (asserted above); v128_load
        // has no alignment requirement.
        unsafe { v128_load(p.as_ptr().cast()) }
    }

    /// `$body` once for each listed index, `$i` a constant in it: the
    /// steps over a block's loads written out. As loops over the loads,
    /// LLVM left them rolled and kept the accumulators they index
    /// (`rows[2 * pair]`) in memory, a load and a store per step (SIMD128's
    /// Q8_0 output matrix: 13% of a SmolLM2 Q4_0 token in Node).
    macro_rules! unrolled {
        ($i:ident in $($n:literal)*; $body:block) => {$({
            const $i: usize = $n;
            $body
        })*};
    }
    // (Macros are used in this module by their text; the relaxed-SIMD
    // kernels and `wasm_q5_0` import this one.)
    pub(in crate::backend::cpu) use unrolled;

    /// The first 8 bytes of `p` in the low half of a vector (the high half
    /// zero); panics if `p` holds fewer.
    #[inline(always)]
    pub(in crate::backend::cpu) fn load8<T>(p: &[T]) -> v128 {
        assert!(
            std::mem::size_of_val(p) >= 8,
            "an 8-byte load from a shorter slice"
        );
        // SAFETY: the slice holds at least 8 bytes (asserted above);
        // v128_load64_zero has no alignment requirement.
        unsafe { v128_load64_zero(p.as_ptr().cast()) }
    }

    /// Writes `v` over the first four values of `p`; panics if it holds fewer.
    #[inline(always)]
    pub(in crate::backend::cpu) fn store16(p: &mut [f32], v: v128) {
        assert!(p.len() >= 4, "a 16-byte store to a shorter slice");
        // SAFETY: the slice holds at least 16 bytes (asserted above);
        // v128_store has no alignment requirement.
        unsafe { v128_store(p.as_mut_ptr().cast(), v) }
    }

    /// Low and high nibbles of 16 bytes as two vectors of values 0..15.
    #[inline(always)]
    pub(in crate::backend::cpu) fn nibbles(qs: &[u8; 16]) -> (v128, v128) {
        let v = load16(qs);
        (v128_and(v, u8x16_splat(0x0F)), shr_bytes(v, 4))
    }

    /// Each byte shifted right by `n` (< 8), zeros shifted in: the bytes of
    /// `u8x16_shr`, as a 16-bit shift and an AND that clears the top `n`
    /// bits of each byte (where the byte above's bits land). V8 on x86
    /// lowers `u8x16_shr` to the same two instructions but rebuilds the
    /// mask from an immediate every time, five in all; here the mask is a
    /// `v128.const`, built at most once per loop pass and shared by every
    /// shift in it (see `opaque`).
    #[inline(always)]
    pub(in crate::backend::cpu) fn shr_bytes(v: v128, n: u32) -> v128 {
        shr_bytes_and(v, n, 0xFF >> n)
    }

    /// `shr_bytes(v, n)` ANDed with `mask` in every byte, in the same two
    /// instructions: `mask` must have none of a byte's top `n` bits set.
    #[inline(always)]
    pub(in crate::backend::cpu) fn shr_bytes_and(v: v128, n: u32, mask: u8) -> v128 {
        debug_assert!(n < 8 && u32::from(mask) >> (8 - n) == 0);
        v128_and(u16x8_shr(v, n), u8x16_splat(mask))
    }

    fn quantize_q8_0(x: &[f32], y: &mut [BlockQ8_0]) {
        check_quantize(x, y);
        quantize_q8_0_blocks(x, y)
    }

    /// `quantize_q8_0` without the length check: whole chunks of 32 values
    /// that have a block to go to.
    #[inline(always)]
    fn quantize_q8_0_blocks(x: &[f32], y: &mut [BlockQ8_0]) {
        for (x, b) in x.chunks_exact(QK).zip(y) {
            let v: [v128; 8] = std::array::from_fn(|k| load16(&x[4 * k..]));
            // The largest magnitude as the twin's fold of `f32::max` from
            // 0: `f32x4_pmax(m, v)` keeps m unless m < v, so it passes a
            // NaN over as the fold does, in one `maxps` where V8 spends
            // about seven instructions on `f32x4_max`'s NaN rules (Chromium
            // profile).
            let mut m = f32x4_splat(0.0);
            for vi in &v {
                m = f32x4_pmax(m, f32x4_abs(*vi));
            }
            let amax = f32x4_extract_lane::<0>(m)
                .max(f32x4_extract_lane::<1>(m))
                .max(f32x4_extract_lane::<2>(m))
                .max(f32x4_extract_lane::<3>(m));
            b.d = half::f16::from_f32(amax / 127.0);
            let idv = f32x4_splat(crate::backend::cpu::scalar::activation_scale(amax));
            // Half to even, as the scalar twin. The saturating conversion
            // and narrowings clamp as the twin's float-to-i8 `as` does (NaN
            // to 0 in both); two stores replace 32 lane extractions.
            let q = v.map(|vi| i32x4_trunc_sat_f32x4(f32x4_nearest(f32x4_mul(vi, idv))));
            let h = [0, 1, 2, 3].map(|p| i16x8_narrow_i32x4(q[2 * p], q[2 * p + 1]));
            store_bytes16(&mut b.qs[..16], i8x16_narrow_i16x8(h[0], h[1]));
            store_bytes16(&mut b.qs[16..], i8x16_narrow_i16x8(h[2], h[3]));
        }
    }

    /// Writes `v` over the first 16 bytes of `p`; panics if it holds fewer.
    #[inline(always)]
    fn store_bytes16(p: &mut [i8], v: v128) {
        assert!(p.len() >= 16, "a 16-byte store to a shorter slice");
        // SAFETY: the slice holds at least 16 bytes (asserted above);
        // v128_store has no alignment requirement.
        unsafe { v128_store(p.as_mut_ptr().cast(), v) }
    }

    /// `scalar::q8_1_from_q8_0` with its sums in vectors: the quants' sum,
    /// and the largest magnitude as its fold of `f32::max` from 0, which
    /// passes a NaN over, as `f32x4_pmax(m, v)` does (it keeps m unless
    /// m < v). In V8 the scalar fold's 32 maximums, each a compare and
    /// branches for NaN, cost more than the quantizing (Chromium profile).
    fn quantize_q8_1(x: &[f32], y: &mut [BlockQ8_1]) {
        crate::backend::cpu::scalar::check_quantize(x, y);
        for (x, b) in x.chunks_exact(QK).zip(y) {
            let mut t = [BlockQ8_0::zeroed()];
            quantize_q8_0_blocks(x, &mut t);
            b.d = t[0].d;
            b.qs = t[0].qs;
            let pairs = |v: v128| i32x4_extadd_pairwise_i16x8(i16x8_extadd_pairwise_i8x16(v));
            let sum = hsum_i32(i32x4_add(
                pairs(load16(&b.qs[..16])),
                pairs(load16(&b.qs[16..])),
            ));
            let mut m = f32x4_splat(0.0);
            for k in 0..QK / 4 {
                m = f32x4_pmax(m, f32x4_abs(load16(&x[4 * k..])));
            }
            let amax = f32x4_extract_lane::<0>(m)
                .max(f32x4_extract_lane::<1>(m))
                .max(f32x4_extract_lane::<2>(m))
                .max(f32x4_extract_lane::<3>(m));
            b.s = half::f16::from_f32(sum as f32 * (amax / 127.0));
        }
    }

    fn quantize_q8_k(x: &[f32], y: &mut [BlockQ8K]) {
        // `q8_k_with` checks the lengths, then passes one block at a time.
        crate::backend::cpu::scalar::q8_k_with(x, y, |x, iscale, q| {
            let s = f32x4_splat(iscale);
            for k in 0..QK_K / 4 {
                // f32x4_nearest rounds half to even, as ggml's nearest_int.
                let i = i32x4_min(
                    i32x4_trunc_sat_f32x4(f32x4_nearest(f32x4_mul(load16(&x[4 * k..]), s))),
                    i32x4_splat(127),
                );
                q[4 * k] = i32x4_extract_lane::<0>(i) as i8;
                q[4 * k + 1] = i32x4_extract_lane::<1>(i) as i8;
                q[4 * k + 2] = i32x4_extract_lane::<2>(i) as i8;
                q[4 * k + 3] = i32x4_extract_lane::<3>(i) as i8;
            }
        })
    }

    /// The bits of `b0` and `b1` as bytes of 16 or 0, a fifth bit's worth:
    /// bit j of `b0` to byte j, of `b1` to byte 8 + j. `bits` holds bit j
    /// % 8 in byte j, `sixteen` 0x10 in every byte.
    #[inline(always)]
    pub(in crate::backend::cpu) fn spread_fifth_bits(
        b0: u8,
        b1: u8,
        bits: v128,
        sixteen: v128,
    ) -> v128 {
        let spread = u64x2(u64::from_ne_bytes([b0; 8]), u64::from_ne_bytes([b1; 8]));
        v128_and(i8x16_eq(v128_and(spread, bits), bits), sixteen)
    }

    /// Σ (value - offset) · y over a Q5 block's 32 five-bit values.
    #[inline(always)]
    fn q5_dot(qs: &[u8; 16], qh: [u8; 4], y: &[i8; 32], offset: i8) -> i32 {
        let (lo, hi) = nibbles(qs);
        let bits = u8x16(1, 2, 4, 8, 16, 32, 64, 128, 1, 2, 4, 8, 16, 32, 64, 128);
        let high = |b0: u8, b1: u8| spread_fifth_bits(b0, b1, bits, u8x16_splat(0x10));
        let off = i8x16_splat(offset);
        let v0 = i8x16_sub(v128_or(lo, high(qh[0], qh[1])), off);
        let v1 = i8x16_sub(v128_or(hi, high(qh[2], qh[3])), off);
        hsum_i32(i32x4_add(
            dot16(v0, load16(&y[..])),
            dot16(v1, load16(&y[16..])),
        ))
    }

    fn vec_dot_q5_0_q8_0(x: &[BlockQ5_0], y: &[BlockQ8_0]) -> f32 {
        check_dot(x, y);
        let mut sum = 0.0f32;
        for (x, y) in x.iter().zip(y) {
            sum += q5_dot(&x.qs, x.qh, &y.qs, 16) as f32 * f16_to_f32(x.d) * f16_to_f32(y.d);
        }
        sum
    }

    fn vec_dot_q5_1_q8_1(x: &[BlockQ5_1], y: &[BlockQ8_1]) -> f32 {
        check_dot(x, y);
        let mut sum = 0.0f32;
        for (x, y) in x.iter().zip(y) {
            let sumi = q5_dot(&x.qs, x.qh, &y.qs, 0);
            sum += (f16_to_f32(x.d) * f16_to_f32(y.d)) * sumi as f32
                + f16_to_f32(x.m) * f16_to_f32(y.s);
        }
        sum
    }

    fn vec_dot_q8_0_q8_0(x: &[BlockQ8_0], y: &[BlockQ8_0]) -> f32 {
        check_dot(x, y);
        let mut sum = 0.0f32;
        for (x, y) in x.iter().zip(y) {
            let s = i32x4_add(
                dot16(load16(&x.qs), load16(&y.qs)),
                dot16(load16(&x.qs[16..]), load16(&y.qs[16..])),
            );
            sum += hsum_i32(s) as f32 * (f16_to_f32(x.d) * f16_to_f32(y.d));
        }
        sum
    }

    /// Four activation rows per weight row: the weight block is widened
    /// to i16 once, and each row summed as `vec_dot_q8_0_q8_0` sums it, the
    /// four rows in the lanes of one vector (the same operations per lane,
    /// so the same bits).
    fn vec_dot4_q8_0_q8_0(x: &[BlockQ8_0], y: [&[BlockQ8_0]; 4]) -> [f32; 4] {
        check_dot4(x, &y);
        let n = y.iter().fold(x.len(), |n, r| n.min(r.len()));
        let mut sum = f32x4_splat(0.0);
        for b in 0..n {
            let xb = &x[b];
            let (x0, x1) = (load16(&xb.qs[..]), load16(&xb.qs[16..]));
            let w = [
                i16x8_extend_low_i8x16(x0),
                i16x8_extend_high_i8x16(x0),
                i16x8_extend_low_i8x16(x1),
                i16x8_extend_high_i8x16(x1),
            ];
            let ys = [&y[0][b], &y[1][b], &y[2][b], &y[3][b]];
            let s = hsum4_i32(ys.map(|yb| {
                let (y0, y1) = (load16(&yb.qs[..]), load16(&yb.qs[16..]));
                i32x4_add(
                    i32x4_add(
                        i32x4_dot_i16x8(w[0], i16x8_extend_low_i8x16(y0)),
                        i32x4_dot_i16x8(w[1], i16x8_extend_high_i8x16(y0)),
                    ),
                    i32x4_add(
                        i32x4_dot_i16x8(w[2], i16x8_extend_low_i8x16(y1)),
                        i32x4_dot_i16x8(w[3], i16x8_extend_high_i8x16(y1)),
                    ),
                )
            }));
            let scale = f32x4_mul(f32x4_splat(f16_to_f32(xb.d)), widen4(ys.map(|yb| yb.d)));
            sum = f32x4_add(sum, f32x4_mul(f32x4_convert_i32x4(s), scale));
        }
        lanes(sum)
    }

    fn vec_dot_q4_0_q8_0(x: &[BlockQ4_0], y: &[BlockQ8_0]) -> f32 {
        check_dot(x, y);
        let mut sum = 0.0f32;
        let eight = i8x16_splat(8);
        for (x, y) in x.iter().zip(y) {
            let (lo, hi) = nibbles(&x.qs);
            let s = i32x4_add(
                dot16(i8x16_sub(lo, eight), load16(&y.qs)),
                dot16(i8x16_sub(hi, eight), load16(&y.qs[16..])),
            );
            sum += hsum_i32(s) as f32 * f16_to_f32(x.d) * f16_to_f32(y.d);
        }
        sum
    }

    /// Four activation rows per weight row, each summed as
    /// `vec_dot_q4_1_q8_1` sums it, the four in the lanes of one vector.
    fn vec_dot4_q4_1_q8_1(x: &[BlockQ4_1], y: [&[BlockQ8_1]; 4]) -> [f32; 4] {
        q4_1_rows4(x, y, |lo, hi, y| {
            i32x4_add(dot16(lo, load16(&y.qs)), dot16(hi, load16(&y.qs[16..])))
        })
    }

    /// The frame of the Q4_1 four-row dots: `dot(lo, hi, y)` gives a
    /// block's partial sums of nibbles times activations; per block and
    /// lane r, `sum += (d·dy)·S + m·s`, `vec_dot_q4_1_q8_1`'s operations.
    #[inline(always)]
    pub(in crate::backend::cpu) fn q4_1_rows4(
        x: &[BlockQ4_1],
        y: [&[BlockQ8_1]; 4],
        dot: impl Fn(v128, v128, &BlockQ8_1) -> v128,
    ) -> [f32; 4] {
        check_dot4(x, &y);
        let n = y.iter().fold(x.len(), |n, r| n.min(r.len()));
        let mut sum = f32x4_splat(0.0);
        for b in 0..n {
            let xb = &x[b];
            let (lo, hi) = nibbles(&xb.qs);
            let ys = [&y[0][b], &y[1][b], &y[2][b], &y[3][b]];
            let s = hsum4_i32(ys.map(|yb| dot(lo, hi, yb)));
            let (d, m) = (f32x4_splat(f16_to_f32(xb.d)), f32x4_splat(f16_to_f32(xb.m)));
            let term = f32x4_add(
                f32x4_mul(
                    f32x4_mul(d, widen4(ys.map(|yb| yb.d))),
                    f32x4_convert_i32x4(s),
                ),
                f32x4_mul(m, widen4(ys.map(|yb| yb.s))),
            );
            sum = f32x4_add(sum, term);
        }
        lanes(sum)
    }

    fn vec_dot_q4_1_q8_1(x: &[BlockQ4_1], y: &[BlockQ8_1]) -> f32 {
        check_dot(x, y);
        let mut sum = 0.0f32;
        for (x, y) in x.iter().zip(y) {
            let (lo, hi) = nibbles(&x.qs);
            let s = i32x4_add(dot16(lo, load16(&y.qs)), dot16(hi, load16(&y.qs[16..])));
            sum += (f16_to_f32(x.d) * f16_to_f32(y.d)) * hsum_i32(s) as f32
                + f16_to_f32(x.m) * f16_to_f32(y.s);
        }
        sum
    }

    fn gemv_q4_0_x4i4(group: &[BlockQ4_0x4], x: &[BlockQ8_0], out: &mut [f32]) {
        check_gemv(group, x, out, 4);
        let mut res = [[0f32; 4]; 4];
        q4_0_x4i4_tile::<1>(group, &[x; 4], &mut res);
        out[..4].copy_from_slice(&res[0]);
    }

    fn gemm_q4_1_x8(
        group: &[BlockQ4_1x8],
        x: &[BlockQ8_1],
        n: usize,
        out: &mut [f32],
        stride: usize,
    ) {
        gemm_in_tiles(group, x, n, out, stride, |take, xs, res| {
            by_take!(take, q4_1_x8_tile(group, xs, res, &WidenedSums))
        });
    }

    fn gemm_q8_0_x8(
        group: &[BlockQ8_0x8],
        x: &[BlockQ8_0],
        n: usize,
        out: &mut [f32],
        stride: usize,
    ) {
        gemm_in_tiles(group, x, n, out, stride, |take, xs, res| {
            by_take!(take, q8_0_x8_tile(group, xs, res, &WidenedQ8_0))
        });
    }

    /// A repacked Q8_0 group's eight rows times the first `A` rows of `xs`,
    /// as `q4_1_x8_tile` without the minimums: each 16-byte load holds
    /// values 8k.. of two rows, widened to i16 and multiplied in pairs
    /// against the activation's values 8k.. (both operands are signed, so
    /// the relaxed dot would not take them). The weights are widened again
    /// for each activation row rather than held widened across them: with
    /// 32 held vectors, Node 20's V8 (which keeps fewer in registers) ran
    /// SmolLM2 Q8_0's generated tokens slower than row-by-row dots did
    /// (29.5 against 40.8 t/s). The integer sums are exact;
    /// each block's, times d(w)·d(a), is rounded before it is added where
    /// the twin (`repack_q8_0::gemm_q8_0_x8`) fuses the two, so results are
    /// within `q4_1_x8_tile`'s bound of the twin's.
    #[inline(always)]
    pub(in crate::backend::cpu) fn q8_0_x8_tile<const A: usize>(
        group: &[BlockQ8_0x8],
        xs: &[&[BlockQ8_0]; 4],
        res: &mut [[f32; 8]; 4],
        way: &impl Q8_0GroupSums,
    ) {
        let xs: [&[BlockQ8_0]; A] = std::array::from_fn(|a| &xs[a][..group.len()]);
        let mut acc = [[f32x4_splat(0.0); 2]; A];
        let widen = ScaleWidening::opaque();
        for (bi, b) in group.iter().enumerate() {
            let [d] = widen.block_scales([&b.d]);
            let dys = widen.activation_scales::<A>(std::array::from_fn(|a| xs[a][bi].d));
            // Unrolled by hand: as a loop, V8 kept `acc` in memory.
            unrolled!(I in 0 1 2 3; {
                if I < A {
                    let s = way.sums(b, &xs[I][bi]);
                    let dy = lane_splat(dys, I);
                    for h in 0..2 {
                        let scale = f32x4_mul(d[h], dy);
                        let term = f32x4_mul(f32x4_convert_i32x4(s[h]), scale);
                        acc[I][h] = f32x4_add(acc[I][h], term);
                    }
                }
            });
        }
        for (res, acc) in res.iter_mut().zip(&acc) {
            store16(&mut res[..4], acc[0]);
            store16(&mut res[4..], acc[1]);
        }
    }

    /// How a wasm variant gets the exact integer sums of one repacked Q8_0
    /// block's eight rows against one activation block, rows 0..4 and 4..8
    /// in two vectors.
    pub(in crate::backend::cpu) trait Q8_0GroupSums {
        fn sums(&self, b: &BlockQ8_0x8, y: &BlockQ8_0) -> [v128; 2];
    }

    /// SIMD128's way: both operands widened to i16 and multiplied in pairs.
    struct WidenedQ8_0;

    impl Q8_0GroupSums for WidenedQ8_0 {
        #[inline(always)]
        fn sums(&self, b: &BlockQ8_0x8, y: &BlockQ8_0) -> [v128; 2] {
            // Opaque: with both operands of a dot visibly sign-extended
            // bytes, LLVM rewrites it as i16x8.extmul and
            // i32x4.extadd_pairwise, which V8 makes about five
            // instructions, the activation widened again each time,
            // against two for the dot.
            let a = widened_activations(&y.qs).map(opaque);
            let mut rows = [i32x4_splat(0); 8];
            // Load I holds values 8k.. (k = I / 4) of rows 2(I % 4) and
            // 2(I % 4) + 1.
            unrolled!(I in 0 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15; {
                let (k, pair) = (I / 4, I % 4);
                let v = load16(&b.qs[16 * I..16 * I + 16]);
                let (lo, hi) = (i16x8_extend_low_i8x16(v), i16x8_extend_high_i8x16(v));
                rows[2 * pair] = i32x4_add(rows[2 * pair], i32x4_dot_i16x8(lo, a[k]));
                rows[2 * pair + 1] = i32x4_add(rows[2 * pair + 1], i32x4_dot_i16x8(hi, a[k]));
            });
            eight_row_sums(&rows)
        }
    }

    /// An activation block's values 8c..8c + 8 widened to i16, c in 0..4.
    #[inline(always)]
    fn widened_activations(qs: &[i8; 32]) -> [v128; 4] {
        let (v0, v1) = (load16(&qs[..16]), load16(&qs[16..]));
        [
            i16x8_extend_low_i8x16(v0),
            i16x8_extend_high_i8x16(v0),
            i16x8_extend_low_i8x16(v1),
            i16x8_extend_high_i8x16(v1),
        ]
    }

    /// Eight rows' vectors of partial sums as rows 0..4 and 4..8 summed.
    #[inline(always)]
    fn eight_row_sums(rows: &[v128; 8]) -> [v128; 2] {
        [
            hsum4_i32([rows[0], rows[1], rows[2], rows[3]]),
            hsum4_i32([rows[4], rows[5], rows[6], rows[7]]),
        ]
    }

    /// How a wasm variant gets the exact integer sums of one repacked Q4_1
    /// block's rows 4h..4h + 4 against one activation block: `prepare`
    /// decodes those rows' weights once for a tile's activation rows, where
    /// that pays; `sums` gives the four rows' sums.
    pub(in crate::backend::cpu) trait Q4_1GroupSums {
        type Weights;
        fn prepare(&self, b: &BlockQ4_1x8, h: usize) -> Self::Weights;
        fn sums(&self, b: &BlockQ4_1x8, w: &Self::Weights, h: usize, y: &BlockQ8_1) -> v128;
    }

    /// SIMD128's way: nibbles and activations widened to i16 and multiplied
    /// in pairs (`i32x4.dot_i16x8_s`), one vector of partial sums per row.
    /// The nibbles are unpacked again for each activation row, as
    /// `q8_0_x8_tile` widens its weights, for Node 20's V8's registers.
    struct WidenedSums;

    impl Q4_1GroupSums for WidenedSums {
        type Weights = ();

        #[inline(always)]
        fn prepare(&self, _: &BlockQ4_1x8, _: usize) {}

        #[inline(always)]
        fn sums(&self, b: &BlockQ4_1x8, _: &(), h: usize, y: &BlockQ8_1) -> v128 {
            widened_half_sums(
                |j| {
                    let i = x8_half_load(h, j);
                    let v = load16(&b.qs[16 * i..16 * i + 16]);
                    [v128_and(v, u8x16_splat(0x0F)), shr_bytes(v, 4)]
                },
                &y.qs,
            )
        }
    }

    /// Σ q·y of rows 4h..4h + 4 of an 8x8 group block against one
    /// activation block, q unsigned bytes (Q4_1's nibbles, Q5_0's values
    /// plus 16) widened to i16 and multiplied in pairs (`i32x4.dot_i16x8_s`),
    /// one vector of partial sums per row, summed into one vector. `q(j)`
    /// gives the bytes of the half's load j (`x8_half_load`): values 8k..
    /// and 16 + 8k.. (k = j / 2) of rows 4h + 2(j % 2) and 4h + 2(j % 2) + 1,
    /// eight of each row in turn.
    #[inline(always)]
    pub(in crate::backend::cpu) fn widened_half_sums(
        q: impl Fn(usize) -> [v128; 2],
        y: &[i8; 32],
    ) -> v128 {
        let a = widened_activations(y);
        let mut rows = [i32x4_splat(0); 4];
        unrolled!(J in 0 1 2 3; {
            let (k, pair) = (J / 2, J % 2);
            for (half, q) in q(J).into_iter().enumerate() {
                let (lo, hi) = (u16x8_extend_low_u8x16(q), u16x8_extend_high_u8x16(q));
                let y = a[2 * half + k];
                rows[2 * pair] = i32x4_add(rows[2 * pair], i32x4_dot_i16x8(lo, y));
                rows[2 * pair + 1] = i32x4_add(rows[2 * pair + 1], i32x4_dot_i16x8(hi, y));
            }
        });
        hsum4_i32(rows)
    }

    /// Each of the first `A` activation rows' block `bi` sum times 2^shift,
    /// a lane each (the rest 0): gathered once per block, where a splat per
    /// row costs V8 five instructions.
    #[inline(always)]
    pub(in crate::backend::cpu) fn activation_offsets<const A: usize>(
        ss: &[&[i32]; A],
        bi: usize,
        shift: u32,
    ) -> v128 {
        let sum = |a: usize| ss.get(a).map_or(0, |s| s[bi]);
        i32x4_shl(i32x4(sum(0), sum(1), sum(2), sum(3)), shift)
    }

    /// Which of an 8x8 group block's eight 16-byte loads is the `j`th of
    /// rows 4h..4h + 4: loads 2h and 2h + 1 hold their values 0..8 and
    /// 16..24 (rows 4h, 4h + 1, then 4h + 2, 4h + 3), loads 4 + 2h and
    /// 5 + 2h their values 8..16 and 24..32.
    #[inline(always)]
    pub(in crate::backend::cpu) fn x8_half_load(h: usize, j: usize) -> usize {
        4 * (j / 2) + 2 * h + j % 2
    }

    /// A repacked Q4_1 group's eight rows times the first `A` rows of `xs`:
    /// `res[a][r]` = row r · activation row a, the integer sums from `way`.
    /// The float steps are the scalar twin's (`repack_q4_1::gemm_q4_1_x8`)
    /// but for one: wasm has no fused multiply-add, so each block's sum
    /// times d(w)·d(a) is rounded before it is added, where the twin rounds
    /// once. (d(w)·d(a) and m·s are products of two f16, exact in f32, so
    /// the minimums' sum equals the twin's.) Results are within
    /// 2·(blocks + 2)·2⁻²⁴ × the sum of the terms' magnitudes of the twin's
    /// (`native-tests/repack.rs` states it).
    #[inline(always)]
    pub(in crate::backend::cpu) fn q4_1_x8_tile<const A: usize>(
        group: &[BlockQ4_1x8],
        xs: &[&[BlockQ8_1]; 4],
        res: &mut [[f32; 8]; 4],
        way: &impl Q4_1GroupSums,
    ) {
        let xs: [&[BlockQ8_1]; A] = std::array::from_fn(|a| &xs[a][..group.len()]);
        let mut dots = [[f32x4_splat(0.0); 2]; A];
        let mut mins = [[f32x4_splat(0.0); 2]; A];
        let widen = ScaleWidening::opaque();
        for (bi, b) in group.iter().enumerate() {
            let [d, m] = widen.block_scales([&b.d, &b.m]);
            let [dys, sys] = widen.activation_pairs::<A>(std::array::from_fn(|a| &xs[a][bi]));
            // Rows 0..4, then 4..8: half the weights live at a time, fewer
            // vectors than x86's sixteen registers (relaxed SIMD in
            // Chromium: Q4_1's prompts 8% faster, its tokens 10%; SIMD128
            // in Node unchanged). Unrolled by hand: as a loop, V8 kept the
            // sums in memory.
            unrolled!(H in 0 1; {
                let w = way.prepare(b, H);
                unrolled!(I in 0 1 2 3; {
                    if I < A {
                        let s = way.sums(b, &w, H, &xs[I][bi]);
                        let (dy, sy) = (lane_splat(dys, I), lane_splat(sys, I));
                        let scale = f32x4_mul(d[H], dy);
                        let term = f32x4_mul(f32x4_convert_i32x4(s), scale);
                        dots[I][H] = f32x4_add(dots[I][H], term);
                        mins[I][H] = f32x4_add(mins[I][H], f32x4_mul(m[H], sy));
                    }
                });
            });
        }
        for (res, (dots, mins)) in res.iter_mut().zip(dots.iter().zip(&mins)) {
            store16(&mut res[..4], f32x4_add(dots[0], mins[0]));
            store16(&mut res[4..], f32x4_add(dots[1], mins[1]));
        }
    }

    fn gemm_q4_0_x4i4(
        group: &[BlockQ4_0x4],
        x: &[BlockQ8_0],
        n: usize,
        out: &mut [f32],
        stride: usize,
    ) {
        gemm_in_tiles(group, x, n, out, stride, |take, xs, res| {
            by_take!(take, q4_0_x4i4_tile(group, xs, res))
        });
    }

    /// Activation bytes `at..at + 4` as a little-endian word in every lane:
    /// lane r then meets row r's four bytes of a 4x4 load.
    #[inline(always)]
    fn word_x4(y: &[i8; 32], at: usize) -> v128 {
        i32x4_splat(i32::from_le_bytes([
            y[at] as u8,
            y[at + 1] as u8,
            y[at + 2] as u8,
            y[at + 3] as u8,
        ]))
    }

    /// `word_x4` widened to i16: paired with a widened half of a 4x4 load,
    /// lane pairs multiply one row's four bytes by it.
    #[inline(always)]
    fn word_x4_i16(y: &[i8; 32], at: usize) -> v128 {
        i16x8_extend_low_i8x16(word_x4(y, at))
    }

    /// The 4x4 layout's four rows times the first `A` rows of `xs`:
    /// `res[a][r]` = row r · activation row a. Each 16-byte load holds four
    /// bytes of each row, nibbles stored XOR 8, so in the top four bits of a
    /// byte a nibble q is 16·(q − 8); it is widened to i16 once per block
    /// and multiplied, for each activation row, by that row's matching four
    /// bytes (`word_x4_i16`). Per block the four integer sums are exact,
    /// divided by the 16 exactly and scaled in `vec_dot`'s order, so each
    /// output equals the scalar `vec_dot` of its row.
    #[inline(always)]
    fn q4_0_x4i4_tile<const A: usize>(
        group: &[BlockQ4_0x4],
        xs: &[&[BlockQ8_0]; 4],
        res: &mut [[f32; 4]; 4],
    ) {
        let xs: [&[BlockQ8_0]; A] = std::array::from_fn(|a| &xs[a][..group.len()]);
        let mut acc = [f32x4_splat(0.0); A];
        let (widen, high) = (ScaleWidening::opaque(), opaque(u8x16_splat(0xF0)));
        for (bi, b) in group.iter().enumerate() {
            // w[k][h]: load k's low (h = 0) or high (h = 1) nibbles, as
            // [rows 0 and 1 widened, rows 2 and 3 widened].
            let w: [[[v128; 2]; 2]; 4] = std::array::from_fn(|k| {
                let v = load16(&b.qs[16 * k..16 * k + 16]);
                // (The low nibbles moved up by a 16-bit shift and the mask:
                // `i8x16_shl` would rebuild the mask each time, as
                // `shr_bytes` explains.)
                let halves = [v128_and(u16x8_shl(v, 4), high), v128_and(v, high)];
                halves.map(|q| [i16x8_extend_low_i8x16(q), i16x8_extend_high_i8x16(q)])
            });
            let dw = widen.block_scales4(&b.d);
            for (acc, x) in acc.iter_mut().zip(&xs) {
                let y = &x[bi];
                // Lanes of `rows01` and `rows23` hold pairs of products per row.
                let (mut rows01, mut rows23) = (i32x4_splat(0), i32x4_splat(0));
                for (k, w) in w.iter().enumerate() {
                    for (h, [w01, w23]) in w.iter().enumerate() {
                        let yv = word_x4_i16(&y.qs, 16 * h + 4 * k);
                        rows01 = i32x4_add(rows01, i32x4_dot_i16x8(*w01, yv));
                        rows23 = i32x4_add(rows23, i32x4_dot_i16x8(*w23, yv));
                    }
                }
                let sums = i32x4_shr(
                    i32x4_add(
                        i32x4_shuffle::<0, 2, 4, 6>(rows01, rows23),
                        i32x4_shuffle::<1, 3, 5, 7>(rows01, rows23),
                    ),
                    4,
                );
                let scaled = f32x4_mul(f32x4_mul(f32x4_convert_i32x4(sums), dw), widen.splat(y.d));
                *acc = f32x4_add(*acc, scaled);
            }
        }
        for (res, acc) in res.iter_mut().zip(acc) {
            store16(res, acc);
        }
    }

    /// 2^112: an f16's exponent and mantissa bits read in an f32's place
    /// are worth 2^-112 times the f16.
    const TWO_112: f32 = f32::from_bits(0x7780_0000);

    /// A value LLVM cannot see through, for a vector constant a kernel's
    /// loop uses. Given a `v128.const` in a loop, V8 (x86) rebuilds it on
    /// every iteration: a load into a general register, a move and a
    /// broadcast, three instructions per constant per block in the group
    /// tiles, where it hoists nothing. An opaque value made once per call
    /// is a local instead, kept in a register or reloaded from the stack
    /// in one instruction. (LLVM would fold a plain one back into each use.)
    #[inline(always)]
    pub(in crate::backend::cpu) fn opaque(v: v128) -> v128 {
        std::hint::black_box(v)
    }

    /// `ScaleWidening::finite` exact for every f16: infinities and NaNs get
    /// the all-ones exponent (NaNs keep their payload).
    #[inline(always)]
    fn f16_high_to_f32(x: v128) -> v128 {
        let bits = v128_and(i32x4_shr(x, 3), u32x4_splat(0x8FFF_E000));
        let finite = f32x4_mul(bits, f32x4_splat(TWO_112));
        let exponent = u32x4_splat(0x7C00_0000);
        let special = i32x4_eq(v128_and(x, exponent), exponent);
        v128_bitselect(v128_or(bits, u32x4_splat(0x7F80_0000)), finite, special)
    }

    /// The eight f16 of `h`, each moved into the high half of a 32-bit lane:
    /// values 0..4 and 4..8 (one unpack with zero each).
    #[inline(always)]
    fn f16_high_halves(h: v128) -> [v128; 2] {
        let z = i16x8_splat(0);
        [
            i16x8_shuffle::<0, 8, 1, 9, 2, 10, 3, 11>(z, h),
            i16x8_shuffle::<4, 12, 5, 13, 6, 14, 7, 15>(z, h),
        ]
    }

    /// Four f16 (as the low 64 bits of `h`) to f32x4, exactly.
    #[inline(always)]
    pub(in crate::backend::cpu) fn f16x4_to_f32(h: v128) -> v128 {
        f16_high_to_f32(f16_high_halves(h)[0])
    }

    /// Lane `a` (0..4) of `v` in every lane.
    #[inline(always)]
    pub(in crate::backend::cpu) fn lane_splat(v: v128, a: usize) -> v128 {
        match a {
            0 => i32x4_shuffle::<0, 0, 0, 0>(v, v),
            1 => i32x4_shuffle::<1, 1, 1, 1>(v, v),
            2 => i32x4_shuffle::<2, 2, 2, 2>(v, v),
            _ => i32x4_shuffle::<3, 3, 3, 3>(v, v),
        }
    }

    /// Whether an f16 is an infinity or a NaN (exponent 31).
    #[inline(always)]
    fn is_inf_nan(h: half::f16) -> bool {
        h.to_bits() & 0x7C00 == 0x7C00
    }

    /// The f16 scales of the group tiles to f32, exactly: each block's
    /// weight scales and each activation block's, once per (group, block),
    /// so on the path of every generated token. Scales are finite in any
    /// model that runs and take the short widening after one check; a block
    /// with an infinite or NaN scale takes the full one. The constants are
    /// fields, `opaque` in the tiles' loops.
    #[derive(Clone, Copy)]
    pub(in crate::backend::cpu) struct ScaleWidening {
        /// An f16's magnitude bits, and the largest finite magnitude.
        magnitude: v128,
        largest_finite: v128,
        /// `finite`'s mask and factor.
        mask: v128,
        two_112: v128,
    }

    impl ScaleWidening {
        /// The constants as `v128.const`s, which V8 rebuilds at every use
        /// (three instructions each).
        #[inline(always)]
        fn plain() -> Self {
            Self {
                magnitude: i16x8_splat(0x7FFF),
                largest_finite: u16x8_splat(0x7BFF),
                mask: u32x4_splat(0x8FFF_E000),
                two_112: f32x4_splat(TWO_112),
            }
        }

        /// For a kernel's loop: the constants made once. (The relaxed Q4_0
        /// 8x8 tile ran its prompts 6% slower in Chromium with `plain`'s.)
        #[inline(always)]
        pub(in crate::backend::cpu) fn opaque() -> Self {
            let p = Self::plain();
            Self {
                magnitude: opaque(p.magnitude),
                largest_finite: opaque(p.largest_finite),
                mask: opaque(p.mask),
                two_112: opaque(p.two_112),
            }
        }

        /// The f16 in the high half of each 32-bit lane to f32x4 (the low
        /// halves are ignored), exactly for finite values. An arithmetic shift
        /// right by 3 puts the sign at bit 31 and the exponent and mantissa at
        /// bits 13..28, where (with the sign's copies in bits 28..31 cleared)
        /// an f32 reads them as 2^-112 times the f16, normal or subnormal (wasm
        /// keeps f32 subnormals); one exact multiply by 2^112 finishes. An
        /// infinity or NaN (exponent 31) comes out as a finite value of 2^16 or
        /// more: `f16_high_to_f32` handles those, or the caller checks first.
        #[inline(always)]
        fn finite(&self, x: v128) -> v128 {
            f32x4_mul(v128_and(i32x4_shr(x, 3), self.mask), self.two_112)
        }

        /// Whether any of the f16 lanes of `a` or `b` is an infinity or a NaN.
        #[inline(always)]
        fn any_inf_nan(&self, a: v128, b: v128) -> bool {
            let m = self.magnitude;
            let largest = u16x8_max(v128_and(a, m), v128_and(b, m));
            v128_any_true(u16x8_gt(largest, self.largest_finite))
        }

        /// A repacked block's `N` scale vectors of eight f16 (`d`, and `m`
        /// where the layout has one) as f32x4 pairs.
        #[inline(always)]
        pub(in crate::backend::cpu) fn block_scales<const N: usize>(
            &self,
            h: [&[half::f16; 8]; N],
        ) -> [[v128; 2]; N] {
            const { assert!(N == 1 || N == 2) };
            let v = h.map(|h| load16(h));
            let special = self.any_inf_nan(v[0], v[N - 1]);
            v.map(|v| {
                let halves = f16_high_halves(v);
                if special {
                    halves.map(f16_high_to_f32)
                } else {
                    halves.map(|x| self.finite(x))
                }
            })
        }

        /// The four scales of a 4x4 block (`load8`'s low 64 bits) as f32x4.
        #[inline(always)]
        pub(in crate::backend::cpu) fn block_scales4(&self, h: &[half::f16; 4]) -> v128 {
            let v = load8(h);
            let high = f16_high_halves(v)[0];
            if self.any_inf_nan(v, v) {
                f16_high_to_f32(high)
            } else {
                self.finite(high)
            }
        }

        /// An activation block's scale in every lane.
        #[inline(always)]
        pub(in crate::backend::cpu) fn splat(&self, h: half::f16) -> v128 {
            let high = i32x4_splat(i32::from(h.to_bits()) << 16);
            if is_inf_nan(h) {
                f16_high_to_f32(high)
            } else {
                self.finite(high)
            }
        }

        /// The scales of the `A` (1..=4) activation blocks a tile meets at
        /// once, widened together: lane a holds row a's (`lane_splat`
        /// spreads it; one row's is in every lane). One widening for the
        /// tile's rows: V8 makes each about twenty instructions, as many as
        /// a row's dots.
        #[inline(always)]
        pub(in crate::backend::cpu) fn activation_scales<const A: usize>(
            &self,
            h: [half::f16; A],
        ) -> v128 {
            const { assert!(A >= 1 && A <= 4) };
            if A == 1 {
                return self.splat(h[0]);
            }
            let high = |a: usize| h.get(a).map_or(0, |h| u32::from(h.to_bits()) << 16);
            let v = u32x4(high(0), high(1), high(2), high(3));
            if self.any_inf_nan(v, v) {
                f16_high_to_f32(v)
            } else {
                self.finite(v)
            }
        }

        /// `activation_scales` of Q8_1 blocks' `d` and `s`.
        #[inline(always)]
        pub(in crate::backend::cpu) fn activation_pairs<const A: usize>(
            &self,
            y: [&BlockQ8_1; A],
        ) -> [v128; 2] {
            if A == 1 {
                return self.pair_splats(y[0].d, y[0].s);
            }
            [
                self.activation_scales(y.map(|y| y.d)),
                self.activation_scales(y.map(|y| y.s)),
            ]
        }

        /// An activation block's two f16 (Q8_1's `d` and `s`), each in
        /// every lane: both from one 32-bit splat, `s` read from the high
        /// halves as it is and `d` shifted there.
        #[inline(always)]
        pub(in crate::backend::cpu) fn pair_splats(&self, d: half::f16, s: half::f16) -> [v128; 2] {
            let both = i32x4_splat((u32::from(d.to_bits()) | u32::from(s.to_bits()) << 16) as i32);
            let highs = [i32x4_shl(both, 16), both];
            if is_inf_nan(d) || is_inf_nan(s) {
                highs.map(f16_high_to_f32)
            } else {
                highs.map(|x| self.finite(x))
            }
        }
    }

    /// One query against cached f16 K rows, each score with the operations
    /// of `vec_dot_f16` in its order (so bit-equal to it), the query held
    /// as f32 so only the rows are widened.
    fn scores_f16(
        k: &[half::f16],
        stride: usize,
        offset: usize,
        cells: &[u32],
        q: &[f32],
        out: &mut [f32],
    ) {
        crate::backend::cpu::rows::check_cells(k.len(), stride, offset, q.len(), cells, out.len());
        let n = q.len();
        for (o, &c) in out.iter_mut().zip(cells) {
            let x = &k[c as usize * stride + offset..][..n];
            let mut acc = [f32x4_splat(0.0); 2];
            let mut i = 0;
            while i + 8 <= n {
                let xv = load16(&x[i..i + 8]);
                let xh = i64x2_shuffle::<1, 1>(xv, xv);
                acc[0] = f32x4_add(acc[0], f32x4_mul(f16x4_to_f32(xv), load16(&q[i..i + 4])));
                acc[1] = f32x4_add(
                    acc[1],
                    f32x4_mul(f16x4_to_f32(xh), load16(&q[i + 4..i + 8])),
                );
                i += 8;
            }
            let v = f32x4_add(acc[0], acc[1]);
            let mut sum = f32x4_extract_lane::<0>(v)
                + f32x4_extract_lane::<1>(v)
                + f32x4_extract_lane::<2>(v)
                + f32x4_extract_lane::<3>(v);
            while i < n {
                sum += f16_to_f32(x[i]) * q[i];
                i += 1;
            }
            *o = sum;
        }
    }

    /// The attention's weighted sum of f16 V rows, eight values at a time:
    /// per value one exact widening, one multiply and one add, in cell
    /// order, as `rows::wsum_f16`, so bit-equal to it.
    fn wsum_f16(
        v: &[half::f16],
        stride: usize,
        offset: usize,
        cells: &[u32],
        p: &[f32],
        out: &mut [f32],
    ) {
        crate::backend::cpu::rows::check_cells(v.len(), stride, offset, out.len(), cells, p.len());
        out.fill(0.0);
        let n = out.len();
        for (&c, &w) in cells.iter().zip(p) {
            let row = &v[c as usize * stride + offset..][..n];
            let wv = f32x4_splat(w);
            let mut i = 0;
            while i + 8 <= n {
                let h = load16(&row[i..i + 8]);
                let lo = f32x4_add(load16(&out[i..i + 4]), f32x4_mul(wv, f16x4_to_f32(h)));
                let hi = f32x4_add(
                    load16(&out[i + 4..i + 8]),
                    f32x4_mul(wv, f16x4_to_f32(i64x2_shuffle::<1, 1>(h, h))),
                );
                store16(&mut out[i..i + 4], lo);
                store16(&mut out[i + 4..i + 8], hi);
                i += 8;
            }
            for (o, x) in out[i..].iter_mut().zip(&row[i..]) {
                *o += w * f16_to_f32(*x);
            }
        }
    }

    /// `scores_f16` for the query heads of one KV head (`q` and `out`
    /// hold them back to back), up to 4 per pass: each row widened once
    /// (in software: SIMD128 has no f16) for all of them, each head's score
    /// with `scores_f16`'s operations in its order, so bit-equal to it.
    fn scores_f16_heads(
        k: &[half::f16],
        stride: usize,
        offset: usize,
        cells: &[u32],
        q: &[f32],
        out: &mut [f32],
        heads: usize,
    ) {
        use crate::backend::cpu::rows;
        let hd =
            rows::check_head_scores(k.len(), stride, offset, cells, (q.len(), out.len()), heads);
        let n = cells.len();
        let mut h = 0;
        while h < heads {
            let take = (heads - h).min(4);
            let (q, out) = (&q[h * hd..(h + take) * hd], &mut out[h * n..(h + take) * n]);
            match take {
                4 => scores_f16_group::<4>(k, stride, offset, cells, q, out),
                3 => scores_f16_group::<3>(k, stride, offset, cells, q, out),
                2 => scores_f16_group::<2>(k, stride, offset, cells, q, out),
                _ => scores_f16(k, stride, offset, cells, q, out),
            }
            h += take;
        }
    }

    /// `scores_f16_heads` for `G` heads (shapes checked by the caller).
    fn scores_f16_group<const G: usize>(
        k: &[half::f16],
        stride: usize,
        offset: usize,
        cells: &[u32],
        q: &[f32],
        out: &mut [f32],
    ) {
        let (hd, n) = (q.len() / G, cells.len());
        for (j, &c) in cells.iter().enumerate() {
            let x = &k[c as usize * stride + offset..][..hd];
            let mut acc = [[f32x4_splat(0.0); 2]; G];
            let mut i = 0;
            while i + 8 <= hd {
                let xv = load16(&x[i..i + 8]);
                let (lo, hi) = (
                    f16x4_to_f32(xv),
                    f16x4_to_f32(i64x2_shuffle::<1, 1>(xv, xv)),
                );
                for (g, a) in acc.iter_mut().enumerate() {
                    let qg = &q[g * hd + i..g * hd + i + 8];
                    a[0] = f32x4_add(a[0], f32x4_mul(lo, load16(&qg[..4])));
                    a[1] = f32x4_add(a[1], f32x4_mul(hi, load16(&qg[4..])));
                }
                i += 8;
            }
            for (g, a) in acc.iter().enumerate() {
                let v = f32x4_add(a[0], a[1]);
                let mut sum = f32x4_extract_lane::<0>(v)
                    + f32x4_extract_lane::<1>(v)
                    + f32x4_extract_lane::<2>(v)
                    + f32x4_extract_lane::<3>(v);
                for t in i..hd {
                    sum += f16_to_f32(x[t]) * q[g * hd + t];
                }
                out[g * n + j] = sum;
            }
        }
    }

    /// `wsum_f16` for the heads of one KV head (`p` and `out` hold them
    /// back to back), up to 4 per pass: 8 columns at a time with the sums
    /// in registers across the cells, each row's values widened once for
    /// all heads; per head and column one multiply and one add in cell
    /// order from zero, as `wsum_f16`, so bit-equal to it.
    fn wsum_f16_heads(
        v: &[half::f16],
        stride: usize,
        offset: usize,
        cells: &[u32],
        p: &[f32],
        out: &mut [f32],
        heads: usize,
    ) {
        use crate::backend::cpu::rows;
        let w = rows::check_head_sums(v.len(), stride, offset, cells, (p.len(), out.len()), heads);
        let n = cells.len();
        let mut h = 0;
        while h < heads {
            let take = (heads - h).min(4);
            let (p, out) = (&p[h * n..(h + take) * n], &mut out[h * w..(h + take) * w]);
            match take {
                4 => wsum_f16_group::<4>(v, stride, offset, cells, p, out),
                3 => wsum_f16_group::<3>(v, stride, offset, cells, p, out),
                2 => wsum_f16_group::<2>(v, stride, offset, cells, p, out),
                _ => wsum_f16(v, stride, offset, cells, p, out),
            }
            h += take;
        }
    }

    /// `wsum_f16_heads` for `G` heads (shapes checked by the caller).
    fn wsum_f16_group<const G: usize>(
        v: &[half::f16],
        stride: usize,
        offset: usize,
        cells: &[u32],
        p: &[f32],
        out: &mut [f32],
    ) {
        let (n, w) = (cells.len(), out.len() / G);
        let mut col = 0;
        while col + 8 <= w {
            let mut acc = [[f32x4_splat(0.0); 2]; G];
            for (j, &c) in cells.iter().enumerate() {
                let h = load16(&v[c as usize * stride + offset + col..][..8]);
                let (lo, hi) = (f16x4_to_f32(h), f16x4_to_f32(i64x2_shuffle::<1, 1>(h, h)));
                for (g, a) in acc.iter_mut().enumerate() {
                    let pw = f32x4_splat(p[g * n + j]);
                    a[0] = f32x4_add(a[0], f32x4_mul(pw, lo));
                    a[1] = f32x4_add(a[1], f32x4_mul(pw, hi));
                }
            }
            for (g, a) in acc.iter().enumerate() {
                store16(&mut out[g * w + col..], a[0]);
                store16(&mut out[g * w + col + 4..], a[1]);
            }
            col += 8;
        }
        // The columns left (fewer than 8): per head, `wsum_f16`'s own tail.
        for g in 0..G {
            for t in col..w {
                let mut sum = 0.0f32;
                for (j, &c) in cells.iter().enumerate() {
                    sum += p[g * n + j] * f16_to_f32(v[c as usize * stride + offset + t]);
                }
                out[g * w + t] = sum;
            }
        }
    }

    fn vec_dot_f16(x: &[half::f16], y: &[half::f16]) -> f32 {
        check_dot(x, y);
        let n = x.len().min(y.len());
        let mut acc = [f32x4_splat(0.0); 2];
        let mut i = 0;
        while i + 8 <= n {
            // SAFETY: 8 f16 (16 bytes) remain at i in both slices (i + 8 <= n,
            // the shorter length).
            let (xv, yv) = unsafe {
                (
                    v128_load(x.as_ptr().add(i).cast()),
                    v128_load(y.as_ptr().add(i).cast()),
                )
            };
            let (xh, yh) = (i64x2_shuffle::<1, 1>(xv, xv), i64x2_shuffle::<1, 1>(yv, yv));
            acc[0] = f32x4_add(acc[0], f32x4_mul(f16x4_to_f32(xv), f16x4_to_f32(yv)));
            acc[1] = f32x4_add(acc[1], f32x4_mul(f16x4_to_f32(xh), f16x4_to_f32(yh)));
            i += 8;
        }
        let v = f32x4_add(acc[0], acc[1]);
        let mut sum = f32x4_extract_lane::<0>(v)
            + f32x4_extract_lane::<1>(v)
            + f32x4_extract_lane::<2>(v)
            + f32x4_extract_lane::<3>(v);
        while i < n {
            sum += f16_to_f32(x[i]) * f16_to_f32(y[i]);
            i += 1;
        }
        sum
    }

    fn vec_dot_q4_k_q8_k(x: &[BlockQ4K], y: &[BlockQ8K]) -> f32 {
        check_dot(x, y);
        // SAFETY: the module is built with simd128 (Simd128Dots's only
        // requirement); its arguments are typed arrays; lengths checked above.
        unsafe { kquant_dot::q4_k::<Simd128Dots>(x, y) }
    }
    fn vec_dot4_q4_k_q8_k(x: &[BlockQ4K], y: [&[BlockQ8K]; 4]) -> [f32; 4] {
        // SAFETY: the module is built with simd128 (Simd128Dots's only
        // requirement); any lengths (the shortest row counts).
        unsafe { kquant_dot::q4_k4::<Simd128Dots>(x, y) }
    }
    fn vec_dot4_q6_k_q8_k(x: &[BlockQ6K], y: [&[BlockQ8K]; 4]) -> [f32; 4] {
        // SAFETY: as `vec_dot4_q4_k_q8_k`.
        unsafe { kquant_dot::q6_k4::<Simd128Dots>(x, y) }
    }
    fn vec_dot_q5_k_q8_k(x: &[BlockQ5K], y: &[BlockQ8K]) -> f32 {
        check_dot(x, y);
        // SAFETY: the module is built with simd128 (Simd128Dots's only
        // requirement); its arguments are typed arrays; lengths checked above.
        unsafe { kquant_dot::q5_k::<Simd128Dots>(x, y) }
    }
    fn vec_dot_q6_k_q8_k(x: &[BlockQ6K], y: &[BlockQ8K]) -> f32 {
        check_dot(x, y);
        // SAFETY: the module is built with simd128 (Simd128Dots's only
        // requirement); its arguments are typed arrays; lengths checked above.
        unsafe { kquant_dot::q6_k::<Simd128Dots>(x, y) }
    }
    fn vec_dot_q2_k_q8_k(x: &[BlockQ2K], y: &[BlockQ8K]) -> f32 {
        check_dot(x, y);
        // SAFETY: the module is built with simd128 (Simd128Dots's only
        // requirement); its arguments are typed arrays; lengths checked above.
        unsafe { kquant_dot::q2_k::<Simd128Dots>(x, y) }
    }
    fn vec_dot_q3_k_q8_k(x: &[BlockQ3K], y: &[BlockQ8K]) -> f32 {
        check_dot(x, y);
        // SAFETY: the module is built with simd128 (Simd128Dots's only
        // requirement); its arguments are typed arrays; lengths checked above.
        unsafe { kquant_dot::q3_k::<Simd128Dots>(x, y) }
    }
    fn vec_dot_iq4_nl_q8_0(x: &[BlockIQ4NL], y: &[BlockQ8_0]) -> f32 {
        check_dot(x, y);
        // SAFETY: the module is built with simd128 (Simd128Dots's only
        // requirement); its arguments are typed arrays; lengths checked above.
        unsafe { iq4_dot::iq4_nl::<Simd128Dots>(x, y) }
    }
    fn vec_dot_iq4_xs_q8_k(x: &[BlockIQ4XS], y: &[BlockQ8K]) -> f32 {
        check_dot(x, y);
        // SAFETY: the module is built with simd128 (Simd128Dots's only
        // requirement); its arguments are typed arrays; lengths checked above.
        unsafe { iq4_dot::iq4_xs::<Simd128Dots>(x, y) }
    }

    /// Exact integer primitives for the k-quant kernels.
    pub(in crate::backend::cpu) struct Simd128Dots;

    // The methods' safety contract is the trait's (the variant's features:
    // simd128, compiled in); they use only safe `load16`s of typed arrays.
    impl IntDots for Simd128Dots {
        #[inline(always)]
        unsafe fn level_dots(q: &[u8; 16], a: &[i8; 32]) -> i32 {
            let grid = load16(&IQ4_LEVELS[..]);
            let v = load16(&q[..]);
            let lo = i8x16_swizzle(grid, v128_and(v, u8x16_splat(0x0F)));
            let hi = i8x16_swizzle(grid, shr_bytes(v, 4));
            hsum_i32(i32x4_add(
                dot16(lo, load16(&a[..])),
                dot16(hi, load16(&a[16..])),
            ))
        }

        #[inline(always)]
        unsafe fn nibble_dots(q: &[u8; 32], a: &[i8; 32], b: &[i8; 32]) -> (i32, i32) {
            let m = u8x16_splat(0x0F);
            let (q0, q1) = (load16(&q[..]), load16(&q[16..]));
            let lo = i32x4_add(
                dot16(v128_and(q0, m), load16(&a[..])),
                dot16(v128_and(q1, m), load16(&a[16..])),
            );
            let hi = i32x4_add(
                dot16(shr_bytes(q0, 4), load16(&b[..])),
                dot16(shr_bytes(q1, 4), load16(&b[16..])),
            );
            (hsum_i32(lo), hsum_i32(hi))
        }

        #[inline(always)]
        unsafe fn bit_sums(h: &[u8; 32], bit: u32, a: &[i8; 32], b: &[i8; 32]) -> (i32, i32) {
            let (h0, h1) = (load16(&h[..]), load16(&h[16..]));
            let masked = |mask: u8, v: &[i8; 32]| {
                let m = u8x16_splat(mask);
                let s0 = v128_and(load16(&v[..]), i8x16_ne(v128_and(h0, m), u8x16_splat(0)));
                let s1 = v128_and(load16(&v[16..]), i8x16_ne(v128_and(h1, m), u8x16_splat(0)));
                let ones = i8x16_splat(1);
                hsum_i32(i32x4_add(dot16(s0, ones), dot16(s1, ones)))
            };
            (masked(1 << bit, a), masked(1 << (bit + 1), b))
        }

        #[inline(always)]
        unsafe fn q6_dots(
            ql: &[u8; 32],
            high: bool,
            qh: &[u8; 32],
            shift: u32,
            a: &[i8; 32],
        ) -> (i32, i32) {
            let half = |off: usize| {
                let l = load16(&ql[off..]);
                let nib = if high {
                    shr_bytes(l, 4)
                } else {
                    v128_and(l, u8x16_splat(0x0F))
                };
                let hb = shr_bytes_and(load16(&qh[off..]), shift, 3);
                // hb < 4, so a 16-bit shift keeps every bit in its byte.
                let q = i8x16_sub(v128_or(nib, u16x8_shl(hb, 4)), i8x16_splat(32));
                hsum_i32(dot16(q, load16(&a[off..])))
            };
            (half(0), half(16))
        }

        #[inline(always)]
        unsafe fn crumb_dots(q: &[u8; 32], shift: u32, a: &[i8; 32]) -> (i32, i32) {
            let half = |off: usize| {
                let v = shr_bytes_and(load16(&q[off..]), shift, 3);
                hsum_i32(dot16(v, load16(&a[off..])))
            };
            (half(0), half(16))
        }

        #[inline(always)]
        unsafe fn masked_sums(h: &[u8; 32], bit: u32, a: &[i8; 32]) -> (i32, i32) {
            let half = |off: usize| {
                let set = i8x16_ne(
                    v128_and(load16(&h[off..]), u8x16_splat(1 << bit)),
                    u8x16_splat(0),
                );
                hsum_i32(dot16(v128_and(load16(&a[off..]), set), i8x16_splat(1)))
            };
            (half(0), half(16))
        }
    }

    fn vec_dot_f32(x: &[f32], y: &[f32]) -> f32 {
        check_dot(x, y);
        let n = x.len().min(y.len());
        let mut acc = [f32x4_splat(0.0); 4];
        let mut i = 0;
        while i + 16 <= n {
            for (k, a) in acc.iter_mut().enumerate() {
                // SAFETY: 4 f32 (16 bytes) remain at i + 4k in both slices
                // (i + 4k + 4 <= i + 16 <= n, the shorter length).
                let (xv, yv) = unsafe {
                    (
                        v128_load(x.as_ptr().add(i + 4 * k).cast()),
                        v128_load(y.as_ptr().add(i + 4 * k).cast()),
                    )
                };
                *a = f32x4_add(*a, f32x4_mul(xv, yv));
            }
            i += 16;
        }
        let v = f32x4_add(f32x4_add(acc[0], acc[1]), f32x4_add(acc[2], acc[3]));
        let mut sum = f32x4_extract_lane::<0>(v)
            + f32x4_extract_lane::<1>(v)
            + f32x4_extract_lane::<2>(v)
            + f32x4_extract_lane::<3>(v);
        while i < n {
            sum += x[i] * y[i];
            i += 1;
        }
        sum
    }
}

// The table, and the helpers repacked Q5_0's group kernel builds on.
#[cfg(target_feature = "simd128")]
pub(super) use imp::{
    activation_offsets, kernels, lane_splat, load16, opaque, spread_fifth_bits, store16, unrolled,
    widened_half_sums, x8_half_load, ScaleWidening,
};
// The helpers the relaxed-SIMD kernels build on.
#[cfg(all(target_feature = "simd128", target_feature = "relaxed-simd"))]
pub(super) use imp::{
    hsum_i32, load8, nibbles, q4_1_rows4, q4_1_x8_tile, q8_0_x8_tile, shr_bytes, shr_bytes_and,
    Q4_1GroupSums, Q8_0GroupSums, Simd128Dots,
};

/// Without simd128 in the module the variant is never supported, so this
/// table is never asked for; it is the scalar one.
#[cfg(not(target_feature = "simd128"))]
pub(super) fn kernels(base: super::kernels::Kernels) -> super::kernels::Kernels {
    base
}

//! WebAssembly relaxed-SIMD kernels: the SIMD128 table with the quantized types'
//! integer dot products on `i32x4.relaxed_dot_i8x16_i7x16_add_s`, one
//! instruction for sixteen byte products summed four at a time (SIMD128
//! widens to i16 first: seven). Its second operand must lie in 0..=127; there
//! every engine gives the exact sum (outside it the result is the engine's
//! choice), so each kernel puts an unsigned value there: a weight's
//! nibbles, 2-bit, 6-bit or single-bit values, with their offset (8 for
//! Q4_0, 32 for Q6_K) taken off through the activations' sum. Every sum is
//! exact and is scaled in the scalar kernel's order, so results equal the
//! scalar twins' bit for bit (the kernel tests assert it, in Chromium), but
//! for two group tiles. Repacked Q4_1's and Q8_0's take SIMD128's float
//! steps (`simd128::q4_1_x8_tile`, `q8_0_x8_tile`), so a model of those
//! types gives the same ids as the SIMD128 build (the browser test asserts
//! it). Q4_0's 8x8 tile adds each block's scaled sum with
//! `f32x4.relaxed_madd`, one FMA where the engine has one, where `vec_dot`
//! rounds the product first: within the repack tests' stated bound of
//! `vec_dot`, not bit-equal (Chromium's Q4_0 prompts ran 11% faster, its
//! tokens 16%). The same fusing in the Q4_1 and Q8_0 tiles gained 2-5% and
//! moved a near-tie of the browser test's Q4_1 model (ggml quantizes each
//! layer's activations to 8 bits, so a last-bit difference can move a
//! value by a quantization step).
//!
//! Q8_0's operands are both signed. Its repacked group kernel moves the
//! activations' signs onto the weights: the dot takes |a| as its 7-bit
//! operand and the weight's bits flipped where a < 0, (w ^ m)·|a| = w·a -
//! |a| there, with the block's Σ|a| over its negative activations added
//! back once (`FlippedWeightsQ8_0`): one dot and one XOR per load, for
//! every weight byte. An activation block holding -128 gives each
//! activation byte to the dot as its low seven bits and its sign bit
//! instead, two dots per load (`SignSplitQ8_0`). Row-by-row dots would
//! split each activation run per dot rather than once per block: three
//! more operations each, slower than SIMD128 in Chromium, so the
//! row-by-row Q8_0 dots stay SIMD128's.
//!
//! Repacked Q5_0 goes through `wasm_q5_0`'s tile, its values plus 16
//! (0..=31) the dot's 7-bit operand; repacked Q4_K through
//! `relaxed_q4_k`'s, each sub-block's sum multiplied by its scale as it is
//! widened (`DotForm::sum_dots`, `scale_mul`); repacked Q6_K through
//! `relaxed_q6_k`'s likewise. All equal the scalar `vec_dot` bit for bit.
//!
//! The group kernels (repacked Q4_0, Q4_1, Q5_0, Q8_0, Q4_K and Q6_K) and
//! the k-quants' integer primitives come in two forms with the same exact
//! sums, picked when the variant is chosen by how the engine
//! lowers the dot (`dot_saturates_in_i16`): on the i32 dot, one instruction
//! where the CPU has VNNI or SDOT, or on the i16 dot where the i32 dot
//! takes five instructions (V8 on x86 without AVX-VNNI, such as Zen 4),
//! the nibbles' four results summed in i16 lanes before one widening, each
//! Q8_0 result widened by a multiply-add with ones (Chromium's prompts on
//! Zen 4: Q4_0 21-44% faster, Q4_1 28-41%, Q8_0 26%; Gemma 3's Q4_K_M
//! tokens 7%).
//!
//! The module exists only in a build with relaxed-simd enabled (the npm
//! package's `-relaxed` builds, loaded where the engine runs relaxed SIMD
//! correctly: `npm/simd.js`).

#[cfg(all(target_feature = "simd128", target_feature = "relaxed-simd"))]
mod imp {
    use crate::wasm_arch::*;

    use crate::backend::cpu::group_tiles::{by_take, gemm_in_tiles, gemm_sums_in_tiles};
    use crate::backend::cpu::kernels::Kernels;
    use crate::backend::cpu::kquant_dot::{self, IntDots};
    use crate::backend::cpu::repack::{BlockQ4_0x8, X8I8_FLIP};
    use crate::backend::cpu::repack_q4_1::BlockQ4_1x8;
    use crate::backend::cpu::repack_q5_0::BlockQ5_0x8;
    use crate::backend::cpu::repack_q8_0::BlockQ8_0x8;
    use crate::backend::cpu::scalar::check_dot;
    use crate::backend::cpu::simd128::{
        activation_offsets, hsum_i32, lane_splat, load16, nibbles, opaque, q4_1_rows4,
        q4_1_x8_tile, q8_0_x8_tile, shr_bytes, shr_bytes_and, store16, unrolled, x8_half_load,
        Q4_1GroupSums, Q8_0GroupSums, ScaleWidening, Simd128Dots,
    };
    use crate::backend::cpu::wasm_q5_0::{q5_0_x8_tile, FifthBits, Q5_0GroupSums};
    use crate::backend::cpu::widen::f16_to_f32;
    use crate::tensor::blocks::*;

    // Safety: as in `simd128`: compiled only into a module built with
    // simd128 and relaxed-simd (an engine without them rejects the whole
    // module), so the intrinsics need no run-time check; loads are the
    // bounds-checked `load16`; each kernel checks its slices' lengths.

    // `q4_0_x8_tile` reads the 8x8 layout's nibbles as they are.
    const _: () = assert!(X8I8_FLIP == 0);

    /// The table for this engine: the group kernels and the k-quant dots
    /// in the form its lowering of the relaxed dot runs faster (`DotForm`).
    pub(in crate::backend::cpu) fn kernels(base: Kernels) -> Kernels {
        if dot_saturates_in_i16() {
            kernels_with::<I16Dots>(base)
        } else {
            kernels_with::<I32Dots>(base)
        }
    }

    /// The table in each form of its dots, whichever this engine would
    /// pick: both are tested on every engine.
    pub(in crate::backend::cpu) fn both_forms(base: Kernels) -> [Kernels; 2] {
        [
            kernels_with::<I32Dots>(base.clone()),
            kernels_with::<I16Dots>(base),
        ]
    }

    /// Whether the engine runs `i32x4.relaxed_dot_i8x16_i7x16_add_s` as x86
    /// without AVX-VNNI has it (V8: `pmaddubsw`, then `pmaddwd` by ones and
    /// an add, with the ones rebuilt for each dot: five instructions where
    /// `pmaddubsw` alone is the i16 dot). The 7-bit operand out of range
    /// tells the lowerings apart: 255 against 127 in every byte gives each
    /// lane 2·32767 there (`pmaddubsw` reads it unsigned and saturates each
    /// pair's i16 sum), 4·255·127 with VNNI's `vpdpbusd` (no i16 step) and
    /// -4·127 with SDOT (signed), the two where the i32 dot is one
    /// instruction.
    #[inline(never)]
    fn dot_saturates_in_i16() -> bool {
        let (a, b) = (opaque(i8x16_splat(127)), opaque(u8x16_splat(255)));
        i32x4_extract_lane::<0>(dot16(a, b)) == 2 * i16::MAX as i32
    }

    fn kernels_with<S: DotForm>(base: Kernels) -> Kernels {
        Kernels {
            vec_dot_q4_0_q8_0,
            vec_dot_q4_1_q8_1,
            vec_dot4_q4_1_q8_1: Some(vec_dot4_q4_1_q8_1),
            vec_dot_q4_k_q8_k: vec_dot_q4_k_q8_k::<S>,
            vec_dot4_q4_k_q8_k: Some(vec_dot4_q4_k_q8_k::<S>),
            vec_dot_q5_k_q8_k: vec_dot_q5_k_q8_k::<S>,
            vec_dot_q6_k_q8_k: vec_dot_q6_k_q8_k::<S>,
            vec_dot4_q6_k_q8_k: Some(vec_dot4_q6_k_q8_k::<S>),
            vec_dot_q2_k_q8_k: vec_dot_q2_k_q8_k::<S>,
            vec_dot_q3_k_q8_k: vec_dot_q3_k_q8_k::<S>,
            gemm_q4_0_x8i8_sums: Some(gemm_q4_0_x8i8_sums::<S>),
            gemm_q4_1_x8: Some(gemm_q4_1_x8::<S>),
            gemm_q8_0_x8: Some(gemm_q8_0_x8::<S>),
            gemm_q5_0_x8: Some(gemm_q5_0_x8::<S>),
            gemm_q4_k_x8: Some(crate::backend::cpu::relaxed_q4_k::gemm_q4_k_x8::<S>),
            gemm_q6_k_x8: Some(crate::backend::cpu::relaxed_q6_k::gemm_q6_k_x8::<S>),
            ..crate::backend::cpu::simd128::kernels(base)
        }
    }

    /// `acc` plus, per lane, the sum of four products a·b of the lane's
    /// bytes; every byte of `b` must be in 0..=127.
    #[inline(always)]
    fn dot_i7(a: v128, b: v128, acc: v128) -> v128 {
        i32x4_relaxed_dot_i8x16_i7x16_add(a, b, acc)
    }

    /// Σ a·u over sixteen bytes as four partial sums, `u` in 0..=127.
    #[inline(always)]
    fn dot16(a: v128, u: v128) -> v128 {
        dot_i7(a, u, i32x4_splat(0))
    }

    /// Σ q·y over a block's 32 nibbles (low nibbles with `y[..16]`, high
    /// with `y[16..]`), q in 0..=15.
    #[inline(always)]
    fn nibble_dot(lo: v128, hi: v128, y: &[i8; 32]) -> v128 {
        dot_i7(load16(&y[16..]), hi, dot16(load16(&y[..]), lo))
    }

    fn vec_dot_q4_0_q8_0(x: &[BlockQ4_0], y: &[BlockQ8_0]) -> f32 {
        check_dot(x, y);
        let mut sum = 0.0f32;
        let eight = u8x16_splat(8);
        for (x, y) in x.iter().zip(y) {
            let (lo, hi) = nibbles(&x.qs);
            let (y0, y1) = (load16(&y.qs[..]), load16(&y.qs[16..]));
            // Σ (q - 8)·y = Σ q·y - Σ 8·y.
            let qy = dot_i7(y1, hi, dot16(y0, lo));
            let eights = dot_i7(y1, eight, dot16(y0, eight));
            sum += hsum_i32(i32x4_sub(qy, eights)) as f32 * f16_to_f32(x.d) * f16_to_f32(y.d);
        }
        sum
    }

    fn vec_dot_q4_1_q8_1(x: &[BlockQ4_1], y: &[BlockQ8_1]) -> f32 {
        check_dot(x, y);
        let mut sum = 0.0f32;
        for (x, y) in x.iter().zip(y) {
            let (lo, hi) = nibbles(&x.qs);
            let s = hsum_i32(nibble_dot(lo, hi, &y.qs));
            sum +=
                (f16_to_f32(x.d) * f16_to_f32(y.d)) * s as f32 + f16_to_f32(x.m) * f16_to_f32(y.s);
        }
        sum
    }

    /// Four activation rows per weight row, in SIMD128's frame.
    fn vec_dot4_q4_1_q8_1(x: &[BlockQ4_1], y: [&[BlockQ8_1]; 4]) -> [f32; 4] {
        q4_1_rows4(x, y, |lo, hi, y| nibble_dot(lo, hi, &y.qs))
    }

    /// The 8x8 layout's product for any number of activation rows (one
    /// included: the GEMV of every generated token), taking the activation
    /// blocks' sums for the nibbles' offset, so each (group, activation
    /// block) pair no longer sums its activations itself.
    fn gemm_q4_0_x8i8_sums<S: DotForm>(
        group: &[BlockQ4_0x8],
        x: &[BlockQ8_0],
        sums: &[i32],
        n: usize,
        out: &mut [f32],
        stride: usize,
    ) {
        gemm_sums_in_tiles(group, x, sums, n, out, stride, |take, xs, ss, res| {
            let low = opaque(u8x16_splat(0x0F));
            by_take!(take, q4_0_x8_tile(group, xs, ss, res, low, S::default()))
        });
    }

    fn gemm_q4_1_x8<S: DotForm>(
        group: &[BlockQ4_1x8],
        x: &[BlockQ8_1],
        n: usize,
        out: &mut [f32],
        stride: usize,
    ) {
        gemm_in_tiles(group, x, n, out, stride, |take, xs, res| {
            let way = RelaxedSums::<S> {
                low: opaque(u8x16_splat(0x0F)),
                form: S::default(),
            };
            by_take!(take, q4_1_x8_tile(group, xs, res, &way))
        });
    }

    /// Repacked Q5_0's group kernel: `wasm_q5_0`'s tile, each block's
    /// values plus 16 (0..=31) the relaxed dot's 7-bit operand as the
    /// nibbles are in `gemm_q4_1_x8` (`DotForm::half_sums`).
    fn gemm_q5_0_x8<S: DotForm>(
        group: &[BlockQ5_0x8],
        x: &[BlockQ8_0],
        sums: &[i32],
        n: usize,
        out: &mut [f32],
        stride: usize,
    ) {
        gemm_sums_in_tiles(group, x, sums, n, out, stride, |take, xs, ss, res| {
            let fifth = FifthBits::new();
            by_take!(take, q5_0_x8_tile(group, xs, ss, res, fifth, &S::default()))
        });
    }

    impl<S: DotForm> Q5_0GroupSums for S {
        #[inline(always)]
        fn half_sums(&self, u: &[[v128; 2]; 4], y: &[i8; 32]) -> v128 {
            DotForm::half_sums(self, u, y)
        }
    }

    fn gemm_q8_0_x8<S: DotForm>(
        group: &[BlockQ8_0x8],
        x: &[BlockQ8_0],
        n: usize,
        out: &mut [f32],
        stride: usize,
    ) {
        gemm_in_tiles(group, x, n, out, stride, |take, xs, res| {
            let way = FlippedWeightsQ8_0 {
                split: SignSplitQ8_0::new(),
                ones: opaque(i8x16_splat(1)),
                form: S::default(),
            };
            by_take!(take, q8_0_x8_tile(group, xs, res, &way))
        });
    }

    /// Repacked Q8_0's sums on the relaxed dot with the activations' signs
    /// on the weights: |a| is the 7-bit operand, and where a < 0 the weight
    /// goes in with its bits flipped (w ^ m, m = -1 there), which is -w - 1
    /// for every byte, -128 included, so (w ^ m)·|a| = (-w - 1)·(-a) =
    /// w·a - |a|. The block's Σ|a| over its negative activations, the same
    /// for every row, is added back once per activation block. One dot and
    /// one XOR per 16-byte load of weights, against `SignSplitQ8_0`'s two
    /// dots. An activation block holding -128, whose magnitude is not a
    /// 7-bit value (lamina's quantizer writes none), takes `SignSplitQ8_0`'s
    /// way. The integer sums are the same, so results equal SIMD128's bit
    /// for bit.
    struct FlippedWeightsQ8_0<S> {
        split: SignSplitQ8_0,
        /// 1 in every byte (`opaque`).
        ones: v128,
        form: S,
    }

    impl<S: DotForm> Q8_0GroupSums for FlippedWeightsQ8_0<S> {
        #[inline(always)]
        fn sums(&self, b: &BlockQ8_0x8, y: &BlockQ8_0) -> [v128; 2] {
            let (v0, v1) = (load16(&y.qs[..16]), load16(&y.qs[16..]));
            let (u0, u1) = (i8x16_abs(v0), i8x16_abs(v1));
            // |-128| wraps to itself: the one magnitude with its top bit set.
            if i8x16_bitmask(v128_or(u0, u1)) != 0 {
                return self.split.sums(b, y);
            }
            let (m0, m1) = (i8x16_shr(v0, 7), i8x16_shr(v1, 7));
            // Σ|a| over the negative activations, spread so that lanes 0
            // and 1 hold all of it between them, and lanes 2 and 3 too:
            // each row's sums start there.
            let f = self.form;
            let t = f.dot(
                self.ones,
                v128_and(u1, m1),
                f.dot(self.ones, v128_and(u0, m0), i32x4_splat(0)),
            );
            let back = i32x4_add(t, i32x4_shuffle::<2, 3, 0, 1>(t, t));
            // u[c], m[c]: magnitudes and sign masks of activation bytes
            // 8c..8c + 8, in both halves.
            let (u, m) = (doubled_runs(u0, u1), doubled_runs(m0, m1));
            // s[pair]: lanes 0 and 1 row 2·pair's sums, 2 and 3 the next row's.
            let mut s = [back; 4];
            unrolled!(I in 0 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15; {
                let (k, pair) = (I / 4, I % 4);
                let w = load16(&b.qs[16 * I..16 * I + 16]);
                s[pair] = f.dot(v128_xor(w, m[k]), u[k], s[pair]);
            });
            [pair_rows(s[0], s[1]), pair_rows(s[2], s[3])]
        }
    }

    /// Repacked Q8_0's sums on the relaxed dot for any activation block
    /// (`FlippedWeightsQ8_0`'s way for one holding -128). Both operands are
    /// signed, so the activation byte goes in as its low seven bits and its
    /// sign: a = (a & 0x7F) - 128·[a < 0], and Σ w·a = dot(w, a & 0x7F) -
    /// 128·dot(w, [a < 0]), both second operands in 0..=127 (exact for every
    /// byte value of either side), made once per activation block for all
    /// eight rows: two dots per 16-byte load of weights. A load holds
    /// values 8k.. of two rows (`BlockQ8_0x8`), against eight activation
    /// bytes in both halves of a vector, as `DotForm::half_sums` does for Q4_0
    /// and Q4_1. The integer sums equal SIMD128's (`WidenedQ8_0`), and the
    /// tile scales them alike: results equal SIMD128's bit for bit.
    struct SignSplitQ8_0 {
        /// 0x7F in every byte (`opaque`).
        low7: v128,
    }

    impl SignSplitQ8_0 {
        /// For a kernel's loop: the mask made once (`opaque`).
        #[inline(always)]
        fn new() -> Self {
            Self {
                low7: opaque(u8x16_splat(0x7F)),
            }
        }
    }

    impl Q8_0GroupSums for SignSplitQ8_0 {
        #[inline(always)]
        fn sums(&self, b: &BlockQ8_0x8, y: &BlockQ8_0) -> [v128; 2] {
            // a[c]: activation bytes 8c..8c + 8 in both halves.
            let a = doubled_runs(load16(&y.qs[..16]), load16(&y.qs[16..]));
            let low = a.map(|v| v128_and(v, self.low7));
            let negative = a.map(|v| u8x16_shr(v, 7));
            // s[pair], n[pair]: lanes 0 and 1 row 2·pair's, 2 and 3 the
            // next row's.
            let mut s = [i32x4_splat(0); 4];
            let mut n = [i32x4_splat(0); 4];
            unrolled!(I in 0 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15; {
                let (k, pair) = (I / 4, I % 4);
                let w = load16(&b.qs[16 * I..16 * I + 16]);
                s[pair] = dot_i7(w, low[k], s[pair]);
                n[pair] = dot_i7(w, negative[k], n[pair]);
            });
            [0, 1].map(|h| {
                let (p, q) = (2 * h, 2 * h + 1);
                i32x4_sub(pair_rows(s[p], s[q]), i32x4_shl(pair_rows(n[p], n[q]), 7))
            })
        }
    }

    /// Four rows' sums from two vectors of two rows' partial sums each
    /// (lanes 0 and 1 one row's, 2 and 3 the next row's).
    #[inline(always)]
    pub(in crate::backend::cpu) fn pair_rows(p: v128, q: v128) -> v128 {
        i32x4_add(
            i32x4_shuffle::<0, 2, 4, 6>(p, q),
            i32x4_shuffle::<1, 3, 5, 7>(p, q),
        )
    }

    /// The four 8-byte runs of an activation block's two vectors (`p`
    /// bytes 0..16, `q` bytes 16..32, or values derived byte by byte),
    /// each in both halves of a vector: run c meets a group load of two
    /// rows' values 8c.. (`BlockQ8_0x8`, `BlockQ4_0x8`, `BlockQ4_1x8`).
    #[inline(always)]
    pub(in crate::backend::cpu) fn doubled_runs(p: v128, q: v128) -> [v128; 4] {
        [
            i64x2_shuffle::<0, 0>(p, p),
            i64x2_shuffle::<1, 1>(p, p),
            i64x2_shuffle::<0, 0>(q, q),
            i64x2_shuffle::<1, 1>(q, q),
        ]
    }

    /// Repacked Q4_1's sums on the relaxed dot (`DotForm::half_sums`).
    struct RelaxedSums<S> {
        /// 0x0F in every byte (`opaque`).
        low: v128,
        form: S,
    }

    impl<S: DotForm> Q4_1GroupSums for RelaxedSums<S> {
        type Weights = [[v128; 2]; 4];

        #[inline(always)]
        fn prepare(&self, b: &BlockQ4_1x8, h: usize) -> Self::Weights {
            half_nibbles(&b.qs, h, self.low)
        }

        #[inline(always)]
        fn sums(&self, _: &BlockQ4_1x8, w: &Self::Weights, _: usize, y: &BlockQ8_1) -> v128 {
            self.form.half_sums(w, &y.qs)
        }
    }

    /// The nibbles of an 8-row group block's four 16-byte loads that hold
    /// rows 4h..4h + 4 (`BlockQ4_1x8`, and `BlockQ4_0x8` outside aarch64,
    /// where its nibbles are stored as they are): `w[j]` holds the low and
    /// high nibbles of the half's load j (`x8_half_load`), values 8k.. and
    /// 16 + 8k.. (k = j / 2) of rows 4h + 2(j % 2) and the next. `low` is
    /// 0x0F in every byte.
    #[inline(always)]
    fn half_nibbles(qs: &[u8; 128], h: usize, low: v128) -> [[v128; 2]; 4] {
        let n = |j: usize| {
            let i = x8_half_load(h, j);
            let v = load16(&qs[16 * i..16 * i + 16]);
            [v128_and(v, low), v128_and(u16x8_shr(v, 4), low)]
        };
        [n(0), n(1), n(2), n(3)]
    }

    /// How the group kernels run the relaxed dot on this engine, in two
    /// forms with the same exact sums, the engine's faster one picked when
    /// the variant is chosen (`dot_saturates_in_i16`).
    pub(in crate::backend::cpu) trait DotForm: Copy + Default {
        /// Σ q·y of rows 4h..4h + 4 of an 8x8 group block against one
        /// activation block, q in 0..=31 (the nibbles of `half_nibbles`,
        /// Q5_0's values plus 16), in one vector: eight activation bytes
        /// in both halves of a vector meet a load of two rows, so each dot
        /// leaves two lanes per row (as SDOT does on NEON), and a pairwise
        /// add of two vectors gives four rows' sums. q is the dot's 7-bit
        /// operand as it is.
        fn half_sums(&self, w: &[[v128; 2]; 4], y: &[i8; 32]) -> v128;

        /// Σ a[k]·w[k] over `N` dots, w unsigned, in a form `scale_mul`
        /// takes: per i32 lane the sum of 4·N products, which the i16 form
        /// holds in two i16 lanes, so N·2·max(w)·128 must fit i16 (the
        /// k-quants' group kernels: four dots of nibbles, two of Q6_K's
        /// six-bit values).
        fn sum_dots<const N: usize>(&self, a: [v128; N], w: [v128; N]) -> v128;

        /// Signed scales as i16 lanes (lanes 0..4 one row's, 4..8 the next
        /// row's), shaped for `scale_mul`.
        fn scale_lanes(&self, s: v128) -> v128;

        /// Each i32 lane of `sum_dots`' `sum` times its row's scale, as i32.
        fn scale_mul(&self, sum: v128, scale: v128) -> v128;

        /// `acc` plus, per lane, the sum of four products a·u of the
        /// lane's bytes, u in 0..=127 (`dot_i7`).
        fn dot(&self, a: v128, u: v128, acc: v128) -> v128;

        /// Per lane, the sum of four products a·u of the lane's bytes, u
        /// in 0..=63 (2·63·128 fits i16 in one i16 step).
        fn one(a: v128, u: v128) -> v128;

        /// `one(a0, u0) + one(a1, u1)`, u in 0..=31 (two i16 steps of
        /// 2·31·128 fit i16, summed before one widening).
        fn pair(a0: v128, u0: v128, a1: v128, u1: v128) -> v128;
    }

    /// On the i32 dot: one SDOT or VNNI instruction a dot where the engine
    /// has them.
    #[derive(Clone, Copy, Default)]
    struct I32Dots;

    impl DotForm for I32Dots {
        /// The dots in i32 lanes.
        #[inline(always)]
        fn sum_dots<const N: usize>(&self, a: [v128; N], w: [v128; N]) -> v128 {
            let mut s = dot16(a[0], w[0]);
            for k in 1..N {
                s = dot_i7(a[k], w[k], s);
            }
            s
        }

        /// Each i32 lane's scale (the repeated i16 shifted down with its sign).
        #[inline(always)]
        fn scale_lanes(&self, s: v128) -> v128 {
            i32x4_shr(s, 16)
        }

        #[inline(always)]
        fn scale_mul(&self, sum: v128, scale: v128) -> v128 {
            i32x4_mul(sum, scale)
        }

        #[inline(always)]
        fn dot(&self, a: v128, u: v128, acc: v128) -> v128 {
            dot_i7(a, u, acc)
        }

        #[inline(always)]
        fn one(a: v128, u: v128) -> v128 {
            dot16(a, u)
        }

        #[inline(always)]
        fn pair(a0: v128, u0: v128, a1: v128, u1: v128) -> v128 {
            dot_i7(a1, u1, dot16(a0, u0))
        }

        #[inline(always)]
        fn half_sums(&self, w: &[[v128; 2]; 4], y: &[i8; 32]) -> v128 {
            // a[c]: activation bytes 8c..8c + 8 in both halves.
            let a = doubled_runs(load16(&y[..16]), load16(&y[16..]));
            // Lanes 0 and 1 hold row 4h + 2p's sums, 2 and 3 the next row's.
            let pair = |p: usize| {
                let ([l0, h0], [l1, h1]) = (w[p], w[2 + p]);
                dot_i7(
                    a[3],
                    h1,
                    dot_i7(a[1], l1, dot_i7(a[2], h0, dot16(a[0], l0))),
                )
            };
            pair_rows(pair(0), pair(1))
        }
    }

    /// On the i16 dot (`pmaddubsw` alone on x86), results summed in i16
    /// lanes before one widening as far as their values allow: four dots
    /// in `half_sums` (a lane is two products of a value q <= 31 and a byte,
    /// |q·a + q'·a'| <= 2·31·128 = 7936, and four stay within 31744), two
    /// in `pair`; Q8_0's, as large as 2·128·127, one at a time (`dot`).
    #[derive(Clone, Copy)]
    struct I16Dots {
        /// 1 in every i16 lane (`opaque`): `i32x4.dot_i16x8_s` by it widens
        /// in one instruction (`pmaddwd`), where V8 rebuilds the ones of
        /// `extadd_pairwise` for each use.
        ones: v128,
    }

    impl Default for I16Dots {
        #[inline(always)]
        fn default() -> Self {
            Self {
                ones: opaque(i16x8_splat(1)),
            }
        }
    }

    impl DotForm for I16Dots {
        /// The dots summed in i16 lanes, two products each.
        #[inline(always)]
        fn sum_dots<const N: usize>(&self, a: [v128; N], w: [v128; N]) -> v128 {
            let mut s = i16x8_relaxed_dot_i8x16_i7x16(a[0], w[0]);
            for k in 1..N {
                s = i16x8_add(s, i16x8_relaxed_dot_i8x16_i7x16(a[k], w[k]));
            }
            s
        }

        #[inline(always)]
        fn scale_lanes(&self, s: v128) -> v128 {
            s
        }

        /// The widening multiply: each pair of i16 lanes times the scale,
        /// added.
        #[inline(always)]
        fn scale_mul(&self, sum: v128, scale: v128) -> v128 {
            i32x4_dot_i16x8(sum, scale)
        }

        #[inline(always)]
        fn dot(&self, a: v128, u: v128, acc: v128) -> v128 {
            i32x4_add(
                acc,
                i32x4_dot_i16x8(i16x8_relaxed_dot_i8x16_i7x16(a, u), self.ones),
            )
        }

        #[inline(always)]
        fn one(a: v128, u: v128) -> v128 {
            i32x4_extadd_pairwise_i16x8(i16x8_relaxed_dot_i8x16_i7x16(a, u))
        }

        #[inline(always)]
        fn pair(a0: v128, u0: v128, a1: v128, u1: v128) -> v128 {
            i32x4_extadd_pairwise_i16x8(i16x8_add(
                i16x8_relaxed_dot_i8x16_i7x16(a0, u0),
                i16x8_relaxed_dot_i8x16_i7x16(a1, u1),
            ))
        }

        #[inline(always)]
        fn half_sums(&self, w: &[[v128; 2]; 4], y: &[i8; 32]) -> v128 {
            let a = doubled_runs(load16(&y[..16]), load16(&y[16..]));
            let d = |a: v128, u: v128| i16x8_relaxed_dot_i8x16_i7x16(a, u);
            // Lanes 0..4 hold row 4h + 2p's sums, 4..8 the next row's,
            // widened by `extadd_pairwise`: with `ones` in a register
            // Chromium's Q4_0 tokens ran 12-22% slower.
            let pair = |p: usize| {
                let ([l0, h0], [l1, h1]) = (w[p], w[2 + p]);
                let s = i16x8_add(
                    i16x8_add(d(a[0], l0), d(a[2], h0)),
                    i16x8_add(d(a[1], l1), d(a[3], h1)),
                );
                i32x4_extadd_pairwise_i16x8(s)
            };
            pair_rows(pair(0), pair(1))
        }
    }

    /// The 8x8 layout's eight rows times the first `A` rows of `xs`:
    /// `res[a][r]` = row r · activation row a, the nibbles' sums as
    /// `DotForm` makes them (each activation vector serves two loads,
    /// where the 4x4 layout splats four bytes per dot), with 8·Σy (from
    /// `ss`, the activation blocks' sums) taken off per block. Exact, then
    /// scaled in `vec_dot`'s order but for the last multiply, fused into
    /// the add: within rounding of the scalar `vec_dot` of its row.
    ///
    /// Each block goes in two halves, rows 0..4 then 4..8: eight nibble
    /// vectors live across the activation rows rather than sixteen, which
    /// with the eight accumulators overflowed x86's sixteen registers in
    /// V8 (122 of the loop's 540 instructions were spills). Chromium's
    /// Q4_0 prompts ran 10% faster, its tokens 8-21%.
    #[inline(always)]
    fn q4_0_x8_tile<const A: usize>(
        group: &[BlockQ4_0x8],
        xs: &[&[BlockQ8_0]; 4],
        ss: &[&[i32]; 4],
        res: &mut [[f32; 8]; 4],
        low: v128,
        form: impl DotForm,
    ) {
        let xs: [&[BlockQ8_0]; A] = std::array::from_fn(|a| &xs[a][..group.len()]);
        let ss: [&[i32]; A] = std::array::from_fn(|a| &ss[a][..group.len()]);
        let mut acc = [[f32x4_splat(0.0); 2]; A];
        let widen = ScaleWidening::opaque();
        for (bi, b) in group.iter().enumerate() {
            let [dw] = widen.block_scales([&b.d]);
            let dy = widen.activation_scales::<A>(std::array::from_fn(|a| xs[a][bi].d));
            // 8·Σy over each row's block (|Σy| <= 32·128), a lane each.
            let e = activation_offsets::<A>(&ss, bi, 3);
            unrolled!(H in 0 1; {
                let w = half_nibbles(&b.qs, H, low);
                // Unrolled by hand: as a loop, V8 kept `acc` in memory.
                unrolled!(I in 0 1 2 3; {
                    if I < A {
                        let s = form.half_sums(&w, &xs[I][bi].qs);
                        let dyi = lane_splat(dy, I);
                        let q = f32x4_convert_i32x4(i32x4_sub(s, lane_splat(e, I)));
                        acc[I][H] = f32x4_relaxed_madd(f32x4_mul(q, dw[H]), dyi, acc[I][H]);
                    }
                });
            });
        }
        for (res, acc) in res.iter_mut().zip(acc) {
            store16(&mut res[..4], acc[0]);
            store16(&mut res[4..], acc[1]);
        }
    }

    fn vec_dot_q4_k_q8_k<S: DotForm>(x: &[BlockQ4K], y: &[BlockQ8K]) -> f32 {
        check_dot(x, y);
        // SAFETY: the module is built with simd128 and relaxed-simd
        // (RelaxedDots's only requirement); lengths checked above.
        unsafe { kquant_dot::q4_k::<RelaxedDots<S>>(x, y) }
    }

    fn vec_dot4_q4_k_q8_k<S: DotForm>(x: &[BlockQ4K], y: [&[BlockQ8K]; 4]) -> [f32; 4] {
        // SAFETY: as in `vec_dot_q4_k_q8_k`; `q4_k4` checks the lengths.
        unsafe { kquant_dot::q4_k4::<RelaxedDots<S>>(x, y) }
    }

    fn vec_dot4_q6_k_q8_k<S: DotForm>(x: &[BlockQ6K], y: [&[BlockQ8K]; 4]) -> [f32; 4] {
        // SAFETY: as in `vec_dot_q4_k_q8_k`; `q6_k4` checks the lengths.
        unsafe { kquant_dot::q6_k4::<RelaxedDots<S>>(x, y) }
    }

    fn vec_dot_q5_k_q8_k<S: DotForm>(x: &[BlockQ5K], y: &[BlockQ8K]) -> f32 {
        check_dot(x, y);
        // SAFETY: as in `vec_dot_q4_k_q8_k`.
        unsafe { kquant_dot::q5_k::<RelaxedDots<S>>(x, y) }
    }

    fn vec_dot_q6_k_q8_k<S: DotForm>(x: &[BlockQ6K], y: &[BlockQ8K]) -> f32 {
        check_dot(x, y);
        // SAFETY: as in `vec_dot_q4_k_q8_k`.
        unsafe { kquant_dot::q6_k::<RelaxedDots<S>>(x, y) }
    }

    fn vec_dot_q2_k_q8_k<S: DotForm>(x: &[BlockQ2K], y: &[BlockQ8K]) -> f32 {
        check_dot(x, y);
        // SAFETY: as in `vec_dot_q4_k_q8_k`.
        unsafe { kquant_dot::q2_k::<RelaxedDots<S>>(x, y) }
    }

    fn vec_dot_q3_k_q8_k<S: DotForm>(x: &[BlockQ3K], y: &[BlockQ8K]) -> f32 {
        check_dot(x, y);
        // SAFETY: as in `vec_dot_q4_k_q8_k`.
        unsafe { kquant_dot::q3_k::<RelaxedDots<S>>(x, y) }
    }

    /// The k-quants' exact integer primitives on the relaxed dot: each
    /// unsigned value (nibble, 2-bit, 6-bit, bit) is the in-range operand,
    /// the dot in the engine's form (`DotForm::pair`, `DotForm::one`).
    struct RelaxedDots<S>(std::marker::PhantomData<S>);

    // The methods' safety contract is the trait's (the variant's features,
    // compiled in); they use only safe `load16`s of typed arrays.
    impl<S: DotForm> IntDots for RelaxedDots<S> {
        #[inline(always)]
        unsafe fn level_dots(q: &[u8; 16], a: &[i8; 32]) -> i32 {
            // The IQ4 grid holds negative values: SIMD128's kernel.
            // SAFETY: the same contract (simd128 is in this module too).
            unsafe { Simd128Dots::level_dots(q, a) }
        }

        #[inline(always)]
        unsafe fn nibble_dots(q: &[u8; 32], a: &[i8; 32], b: &[i8; 32]) -> (i32, i32) {
            let m = u8x16_splat(0x0F);
            let (q0, q1) = (load16(&q[..]), load16(&q[16..]));
            let lo = S::pair(
                load16(&a[..]),
                v128_and(q0, m),
                load16(&a[16..]),
                v128_and(q1, m),
            );
            let hi = S::pair(
                load16(&b[..]),
                shr_bytes(q0, 4),
                load16(&b[16..]),
                shr_bytes(q1, 4),
            );
            (hsum_i32(lo), hsum_i32(hi))
        }

        #[inline(always)]
        unsafe fn bit_sums(h: &[u8; 32], bit: u32, a: &[i8; 32], b: &[i8; 32]) -> (i32, i32) {
            let (h0, h1) = (load16(&h[..]), load16(&h[16..]));
            let sums = |bit: u32, v: &[i8; 32]| {
                let b0 = shr_bytes_and(h0, bit, 1);
                let b1 = shr_bytes_and(h1, bit, 1);
                hsum_i32(S::pair(load16(&v[..]), b0, load16(&v[16..]), b1))
            };
            (sums(bit, a), sums(bit + 1, b))
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
                // q in 0..=63; Σ (q - 32)·a = Σ q·a - Σ 32·a.
                // hb < 4, so a 16-bit shift keeps every bit in its byte.
                let q = v128_or(nib, u16x8_shl(hb, 4));
                let av = load16(&a[off..]);
                hsum_i32(i32x4_sub(S::one(av, q), S::one(av, u8x16_splat(32))))
            };
            (half(0), half(16))
        }

        #[inline(always)]
        unsafe fn crumb_dots(q: &[u8; 32], shift: u32, a: &[i8; 32]) -> (i32, i32) {
            let half = |off: usize| {
                let v = shr_bytes_and(load16(&q[off..]), shift, 3);
                hsum_i32(S::one(load16(&a[off..]), v))
            };
            (half(0), half(16))
        }

        #[inline(always)]
        unsafe fn masked_sums(h: &[u8; 32], bit: u32, a: &[i8; 32]) -> (i32, i32) {
            let half = |off: usize| {
                let set = shr_bytes_and(load16(&h[off..]), bit, 1);
                hsum_i32(S::one(load16(&a[off..]), set))
            };
            (half(0), half(16))
        }
    }
}

#[cfg(all(target_feature = "simd128", target_feature = "relaxed-simd"))]
pub(super) use imp::{both_forms, doubled_runs, kernels, pair_rows, DotForm};

/// Without relaxed-simd in the module the variant is not compiled, so this
/// table is never asked for; it is SIMD128's.
#[cfg(not(all(target_feature = "simd128", target_feature = "relaxed-simd")))]
pub(super) fn kernels(base: super::kernels::Kernels) -> super::kernels::Kernels {
    super::simd128::kernels(base)
}

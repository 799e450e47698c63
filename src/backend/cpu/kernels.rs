//! A variant's kernel table: plain `fn` pointers chosen once, when the variant is
//! selected, never re-dispatched per call. Kernels a variant does not provide
//! are the scalar ones.

use half::f16;

use super::act_rows::{BlockQ8_0x2, BlockQ8_0x4};
use super::features::CpuFeatures;
use super::repack::{self, BlockQ4_0x4, BlockQ4_0x8, RepackLayout};
use super::repack_q4_1::BlockQ4_1x8;
use super::repack_q4_k::BlockQ4Kx8;
use super::repack_q5_0::BlockQ5_0x8;
use super::repack_q6_k::BlockQ6Kx8;
use super::repack_q8_0::{BlockQ8_0x8, BlockQ8_0x8i4};
use super::variant::CpuVariant;
use super::{rows, scalar};
use crate::backend::ops::Rope;
use crate::tensor::blocks::*;

pub type QuantizeFn<B> = fn(&[f32], &mut [B]);
/// One group of repacked rows times one activation row; writes one output per row.
pub type GemvFn<G> = fn(&[G], &[BlockQ8_0], &mut [f32]);
/// One group of repacked rows times `n` activation rows stored one after the
/// other; output `r` of activation row `i` goes to `out[i * stride + r]`.
pub type GemmFn<G> = fn(&[G], &[BlockQ8_0], usize, &mut [f32], usize);
/// `GemmFn` with the activation rows also interleaved in blocks of rows
/// (`act_rows::interleave_rows`): `(group, blocks, x, n, out, stride)`;
/// rows past the last whole block of rows are read from `x`.
pub type InterleavedGemmFn<G, A> = fn(&[G], &[A], &[BlockQ8_0], usize, &mut [f32], usize);
/// `GemmFn` with each activation block's sum of quants
/// (`repack_q5_0::activation_sums`), for kernels that take an offset off
/// the weights through them.
pub type GemmSumsFn<G> = fn(&[G], &[BlockQ8_0], &[i32], usize, &mut [f32], usize);
/// `GemmSumsFn` for eight repacked Q5_0 rows.
pub type GemmQ5_0Fn = GemmSumsFn<BlockQ5_0x8>;
/// `GemmFn` for eight repacked Q4_K rows, with Q8_K activations.
pub type GemmQ4KFn = fn(&[BlockQ4Kx8], &[BlockQ8K], usize, &mut [f32], usize);
/// `GemmFn` for eight repacked Q4_1 rows, with Q8_1 activations.
pub type GemmQ4_1Fn = fn(&[BlockQ4_1x8], &[BlockQ8_1], usize, &mut [f32], usize);
/// `GemmFn` for eight repacked Q6_K rows, with Q8_K activations.
pub type GemmQ6KFn = fn(&[BlockQ6Kx8], &[BlockQ8K], usize, &mut [f32], usize);
pub type VecDotFn<X, Y> = fn(&[X], &[Y]) -> f32;
/// One weight row against four activation rows: the weight's blocks are
/// decoded once for all four. Each result equals the variant's `vec_dot` of
/// that pair bit for bit.
pub type VecDot4Fn<X, Y> = fn(&[X], [&[Y]; 4]) -> [f32; 4];
/// Four weight rows times every activation row, all f32 (the matmul passes
/// f16 weights widened and activations rounded to f16, so every product is
/// exact): `(w, x, out, stride, store)` sets `out[i * stride + r] = w[r] ·
/// x_i` for the activation rows `x_i` (`x` holds them back to back, each as
/// long as a weight row) and the first `store` (1..=4) weight rows. Each
/// output has its own accumulator and the same operations whichever rows
/// share its tile, so a row padded with copies gives the same values.
pub type TileF32Fn = fn([&[f32]; 4], &[f32], &mut [f32], usize, usize);
/// `TileF32Fn` with the weight rows as the file stores them (f16), each
/// value converted as it is loaded: for a generated token's one activation
/// row, widening a row into a buffer first would cost as much as the
/// product. Converting is exact, so the outputs equal `TileF32Fn`'s on the
/// widened rows bit for bit.
pub type TileF16Fn = fn([&[f16]; 4], &[f32], &mut [f32], usize, usize);
/// f16 weight rows times one activation row (a generated token's product):
/// `(w, x, out)` sets `out[r]` to row `r` of `w` (the rows back to back,
/// each as long as `x`) times `x`, for every `r < out.len()`. One call per
/// matrix piece walks the rows in order, one stream of memory, without a
/// frame per row; each row is summed as `TileF32Fn` sums it, so the outputs
/// equal a tile's on the widened rows bit for bit.
pub type GemvF16Fn = fn(&[f16], &[f32], &mut [f32]);

/// `out += p · v` (the attention's weighted sum of f32 V rows).
pub type AxpyFn<T> = fn(f32, &[T], &mut [f32]);
/// Steps of independent state columns of the gated DeltaNet `(columns,
/// key, query, decay, values, strength, reads)`: `rows::delta_net_columns`
/// says what it computes (every variant bit for bit).
pub type DeltaNetColumnsFn = fn(&mut [f32], &[f32], &[f32], f32, &[f32], f32, &mut [f32]);
/// One token's sums of a causal depthwise convolution `(taps, state, x,
/// out)`: `rows::causal_conv_sums` says what it computes (every variant
/// bit for bit).
pub type CausalConvFn = fn(&[f32], &[f32], &[f32], &mut [f32]);
/// Attention over cached f16 rows `(cache, row stride, offset of the head,
/// cells, per-cell or query values, out)`: `rows::scores_f16` and
/// `rows::wsum_f16` say what each computes.
pub type CachedRowsFn = fn(&[f16], usize, usize, &[u32], &[f32], &mut [f32]);
/// The same over cached f32 rows: `rows::scores_f32` and `rows::wsum_f32`.
pub type CachedRowsF32Fn = fn(&[f32], usize, usize, &[u32], &[f32], &mut [f32]);
/// A product of f32 matrices, `rows::gemm_f32` (every variant bit for bit).
pub type GemmF32Fn = fn(&rows::GemmShape, &[f32], &[f32], &mut [f32]);
/// `CachedRowsFn` for several query heads that share the cached rows (one
/// KV head): the heads' queries or per-cell values back to back, and their
/// outputs back to back, each head's equal bit for bit to a single-head
/// call; the last argument is the number of heads.
pub type CachedRowsHeadsFn = fn(&[f16], usize, usize, &[u32], &[f32], &mut [f32], usize);

/// Every kernel the engine calls through a variant. A table is built only
/// from a `SupportedVariant` (a witness that this CPU has the variant's
/// features), so safe code cannot reach a kernel the CPU lacks.
#[derive(Clone, Copy)]
pub struct Kernels {
    pub variant: CpuVariant,
    pub quantize_q8_0: QuantizeFn<BlockQ8_0>,
    pub quantize_q8_1: QuantizeFn<BlockQ8_1>,
    pub quantize_q8_k: QuantizeFn<BlockQ8K>,
    pub vec_dot_q4_0_q8_0: VecDotFn<BlockQ4_0, BlockQ8_0>,
    pub vec_dot_q4_1_q8_1: VecDotFn<BlockQ4_1, BlockQ8_1>,
    /// Where a variant has one; else products loop over `vec_dot_q4_1_q8_1`.
    pub vec_dot4_q4_1_q8_1: Option<VecDot4Fn<BlockQ4_1, BlockQ8_1>>,
    pub vec_dot_q5_0_q8_0: VecDotFn<BlockQ5_0, BlockQ8_0>,
    /// Where a variant has one; else products loop over `vec_dot_q5_0_q8_0`.
    pub vec_dot4_q5_0_q8_0: Option<VecDot4Fn<BlockQ5_0, BlockQ8_0>>,
    pub vec_dot_q5_1_q8_1: VecDotFn<BlockQ5_1, BlockQ8_1>,
    pub vec_dot_q8_0_q8_0: VecDotFn<BlockQ8_0, BlockQ8_0>,
    /// Where a variant has one; else products loop over `vec_dot_q8_0_q8_0`.
    pub vec_dot4_q8_0_q8_0: Option<VecDot4Fn<BlockQ8_0, BlockQ8_0>>,
    pub vec_dot_q4_k_q8_k: VecDotFn<BlockQ4K, BlockQ8K>,
    /// Where a variant decodes a weight block once for four activation
    /// rows; else products loop over `vec_dot_q4_k_q8_k`.
    pub vec_dot4_q4_k_q8_k: Option<VecDot4Fn<BlockQ4K, BlockQ8K>>,
    pub vec_dot_q5_k_q8_k: VecDotFn<BlockQ5K, BlockQ8K>,
    pub vec_dot_q6_k_q8_k: VecDotFn<BlockQ6K, BlockQ8K>,
    /// As `vec_dot4_q4_k_q8_k`.
    pub vec_dot4_q6_k_q8_k: Option<VecDot4Fn<BlockQ6K, BlockQ8K>>,
    pub vec_dot_q2_k_q8_k: VecDotFn<BlockQ2K, BlockQ8K>,
    pub vec_dot_q3_k_q8_k: VecDotFn<BlockQ3K, BlockQ8K>,
    pub vec_dot_iq4_nl_q8_0: VecDotFn<BlockIQ4NL, BlockQ8_0>,
    pub vec_dot_iq4_xs_q8_k: VecDotFn<BlockIQ4XS, BlockQ8K>,
    pub vec_dot_f16: VecDotFn<f16, f16>,
    pub vec_dot_f32: VecDotFn<f32, f32>,
    /// f16 matrix products in 4x2 tiles where a variant has them (each weight
    /// row converted once per two activation rows); else one `vec_dot_f16`
    /// per pair.
    pub tile_f32: Option<TileF32Fn>,
    /// The same tiles on f16 weight rows, converted in the kernel, where a
    /// variant has them (used for products with few activation rows).
    pub tile_f16: Option<TileF16Fn>,
    /// The same for one activation row over many weight rows, where a
    /// variant has it.
    pub gemv_f16: Option<GemvF16Fn>,
    /// The repacked Q4_0 layout this variant accelerates, if any.
    pub repack: Option<RepackLayout>,
    pub gemv_q4_0_x4i4: GemvFn<BlockQ4_0x4>,
    pub gemv_q4_0_x4i8: GemvFn<BlockQ4_0x4>,
    pub gemv_q4_0_x8i8: GemvFn<BlockQ4_0x8>,
    /// Matrix-matrix kernels where a variant has one (else GEMV per row).
    pub gemm_q4_0_x4i4: Option<GemmFn<BlockQ4_0x4>>,
    pub gemm_q4_0_x4i8: Option<GemmFn<BlockQ4_0x4>>,
    /// `gemm_q4_0_x4i4` with the activation rows also in quads
    /// (`act_rows`), where a variant has an SDOT-by-element kernel for it;
    /// used for four activation rows and more.
    pub gemm_q4_0_x4i4_quads: Option<InterleavedGemmFn<BlockQ4_0x4, BlockQ8_0x4>>,
    pub gemm_q4_0_x8i8: Option<GemmFn<BlockQ4_0x8>>,
    /// The same product with the activation rows also in pairs
    /// (`act_rows`), where a variant has an SMMLA kernel for it; used for
    /// two activation rows and more.
    pub gemm_q4_0_x8i8_pairs: Option<InterleavedGemmFn<BlockQ4_0x8, BlockQ8_0x2>>,
    /// The same product taking the activation blocks' sums, where a
    /// variant's kernel wants them (x86's and relaxed SIMD's take the
    /// nibbles' offset off through them): then used instead of `gemm_q4_0_x8i8`
    /// and `gemv_q4_0_x8i8`, for any number of activation rows.
    pub gemm_q4_0_x8i8_sums: Option<GemmSumsFn<BlockQ4_0x8>>,
    /// Eight interleaved Q5_0 rows at once, where a variant has it: Q5_0
    /// weights are then repacked at load (`repack_q5_0`).
    pub gemm_q5_0_x8: Option<GemmQ5_0Fn>,
    /// As `gemm_q5_0_x8`, for Q4_K (`repack_q4_k`).
    pub gemm_q4_k_x8: Option<GemmQ4KFn>,
    /// As `gemm_q5_0_x8`, for Q6_K (`repack_q6_k`).
    pub gemm_q6_k_x8: Option<GemmQ6KFn>,
    /// As `gemm_q5_0_x8`, for Q8_0 (`repack_q8_0`).
    pub gemm_q8_0_x8: Option<GemmFn<BlockQ8_0x8>>,
    /// The same product with the activation rows also in pairs
    /// (`act_rows`), where a variant has an SMMLA kernel for it; used for
    /// two activation rows and more.
    pub gemm_q8_0_x8_pairs: Option<InterleavedGemmFn<BlockQ8_0x8, BlockQ8_0x2>>,
    /// Q8_0's eight rows in runs of four bytes (`repack_q8_0::BlockQ8_0x8i4`),
    /// where a variant has a kernel for them: Q8_0 weights are then repacked
    /// so instead of as `gemm_q8_0_x8`'s.
    pub gemm_q8_0_x8i4: Option<GemmFn<BlockQ8_0x8i4>>,
    /// The same product with the activation rows also in quads (`act_rows`),
    /// used for four activation rows and more.
    pub gemm_q8_0_x8i4_quads: Option<InterleavedGemmFn<BlockQ8_0x8i4, BlockQ8_0x4>>,
    /// As `gemm_q5_0_x8`, for Q4_1 (`repack_q4_1`).
    pub gemm_q4_1_x8: Option<GemmQ4_1Fn>,
    // Element-wise and row kernels (scalar twins in rows.rs).
    pub rms_norm: fn(&[f32], &[f32], f32, &mut [f32]),
    pub layer_norm: fn(&mut [f32], &[f32], &[f32], f32),
    pub rope: fn(&Rope, &mut [f32], i32),
    pub silu_mul: fn(&mut [f32], &[f32]),
    pub gelu: fn(&mut [f32]),
    pub gelu_mul: fn(&mut [f32], &[f32]),
    /// One query's scores against cached f16 K rows.
    pub scores_f16: CachedRowsFn,
    /// The weighted sum of cached f16 V rows.
    pub wsum_f16: CachedRowsFn,
    /// `scores_f16` for the query heads of one KV head in one pass over the
    /// rows, each row widened once for all of them, where a variant has it
    /// (else `attention.rs` calls `scores_f16` per head).
    pub scores_f16_heads: Option<CachedRowsHeadsFn>,
    /// `wsum_f16` for the heads of one KV head in one pass, likewise.
    pub wsum_f16_heads: Option<CachedRowsHeadsFn>,
    pub axpy_f32: AxpyFn<f32>,
    pub delta_net_columns: DeltaNetColumnsFn,
    pub causal_conv: CausalConvFn,
    /// One query's scores against cached f32 K rows (BERT's attention),
    /// where a variant has one; else a `vec_dot_f32` per cell.
    pub scores_f32: Option<CachedRowsF32Fn>,
    /// The weighted sum of cached f32 V rows, where a variant has one; else
    /// an `axpy_f32` per cell.
    pub wsum_f32: Option<CachedRowsF32Fn>,
    /// f32 matrix products (attention over blocks of queries).
    pub gemm_f32: GemmF32Fn,
    /// A row's softmax with the polynomial exp (`rows::softmax_poly`, every
    /// variant bit for bit; attention over blocks of queries).
    pub softmax_poly: fn(&mut [f32]),
    /// f16 values to f32 (exact, so every variant gives the same bits);
    /// the slices must have the same length.
    pub widen_f16: fn(&[f16], &mut [f32]),
    /// f32 values rounded to the nearest f16 (ties to even), held as f32:
    /// ggml's f16 activations and attention inputs, in a form the f32
    /// kernels take (exact, so every variant gives the same bits); the
    /// slices must have the same length.
    pub round_f16: fn(&[f32], &mut [f32]),
    /// Whether f16 arithmetic is emulated in software (wasm32): products
    /// then widen each f16 weight row once instead of inside every dot.
    pub f16_in_software: bool,
}

impl Kernels {
    pub fn scalar() -> Kernels {
        Kernels {
            variant: CpuVariant::Scalar,
            quantize_q8_0: scalar::quantize_q8_0,
            quantize_q8_1: scalar::quantize_q8_1,
            quantize_q8_k: scalar::quantize_q8_k,
            vec_dot_q4_0_q8_0: scalar::vec_dot_q4_0_q8_0,
            vec_dot_q4_1_q8_1: scalar::vec_dot_q4_1_q8_1,
            vec_dot4_q4_1_q8_1: None,
            vec_dot_q5_0_q8_0: scalar::vec_dot_q5_0_q8_0,
            vec_dot4_q5_0_q8_0: None,
            vec_dot_q5_1_q8_1: scalar::vec_dot_q5_1_q8_1,
            vec_dot_q8_0_q8_0: scalar::vec_dot_q8_0_q8_0,
            vec_dot4_q8_0_q8_0: None,
            vec_dot_q4_k_q8_k: scalar::vec_dot_q4_k_q8_k,
            vec_dot4_q4_k_q8_k: None,
            vec_dot_q5_k_q8_k: scalar::vec_dot_q5_k_q8_k,
            vec_dot_q6_k_q8_k: scalar::vec_dot_q6_k_q8_k,
            vec_dot4_q6_k_q8_k: None,
            vec_dot_q2_k_q8_k: scalar::vec_dot_q2_k_q8_k,
            vec_dot_q3_k_q8_k: scalar::vec_dot_q3_k_q8_k,
            vec_dot_iq4_nl_q8_0: scalar::vec_dot_iq4_nl_q8_0,
            vec_dot_iq4_xs_q8_k: scalar::vec_dot_iq4_xs_q8_k,
            vec_dot_f16: scalar::vec_dot_f16,
            vec_dot_f32: scalar::vec_dot_f32,
            tile_f32: None,
            tile_f16: None,
            gemv_f16: None,
            repack: None,
            gemv_q4_0_x4i4: repack::gemv_q4_0_x4i4,
            gemv_q4_0_x4i8: repack::gemv_q4_0_x4i8,
            gemv_q4_0_x8i8: repack::gemv_q4_0_x8i8,
            gemm_q4_0_x4i4: None,
            gemm_q4_0_x4i8: None,
            gemm_q4_0_x8i8: None,
            gemm_q4_0_x8i8_pairs: None,
            gemm_q4_0_x4i4_quads: None,
            gemm_q8_0_x8_pairs: None,
            gemm_q8_0_x8i4: None,
            gemm_q8_0_x8i4_quads: None,
            gemm_q4_0_x8i8_sums: None,
            gemm_q5_0_x8: None,
            gemm_q4_k_x8: None,
            gemm_q6_k_x8: None,
            gemm_q4_1_x8: None,
            gemm_q8_0_x8: None,
            rms_norm: rows::rms_norm,
            layer_norm: rows::layer_norm,
            rope: rows::rope,
            silu_mul: rows::silu_mul,
            widen_f16: rows::widen_f16,
            round_f16: rows::round_f16,
            scores_f32: None,
            wsum_f32: None,
            gemm_f32: rows::gemm_f32,
            softmax_poly: rows::softmax_poly,
            gelu: rows::gelu,
            gelu_mul: rows::gelu_mul,
            scores_f16: rows::scores_f16,
            wsum_f16: rows::wsum_f16,
            scores_f16_heads: None,
            wsum_f16_heads: None,
            axpy_f32: rows::axpy_f32,
            delta_net_columns: rows::delta_net_columns,
            causal_conv: rows::causal_conv_sums,
            f16_in_software: cfg!(target_family = "wasm"),
        }
    }

    /// The table of a variant this CPU supports (the witness says so: the
    /// SIMD entries assume their features are present).
    pub fn for_variant(supported: SupportedVariant) -> Kernels {
        let SupportedVariant { variant, features } = supported;
        let features = &features;
        let scalar = Kernels::scalar();
        match variant {
            CpuVariant::Scalar => scalar,
            #[cfg(target_arch = "x86_64")]
            CpuVariant::Avx2 => super::avx2::kernels(scalar),
            #[cfg(target_arch = "x86_64")]
            CpuVariant::AvxVnni => super::avxvnni::kernels(scalar),
            #[cfg(target_arch = "x86_64")]
            CpuVariant::Avx512 => super::avx512::kernels(scalar),
            #[cfg(target_arch = "aarch64")]
            CpuVariant::Neon => super::neon::kernels(scalar),
            #[cfg(target_arch = "aarch64")]
            CpuVariant::NeonDotprod => super::neon::dotprod_kernels(scalar),
            #[cfg(target_arch = "aarch64")]
            CpuVariant::NeonI8mm => super::neon::i8mm_kernels(scalar),
            #[cfg(target_arch = "aarch64")]
            CpuVariant::Sve => super::sve::kernels(super::neon::best_neon(scalar), features),
            #[cfg(target_family = "wasm")]
            CpuVariant::Simd128 => super::simd128::kernels(scalar),
            #[cfg(target_family = "wasm")]
            CpuVariant::RelaxedSimd => super::relaxed_simd::kernels(scalar),
            // Not compiled for this architecture: never supported, never here.
            #[allow(unreachable_patterns)]
            _ => scalar,
        }
        .with_variant(variant, RepackLayout::for_variant(variant, features))
    }

    /// relaxed SIMD's table in each form of its group kernels (on the i32
    /// dot or on i16 sums; the engine's lowering of the dot picks one when
    /// the variant is chosen), so the tests check both on any engine.
    #[cfg(all(target_feature = "simd128", target_feature = "relaxed-simd"))]
    pub fn relaxed_simd_forms() -> Vec<Kernels> {
        let features = super::CpuFeatures::detect();
        let layout = RepackLayout::for_variant(CpuVariant::RelaxedSimd, &features);
        super::relaxed_simd::both_forms(Kernels::scalar())
            .into_iter()
            .map(|k| k.with_variant(CpuVariant::RelaxedSimd, layout))
            .collect()
    }

    fn with_variant(mut self, variant: CpuVariant, repack: Option<RepackLayout>) -> Kernels {
        self.variant = variant;
        self.repack = repack;
        self
    }
}

/// A variant checked against the features of the CPU this runs on: the only
/// way to a kernel table.
#[derive(Clone, Debug)]
pub struct SupportedVariant {
    variant: CpuVariant,
    features: CpuFeatures,
}

impl SupportedVariant {
    /// `variant` on this machine, or an error naming the missing features.
    pub fn check(variant: CpuVariant) -> crate::error::Result<SupportedVariant> {
        let features = CpuFeatures::detect();
        CpuVariant::force(variant.name(), &features)?;
        Ok(SupportedVariant { variant, features })
    }

    /// The best variant this machine supports.
    pub fn best() -> SupportedVariant {
        let features = CpuFeatures::detect();
        SupportedVariant {
            variant: CpuVariant::best(&features),
            features,
        }
    }

    pub fn variant(&self) -> CpuVariant {
        self.variant
    }

    pub fn features(&self) -> &CpuFeatures {
        &self.features
    }
}

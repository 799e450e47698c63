//! Repacked Q4_0 GEMV/GEMM against row-by-row `vec_dot`: every layout, with
//! each supported variant's kernels, on row counts that fill and that do not
//! fill a group. Integer sums are exact and blocks are scaled in the scalar
//! `vec_dot`'s order, so the results must be identical, but for relaxed
//! SIMD's 8x8 tile, which fuses each block's last multiply into its add
//! (`assert_q4_0_matches`).

mod common;

#[cfg(target_arch = "wasm32")]
use wasm_bindgen_test::wasm_bindgen_test as test;

use common::{ggml_test_values, Rng};
use lamina::backend::cpu::repack::{RepackLayout, RepackedQ4_0};
use lamina::backend::cpu::{CpuDevice, CpuVariant, Kernels};
use lamina::tensor::blocks::*;

const LAYOUTS: [RepackLayout; 3] = [RepackLayout::X4I4, RepackLayout::X4I8, RepackLayout::X8I8];

/// Every supported variant's table; for relaxed SIMD both forms of its
/// group kernels (the engine's lowering of the dot picks one at run time,
/// `Kernels::relaxed_simd_forms`).
fn supported_kernels() -> Vec<Kernels> {
    let device = CpuDevice::new(Some("scalar")).unwrap();
    #[allow(unused_mut)]
    let mut all: Vec<Kernels> = CpuVariant::compiled_variants()
        .into_iter()
        .filter(|v| v.supported(device.features()))
        .map(|v| device.kernels_for(v).unwrap())
        .collect();
    #[cfg(all(target_feature = "simd128", target_feature = "relaxed-simd"))]
    {
        assert!(all.iter().any(|k| k.variant == CpuVariant::RelaxedSimd));
        all.extend(Kernels::relaxed_simd_forms());
    }
    all
}

/// Asserts that a group kernel's output for a row of whole groups matches
/// the scalar twin's. Native kernels fuse each block's scaled integer sum
/// into the row's sum, as the twins do: bit-equal. SIMD128 has no fused
/// multiply-add, and relaxed SIMD's fuses only where the engine has one,
/// so wasm's kernels may round that product before adding it: each
/// of the row's `blocks` can add one rounding of its term, and the two sums
/// then round their additions differently (at most one rounding each per
/// block, one for a final add): within 2·(blocks + 2)·2⁻²⁴ × `magnitude`,
/// the sum of the blocks' terms' magnitudes.
fn assert_matches_twin(got: f32, twin: f32, blocks: usize, magnitude: f64, what: &str) {
    if cfg!(target_family = "wasm") {
        let bound = 2.0 * (blocks + 2) as f64 * 2f64.powi(-24) * magnitude;
        assert!(
            (got as f64 - twin as f64).abs() <= bound,
            "{what}: {got} vs twin {twin} (bound {bound})"
        );
    } else {
        assert_eq!(
            got.to_bits(),
            twin.to_bits(),
            "{what}: {got} vs twin {twin}"
        );
    }
}

/// Asserts a Q4_0 layout's output for a row of whole groups (weight blocks
/// `w`, activation blocks `x`) against the scalar `vec_dot`'s, `want`: bit
/// for bit, but for relaxed SIMD's 8x8 tile, whose `f32x4.relaxed_madd`
/// (one FMA where the engine has it) skips the rounding of each block's
/// scaled sum before the add, as the Q4_1 and Q8_0 twins do: within
/// `assert_matches_twin`'s bound, taken about the sum of the blocks'
/// terms' magnitudes.
fn assert_q4_0_matches(
    k: &Kernels,
    layout: RepackLayout,
    got: f32,
    want: f32,
    w: &[BlockQ4_0],
    x: &[BlockQ8_0],
    what: &str,
) {
    if k.variant == CpuVariant::RelaxedSimd && layout == RepackLayout::X8I8 {
        assert_matches_twin(got, want, w.len(), q4_0_magnitude(w, x), what);
    } else {
        assert_eq!(got.to_bits(), want.to_bits(), "{what}: {got} vs {want}");
    }
}

/// The sum of a Q4_0 row's block terms' magnitudes, |d(w)·d(a)·Σ (q - 8)·a|.
fn q4_0_magnitude(w: &[BlockQ4_0], x: &[BlockQ8_0]) -> f64 {
    w.iter()
        .zip(x)
        .map(|(b, y)| {
            let dot: i32 = (0..QK)
                .map(|j| {
                    let byte = b.qs[j % (QK / 2)];
                    let q = if j < QK / 2 { byte & 0x0F } else { byte >> 4 };
                    (q as i32 - 8) * y.qs[j] as i32
                })
                .sum();
            (b.d.to_f64() * y.d.to_f64() * dot as f64).abs()
        })
        .sum()
}

fn q4_0(x: &[f32]) -> Vec<BlockQ4_0> {
    let mut out = vec![BlockQ4_0::zeroed(); x.len() / QK];
    lamina::tensor::quants::q4_0::quantize(x, &mut out);
    out
}

fn q8_0(x: &[f32]) -> Vec<BlockQ8_0> {
    let mut out = vec![BlockQ8_0::zeroed(); x.len() / QK];
    lamina::tensor::quants::q8_0::quantize(x, &mut out);
    out
}

#[test]
fn gemv_equals_row_by_row_vec_dot() {
    let scalar = Kernels::scalar();
    let mut rng = Rng::new(5);
    for k in supported_kernels() {
        for layout in LAYOUTS {
            for rows in [1usize, 3, 4, 5, 8, 12, 13, 17] {
                for cols in [32usize, 64, 256, 576] {
                    let w = q4_0(&ggml_test_values(rng.next_u64(), rows * cols));
                    let x = q8_0(&ggml_test_values(rng.next_u64(), cols));
                    let packed = RepackedQ4_0::new(&w, rows, cols, layout).unwrap();
                    let mut out = vec![f32::NAN; rows];
                    packed.gemv(&k, &x, &mut out).unwrap();
                    let per_row = cols / QK;
                    // Rows in whole groups go through the layout's kernel, which
                    // sums in the scalar order; the rest through the variant's
                    // own vec_dot.
                    let whole = rows / layout.rows() * layout.rows();
                    for r in 0..rows {
                        let wr = &w[r * per_row..(r + 1) * per_row];
                        let what = format!(
                            "{} {} rows={rows} cols={cols} row {r}",
                            k.variant,
                            layout.name()
                        );
                        if r < whole {
                            let want = (scalar.vec_dot_q4_0_q8_0)(wr, &x);
                            assert_q4_0_matches(&k, layout, out[r], want, wr, &x, &what);
                        } else {
                            let want = (k.vec_dot_q4_0_q8_0)(wr, &x);
                            assert_eq!(
                                out[r].to_bits(),
                                want.to_bits(),
                                "{what}: {} vs {want}",
                                out[r]
                            );
                        }
                    }
                }
            }
        }
    }
}

#[test]
fn gemm_equals_gemv_per_activation_row() {
    let mut rng = Rng::new(6);
    for k in supported_kernels() {
        for layout in LAYOUTS {
            for rows in [12, 13] {
                let cols = 128;
                let w = q4_0(&ggml_test_values(rng.next_u64(), rows * cols));
                let packed = RepackedQ4_0::new(&w, rows, cols, layout).unwrap();
                // Up to a tile of eight rows and one more (neon-i8mm's
                // SMMLA tiles take eight).
                for n in 1..=9 {
                    let x = q8_0(&ggml_test_values(rng.next_u64(), n * cols));
                    let mut out = vec![f32::NAN; n * rows];
                    packed.gemm(&k, &x, n, &mut out).unwrap();
                    // The threads' entry point: two ranges of whole groups
                    // and the tail, the same values.
                    let split = layout.rows();
                    let mut head = vec![f32::NAN; n * split];
                    let mut rest = vec![f32::NAN; n * (rows - split)];
                    let mut sums = Vec::new();
                    lamina::backend::cpu::repack_q5_0::activation_sums(&x, &mut sums);
                    packed
                        .product_rows(&k, &x, &sums, n, 0..split, &mut head)
                        .unwrap();
                    packed
                        .product_rows(&k, &x, &sums, n, split..rows, &mut rest)
                        .unwrap();
                    // Where the kernel reads them, sums that do not match
                    // the activations are an error; elsewhere not read.
                    let short = packed.product_rows(&k, &x, &sums[1..], n, 0..split, &mut head);
                    assert_eq!(short.is_err(), packed.wants_sums(&k));
                    for i in 0..n {
                        let row = &out[i * rows..(i + 1) * rows];
                        assert_eq!(row[..split], head[i * split..(i + 1) * split]);
                        assert_eq!(
                            row[split..],
                            rest[i * (rows - split)..(i + 1) * (rows - split)]
                        );
                    }
                    for i in 0..n {
                        let mut one = vec![0f32; rows];
                        packed
                            .gemv(&k, &x[i * cols / QK..(i + 1) * cols / QK], &mut one)
                            .unwrap();
                        let got: Vec<u32> = out[i * rows..(i + 1) * rows]
                            .iter()
                            .map(|v| v.to_bits())
                            .collect();
                        let want: Vec<u32> = one.iter().map(|v| v.to_bits()).collect();
                        assert_eq!(
                            got,
                            want,
                            "{} {} rows={rows} n={n} act {i}",
                            k.variant,
                            layout.name()
                        );
                    }
                }
            }
        }
    }
}

#[test]
fn extreme_values_stay_exact() {
    // Nibbles at both ends (-8 and 7 with a scale of 1) against activations
    // at ±127 (a scale of 1): the largest products a block can hold. Every
    // float step is then exact, so each result is its integer sum.
    let (rows, cols) = (8, 128);
    let weight = |i: usize, sign: f32| if i % 5 < 2 { sign * 7.0 } else { -sign * 8.0 };
    for k in supported_kernels() {
        for layout in LAYOUTS {
            for (wv, xv) in [(1.0f32, 1.0f32), (-1.0, 1.0), (1.0, -1.0), (-1.0, -1.0)] {
                let w: Vec<f32> = (0..rows * cols).map(|i| weight(i, wv)).collect();
                let packed = RepackedQ4_0::new(&q4_0(&w), rows, cols, layout).unwrap();
                for n in [1, 4] {
                    let x = q8_0(&vec![xv * 127.0; n * cols]);
                    let mut out = vec![f32::NAN; n * rows];
                    packed.gemm(&k, &x, n, &mut out).unwrap();
                    for (i, got) in out.iter().enumerate() {
                        let r = i % rows;
                        let want: f32 = (0..cols)
                            .map(|c| weight(r * cols + c, wv) * xv * 127.0)
                            .sum();
                        assert_eq!(*got, want, "{} {} n={n} row {r}", k.variant, layout.name());
                    }
                }
            }
        }
    }
}

#[test]
fn layout_choice_per_variant() {
    use lamina::backend::cpu::{CpuFeatures, Feature::*};
    use RepackLayout::*;
    let cpu = |present: &[lamina::backend::cpu::Feature], sve_bytes| CpuFeatures {
        present: present.to_vec(),
        sve_bytes,
    };
    let layout = RepackLayout::for_variant;
    assert_eq!(
        layout(CpuVariant::Avx2, &cpu(&[Avx2, Fma, F16c], 0)),
        Some(X8I8)
    );
    let avx512 = [Avx2, Fma, F16c, Avx512f, Avx512bw, Avx512vl, Avx512vnni];
    assert_eq!(layout(CpuVariant::Avx512, &cpu(&avx512, 0)), Some(X8I8));
    let avx_vnni = [Avx2, Fma, F16c, AvxVnni];
    assert_eq!(layout(CpuVariant::AvxVnni, &cpu(&avx_vnni, 0)), Some(X8I8));
    let arm = [Neon, Dotprod, I8mm, Sve];
    // With i8mm, 8x8: its 16-byte loads are SMMLA's operands (two rows,
    // eight bytes each), at any SVE width.
    assert_eq!(layout(CpuVariant::Sve, &cpu(&arm, 32)), Some(X8I8));
    assert_eq!(layout(CpuVariant::Sve, &cpu(&arm, 16)), Some(X8I8));
    assert_eq!(layout(CpuVariant::Sve, &cpu(&arm, 64)), Some(X8I8));
    // With SDOT and no i8mm, 4x4 (SDOT by element).
    assert_eq!(layout(CpuVariant::Sve, &cpu(&arm[..2], 16)), Some(X4I4));
    assert_eq!(
        layout(CpuVariant::Sve, &cpu(&[Neon, Dotprod, Sve], 32)),
        Some(X4I4)
    );
    // A64FX: SVE-512 without dotprod or i8mm.
    assert_eq!(layout(CpuVariant::Sve, &cpu(&[Neon, Sve], 64)), Some(X8I8));
    assert_eq!(layout(CpuVariant::Sve, &cpu(&[Neon, Sve], 32)), Some(X8I8));
    assert_eq!(layout(CpuVariant::NeonI8mm, &cpu(&arm[..3], 0)), Some(X8I8));
    assert_eq!(
        layout(CpuVariant::NeonDotprod, &cpu(&arm[..2], 0)),
        Some(X4I4)
    );
    assert_eq!(layout(CpuVariant::Neon, &cpu(&arm[..1], 0)), None);
    // SIMD128's i16 products take four bytes of each row per load; the
    // relaxed dot takes eight of two rows, as Q4_1's tile does.
    assert_eq!(layout(CpuVariant::Simd128, &cpu(&[Simd128], 0)), Some(X4I4));
    assert_eq!(
        layout(CpuVariant::RelaxedSimd, &cpu(&[Simd128, RelaxedSimd], 0)),
        Some(X8I8)
    );
    assert_eq!(layout(CpuVariant::Scalar, &cpu(&[], 0)), None);
    let device = CpuDevice::new(None).unwrap();
    assert_eq!(
        device.kernels().repack,
        layout(device.variant(), device.features())
    );
}

#[test]
fn bad_shapes_are_errors() {
    let w = q4_0(&ggml_test_values(1, 4 * 64));
    assert!(RepackedQ4_0::new(&w, 4, 48, RepackLayout::X4I4).is_err());
    assert!(RepackedQ4_0::new(&w, 5, 64, RepackLayout::X4I4).is_err());
    let packed = RepackedQ4_0::new(&w, 4, 64, RepackLayout::X8I8).unwrap();
    let k = Kernels::scalar();
    let x = q8_0(&ggml_test_values(2, 64));
    assert!(packed.gemv(&k, &x[..1], &mut [0.0; 4]).is_err());
    assert!(packed.gemv(&k, &x, &mut [0.0; 3]).is_err());
    assert!(packed.gemm(&k, &x, 2, &mut [0.0; 8]).is_err());
}

mod q5_0 {
    //! Repacked Q5_0: eight interleaved rows per group, for variants with a
    //! group kernel. Every native variant's group kernel equals the scalar
    //! one bit for bit (exact integer sums, one FMA per block); the scalar
    //! one equals row-by-row `vec_dot` within rounding (|difference| <= 1e-3
    //! + 1e-5 × |value|: a wrong value or scale moves a result by 0.01 or
    //! more). wasm's (SIMD128, relaxed SIMD) take `vec_dot`'s float steps
    //! instead, having no fused multiply-add, and equal the scalar
    //! `vec_dot` of each row bit for bit (`wasm_q5_0`). The rows past the
    //! last group go through the variant's own `vec_dot`.

    // Named imports: a glob of the parent would bring its wasm `test` next
    // to the built-in attribute (ambiguous).
    use super::{q8_0, supported_kernels};
    use crate::common::{ggml_test_values, Rng};
    use lamina::backend::cpu::repack_q5_0::{self, activation_sums, RepackedQ5_0};
    use lamina::backend::cpu::{CpuVariant, Kernels};
    use lamina::tensor::blocks::*;
    #[cfg(target_arch = "wasm32")]
    use wasm_bindgen_test::wasm_bindgen_test as test;

    /// Whether a table's group kernel takes `vec_dot`'s float steps (the
    /// wasm variants') rather than the scalar group kernel's.
    pub(super) fn in_vec_dot_steps(k: &Kernels) -> bool {
        matches!(k.variant, CpuVariant::Simd128 | CpuVariant::RelaxedSimd)
    }

    fn q5_0(x: &[f32]) -> Vec<BlockQ5_0> {
        let mut out = vec![BlockQ5_0::zeroed(); x.len() / QK];
        lamina::tensor::quants::q5_0::quantize(x, &mut out);
        out
    }

    /// The scalar table with the scalar group kernel.
    fn scalar_table() -> Kernels {
        let mut scalar = Kernels::scalar();
        scalar.gemm_q5_0_x8 = Some(repack_q5_0::gemm_q5_0_x8);
        scalar
    }

    /// The scalar table, and every supported variant's table that has a
    /// group kernel.
    fn tables() -> Vec<Kernels> {
        let mut all = vec![scalar_table()];
        all.extend(
            supported_kernels()
                .into_iter()
                .filter(|k| k.gemm_q5_0_x8.is_some()),
        );
        all
    }

    /// `packed`'s rows `rows` times the `n` activation rows `x`.
    fn product(
        k: &Kernels,
        packed: &RepackedQ5_0,
        x: &[BlockQ8_0],
        n: usize,
        rows: std::ops::Range<usize>,
    ) -> Vec<f32> {
        let mut sums = Vec::new();
        activation_sums(x, &mut sums);
        let mut out = vec![f32::NAN; n * rows.len()];
        packed.product_rows(k, x, &sums, n, rows, &mut out).unwrap();
        out
    }

    #[test]
    fn products_match_the_scalar_kernel_and_vec_dot() {
        let scalar = Kernels::scalar();
        let mut rng = Rng::new(7);
        for rows in [8usize, 13, 16, 24] {
            for cols in [32usize, 64, 576] {
                for n in [1usize, 2, 3, 4, 5, 9] {
                    let w = q5_0(&ggml_test_values(rng.next_u64(), rows * cols));
                    let x = q8_0(&ggml_test_values(rng.next_u64(), n * cols));
                    let packed = RepackedQ5_0::new(&w, rows, cols).unwrap();
                    let per_row = cols / QK;
                    let whole = rows / 8 * 8;
                    let twin = product(&scalar_table(), &packed, &x, n, 0..rows);
                    for i in 0..n {
                        let xi = &x[i * per_row..(i + 1) * per_row];
                        for r in 0..whole {
                            let want =
                                (scalar.vec_dot_q5_0_q8_0)(&w[r * per_row..(r + 1) * per_row], xi);
                            let got = twin[i * rows + r];
                            assert!(
                                (got - want).abs() <= 1e-3 + 1e-5 * want.abs(),
                                "rows={rows} cols={cols} n={n} act {i} row {r}: {got} vs {want}"
                            );
                        }
                    }
                    for k in tables() {
                        // Every piece a thread could be given: whole groups.
                        for start in (0..rows).step_by(8) {
                            for end in (start + 1..=rows).filter(|&e| e % 8 == 0 || e == rows) {
                                let len = end - start;
                                let out = product(&k, &packed, &x, n, start..end);
                                for i in 0..n {
                                    let xi = &x[i * per_row..(i + 1) * per_row];
                                    for r in start..end {
                                        let row = &w[r * per_row..(r + 1) * per_row];
                                        let want = if r >= whole {
                                            (k.vec_dot_q5_0_q8_0)(row, xi)
                                        } else if in_vec_dot_steps(&k) {
                                            (scalar.vec_dot_q5_0_q8_0)(row, xi)
                                        } else {
                                            twin[i * rows + r]
                                        };
                                        let got = out[i * len + r - start];
                                        assert_eq!(
                                            got.to_bits(),
                                            want.to_bits(),
                                            "{} rows={rows} cols={cols} n={n} piece {start}..{end} act {i} row {r}: {got} vs {want}",
                                            k.variant
                                        );
                                    }
                                }
                            }
                        }
                    }
                }
            }
        }
    }

    #[test]
    fn extreme_values_stay_exact() {
        // Weights at both ends of Q5_0's range and activations at ±127: the
        // 16-bit partial sums are at their largest. Small scales keep every
        // float step exact, so the results are the integer sums exactly.
        let cols = 64;
        for k in tables() {
            for (wv, xv) in [(1.0f32, 1.0f32), (-1.0, 1.0), (1.0, -1.0), (-1.0, -1.0)] {
                let w: Vec<f32> = (0..8 * cols)
                    .map(|i| if i % 3 == 0 { wv * 15.0 } else { -wv * 16.0 })
                    .collect();
                let w = q5_0(&w);
                let x = q8_0(&vec![xv * 127.0; cols]);
                let packed = RepackedQ5_0::new(&w, 8, cols).unwrap();
                let out = product(&k, &packed, &x, 1, 0..8);
                for r in 0..8 {
                    let want: f32 = (0..cols)
                        .map(|i| {
                            let v = if (r * cols + i) % 3 == 0 {
                                wv * 15.0
                            } else {
                                -wv * 16.0
                            };
                            v * xv * 127.0
                        })
                        .sum();
                    assert_eq!(out[r], want, "{} row {r}", k.variant);
                }
            }
        }
    }
    #[test]
    fn bad_shapes_are_errors() {
        let w = q5_0(&ggml_test_values(1, 8 * 64));
        assert!(RepackedQ5_0::new(&w, 8, 48).is_err());
        assert!(RepackedQ5_0::new(&w, 9, 64).is_err());
        let packed = RepackedQ5_0::new(&w, 8, 64).unwrap();
        let k = Kernels::scalar();
        let x = q8_0(&ggml_test_values(2, 64));
        let sums = vec![0; 2];
        let mut out = [0.0; 8];
        assert!(packed
            .product_rows(&k, &x[..1], &sums, 1, 0..8, &mut out)
            .is_err());
        assert!(packed
            .product_rows(&k, &x, &sums[..1], 1, 0..8, &mut out)
            .is_err());
        assert!(packed
            .product_rows(&k, &x, &sums, 1, 0..4, &mut out[..4])
            .is_err());
        assert!(packed
            .product_rows(&k, &x, &sums, 1, 0..9, &mut out)
            .is_err());
        assert!(packed
            .product_rows(&k, &x, &sums, 2, 0..8, &mut out)
            .is_err());
    }
}

mod q8_0_groups {
    //! Repacked Q8_0: eight interleaved rows per group, for variants with a
    //! group kernel. Every native variant's group kernel equals the scalar
    //! one bit for bit (exact integer sums, one FMA per block); wasm's,
    //! without a fused multiply-add, within `assert_matches_twin`'s bound;
    //! the scalar one equals row-by-row `vec_dot` within rounding
    //! (|difference| <= 1e-3 + 1e-5 × |value|); the rows past the last group
    //! go through `vec_dot`.

    use super::{assert_matches_twin, q8_0, supported_kernels};
    use crate::common::{ggml_test_values, Rng};
    use lamina::backend::cpu::act_rows::interleave_rows;
    use lamina::backend::cpu::repack_q8_0::{self, RepackedQ8_0};
    use lamina::backend::cpu::Kernels;
    use lamina::tensor::blocks::*;
    #[cfg(target_arch = "wasm32")]
    use wasm_bindgen_test::wasm_bindgen_test as test;

    fn scalar_table() -> Kernels {
        let mut scalar = Kernels::scalar();
        scalar.gemm_q8_0_x8 = Some(repack_q8_0::gemm_q8_0_x8);
        scalar
    }

    /// The sum of a row's block terms' magnitudes, |d(w)·d(a)·Σ q·a|.
    pub(super) fn q8_0_magnitude(w: &[BlockQ8_0], x: &[BlockQ8_0]) -> f64 {
        w.iter()
            .zip(x)
            .map(|(b, y)| {
                let dot: i32 =
                    b.qs.iter()
                        .zip(&y.qs)
                        .map(|(&q, &a)| q as i32 * a as i32)
                        .sum();
                (b.d.to_f64() * y.d.to_f64() * dot as f64).abs()
            })
            .sum()
    }

    fn product(
        k: &Kernels,
        packed: &RepackedQ8_0,
        x: &[BlockQ8_0],
        n: usize,
        rows: std::ops::Range<usize>,
    ) -> Vec<f32> {
        let mut out = vec![f32::NAN; n * rows.len()];
        packed.product_rows(k, x, n, rows, &mut out).unwrap();
        out
    }

    /// The same product with the activations in pairs, where the variant
    /// takes them (`act_rows`; neon-i8mm's SMMLA tiles).
    fn product_paired(
        k: &Kernels,
        packed: &RepackedQ8_0,
        x: &[BlockQ8_0],
        n: usize,
        rows: std::ops::Range<usize>,
    ) -> Option<Vec<f32>> {
        if !RepackedQ8_0::wants_pairs(k, n) {
            return None;
        }
        let mut pairs = Vec::new();
        let workers = lamina::parallel::Workers::new(1).unwrap();
        interleave_rows(&workers, x, n, packed.cols() / QK, &mut pairs);
        let mut out = vec![f32::NAN; n * rows.len()];
        // Pairs that do not match the activations are an error.
        assert!(packed
            .product_rows_pairs(k, x, &pairs[1..], n, rows.clone(), &mut out)
            .is_err());
        packed
            .product_rows_pairs(k, x, &pairs, n, rows, &mut out)
            .unwrap();
        Some(out)
    }

    #[test]
    fn products_match_the_scalar_kernel_and_vec_dot() {
        let scalar = Kernels::scalar();
        let mut tables = vec![scalar_table()];
        tables.extend(
            supported_kernels()
                .into_iter()
                .filter(|k| k.gemm_q8_0_x8.is_some()),
        );
        let mut rng = Rng::new(9);
        for rows in [8usize, 13, 16] {
            for cols in [32usize, 576] {
                for n in [1usize, 3, 4, 6] {
                    let w = q8_0(&ggml_test_values(rng.next_u64(), rows * cols));
                    let x = q8_0(&ggml_test_values(rng.next_u64(), n * cols));
                    let packed = RepackedQ8_0::new(&w, rows, cols).unwrap();
                    let per_row = cols / QK;
                    let whole = rows / 8 * 8;
                    let twin = product(&scalar_table(), &packed, &x, n, 0..rows);
                    for i in 0..n {
                        let xi = &x[i * per_row..(i + 1) * per_row];
                        for r in 0..rows {
                            let wr = &w[r * per_row..(r + 1) * per_row];
                            let want = (scalar.vec_dot_q8_0_q8_0)(wr, xi);
                            let got = twin[i * rows + r];
                            assert!(
                                (got - want).abs() <= 1e-3 + 1e-5 * want.abs(),
                                "rows={rows} cols={cols} n={n} act {i} row {r}: {got} vs {want}"
                            );
                        }
                    }
                    for k in &tables {
                        for start in (0..rows).step_by(8) {
                            for end in (start + 1..=rows).filter(|&e| e % 8 == 0 || e == rows) {
                                let len = end - start;
                                let out = product(k, &packed, &x, n, start..end);
                                if let Some(paired) = product_paired(k, &packed, &x, n, start..end)
                                {
                                    let bits = |v: &[f32]| {
                                        v.iter().map(|f| f.to_bits()).collect::<Vec<_>>()
                                    };
                                    assert_eq!(
                                        bits(&paired),
                                        bits(&out),
                                        "{} paired rows={rows} cols={cols} n={n} piece {start}..{end}",
                                        k.variant
                                    );
                                }
                                for i in 0..n {
                                    let xi = &x[i * per_row..(i + 1) * per_row];
                                    for r in start..end {
                                        let wr = &w[r * per_row..(r + 1) * per_row];
                                        let got = out[i * len + r - start];
                                        let what = format!(
                                            "{} rows={rows} cols={cols} n={n} piece {start}..{end} act {i} row {r}",
                                            k.variant
                                        );
                                        if r < whole {
                                            let twin = twin[i * rows + r];
                                            let magnitude = q8_0_magnitude(wr, xi);
                                            assert_matches_twin(
                                                got, twin, per_row, magnitude, &what,
                                            );
                                        } else {
                                            let want = (k.vec_dot_q8_0_q8_0)(wr, xi);
                                            assert_eq!(got.to_bits(), want.to_bits(), "{what}");
                                        }
                                    }
                                }
                            }
                        }
                    }
                }
            }
        }
    }

    #[test]
    fn extreme_values_stay_exact() {
        // Weights at -128 (a file may hold it; relaxed SIMD's kernel flips
        // it to 127) or -127, and 127; activations at ±127 (and -128,
        // below): the 16-bit pair sums at their largest. Scales of 1 keep
        // the float steps exact: the results are the integer sums.
        let cols = 64;
        let mut tables = vec![scalar_table()];
        tables.extend(
            supported_kernels()
                .into_iter()
                .filter(|k| k.gemm_q8_0_x8.is_some()),
        );
        // Activations of -128 too where every kernel takes them: wasm's
        // (lamina's quantizer writes none; x86's sign trick would wrap).
        let activations: &[i8] = if cfg!(target_family = "wasm") {
            &[127, -127, -128]
        } else {
            &[127, -127]
        };
        for k in &tables {
            for (xv, low) in activations.iter().flat_map(|&x| [(x, -128i8), (x, -127)]) {
                let mut w = q8_0(&ggml_test_values(3, 8 * cols));
                for (i, b) in w.iter_mut().enumerate() {
                    b.d = half::f16::ONE;
                    b.qs = std::array::from_fn(|j| if (i + j) % 3 == 0 { low } else { 127 });
                }
                // One activation row (the GEMV) and four (the tiles: SMMLA
                // with i8mm).
                for n in [1, 4] {
                    let mut x = q8_0(&ggml_test_values(4, n * cols));
                    for b in x.iter_mut() {
                        b.d = half::f16::ONE;
                        b.qs = [xv; QK];
                    }
                    let packed = RepackedQ8_0::new(&w, 8, cols).unwrap();
                    let out = product(k, &packed, &x, n, 0..8);
                    let paired = product_paired(k, &packed, &x, n, 0..8);
                    for (i, got) in out.iter().chain(paired.iter().flatten()).enumerate() {
                        let r = i % 8;
                        let want: i32 = w[r * 2..r * 2 + 2]
                            .iter()
                            .flat_map(|b| b.qs)
                            .map(|q| q as i32 * xv as i32)
                            .sum();
                        let what = format!(
                            "{} n={n} output {i}: activations {xv}, weights {low} and 127",
                            k.variant
                        );
                        assert_eq!(*got, want as f32, "{what}");
                    }
                }
            }
        }
    }
}

mod q8_0_x8i4_groups {
    //! Repacked Q8_0 in runs of four bytes (`BlockQ8_0x8i4`, for
    //! neon-dotprod). Its scalar twin equals the eight-byte layout's bit for
    //! bit (the same exact sums and FMAs); every variant's kernel for it
    //! equals the twin bit for bit, with the activations as rows and, where
    //! the variant takes them, in quads; the rows past the last group go
    //! through the variant's `vec_dot`.

    use super::{q8_0, supported_kernels};
    use crate::common::{ggml_test_values, Rng};
    use lamina::backend::cpu::act_rows::interleave_rows;
    use lamina::backend::cpu::repack_q8_0::{self, RepackedQ8_0, RepackedQ8_0x8i4};
    use lamina::backend::cpu::Kernels;
    use lamina::tensor::blocks::*;
    #[cfg(target_arch = "wasm32")]
    use wasm_bindgen_test::wasm_bindgen_test as test;

    /// The scalar table with the twins of both Q8_0 layouts.
    fn twin_table() -> Kernels {
        let mut scalar = Kernels::scalar();
        scalar.gemm_q8_0_x8 = Some(repack_q8_0::gemm_q8_0_x8);
        scalar.gemm_q8_0_x8i4 = Some(repack_q8_0::gemm_q8_0_x8i4);
        scalar
    }

    fn tables() -> Vec<Kernels> {
        let mut tables = vec![twin_table()];
        tables.extend(
            supported_kernels()
                .into_iter()
                .filter(|k| k.gemm_q8_0_x8i4.is_some()),
        );
        tables
    }

    fn bits(v: &[f32]) -> Vec<u32> {
        v.iter().map(|f| f.to_bits()).collect()
    }

    /// The product through `k`'s kernels, and, where `k` takes quads, the
    /// same product with them (after checking that quads which do not match
    /// the activations are an error).
    fn products(
        k: &Kernels,
        packed: &RepackedQ8_0x8i4,
        x: &[BlockQ8_0],
        n: usize,
        rows: std::ops::Range<usize>,
    ) -> (Vec<f32>, Option<Vec<f32>>) {
        let mut out = vec![f32::NAN; n * rows.len()];
        packed
            .product_rows(k, x, n, rows.clone(), &mut out)
            .unwrap();
        if !RepackedQ8_0x8i4::wants_quads(k, n) {
            return (out, None);
        }
        let mut quads = Vec::new();
        let workers = lamina::parallel::Workers::new(1).unwrap();
        interleave_rows(&workers, x, n, packed.cols() / QK, &mut quads);
        let mut with_quads = vec![f32::NAN; n * rows.len()];
        assert!(packed
            .product_rows_quads(k, x, &quads[1..], n, rows.clone(), &mut with_quads)
            .is_err());
        packed
            .product_rows_quads(k, x, &quads, n, rows, &mut with_quads)
            .unwrap();
        (out, Some(with_quads))
    }

    #[test]
    fn products_match_the_twin() {
        let twin_k = twin_table();
        let mut rng = Rng::new(19);
        for rows in [8usize, 13, 16] {
            for cols in [32usize, 576] {
                // Up to two quads and one row more.
                for n in [1usize, 3, 4, 6, 9] {
                    let w = q8_0(&ggml_test_values(rng.next_u64(), rows * cols));
                    let x = q8_0(&ggml_test_values(rng.next_u64(), n * cols));
                    let packed = RepackedQ8_0x8i4::new(&w, rows, cols).unwrap();
                    let per_row = cols / QK;
                    let whole = rows / 8 * 8;
                    let mut twin = vec![f32::NAN; n * rows];
                    packed
                        .product_rows(&twin_k, &x, n, 0..rows, &mut twin)
                        .unwrap();
                    let mut runs8 = vec![f32::NAN; n * rows];
                    RepackedQ8_0::new(&w, rows, cols)
                        .unwrap()
                        .product_rows(&twin_k, &x, n, 0..rows, &mut runs8)
                        .unwrap();
                    assert_eq!(bits(&twin), bits(&runs8), "rows={rows} cols={cols} n={n}");
                    for k in tables() {
                        for start in (0..rows).step_by(8) {
                            for end in (start + 1..=rows).filter(|&e| e % 8 == 0 || e == rows) {
                                let len = end - start;
                                let what = format!(
                                    "{} rows={rows} cols={cols} n={n} piece {start}..{end}",
                                    k.variant
                                );
                                let (out, quads) = products(&k, &packed, &x, n, start..end);
                                if let Some(quads) = quads {
                                    assert_eq!(bits(&quads), bits(&out), "{what} quads");
                                }
                                for i in 0..n {
                                    let xi = &x[i * per_row..(i + 1) * per_row];
                                    for r in start..end {
                                        let got = out[i * len + r - start];
                                        let want = if r < whole {
                                            twin[i * rows + r]
                                        } else {
                                            let wr = &w[r * per_row..(r + 1) * per_row];
                                            (k.vec_dot_q8_0_q8_0)(wr, xi)
                                        };
                                        assert_eq!(
                                            got.to_bits(),
                                            want.to_bits(),
                                            "{what} act {i} row {r}"
                                        );
                                    }
                                }
                            }
                        }
                    }
                }
            }
        }
    }

    #[test]
    fn extreme_values_stay_exact() {
        // As for the eight-byte runs: weights at -128 and 127, activations
        // at ±127, scales of 1: every result is its integer sum.
        let cols = 64;
        for k in tables() {
            for xv in [127i8, -127] {
                let mut w = q8_0(&ggml_test_values(3, 8 * cols));
                for (i, b) in w.iter_mut().enumerate() {
                    b.d = half::f16::ONE;
                    b.qs = std::array::from_fn(|j| if (i + j) % 3 == 0 { -128 } else { 127 });
                }
                for n in [1, 4] {
                    let mut x = q8_0(&ggml_test_values(4, n * cols));
                    for b in x.iter_mut() {
                        b.d = half::f16::ONE;
                        b.qs = [xv; QK];
                    }
                    let packed = RepackedQ8_0x8i4::new(&w, 8, cols).unwrap();
                    let (out, quads) = products(&k, &packed, &x, n, 0..8);
                    for (i, got) in out.iter().chain(quads.iter().flatten()).enumerate() {
                        let r = i % 8;
                        let want: i32 = w[r * 2..r * 2 + 2]
                            .iter()
                            .flat_map(|b| b.qs)
                            .map(|q| q as i32 * xv as i32)
                            .sum();
                        assert_eq!(*got, want as f32, "{} n={n} output {i}", k.variant);
                    }
                }
            }
        }
    }
}

mod q4_1_groups {
    //! Repacked Q4_1: eight interleaved rows per group, for variants with a
    //! group kernel. Every native variant's group kernel equals the scalar
    //! one bit for bit (exact integer sums, one FMA per block for them and
    //! one for the minimums' terms); wasm's, without a fused multiply-add,
    //! within `assert_matches_twin`'s bound; the scalar one and row-by-row
    //! `vec_dot` are both within rounding of the product in f64
    //! (|difference| <= 1e-4 +
    //! 1e-5 × the sum of the blocks' terms' magnitudes: the minimums' terms
    //! cancel much of the rest, so a result can be far smaller than its
    //! terms); the rows past the last group go through the variant's own
    //! `vec_dot`.

    use super::{assert_matches_twin, supported_kernels};
    use crate::common::{ggml_test_values, Rng};
    use lamina::backend::cpu::repack_q4_1::{self, RepackedQ4_1};
    use lamina::backend::cpu::Kernels;
    use lamina::tensor::blocks::*;
    #[cfg(target_arch = "wasm32")]
    use wasm_bindgen_test::wasm_bindgen_test as test;

    fn q4_1(x: &[f32]) -> Vec<BlockQ4_1> {
        let mut out = vec![BlockQ4_1::zeroed(); x.len() / QK];
        lamina::tensor::quants::q4_1::quantize(x, &mut out);
        out
    }

    fn q8_1(x: &[f32]) -> Vec<BlockQ8_1> {
        let mut out = vec![BlockQ8_1::zeroed(); x.len() / QK];
        lamina::tensor::quants::q8_1::quantize(x, &mut out);
        out
    }

    /// The scalar table with the scalar group kernel, and every supported
    /// variant's table that has a group kernel.
    fn tables() -> Vec<Kernels> {
        let mut scalar = Kernels::scalar();
        scalar.gemm_q4_1_x8 = Some(repack_q4_1::gemm_q4_1_x8);
        let mut all = vec![scalar];
        all.extend(
            supported_kernels()
                .into_iter()
                .filter(|k| k.gemm_q4_1_x8.is_some()),
        );
        all
    }

    fn product(
        k: &Kernels,
        packed: &RepackedQ4_1,
        x: &[BlockQ8_1],
        n: usize,
        rows: std::ops::Range<usize>,
    ) -> Vec<f32> {
        let mut out = vec![f32::NAN; n * rows.len()];
        packed.product_rows(k, x, n, rows, &mut out).unwrap();
        out
    }

    /// A row's product in f64 from the blocks' terms d(w)·d(a)·Σ q·a and
    /// m·s (each exact in f64), and the sum of the terms' magnitudes: the
    /// minimums' terms largely cancel the others, so rounding is relative
    /// to the terms, not to the result.
    pub(super) fn definition(w: &[BlockQ4_1], x: &[BlockQ8_1]) -> (f64, f64) {
        let (mut sum, mut magnitude) = (0f64, 0f64);
        for (b, y) in w.iter().zip(x) {
            let dot: i32 = (0..QK)
                .map(|j| {
                    let q = if j < 16 {
                        b.qs[j] & 0x0F
                    } else {
                        b.qs[j - 16] >> 4
                    };
                    q as i32 * y.qs[j] as i32
                })
                .sum();
            let terms = [
                b.d.to_f64() * y.d.to_f64() * dot as f64,
                b.m.to_f64() * y.s.to_f64(),
            ];
            sum += terms[0] + terms[1];
            magnitude += terms[0].abs() + terms[1].abs();
        }
        (sum, magnitude)
    }

    #[test]
    fn products_match_the_scalar_kernel_and_vec_dot() {
        let scalar = Kernels::scalar();
        let tables = tables();
        let mut rng = Rng::new(11);
        for rows in [8usize, 13, 16] {
            for cols in [32usize, 576] {
                for n in [1usize, 3, 4, 6] {
                    let w = q4_1(&ggml_test_values(rng.next_u64(), rows * cols));
                    let x = q8_1(&ggml_test_values(rng.next_u64(), n * cols));
                    let packed = RepackedQ4_1::new(&w, rows, cols).unwrap();
                    let per_row = cols / QK;
                    let whole = rows / 8 * 8;
                    let twin = product(&tables[0], &packed, &x, n, 0..rows);
                    for i in 0..n {
                        let xi = &x[i * per_row..(i + 1) * per_row];
                        for r in 0..rows {
                            let wr = &w[r * per_row..(r + 1) * per_row];
                            let (exact, magnitude) = definition(wr, xi);
                            let tolerance = 1e-4 + 1e-5 * magnitude;
                            for (what, got) in [
                                ("twin", twin[i * rows + r]),
                                ("vec_dot", (scalar.vec_dot_q4_1_q8_1)(wr, xi)),
                            ] {
                                assert!(
                                    (got as f64 - exact).abs() <= tolerance,
                                    "{what} rows={rows} cols={cols} n={n} act {i} row {r}: {got} vs {exact}"
                                );
                            }
                        }
                    }
                    for k in &tables {
                        for start in (0..rows).step_by(8) {
                            for end in (start + 1..=rows).filter(|&e| e % 8 == 0 || e == rows) {
                                let len = end - start;
                                let out = product(k, &packed, &x, n, start..end);
                                for i in 0..n {
                                    let xi = &x[i * per_row..(i + 1) * per_row];
                                    for r in start..end {
                                        let wr = &w[r * per_row..(r + 1) * per_row];
                                        let got = out[i * len + r - start];
                                        let what = format!(
                                            "{} rows={rows} cols={cols} n={n} piece {start}..{end} act {i} row {r}",
                                            k.variant
                                        );
                                        if r < whole {
                                            let twin = twin[i * rows + r];
                                            let magnitude = definition(wr, xi).1;
                                            assert_matches_twin(
                                                got, twin, per_row, magnitude, &what,
                                            );
                                        } else {
                                            let want = (k.vec_dot_q4_1_q8_1)(wr, xi);
                                            assert_eq!(got.to_bits(), want.to_bits(), "{what}");
                                        }
                                    }
                                }
                            }
                        }
                    }
                }
            }
        }
    }

    #[test]
    fn extreme_values_stay_exact() {
        // Nibbles at 15 and 0 against activations at 127 and -128: the
        // 16-bit pair sums at their largest. Scales of 1 and minimums of 1
        // against an activation `s` of 2 keep the float steps exact: each
        // result is the integer sum plus 2 per block.
        let cols = 64;
        for k in &tables() {
            for xv in [127i8, -128] {
                let mut w = q4_1(&ggml_test_values(3, 8 * cols));
                for (i, b) in w.iter_mut().enumerate() {
                    b.d = half::f16::ONE;
                    b.m = half::f16::ONE;
                    b.qs = std::array::from_fn(|j| if (i + j) % 5 == 0 { 0xF0 } else { 0xFF });
                }
                let mut x = q8_1(&ggml_test_values(4, cols));
                for b in x.iter_mut() {
                    b.d = half::f16::ONE;
                    b.s = half::f16::from_f32(2.0);
                    b.qs = [xv; QK];
                }
                let packed = RepackedQ4_1::new(&w, 8, cols).unwrap();
                let out = product(k, &packed, &x, 1, 0..8);
                for (r, got) in out.iter().enumerate() {
                    let nibbles: i32 = w[r * 2..r * 2 + 2]
                        .iter()
                        .flat_map(|b| b.qs)
                        .map(|q| (q & 0x0F) as i32 + (q >> 4) as i32)
                        .sum();
                    let want = nibbles * xv as i32 + 2 * 2;
                    assert_eq!(*got, want as f32, "{} row {r} activations {xv}", k.variant);
                }
            }
        }
    }

    #[test]
    fn bad_shapes_are_errors() {
        let w = q4_1(&ggml_test_values(5, 8 * 64));
        let x = q8_1(&ggml_test_values(6, 64));
        assert!(RepackedQ4_1::new(&w, 8, 48).is_err());
        assert!(RepackedQ4_1::new(&w[..15], 8, 64).is_err());
        let packed = RepackedQ4_1::new(&w, 8, 64).unwrap();
        let k = Kernels::scalar();
        let mut out = [0.0; 8];
        assert!(packed.product_rows(&k, &x[..1], 1, 0..8, &mut out).is_err());
        assert!(packed.product_rows(&k, &x, 1, 0..4, &mut out[..4]).is_err());
        assert!(packed.product_rows(&k, &x, 1, 0..9, &mut out).is_err());
        assert!(packed.product_rows(&k, &x, 2, 0..8, &mut out).is_err());
    }
}

/// The tests of a k-quant whose rows are interleaved eight at a time, for
/// variants with a group kernel: exact integer sums and `vec_dot`'s float
/// combination, so every result equals the scalar `vec_dot` of its row bit
/// for bit (every variant's k-quant `vec_dot` equals the scalar one).
macro_rules! k_quant_group_tests {
    ($name:ident, $repack:ident, $Row:ident, $Packed:ident, $gemm:ident, $vec_dot:ident, $extreme:expr) => {
        mod $name {
            use super::supported_kernels;
            use crate::common::{ggml_test_values, Rng};
            use lamina::backend::cpu::$repack::{$gemm, $Packed};
            use lamina::backend::cpu::Kernels;
            use lamina::tensor::blocks::*;
            #[cfg(target_arch = "wasm32")]
            use wasm_bindgen_test::wasm_bindgen_test as test;

            fn quantize(x: &[f32]) -> Vec<$Row> {
                let mut out = vec![$Row::zeroed(); x.len() / QK_K];
                lamina::tensor::quants::$name::quantize(x, &mut out);
                out
            }

            fn q8_k(x: &[f32]) -> Vec<BlockQ8K> {
                let mut out = vec![BlockQ8K::zeroed(); x.len() / QK_K];
                lamina::tensor::quants::q8_k::quantize(x, &mut out);
                out
            }

            /// The scalar table with the scalar group kernel, and every
            /// supported variant's table that has a group kernel.
            fn tables() -> Vec<Kernels> {
                let mut scalar = Kernels::scalar();
                scalar.$gemm = Some($gemm);
                let mut all = vec![scalar];
                all.extend(supported_kernels().into_iter().filter(|k| k.$gemm.is_some()));
                all
            }

            fn assert_rows_equal_vec_dot(
                w: &[$Row],
                x: &[BlockQ8K],
                rows: usize,
                cols: usize,
                n: usize,
                what: &str,
            ) {
                let scalar = Kernels::scalar();
                let per_row = cols / QK_K;
                let packed = $Packed::new(w, rows, cols).unwrap();
                for k in tables() {
                    // Every piece a thread could be given: whole groups.
                    for start in (0..rows).step_by(8) {
                        for end in (start + 1..=rows).filter(|&e| e % 8 == 0 || e == rows) {
                            let len = end - start;
                            let mut out = vec![f32::NAN; n * len];
                            packed.product_rows(&k, x, n, start..end, &mut out).unwrap();
                            for i in 0..n {
                                let xi = &x[i * per_row..(i + 1) * per_row];
                                for r in start..end {
                                    let wr = &w[r * per_row..(r + 1) * per_row];
                                    let want = (scalar.$vec_dot)(wr, xi);
                                    let got = out[i * len + r - start];
                                    assert_eq!(
                                        got.to_bits(),
                                        want.to_bits(),
                                        "{what} {} rows={rows} cols={cols} n={n} piece {start}..{end} act {i} row {r}: {got} vs {want}",
                                        k.variant
                                    );
                                }
                            }
                        }
                    }
                }
            }

            #[test]
            fn products_equal_row_by_row_vec_dot() {
                let mut rng = Rng::new(8);
                for rows in [8usize, 13, 16] {
                    for cols in [256usize, 512] {
                        for n in [1usize, 3, 4, 6] {
                            let w = quantize(&ggml_test_values(rng.next_u64(), rows * cols));
                            let x = q8_k(&ggml_test_values(rng.next_u64(), n * cols));
                            assert_rows_equal_vec_dot(&w, &x, rows, cols, n, "random");
                        }
                    }
                }
            }

            #[test]
            fn extreme_values_stay_exact() {
                // The largest quants and scales, activations at -128 and
                // 127: the 16-bit partial sums are at their largest.
                let cols = 512;
                let mut w = quantize(&ggml_test_values(1, 8 * cols));
                w.iter_mut().for_each($extreme);
                for fill in [-128i8, 127] {
                    let mut x = q8_k(&ggml_test_values(2, 2 * cols));
                    for b in x.iter_mut() {
                        b.qs = [fill; QK_K];
                        b.bsums = [16 * fill as i16; 16];
                    }
                    assert_rows_equal_vec_dot(&w, &x, 8, cols, 2, &format!("all {fill}"));
                }
            }

            #[test]
            fn bad_shapes_are_errors() {
                let w = quantize(&ggml_test_values(1, 8 * 256));
                assert!($Packed::new(&w, 8, 128).is_err());
                assert!($Packed::new(&w, 9, 256).is_err());
                let packed = $Packed::new(&w, 8, 256).unwrap();
                let k = Kernels::scalar();
                let x = q8_k(&ggml_test_values(2, 256));
                let mut out = [0.0; 8];
                assert!(packed.product_rows(&k, &x[..0], 1, 0..8, &mut out).is_err());
                assert!(packed.product_rows(&k, &x, 1, 0..4, &mut out[..4]).is_err());
                assert!(packed.product_rows(&k, &x, 1, 0..9, &mut out).is_err());
                assert!(packed.product_rows(&k, &x, 2, 0..8, &mut out).is_err());
            }
        }
    };
}

// Q4_K: every nibble 15, every 6-bit scale and min 63.
k_quant_group_tests!(
    q4_k,
    repack_q4_k,
    BlockQ4K,
    RepackedQ4K,
    gemm_q4_k_x8,
    vec_dot_q4_k_q8_k,
    |b| {
        b.qs = [0xFF; 128];
        b.scales = [0xFF; 12];
    }
);
// Q6_K: every value 63 (31 after the offset) and every scale -128, the
// 16-bit sums of two unsigned products at their largest.
k_quant_group_tests!(
    q6_k,
    repack_q6_k,
    BlockQ6K,
    RepackedQ6K,
    gemm_q6_k_x8,
    vec_dot_q6_k_q8_k,
    |b| {
        b.ql = [0xFF; 128];
        b.qh = [0xFF; 64];
        b.scales = [-128; 16];
    }
);

mod edge_scales {
    //! Scales at the edges of f16 (zeros of both signs, the smallest and
    //! largest subnormals, the smallest normal, the largest finite values,
    //! infinities, NaN) through every group kernel. wasm's kernels widen a
    //! block's scales with a short sequence that is exact for finite values
    //! after checking the block for infinities and NaNs, which take the
    //! full widening (`simd128::block_scales`); an activation block's
    //! scales are checked in scalar code and take the short widening when
    //! finite (`ScaleWidening::splat`, `pair_splats`). Results with finite
    //! scales must match the twins as the random tests' do; a row with an
    //! infinite or NaN scale, weight's or activation's, must be infinite
    //! (same sign) or NaN where the twin's is.

    use super::{assert_matches_twin, q4_0, q8_0, supported_kernels, LAYOUTS};
    use crate::common::ggml_test_values;
    use lamina::backend::cpu::repack::{RepackLayout, RepackedQ4_0};
    use lamina::backend::cpu::repack_q4_1::{self, RepackedQ4_1};
    use lamina::backend::cpu::repack_q5_0::{self, activation_sums, RepackedQ5_0};
    use lamina::backend::cpu::repack_q8_0::{self, RepackedQ8_0};
    use lamina::backend::cpu::{CpuVariant, Kernels};
    use lamina::tensor::blocks::*;
    #[cfg(target_arch = "wasm32")]
    use wasm_bindgen_test::wasm_bindgen_test as test;

    use half::f16;

    /// ±0, the smallest and largest subnormals, the smallest normal, 1, -2,
    /// ±65504.
    const FINITE: [u16; 9] = [
        0x0000, 0x8000, 0x0001, 0x03FF, 0x0400, 0x3C00, 0xC000, 0x7BFF, 0xFBFF,
    ];
    /// +∞, -∞, NaN.
    const SPECIAL: [u16; 3] = [0x7C00, 0xFC00, 0x7E00];

    const ROWS: usize = 16;
    const COLS: usize = 128;
    const PER_ROW: usize = COLS / QK;

    /// Weight block `b` of row `r`'s scale: every finite edge value, and in
    /// rows 3, 10 and 13 (blocks 1, 2, 3) the infinities and NaN.
    fn weight_scale(r: usize, b: usize, salt: usize) -> f16 {
        match (r, b) {
            (3, 1) => f16::from_bits(SPECIAL[0]),
            (10, 2) => f16::from_bits(SPECIAL[1]),
            (13, 3) => f16::from_bits(SPECIAL[2]),
            _ => f16::from_bits(FINITE[(7 * r + 3 * b + salt) % FINITE.len()]),
        }
    }

    fn special_row(r: usize) -> bool {
        matches!(r, 3 | 10 | 13)
    }

    /// Activations with small values (sums stay small) and, per block, a
    /// finite edge scale.
    fn small_activations(n: usize) -> Vec<i8> {
        (0..n * COLS).map(|j| ((j * 5 % 7) as i8) - 3).collect()
    }

    /// `got` against the twin's `want`: non-finite alike in a row with a
    /// special scale, else within `assert_matches_twin`'s bound (bit-equal
    /// natively).
    fn check(got: f32, want: f32, special: bool, magnitude: f64, what: &str) {
        if special || !want.is_finite() {
            assert!(!want.is_finite(), "{what}: the twin's {want} is finite");
            assert_eq!(got.is_nan(), want.is_nan(), "{what}: {got} vs twin {want}");
            if want.is_infinite() {
                assert_eq!(got, want, "{what}");
            }
        } else {
            assert_matches_twin(got, want, PER_ROW, magnitude, what);
        }
    }

    /// Every output of variant `k`'s product (`n` activation rows) against
    /// the twin's, `magnitude(r, i)` the sum of row r's terms' magnitudes
    /// with activation row i.
    fn check_rows(
        k: &Kernels,
        out: &[f32],
        want: &[f32],
        n: usize,
        magnitude: impl Fn(usize, usize) -> f64,
    ) {
        for i in 0..n {
            for r in 0..ROWS {
                let what = format!("{} n={n} act {i} row {r}", k.variant);
                let at = i * ROWS + r;
                check(out[at], want[at], special_row(r), magnitude(r, i), &what);
            }
        }
    }

    #[test]
    fn q4_0_layouts() {
        let scalar = Kernels::scalar();
        let mut w = q4_0(&ggml_test_values(21, ROWS * COLS));
        for (i, b) in w.iter_mut().enumerate() {
            b.d = weight_scale(i / PER_ROW, i % PER_ROW, 0);
        }
        for n in [1, 4] {
            let mut x = q8_0(&ggml_test_values(22, n * COLS));
            for (i, (b, q)) in x
                .iter_mut()
                .zip(small_activations(n).chunks(QK))
                .enumerate()
            {
                b.d = f16::from_bits(FINITE[(i * 5 + 2) % FINITE.len()]);
                b.qs.copy_from_slice(q);
            }
            let mut sums = Vec::new();
            lamina::backend::cpu::repack_q5_0::activation_sums(&x, &mut sums);
            for k in supported_kernels() {
                for layout in LAYOUTS {
                    let packed = RepackedQ4_0::new(&w, ROWS, COLS, layout).unwrap();
                    let mut out = vec![0.0; n * ROWS];
                    packed
                        .product_rows(&k, &x, &sums, n, 0..ROWS, &mut out)
                        .unwrap();
                    for i in 0..n {
                        let xi = &x[i * PER_ROW..(i + 1) * PER_ROW];
                        for r in 0..ROWS {
                            // Every Q4_0 layout equals the scalar vec_dot
                            // (`assert_q4_0_matches`).
                            let wr = &w[r * PER_ROW..][..PER_ROW];
                            let want = (scalar.vec_dot_q4_0_q8_0)(wr, xi);
                            let got = out[i * ROWS + r];
                            let what =
                                format!("{} {} n={n} act {i} row {r}", k.variant, layout.name());
                            if !want.is_finite() {
                                assert_eq!(got.is_nan(), want.is_nan(), "{what}: {got} vs {want}");
                                if want.is_infinite() {
                                    assert_eq!(got, want, "{what}");
                                }
                            } else {
                                super::assert_q4_0_matches(&k, layout, got, want, wr, xi, &what);
                            }
                            assert_eq!(special_row(r), !want.is_finite(), "{what}");
                        }
                    }
                }
            }
        }
    }

    #[test]
    fn q4_1_groups() {
        let mut twin = Kernels::scalar();
        twin.gemm_q4_1_x8 = Some(repack_q4_1::gemm_q4_1_x8);
        let mut w = {
            let mut out = vec![BlockQ4_1::zeroed(); ROWS * PER_ROW];
            lamina::tensor::quants::q4_1::quantize(&ggml_test_values(23, ROWS * COLS), &mut out);
            out
        };
        for (i, b) in w.iter_mut().enumerate() {
            b.d = weight_scale(i / PER_ROW, i % PER_ROW, 0);
            // Minimums finite except where `d` is not: the other rows of a
            // block with a special `d` take the full widening too.
            b.m = f16::from_bits(FINITE[(i * 4 + 1) % FINITE.len()]);
        }
        let packed = RepackedQ4_1::new(&w, ROWS, COLS).unwrap();
        for n in [1, 4] {
            let mut x = vec![BlockQ8_1::zeroed(); n * PER_ROW];
            lamina::tensor::quants::q8_1::quantize(&ggml_test_values(24, n * COLS), &mut x);
            for (i, (b, q)) in x
                .iter_mut()
                .zip(small_activations(n).chunks(QK))
                .enumerate()
            {
                b.d = f16::from_bits(FINITE[(i * 5 + 2) % FINITE.len()]);
                b.s = f16::from_bits(FINITE[(i * 2 + 6) % FINITE.len()]);
                b.qs.copy_from_slice(q);
            }
            let mut want = vec![0.0; n * ROWS];
            packed
                .product_rows(&twin, &x, n, 0..ROWS, &mut want)
                .unwrap();
            for k in supported_kernels()
                .iter()
                .filter(|k| k.gemm_q4_1_x8.is_some())
            {
                let mut out = vec![0.0; n * ROWS];
                packed.product_rows(k, &x, n, 0..ROWS, &mut out).unwrap();
                check_rows(k, &out, &want, n, |r, i| {
                    super::q4_1_groups::definition(
                        &w[r * PER_ROW..][..PER_ROW],
                        &x[i * PER_ROW..][..PER_ROW],
                    )
                    .1
                });
            }
        }
    }

    /// An infinite or NaN scale in activation row `i`'s block `b` (of `n`
    /// rows): the one row of a generated token, or three of a tile's four.
    fn activation_special(n: usize, i: usize, b: usize) -> Option<f16> {
        let special = match (n, i, b) {
            (1, 0, 2) | (4, 1, 2) => SPECIAL[0],
            (4, 2, 0) => SPECIAL[2],
            (4, 3, 3) => SPECIAL[1],
            _ => return None,
        };
        Some(f16::from_bits(special))
    }

    /// Activation rows with an infinite or NaN scale (`d`, or Q8_1's `s` in
    /// one of them) through every group kernel, the weights' scales finite:
    /// the row's outputs are infinite or NaN as the twin's, the other rows'
    /// as the random tests' are.
    #[test]
    fn special_activation_scales() {
        let scalar = Kernels::scalar();
        let mut twin = Kernels::scalar();
        twin.gemm_q4_1_x8 = Some(repack_q4_1::gemm_q4_1_x8);
        twin.gemm_q8_0_x8 = Some(repack_q8_0::gemm_q8_0_x8);
        let w4_0 = q4_0(&ggml_test_values(31, ROWS * COLS));
        let w8_0 = q8_0(&ggml_test_values(32, ROWS * COLS));
        let mut w4_1 = vec![BlockQ4_1::zeroed(); ROWS * PER_ROW];
        lamina::tensor::quants::q4_1::quantize(&ggml_test_values(33, ROWS * COLS), &mut w4_1);
        let packed4_1 = RepackedQ4_1::new(&w4_1, ROWS, COLS).unwrap();
        let packed8_0 = RepackedQ8_0::new(&w8_0, ROWS, COLS).unwrap();
        for n in [1, 4] {
            let special_act =
                |i: usize| (0..PER_ROW).any(|b| activation_special(n, i, b).is_some());
            let mut x8_0 = q8_0(&ggml_test_values(34, n * COLS));
            let mut x8_1 = vec![BlockQ8_1::zeroed(); n * PER_ROW];
            lamina::tensor::quants::q8_1::quantize(&ggml_test_values(34, n * COLS), &mut x8_1);
            for (j, (b0, b1)) in x8_0.iter_mut().zip(&mut x8_1).enumerate() {
                let (i, b) = (j / PER_ROW, j % PER_ROW);
                if let Some(v) = activation_special(n, i, b) {
                    b0.d = v;
                    // Q8_1's sum scale in the last row, its `d` elsewhere.
                    if i == 3 {
                        b1.s = v
                    } else {
                        b1.d = v
                    }
                }
            }
            let mut sums = Vec::new();
            lamina::backend::cpu::repack_q5_0::activation_sums(&x8_0, &mut sums);
            let (mut want4_1, mut want8_0) = (vec![0.0; n * ROWS], vec![0.0; n * ROWS]);
            packed4_1
                .product_rows(&twin, &x8_1, n, 0..ROWS, &mut want4_1)
                .unwrap();
            packed8_0
                .product_rows(&twin, &x8_0, n, 0..ROWS, &mut want8_0)
                .unwrap();
            for k in supported_kernels() {
                let each = |out: &[f32],
                            want: &[f32],
                            kind: &str,
                            magnitude: &dyn Fn(usize, usize) -> f64| {
                    for i in 0..n {
                        for r in 0..ROWS {
                            let what = format!("{kind} {} n={n} act {i} row {r}", k.variant);
                            let at = i * ROWS + r;
                            check(out[at], want[at], special_act(i), magnitude(r, i), &what);
                        }
                    }
                };
                for layout in LAYOUTS {
                    let packed = RepackedQ4_0::new(&w4_0, ROWS, COLS, layout).unwrap();
                    let mut out = vec![0.0; n * ROWS];
                    packed
                        .product_rows(&k, &x8_0, &sums, n, 0..ROWS, &mut out)
                        .unwrap();
                    // Every Q4_0 layout equals the scalar vec_dot, bit for
                    // bit but for relaxed SIMD's fused 8x8 tile.
                    let want: Vec<f32> = (0..n * ROWS)
                        .map(|at| {
                            let (i, r) = (at / ROWS, at % ROWS);
                            (scalar.vec_dot_q4_0_q8_0)(
                                &w4_0[r * PER_ROW..][..PER_ROW],
                                &x8_0[i * PER_ROW..][..PER_ROW],
                            )
                        })
                        .collect();
                    // (A magnitude of 0 asks for bit-equality.)
                    let fused =
                        k.variant == CpuVariant::RelaxedSimd && layout == RepackLayout::X8I8;
                    each(&out, &want, layout.name(), &|r, i| {
                        if fused {
                            super::q4_0_magnitude(
                                &w4_0[r * PER_ROW..][..PER_ROW],
                                &x8_0[i * PER_ROW..][..PER_ROW],
                            )
                        } else {
                            0.0
                        }
                    });
                }
                if k.gemm_q4_1_x8.is_some() {
                    let mut out = vec![0.0; n * ROWS];
                    packed4_1
                        .product_rows(&k, &x8_1, n, 0..ROWS, &mut out)
                        .unwrap();
                    each(&out, &want4_1, "q4_1", &|r, i| {
                        super::q4_1_groups::definition(
                            &w4_1[r * PER_ROW..][..PER_ROW],
                            &x8_1[i * PER_ROW..][..PER_ROW],
                        )
                        .1
                    });
                }
                if k.gemm_q8_0_x8.is_some() {
                    let mut out = vec![0.0; n * ROWS];
                    packed8_0
                        .product_rows(&k, &x8_0, n, 0..ROWS, &mut out)
                        .unwrap();
                    each(&out, &want8_0, "q8_0", &|r, i| {
                        super::q8_0_groups::q8_0_magnitude(
                            &w8_0[r * PER_ROW..][..PER_ROW],
                            &x8_0[i * PER_ROW..][..PER_ROW],
                        )
                    });
                }
            }
        }
    }

    #[test]
    fn q8_0_groups() {
        let mut twin = Kernels::scalar();
        twin.gemm_q8_0_x8 = Some(repack_q8_0::gemm_q8_0_x8);
        let mut w = q8_0(&ggml_test_values(25, ROWS * COLS));
        for (i, b) in w.iter_mut().enumerate() {
            b.d = weight_scale(i / PER_ROW, i % PER_ROW, 4);
        }
        let packed = RepackedQ8_0::new(&w, ROWS, COLS).unwrap();
        for n in [1, 4] {
            let mut x = q8_0(&ggml_test_values(26, n * COLS));
            for (i, (b, q)) in x
                .iter_mut()
                .zip(small_activations(n).chunks(QK))
                .enumerate()
            {
                b.d = f16::from_bits(FINITE[(i * 5 + 2) % FINITE.len()]);
                b.qs.copy_from_slice(q);
            }
            let mut want = vec![0.0; n * ROWS];
            packed
                .product_rows(&twin, &x, n, 0..ROWS, &mut want)
                .unwrap();
            for k in supported_kernels()
                .iter()
                .filter(|k| k.gemm_q8_0_x8.is_some())
            {
                let mut out = vec![0.0; n * ROWS];
                packed.product_rows(k, &x, n, 0..ROWS, &mut out).unwrap();
                check_rows(k, &out, &want, n, |r, i| {
                    super::q8_0_groups::q8_0_magnitude(
                        &w[r * PER_ROW..][..PER_ROW],
                        &x[i * PER_ROW..][..PER_ROW],
                    )
                });
            }
        }
    }

    /// Repacked Q5_0 with edge scales on both sides: weight rows 3, 10 and
    /// 13 and some activation rows (`activation_special`) hold an infinity
    /// or NaN. Every output equals its twin's (the scalar `vec_dot` of its
    /// row for wasm, the scalar group kernel elsewhere) bit for bit where
    /// the twin's is finite, and is infinite or NaN alike where not.
    #[test]
    fn q5_0_groups() {
        let scalar = Kernels::scalar();
        let mut twin = Kernels::scalar();
        twin.gemm_q5_0_x8 = Some(repack_q5_0::gemm_q5_0_x8);
        let mut w = vec![BlockQ5_0::zeroed(); ROWS * PER_ROW];
        lamina::tensor::quants::q5_0::quantize(&ggml_test_values(27, ROWS * COLS), &mut w);
        for (i, b) in w.iter_mut().enumerate() {
            b.d = weight_scale(i / PER_ROW, i % PER_ROW, 5);
        }
        let packed = RepackedQ5_0::new(&w, ROWS, COLS).unwrap();
        for n in [1, 4] {
            let mut x = q8_0(&ggml_test_values(28, n * COLS));
            for (j, (b, q)) in x
                .iter_mut()
                .zip(small_activations(n).chunks(QK))
                .enumerate()
            {
                let (i, blk) = (j / PER_ROW, j % PER_ROW);
                b.d = activation_special(n, i, blk)
                    .unwrap_or(f16::from_bits(FINITE[(j * 3 + 1) % FINITE.len()]));
                b.qs.copy_from_slice(q);
            }
            let special_act =
                |i: usize| (0..PER_ROW).any(|b| activation_special(n, i, b).is_some());
            let mut sums = Vec::new();
            activation_sums(&x, &mut sums);
            let mut grouped = vec![0.0; n * ROWS];
            packed
                .product_rows(&twin, &x, &sums, n, 0..ROWS, &mut grouped)
                .unwrap();
            for k in supported_kernels()
                .iter()
                .filter(|k| k.gemm_q5_0_x8.is_some())
            {
                let mut out = vec![0.0; n * ROWS];
                packed
                    .product_rows(k, &x, &sums, n, 0..ROWS, &mut out)
                    .unwrap();
                for i in 0..n {
                    for r in 0..ROWS {
                        let at = i * ROWS + r;
                        let want = if super::q5_0::in_vec_dot_steps(k) {
                            (scalar.vec_dot_q5_0_q8_0)(
                                &w[r * PER_ROW..][..PER_ROW],
                                &x[i * PER_ROW..][..PER_ROW],
                            )
                        } else {
                            grouped[at]
                        };
                        let what = format!("{} n={n} act {i} row {r}", k.variant);
                        // A zero magnitude: exact where finite.
                        check(out[at], want, special_row(r) || special_act(i), 0.0, &what);
                    }
                }
            }
        }
    }
}

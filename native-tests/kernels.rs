//! Every SIMD kernel against its scalar twin, on random data across sizes, for
//! every variant this machine supports (x86_64 natively; aarch64 under qemu
//! with several CPU models; wasm32 in Node).
//! Tolerances come from the arithmetic: integer parts are exact, so a kernel
//! that combines blocks in the scalar order must match bit for bit; one that
//! accumulates in vector lanes may differ by float rounding only, bounded by
//! n·ε·Σ|terms|.

mod common;

#[cfg(target_arch = "wasm32")]
use wasm_bindgen_test::wasm_bindgen_test as test;

use common::{ggml_test_values, Rng};
use lamina::backend::cpu::kernels::VecDotFn;
use lamina::backend::cpu::{CpuDevice, CpuVariant, Kernels};
use lamina::tensor::blocks::*;

/// Block counts, including odd ones and a single block.
const BLOCKS: [usize; 6] = [1, 2, 3, 7, 18, 48];

/// Every supported variant's table; for relaxed SIMD both forms of its dots
/// (the engine's lowering of the dot picks one at run time,
/// `Kernels::relaxed_simd_forms`).
fn variants() -> Vec<(CpuVariant, Kernels)> {
    let device = CpuDevice::new(Some("scalar")).unwrap();
    #[allow(unused_mut)]
    let mut supported: Vec<_> = CpuVariant::compiled_variants()
        .into_iter()
        .filter(|v| v.supported(device.features()))
        .map(|v| (v, device.kernels_for(v).unwrap()))
        .collect();
    assert!(!supported.is_empty());
    #[cfg(all(target_feature = "simd128", target_feature = "relaxed-simd"))]
    {
        assert!(supported.iter().any(|(v, _)| *v == CpuVariant::RelaxedSimd));
        let forms = Kernels::relaxed_simd_forms();
        supported.extend(forms.into_iter().map(|k| (CpuVariant::RelaxedSimd, k)));
    }
    supported
}

fn random_values(rng: &mut Rng, n: usize) -> Vec<f32> {
    ggml_test_values(rng.next_u64(), n)
}

fn quantized<B: Block + Copy>(x: &[f32], f: fn(&[f32], &mut [B])) -> Vec<B> {
    let mut out = vec![B::zeroed(); x.len() / B::ELEMENTS];
    f(x, &mut out);
    out
}

/// Kernels that combine blocks in the scalar order and so must equal the scalar
/// result exactly: all but AVX2's legacy-type dots (which the avx-vnni and
/// avx512 variants keep), which accumulate in float lanes (its k-quant and IQ4 kernels share
/// the scalar combination code).
fn exact(variant: CpuVariant, kernel: &str) -> bool {
    !matches!(
        variant,
        CpuVariant::Avx2 | CpuVariant::AvxVnni | CpuVariant::Avx512
    ) || kernel.contains("_K")
        || kernel.starts_with("iq4")
}

/// Float sums may be reassociated: allow n·ε·Σ|terms| (plus a denormal floor).
fn assert_close(what: &str, got: f32, want: f32, magnitude: f32, terms: usize) {
    let tol = magnitude * f32::EPSILON * (terms as f32 + 2.0) + 1e-30;
    assert!(
        (got - want).abs() <= tol,
        "{what}: {got} vs scalar {want} (tolerance {tol})"
    );
}

#[test]
fn quantize_q8_0_matches_scalar_exactly() {
    let scalar = Kernels::scalar();
    let mut rng = Rng::new(1);
    for (variant, k) in variants() {
        for blocks in BLOCKS {
            let x = random_values(&mut rng, blocks * QK);
            let a = quantized(&x, k.quantize_q8_0);
            let b = quantized(&x, scalar.quantize_q8_0);
            assert_eq!(a, b, "{variant}, {blocks} blocks");
        }
        // Exact halves after scaling: 127 * 0.5/127 etc. round away from zero.
        let mut x = vec![0.0f32; QK];
        x[0] = 127.0;
        for (i, v) in x.iter_mut().enumerate().skip(1) {
            *v = (i as f32 - 16.0) + 0.5;
        }
        assert_eq!(
            quantized(&x, k.quantize_q8_0),
            quantized(&x, scalar.quantize_q8_0),
            "{variant}: ties"
        );
    }
}

#[test]
fn quantize_q8_1_and_q8_k_match_scalar_exactly() {
    let scalar = Kernels::scalar();
    let mut rng = Rng::new(7);
    for (variant, k) in variants() {
        for blocks in BLOCKS {
            let x = random_values(&mut rng, blocks * QK_K);
            assert_eq!(
                quantized(&x, k.quantize_q8_1),
                quantized(&x, scalar.quantize_q8_1),
                "{variant} q8_1"
            );
            let a = quantized(&x, k.quantize_q8_k);
            let b = quantized(&x, scalar.quantize_q8_k);
            for (i, (a, b)) in a.iter().zip(&b).enumerate() {
                assert_eq!(
                    a.d.to_bits(),
                    b.d.to_bits(),
                    "{variant} q8_K block {i} scale"
                );
                assert_eq!(a.qs, b.qs, "{variant} q8_K block {i}");
                assert_eq!(a.bsums, b.bsums, "{variant} q8_K block {i} sums");
            }
        }
        // Ties: values whose scaled form ends in exactly .5 round to even.
        let mut x = vec![0.0f32; QK_K];
        x[0] = -127.0;
        for (i, v) in x.iter_mut().enumerate().skip(1) {
            *v = -((i % 100) as f32 + 0.5);
        }
        assert_eq!(
            quantized(&x, k.quantize_q8_k)[0].qs,
            quantized(&x, scalar.quantize_q8_k)[0].qs,
            "{variant} ties"
        );
        // Q8_1 on the same blocks, a block of zeros (scale 0) among them,
        // and the quants at ±127.
        x[32..64].fill(0.0);
        assert_eq!(
            quantized(&x, k.quantize_q8_1),
            quantized(&x, scalar.quantize_q8_1),
            "{variant} q8_1 ties and zeros"
        );
    }
}

/// Runs one vec_dot kernel of every variant against scalar.
fn check_vec_dot<X: Block + Copy, Y: Block + Copy>(
    name: &str,
    pick: fn(&Kernels) -> VecDotFn<X, Y>,
    make_x: fn(&[f32]) -> Vec<X>,
    make_y: fn(&[f32]) -> Vec<Y>,
    terms: fn(&[X], &[Y]) -> f32,
) {
    let scalar = pick(&Kernels::scalar());
    let mut rng = Rng::new(2);
    for (variant, k) in variants() {
        let f = pick(&k);
        for blocks in BLOCKS {
            let x = make_x(&random_values(&mut rng, blocks * X::ELEMENTS));
            let y = make_y(&random_values(&mut rng, blocks * X::ELEMENTS));
            let (got, want) = (f(&x, &y), scalar(&x, &y));
            if exact(variant, name) {
                assert_eq!(
                    got.to_bits(),
                    want.to_bits(),
                    "{name} {variant} {blocks} blocks: {got} vs {want}"
                );
            }
            assert_close(
                &format!("{name} {variant} {blocks} blocks"),
                got,
                want,
                terms(&x, &y),
                blocks,
            );
        }
    }
}

fn q8_0(x: &[f32]) -> Vec<BlockQ8_0> {
    quantized(x, lamina::tensor::quants::q8_0::quantize)
}
fn q8_1(x: &[f32]) -> Vec<BlockQ8_1> {
    quantized(x, lamina::tensor::quants::q8_1::quantize)
}
fn q8_k(x: &[f32]) -> Vec<BlockQ8K> {
    quantized(x, lamina::tensor::quants::q8_k::quantize)
}

/// Byte `i` of a block built from values: bits of the values, so every
/// pattern of quants, scales and high bits occurs across blocks.
fn value_byte(c: &[f32], i: usize) -> u8 {
    let v = c[i % c.len()].to_bits();
    (v ^ (v >> 9) ^ (v >> 17) ^ (i as u32).wrapping_mul(0x9E37)) as u8
}

/// Q2_K blocks (lamina has no quantizer for it): random quants, scales and
/// mins, positive d and dmin.
fn q2_k_blocks(x: &[f32]) -> Vec<BlockQ2K> {
    x.chunks_exact(QK_K)
        .map(|c| BlockQ2K {
            scales: std::array::from_fn(|i| value_byte(c, i)),
            qs: std::array::from_fn(|i| value_byte(c, 16 + i)),
            d: half::f16::from_f32(0.001 + c[0].abs() * 0.01),
            dmin: half::f16::from_f32(0.001 + c[1].abs() * 0.01),
        })
        .collect()
}

/// IQ4_NL blocks: random indices, a positive or negative scale.
fn iq4_nl_blocks(x: &[f32]) -> Vec<BlockIQ4NL> {
    x.chunks_exact(32)
        .map(|c| BlockIQ4NL {
            d: half::f16::from_f32(c[0] * 0.01),
            qs: std::array::from_fn(|i| value_byte(c, i)),
        })
        .collect()
}

/// IQ4_XS blocks: random indices and 6-bit scales, a signed scale.
fn iq4_xs_blocks(x: &[f32]) -> Vec<BlockIQ4XS> {
    x.chunks_exact(QK_K)
        .map(|c| BlockIQ4XS {
            d: half::f16::from_f32(c[0] * 0.001),
            scales_h: u16::from_le_bytes([value_byte(c, 0), value_byte(c, 1)]),
            scales_l: std::array::from_fn(|i| value_byte(c, 2 + i)),
            qs: std::array::from_fn(|i| value_byte(c, 6 + i)),
        })
        .collect()
}

/// Q3_K blocks, random as `q2_k_blocks`.
fn q3_k_blocks(x: &[f32]) -> Vec<BlockQ3K> {
    x.chunks_exact(QK_K)
        .map(|c| BlockQ3K {
            hmask: std::array::from_fn(|i| value_byte(c, i)),
            qs: std::array::from_fn(|i| value_byte(c, 32 + i)),
            scales: std::array::from_fn(|i| value_byte(c, 96 + i)),
            d: half::f16::from_f32(0.001 + c[0].abs() * 0.01),
        })
        .collect()
}

/// Σ over blocks of |d_x·d_y| times the largest possible integer sum: a bound on
/// the magnitude of the terms being added.
fn block_magnitude<X, Y>(
    x: &[X],
    y: &[Y],
    dx: fn(&X) -> f32,
    dy: fn(&Y) -> f32,
    max_int: f32,
) -> f32 {
    x.iter()
        .zip(y)
        .map(|(a, b)| (dx(a) * dy(b)).abs() * max_int)
        .sum()
}

#[test]
fn vec_dot_q4_0_q8_0() {
    check_vec_dot(
        "q4_0·q8_0",
        |k| k.vec_dot_q4_0_q8_0,
        |x| quantized(x, lamina::tensor::quants::q4_0::quantize),
        q8_0,
        |x, y| block_magnitude(x, y, |a| a.d.to_f32(), |b| b.d.to_f32(), 32.0 * 8.0 * 127.0),
    );
}

/// Four-row kernels equal their variant's one-row kernel bit for bit.
fn check_dot4<X: Block + Copy, Y: Block + Copy>(
    name: &str,
    dot4: impl Fn(&Kernels) -> Option<fn(&[X], [&[Y]; 4]) -> [f32; 4]>,
    dot: impl Fn(&Kernels) -> VecDotFn<X, Y>,
    weights: fn(&[f32]) -> Vec<X>,
    acts: impl Fn(&Kernels, &[f32]) -> Vec<Y>,
) -> usize {
    let mut rng = Rng::new(0x4d0751);
    let mut checked = 0;
    for (variant, k) in variants() {
        let Some(dot4) = dot4(&k) else {
            continue;
        };
        for blocks in [1, 2, 3, 8, 18] {
            let x = weights(&random_values(&mut rng, blocks * X::ELEMENTS));
            let ys: Vec<Vec<Y>> = (0..4)
                .map(|_| acts(&k, &random_values(&mut rng, blocks * X::ELEMENTS)))
                .collect();
            let got = dot4(&x, [&ys[0], &ys[1], &ys[2], &ys[3]]);
            for r in 0..4 {
                let want = dot(&k)(&x, &ys[r]);
                assert_eq!(
                    got[r].to_bits(),
                    want.to_bits(),
                    "{name} {variant}: {blocks} blocks, row {r}"
                );
            }
        }
        checked += 1;
    }
    checked
}

#[test]
fn four_row_dots_equal_four_vec_dots() {
    let n = check_dot4(
        "q4_1",
        |k| k.vec_dot4_q4_1_q8_1,
        |k| k.vec_dot_q4_1_q8_1,
        |x| quantized(x, lamina::tensor::quants::q4_1::quantize),
        |k, x| quantized(x, k.quantize_q8_1),
    ) + check_dot4(
        "q8_0",
        |k| k.vec_dot4_q8_0_q8_0,
        |k| k.vec_dot_q8_0_q8_0,
        |x| quantized(x, lamina::tensor::quants::q8_0::quantize),
        |k, x| quantized(x, k.quantize_q8_0),
    ) + check_dot4(
        "q5_0",
        |k| k.vec_dot4_q5_0_q8_0,
        |k| k.vec_dot_q5_0_q8_0,
        |x| quantized(x, lamina::tensor::quants::q5_0::quantize),
        |k, x| quantized(x, k.quantize_q8_0),
    ) + check_dot4(
        "q4_k",
        |k| k.vec_dot4_q4_k_q8_k,
        |k| k.vec_dot_q4_k_q8_k,
        |x| quantized(x, lamina::tensor::quants::q4_k::quantize),
        |k, x| quantized(x, k.quantize_q8_k),
    ) + check_dot4(
        "q6_k",
        |k| k.vec_dot4_q6_k_q8_k,
        |k| k.vec_dot_q6_k_q8_k,
        |x| quantized(x, lamina::tensor::quants::q6_k::quantize),
        |k, x| quantized(x, k.quantize_q8_k),
    );
    // Every SIMD variant has at least its Q4_1 one.
    let simd = variants()
        .iter()
        .filter(|(v, _)| *v != CpuVariant::Scalar)
        .count();
    assert!(
        n >= simd,
        "{n} four-row kernels checked for {simd} SIMD variants"
    );
}

#[test]
fn vec_dot_q4_1_q8_1() {
    check_vec_dot(
        "q4_1·q8_1",
        |k| k.vec_dot_q4_1_q8_1,
        |x| quantized(x, lamina::tensor::quants::q4_1::quantize),
        q8_1,
        |x, y| {
            block_magnitude(
                x,
                y,
                |a| a.d.to_f32(),
                |b| b.d.to_f32(),
                32.0 * 15.0 * 127.0,
            ) + x
                .iter()
                .zip(y)
                .map(|(a, b)| (a.m.to_f32() * b.s.to_f32()).abs())
                .sum::<f32>()
        },
    );
}

#[test]
fn vec_dot_q5_0_q8_0() {
    check_vec_dot(
        "q5_0·q8_0",
        |k| k.vec_dot_q5_0_q8_0,
        |x| quantized(x, lamina::tensor::quants::q5_0::quantize),
        q8_0,
        |x, y| {
            block_magnitude(
                x,
                y,
                |a| a.d.to_f32(),
                |b| b.d.to_f32(),
                32.0 * 16.0 * 127.0,
            )
        },
    );
}

#[test]
fn vec_dot_q5_1_q8_1() {
    check_vec_dot(
        "q5_1·q8_1",
        |k| k.vec_dot_q5_1_q8_1,
        |x| quantized(x, lamina::tensor::quants::q5_1::quantize),
        q8_1,
        |x, y| {
            block_magnitude(
                x,
                y,
                |a| a.d.to_f32(),
                |b| b.d.to_f32(),
                32.0 * 31.0 * 127.0,
            ) + x
                .iter()
                .zip(y)
                .map(|(a, b)| (a.m.to_f32() * b.s.to_f32()).abs())
                .sum::<f32>()
        },
    );
}

#[test]
fn vec_dot_q8_0_q8_0() {
    check_vec_dot(
        "q8_0·q8_0",
        |k| k.vec_dot_q8_0_q8_0,
        q8_0,
        q8_0,
        |x, y| {
            block_magnitude(
                x,
                y,
                |a| a.d.to_f32(),
                |b| b.d.to_f32(),
                32.0 * 127.0 * 127.0,
            )
        },
    );
}

#[test]
fn vec_dot_k_quants() {
    check_vec_dot(
        "q4_K·q8_K",
        |k| k.vec_dot_q4_k_q8_k,
        |x| quantized(x, lamina::tensor::quants::q4_k::quantize),
        q8_k,
        |x, y| {
            x.iter()
                .zip(y)
                .map(|(a, b)| {
                    (a.d.to_f32().abs() * 15.0 + a.dmin.to_f32().abs())
                        * 63.0
                        * b.d.abs()
                        * 256.0
                        * 127.0
                })
                .sum()
        },
    );
    check_vec_dot(
        "q5_K·q8_K",
        |k| k.vec_dot_q5_k_q8_k,
        |x| quantized(x, lamina::tensor::quants::q5_k::quantize),
        q8_k,
        |x, y| {
            x.iter()
                .zip(y)
                .map(|(a, b)| {
                    (a.d.to_f32().abs() * 31.0 + a.dmin.to_f32().abs())
                        * 63.0
                        * b.d.abs()
                        * 256.0
                        * 127.0
                })
                .sum()
        },
    );
    check_vec_dot(
        "q2_K·q8_K",
        |k| k.vec_dot_q2_k_q8_k,
        q2_k_blocks,
        q8_k,
        |x, y| {
            x.iter()
                .zip(y)
                .map(|(a, b)| {
                    (a.d.to_f32().abs() * 15.0 * 3.0 + a.dmin.to_f32().abs() * 15.0)
                        * b.d.abs()
                        * 256.0
                        * 127.0
                })
                .sum()
        },
    );
    check_vec_dot(
        "q3_K·q8_K",
        |k| k.vec_dot_q3_k_q8_k,
        q3_k_blocks,
        q8_k,
        |x, y| {
            x.iter()
                .zip(y)
                .map(|(a, b)| a.d.to_f32().abs() * 32.0 * 4.0 * b.d.abs() * 256.0 * 127.0)
                .sum()
        },
    );
    check_vec_dot(
        "iq4_NL·q8_0",
        |k| k.vec_dot_iq4_nl_q8_0,
        iq4_nl_blocks,
        q8_0,
        |x, y| {
            x.iter()
                .zip(y)
                .map(|(a, b)| (a.d.to_f32() * b.d.to_f32()).abs() * 32.0 * 127.0 * 127.0)
                .sum()
        },
    );
    check_vec_dot(
        "iq4_XS·q8_K",
        |k| k.vec_dot_iq4_xs_q8_k,
        iq4_xs_blocks,
        q8_k,
        |x, y| {
            x.iter()
                .zip(y)
                .map(|(a, b)| a.d.to_f32().abs() * 32.0 * 127.0 * b.d.abs() * 256.0 * 127.0)
                .sum()
        },
    );
    check_vec_dot(
        "q6_K·q8_K",
        |k| k.vec_dot_q6_k_q8_k,
        |x| quantized(x, lamina::tensor::quants::q6_k::quantize),
        q8_k,
        |x, y| {
            x.iter()
                .zip(y)
                .map(|(a, b)| a.d.to_f32().abs() * 128.0 * 32.0 * b.d.abs() * 256.0 * 127.0)
                .sum()
        },
    );
}

#[test]
fn vec_dot_f32_and_f16() {
    let scalar = Kernels::scalar();
    let mut rng = Rng::new(3);
    for (variant, k) in variants() {
        for n in [1usize, 3, 15, 16, 17, 31, 64, 100, 1000] {
            let x = random_values(&mut rng, n.div_ceil(32) * 32)[..n].to_vec();
            let y = random_values(&mut rng, n.div_ceil(32) * 32)[..n].to_vec();
            let mag: f32 = x.iter().zip(&y).map(|(a, b)| (a * b).abs()).sum();
            assert_close(
                &format!("f32 {variant} n={n}"),
                (k.vec_dot_f32)(&x, &y),
                (scalar.vec_dot_f32)(&x, &y),
                mag,
                n,
            );
            let xh: Vec<half::f16> = x.iter().map(|&v| half::f16::from_f32(v)).collect();
            let yh: Vec<half::f16> = y.iter().map(|&v| half::f16::from_f32(v)).collect();
            assert_close(
                &format!("f16 {variant} n={n}"),
                (k.vec_dot_f16)(&xh, &yh),
                (scalar.vec_dot_f16)(&xh, &yh),
                mag,
                n,
            );
        }
    }
}

/// Values as their bit patterns, so NaNs compare and zeros keep their sign.
fn bits(v: &[f32]) -> Vec<u32> {
    v.iter().map(|x| x.to_bits()).collect()
}

#[test]
fn float_tiles_match_the_scalar_twin_and_ignore_their_neighbours() {
    let mut rng = Rng::new(5);
    // Values as the matmul passes them: f16 weights widened, activations
    // rounded to f16 (so every product is exact); `n` of them (the
    // generator gives whole blocks of 32), so the tails are exercised.
    let f16_values = |rng: &mut Rng, n: usize| -> Vec<f32> {
        random_values(rng, n.div_ceil(32) * 32)[..n]
            .iter()
            .map(|&x| half::f16::from_f32(x).to_f32())
            .collect()
    };
    let mut checked = 0;
    for (variant, k) in variants() {
        let Some(tile) = k.tile_f32 else { continue };
        for cols in [1usize, 7, 8, 9, 16, 31, 64, 384, 1000] {
            let w: Vec<Vec<f32>> = (0..4).map(|_| f16_values(&mut rng, cols)).collect();
            let wr = [&w[0][..], &w[1][..], &w[2][..], &w[3][..]];
            let h: Vec<Vec<half::f16>> = w
                .iter()
                .map(|r| r.iter().map(|&v| half::f16::from_f32(v)).collect())
                .collect();
            let hr = [&h[0][..], &h[1][..], &h[2][..], &h[3][..]];
            // Every activation row count up to two of the widest tiles and
            // a bit, and every count of stored weight rows.
            for n in 1..=14 {
                let x = f16_values(&mut rng, n * cols);
                let stride = 5;
                for store in 1..=4 {
                    let mut got = vec![f32::NAN; n * stride];
                    tile(wr, &x, &mut got, stride, store);
                    let mut want = vec![f32::NAN; n * stride];
                    lamina::backend::cpu::scalar::tile_f32(wr, &x, &mut want, stride, store);
                    // The same weights as the file holds them (f16), converted
                    // in the kernel: the same bits as the widened rows, and
                    // the scalar twins agree as well.
                    let mut want16 = vec![f32::NAN; n * stride];
                    lamina::backend::cpu::scalar::tile_f16(hr, &x, &mut want16, stride, store);
                    assert_eq!(
                        bits(&want16),
                        bits(&want),
                        "scalar tile_f16 cols={cols} n={n}"
                    );
                    if let Some(tile16) = k.tile_f16 {
                        let mut got16 = vec![f32::NAN; n * stride];
                        tile16(hr, &x, &mut got16, stride, store);
                        assert_eq!(
                            bits(&got16),
                            bits(&got),
                            "{variant}: tile_f16 against tile_f32, cols={cols} n={n} store={store}"
                        );
                    }
                    for i in 0..n {
                        let xi = &x[i * cols..(i + 1) * cols];
                        for r in 0..stride {
                            let (g, v) = (got[i * stride + r], want[i * stride + r]);
                            if r >= store {
                                assert!(g.is_nan(), "{variant}: stored past {store} rows");
                                continue;
                            }
                            let mag: f32 = w[r].iter().zip(xi).map(|(a, b)| (a * b).abs()).sum();
                            let what = format!("tile_f32 {variant} cols={cols} n={n} [{i}][{r}]");
                            assert_close(&what, g, v, mag, cols);
                        }
                    }
                }
                // An output does not depend on the other rows of its tile
                // (the padding of partial tiles relies on it).
                let mut full = vec![0f32; n * 4];
                tile(wr, &x, &mut full, 4, 4);
                let last = &x[(n - 1) * cols..];
                let mut alone = [0f32; 4];
                tile([wr[2]; 4], last, &mut alone, 4, 1);
                assert_eq!(
                    alone[0].to_bits(),
                    full[(n - 1) * 4 + 2].to_bits(),
                    "{variant} cols={cols} n={n}"
                );
            }
            // Tiles check their shapes: a part of a row, too many or no
            // stored rows, an output too short for the stride.
            let x = f16_values(&mut rng, 3 * cols);
            let out = vec![0f32; 12];
            let cases = [
                (&x[..3 * cols - 1], 4, 4),
                (&x[..], 4, 5),
                (&x[..], 4, 0),
                (&x[..], 5, 4),
            ];
            for (x, stride, store) in cases.into_iter().skip(usize::from(cols == 1)) {
                let bad = std::panic::catch_unwind(|| tile(wr, x, &mut out.clone(), stride, store));
                assert!(
                    bad.is_err(),
                    "{variant}: {} values, stride {stride}, store {store}",
                    x.len()
                );
                if let Some(tile16) = k.tile_f16 {
                    let bad =
                        std::panic::catch_unwind(|| tile16(hr, x, &mut out.clone(), stride, store));
                    assert!(bad.is_err(), "{variant}: tile_f16 with {} values", x.len());
                }
            }
        }
        checked += 1;
    }
    if cfg!(target_arch = "x86_64") && variants().iter().any(|(v, _)| *v == CpuVariant::Avx2) {
        assert!(checked >= 1, "the avx2 variant has a float tile");
    }
}

/// The f16 GEMV (one activation row, many weight rows) gives each output
/// the bits of the float tiles on the widened rows, so a token's outputs do
/// not depend on whether it was evaluated alone or in a batch; the scalar
/// twin agrees within rounding, and shapes are checked.
#[test]
fn f16_gemv_matches_the_tiles_bit_for_bit() {
    let mut rng = Rng::new(9);
    let mut checked = 0;
    for (variant, k) in variants() {
        let Some(gemv) = k.gemv_f16 else { continue };
        let tile = k
            .tile_f32
            .expect("a variant with an f16 GEMV has float tiles");
        for cols in [1usize, 7, 8, 9, 16, 31, 64, 384, 1000] {
            for rows in [1usize, 3, 4, 9] {
                let w: Vec<half::f16> = random_values(&mut rng, (rows * cols).div_ceil(32) * 32)
                    [..rows * cols]
                    .iter()
                    .map(|&v| half::f16::from_f32(v))
                    .collect();
                let x: Vec<f32> = random_values(&mut rng, cols.div_ceil(32) * 32)[..cols]
                    .iter()
                    .map(|&v| half::f16::from_f32(v).to_f32())
                    .collect();
                let mut got = vec![f32::NAN; rows];
                gemv(&w, &x, &mut got);
                let mut twin = vec![f32::NAN; rows];
                lamina::backend::cpu::scalar::gemv_f16(&w, &x, &mut twin);
                let wide: Vec<f32> = w.iter().map(|v| v.to_f32()).collect();
                for r in 0..rows {
                    let row = |t: usize| &wide[(r + t).min(rows - 1) * cols..][..cols];
                    let mut tiled = [f32::NAN; 4];
                    tile([row(0), row(1), row(2), row(3)], &x, &mut tiled, 4, 1);
                    let what = format!("{variant}: gemv_f16 cols={cols} rows={rows} [{r}]");
                    assert_eq!(
                        got[r].to_bits(),
                        tiled[0].to_bits(),
                        "{what} against tile_f32"
                    );
                    let mag: f32 = row(0).iter().zip(&x).map(|(a, b)| (a * b).abs()).sum();
                    assert_close(&what, got[r], twin[r], mag, cols);
                }
            }
        }
        // Weights that are not whole rows, or no activations.
        let w = vec![half::f16::ZERO; 10];
        for (x, rows) in [(vec![0f32; 3], 3), (vec![0f32; 5], 3), (vec![], 0)] {
            let bad = std::panic::catch_unwind(|| gemv(&w, &x, &mut vec![0f32; rows]));
            assert!(
                bad.is_err(),
                "{variant}: gemv_f16 of 10 weights, {} columns",
                x.len()
            );
        }
        checked += 1;
    }
    if cfg!(target_arch = "x86_64") && variants().iter().any(|(v, _)| *v == CpuVariant::Avx2) {
        assert!(checked >= 1, "the avx2 variant has an f16 GEMV");
    }
}

/// The scalar kernels themselves against a plain f64 computation from the
/// dequantized blocks: the integer parts are exact, so only float rounding
/// remains.
#[test]
fn scalar_kernels_agree_with_dequantized_dot_products() {
    use lamina::tensor::{convert, DType};
    let mut rng = Rng::new(4);
    let n = 256 * 4;
    let x = random_values(&mut rng, n);
    let y = random_values(&mut rng, n);
    let s = Kernels::scalar();
    let reference = |dx: DType, bx: &[u8], dy: DType, by: &[u8]| -> (f64, f64) {
        let a = convert::to_f32(dx, bx, n).unwrap();
        let b = convert::to_f32(dy, by, n).unwrap();
        let dot: f64 = a.iter().zip(&b).map(|(p, q)| *p as f64 * *q as f64).sum();
        let mag: f64 = a
            .iter()
            .zip(&b)
            .map(|(p, q)| (*p as f64 * *q as f64).abs())
            .sum();
        (dot, mag)
    };
    let bytes = |v: &[u8]| v.to_vec();
    let cases: Vec<(&str, f32, (f64, f64))> = vec![
        {
            let (a, b) = (
                quantized(&x, lamina::tensor::quants::q4_0::quantize),
                q8_0(&y),
            );
            (
                "q4_0",
                (s.vec_dot_q4_0_q8_0)(&a, &b),
                reference(
                    DType::Q4_0,
                    &bytes(blocks_as_bytes(&a)),
                    DType::Q8_0,
                    blocks_as_bytes(&b),
                ),
            )
        },
        {
            let (a, b) = (
                quantized(&x, lamina::tensor::quants::q5_0::quantize),
                q8_0(&y),
            );
            (
                "q5_0",
                (s.vec_dot_q5_0_q8_0)(&a, &b),
                reference(
                    DType::Q5_0,
                    &bytes(blocks_as_bytes(&a)),
                    DType::Q8_0,
                    blocks_as_bytes(&b),
                ),
            )
        },
        {
            let (a, b) = (q8_0(&x), q8_0(&y));
            (
                "q8_0",
                (s.vec_dot_q8_0_q8_0)(&a, &b),
                reference(
                    DType::Q8_0,
                    &bytes(blocks_as_bytes(&a)),
                    DType::Q8_0,
                    blocks_as_bytes(&b),
                ),
            )
        },
        {
            let (a, b) = (
                quantized(&x, lamina::tensor::quants::q4_k::quantize),
                q8_k(&y),
            );
            (
                "q4_K",
                (s.vec_dot_q4_k_q8_k)(&a, &b),
                reference(
                    DType::Q4_K,
                    &bytes(blocks_as_bytes(&a)),
                    DType::Q8_K,
                    blocks_as_bytes(&b),
                ),
            )
        },
        {
            let (a, b) = (
                quantized(&x, lamina::tensor::quants::q5_k::quantize),
                q8_k(&y),
            );
            (
                "q5_K",
                (s.vec_dot_q5_k_q8_k)(&a, &b),
                reference(
                    DType::Q5_K,
                    &bytes(blocks_as_bytes(&a)),
                    DType::Q8_K,
                    blocks_as_bytes(&b),
                ),
            )
        },
        {
            let (a, b) = (
                quantized(&x, lamina::tensor::quants::q6_k::quantize),
                q8_k(&y),
            );
            (
                "q6_K",
                (s.vec_dot_q6_k_q8_k)(&a, &b),
                reference(
                    DType::Q6_K,
                    &bytes(blocks_as_bytes(&a)),
                    DType::Q8_K,
                    blocks_as_bytes(&b),
                ),
            )
        },
    ];
    let mut cases = cases;
    {
        let (a, b) = (iq4_nl_blocks(&x), q8_0(&y));
        cases.push((
            "iq4_nl (random blocks)",
            (s.vec_dot_iq4_nl_q8_0)(&a, &b),
            reference(
                DType::IQ4_NL,
                blocks_as_bytes(&a),
                DType::Q8_0,
                blocks_as_bytes(&b),
            ),
        ));
        let (a, b) = (iq4_xs_blocks(&x), q8_k(&y));
        cases.push((
            "iq4_xs (random blocks)",
            (s.vec_dot_iq4_xs_q8_k)(&a, &b),
            reference(
                DType::IQ4_XS,
                blocks_as_bytes(&a),
                DType::Q8_K,
                blocks_as_bytes(&b),
            ),
        ));
        for (name, ty) in [("iq4_nl", DType::IQ4_NL), ("iq4_xs", DType::IQ4_XS)] {
            let a = convert::from_f32(ty, &x).unwrap();
            let got = if ty == DType::IQ4_NL {
                let b = q8_0(&y);
                let w = lamina::tensor::blocks::as_blocks::<BlockIQ4NL>(&a).unwrap();
                ((s.vec_dot_iq4_nl_q8_0)(w, &b), blocks_as_bytes(&b).to_vec())
            } else {
                let b = q8_k(&y);
                let w = lamina::tensor::blocks::as_blocks::<BlockIQ4XS>(&a).unwrap();
                ((s.vec_dot_iq4_xs_q8_k)(w, &b), blocks_as_bytes(&b).to_vec())
            };
            let dy = if ty == DType::IQ4_NL {
                DType::Q8_0
            } else {
                DType::Q8_K
            };
            cases.push((name, got.0, reference(ty, &a, dy, &got.1)));
        }
    }
    for (name, a, ty) in [
        (
            "q2_K",
            blocks_as_bytes(&q2_k_blocks(&x)).to_vec(),
            DType::Q2_K,
        ),
        (
            "q3_K",
            blocks_as_bytes(&q3_k_blocks(&x)).to_vec(),
            DType::Q3_K,
        ),
    ] {
        let b = q8_k(&y);
        let got = if ty == DType::Q2_K {
            (s.vec_dot_q2_k_q8_k)(&q2_k_blocks(&x), &b)
        } else {
            (s.vec_dot_q3_k_q8_k)(&q3_k_blocks(&x), &b)
        };
        cases.push((
            name,
            got,
            reference(ty, &a, DType::Q8_K, blocks_as_bytes(&b)),
        ));
    }
    for (name, got, (want, mag)) in cases {
        let tol = mag * 1e-5 + 1e-12;
        assert!(
            ((got as f64) - want).abs() <= tol,
            "{name}: {got} vs {want} (tolerance {tol})"
        );
    }
}

/// `got` has `want`'s bits, or both are NaNs of the same sign (payloads
/// may differ between a kernel and `half`).
fn same_value(got: f32, want: f32) -> bool {
    if want.is_nan() {
        got.is_nan() && got.is_sign_negative() == want.is_sign_negative()
    } else {
        got.to_bits() == want.to_bits()
    }
}

/// Widening f16 is exact: every variant gives `half`'s value for every one
/// of the 65536 bit patterns (NaNs stay NaNs with their sign), at every
/// offset of a vector's tail.
#[test]
fn widen_f16_is_exact_for_every_value() {
    let all: Vec<half::f16> = (0..=u16::MAX).map(half::f16::from_bits).collect();
    for (variant, k) in variants() {
        for len in [all.len(), all.len() - 1, 13, 7, 0] {
            let x = &all[all.len() - len..];
            let mut out = vec![0.0f32; len];
            (k.widen_f16)(x, &mut out);
            for (v, o) in x.iter().zip(&out) {
                assert!(
                    same_value(*o, v.to_f32()),
                    "{variant}: {:#06x} gave {o} ({:#x})",
                    v.to_bits(),
                    o.to_bits()
                );
            }
        }
        // (A panic aborts wasm tests: checked natively.)
        #[cfg(not(target_arch = "wasm32"))]
        {
            let short = std::panic::catch_unwind(|| (k.widen_f16)(&all[..8], &mut [0.0; 7]));
            assert!(short.is_err(), "{variant}: widen_f16 into a shorter slice");
        }
    }
}

/// Rounding f32 to f16 and back (the activations of f16 products, the
/// queries and weights of attention over an f16 cache) gives `half`'s bits
/// on every variant: random bit patterns (every exponent: zeros,
/// subnormals, overflow to infinity, NaNs keep NaN and sign), values
/// within f16's range, and the exact midpoints between neighbouring f16
/// values (ties go to the even one), at every offset of a vector's tail.
#[test]
fn round_f16_matches_half_for_every_kind_of_value() {
    let mut rng = Rng::new(21);
    let mut x: Vec<f32> = (0..40_000)
        .map(|_| f32::from_bits(rng.next_u64() as u32))
        .collect();
    x.extend((0..40_000).map(|_| (rng.next_u64() as i32) as f32 / i32::MAX as f32 * 70_000.0));
    x.extend((0..40_000).map(|_| {
        let h = half::f16::from_bits(rng.next_u64() as u16 & 0x7bff);
        let next = half::f16::from_bits(h.to_bits() + 1);
        (h.to_f32() + next.to_f32()) / 2.0
    }));
    x.extend([
        0.0,
        -0.0,
        65504.0,
        65519.996,
        65520.0,
        f32::INFINITY,
        f32::NAN,
        -f32::NAN,
    ]);
    for (variant, k) in variants() {
        for len in [x.len(), x.len() - 1, 13, 7, 0] {
            let x = &x[x.len() - len..];
            let mut out = vec![0.0f32; len];
            (k.round_f16)(x, &mut out);
            for (v, o) in x.iter().zip(&out) {
                let want = half::f16::from_f32(*v).to_f32();
                assert!(
                    same_value(*o, want),
                    "{variant}: {v:e} ({:#x}) gave {o:e}",
                    v.to_bits()
                );
            }
        }
        // (A panic aborts wasm tests: checked natively.)
        #[cfg(not(target_arch = "wasm32"))]
        {
            let short = std::panic::catch_unwind(|| (k.round_f16)(&x[..8], &mut [0.0; 7]));
            assert!(short.is_err(), "{variant}: round_f16 into a shorter slice");
        }
    }
}

/// f32 matrix products (attention over blocks of queries) give the scalar
/// twin's bits on every variant: shapes with rows and columns around the
/// tiles' sizes (4 rows; 4, 8, 16 and 32 columns and their tails), an empty
/// inner dimension (zeros), strided rows whose gaps stay untouched, and
/// values of every magnitude.
#[test]
fn gemm_f32_equals_its_twin_bit_for_bit() {
    use lamina::backend::cpu::rows::{self, GemmShape};
    let mut rng = Rng::new(41);
    let mut shapes = 0;
    for m in [1usize, 2, 3, 4, 5, 9] {
        for n in [1usize, 3, 4, 7, 8, 15, 16, 17, 31, 32, 33, 40, 100] {
            for k in [0usize, 1, 5, 32, 41] {
                let gap = rng.below(3) as usize;
                let g = GemmShape {
                    m,
                    n,
                    k,
                    lda: k + gap,
                    ldb: n + 2 * gap,
                    ldc: n + gap,
                };
                let a = random_values(&mut rng, (m * g.lda).div_ceil(32) * 32);
                let b = random_values(&mut rng, (k.max(1) * g.ldb).div_ceil(32) * 32);
                // The gaps between output rows start as NaN and must stay so.
                let c0 = vec![f32::NAN; m * g.ldc];
                let mut want = c0.clone();
                rows::gemm_f32(&g, &a, &b, &mut want);
                for (variant, kern) in variants() {
                    let mut got = c0.clone();
                    (kern.gemm_f32)(&g, &a, &b, &mut got);
                    for (i, (x, y)) in got.iter().zip(&want).enumerate() {
                        assert!(
                            same_value(*x, *y),
                            "{variant}: {g:?}, value {i}: {x:e} vs the twin's {y:e}"
                        );
                    }
                }
                shapes += 1;
            }
        }
    }
    assert_eq!(shapes, 6 * 13 * 5);
    // An empty inner dimension gives zeros; a slice too short for its shape
    // is refused before anything is read or written.
    for (variant, kern) in variants() {
        let g = GemmShape {
            m: 2,
            n: 3,
            k: 0,
            lda: 0,
            ldb: 3,
            ldc: 3,
        };
        let mut c = [f32::NAN; 6];
        (kern.gemm_f32)(&g, &[], &[], &mut c);
        assert_eq!(c, [0.0; 6], "{variant}");
        // (A panic aborts wasm tests: checked natively.)
        #[cfg(not(target_arch = "wasm32"))]
        {
            let g = GemmShape {
                m: 2,
                n: 16,
                k: 4,
                lda: 4,
                ldb: 16,
                ldc: 16,
            };
            let (a, b) = (vec![1.0; 8], vec![1.0; 64]);
            for (la, lb, lc) in [(7, 64, 32), (8, 63, 32), (8, 64, 31)] {
                let short = std::panic::catch_unwind(|| {
                    (kern.gemm_f32)(&g, &a[..la], &b[..lb], &mut vec![0.0; lc])
                });
                assert!(
                    short.is_err(),
                    "{variant}: gemm_f32 with {la}, {lb}, {lc} values"
                );
            }
            let narrow = GemmShape { ldb: 15, ..g };
            let short =
                std::panic::catch_unwind(|| (kern.gemm_f32)(&narrow, &a, &b, &mut vec![0.0; 32]));
            assert!(
                short.is_err(),
                "{variant}: gemm_f32 with rows narrower than the matrix"
            );
        }
    }
}

/// The softmax with the polynomial exp (attention over blocks of queries)
/// gives the scalar twin's bits on every variant, for rows around the
/// chunk sizes (4 and 8 values) and their tails, with values spread over
/// small and large ranges (exp's clamp included) and a NaN among them; and
/// the twin is a softmax: within a relative 1e-6 (plus 1e-30, for exp's
/// clamp) of one in f64 over the same f32 differences.
#[test]
fn softmax_poly_equals_its_twin_and_the_definition() {
    use lamina::backend::cpu::rows;
    let mut rng = Rng::new(43);
    for len in [0usize, 1, 3, 4, 7, 8, 9, 15, 16, 17, 31, 33, 100, 128, 129] {
        for spread in [0.5f32, 8.0, 200.0] {
            let mut x: Vec<f32> = (0..len)
                .map(|_| ((rng.next_u64() >> 40) as f32 / (1u64 << 24) as f32 - 0.5) * spread)
                .collect();
            let mut want = x.clone();
            rows::softmax_poly(&mut want);
            // (Each value minus the maximum is rounded to f32 first, as
            // every softmax in f32 rounds it.)
            let max = x.iter().copied().fold(f32::NEG_INFINITY, f32::max);
            let total: f64 = x.iter().map(|&v| ((v - max) as f64).exp()).sum();
            for (v, w) in x.iter().zip(&want) {
                let exact = ((*v - max) as f64).exp() / total;
                assert!(
                    (*w as f64 - exact).abs() <= 1e-6 * exact + 1e-30,
                    "len {len} spread {spread}: {w:e} vs {exact:e}"
                );
            }
            if len > 2 && spread == 8.0 {
                x[len / 2] = f32::NAN;
                want.copy_from_slice(&x);
                rows::softmax_poly(&mut want);
            }
            for (variant, k) in variants() {
                let mut got = x.clone();
                (k.softmax_poly)(&mut got);
                // (A NaN made by arithmetic has no set sign in wasm.)
                for (i, (g, w)) in got.iter().zip(&want).enumerate() {
                    assert!(
                        g.to_bits() == w.to_bits() || g.is_nan() && w.is_nan(),
                        "{variant}: len {len} spread {spread}, value {i}: {g:e} vs the twin's {w:e}"
                    );
                }
            }
        }
    }
}

/// The block scales' f16 → f32 (branchless on wasm, `half` elsewhere) gives
/// `half`'s bits for every one of the 65536 values: zeros, subnormals,
/// normals, infinities and NaNs (quieted as `half` quiets them).
#[test]
fn block_scale_widening_matches_half_for_every_value() {
    for bits in 0..=u16::MAX {
        let h = half::f16::from_bits(bits);
        assert_eq!(
            lamina::backend::cpu::widen::f16_to_f32(h).to_bits(),
            h.to_f32().to_bits(),
            "{bits:#06x}"
        );
    }
}

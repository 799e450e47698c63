//! x86_64 kernels for CPUs with AVX-VNNI (the 256-bit, VEX-encoded
//! `vpdpbusd`/`vpdpwssd` of Intel's client cores since Alder Lake, which
//! have no AVX-512), over the AVX2 table. The eight-row group kernels are
//! AVX2's with VNNI sums: four u8 × i8 products per 32-bit lane in one
//! instruction (`vpdpbusd`), and a 16-bit pair times the row's scale added
//! in one more (`vpdpwssd`). The integer sums are exact, and the float steps
//! are AVX2's, so every result equals the AVX2 kernel's (and the scalar
//! twin's) bit for bit.

use std::arch::x86_64::*;

use super::avx2;
use super::group_tiles::{by_take, gemm_in_tiles, gemm_sums_in_tiles};
use super::kernels::Kernels;
use super::repack::BlockQ4_0x8;
use super::repack_q4_k::BlockQ4Kx8;
use super::repack_q5_0::BlockQ5_0x8;
use super::repack_q6_k::BlockQ6Kx8;
use super::repack_q8_0::BlockQ8_0x8;
use crate::tensor::blocks::*;

/// Whether this CPU has what the kernels here need.
pub(super) fn detected() -> bool {
    std::arch::is_x86_feature_detected!("avx2")
        && std::arch::is_x86_feature_detected!("fma")
        && std::arch::is_x86_feature_detected!("f16c")
        && std::arch::is_x86_feature_detected!("avxvnni")
}

/// The AVX-VNNI table over the AVX2 one. Panics unless this CPU has the
/// features (checked here, once per table, as `avx2::kernels` does).
pub(super) fn kernels(base: Kernels) -> Kernels {
    assert!(
        detected(),
        "the avxvnni kernel table needs avx2, fma, f16c and avxvnni, which this CPU lacks"
    );
    Kernels {
        gemm_q4_0_x8i8: Some(gemm_q4_0_x8i8),
        // Its own Q4_0 kernel (activations flipped per run for `vpdpbusd`)
        // rather than AVX2's, which takes the activation sums.
        gemm_q4_0_x8i8_sums: None,
        gemm_q8_0_x8: Some(gemm_q8_0_x8),
        gemm_q4_k_x8: Some(gemm_q4_k_x8),
        gemm_q5_0_x8: Some(gemm_q5_0_x8),
        gemm_q6_k_x8: Some(gemm_q6_k_x8),
        ..avx2::kernels(base)
    }
}

fn gemm_q4_0_x8i8(
    group: &[BlockQ4_0x8],
    x: &[BlockQ8_0],
    n: usize,
    out: &mut [f32],
    stride: usize,
) {
    gemm_in_tiles(group, x, n, out, stride, |take, xs, res| {
        // SAFETY: only reachable through the table built after detecting
        // the features (`kernels`); `gemm_in_tiles` slices every `xs` row
        // to `group.len()` blocks, and `res` is typed.
        unsafe { by_take!(take, gemm_tile_q4_0_x8(group, xs, res)) }
    });
}

fn gemm_q8_0_x8(group: &[BlockQ8_0x8], x: &[BlockQ8_0], n: usize, out: &mut [f32], stride: usize) {
    gemm_in_tiles(group, x, n, out, stride, |take, xs, res| {
        // SAFETY: as in `gemm_q4_0_x8i8`.
        unsafe { by_take!(take, gemm_tile_q8_0_x8(group, xs, res)) }
    });
}

fn gemm_q4_k_x8(group: &[BlockQ4Kx8], x: &[BlockQ8K], n: usize, out: &mut [f32], stride: usize) {
    gemm_in_tiles(group, x, n, out, stride, |take, xs, res| {
        // SAFETY: as in `gemm_q4_0_x8i8`.
        unsafe { by_take!(take, gemm_tile_q4_k_x8(group, xs, res)) }
    });
}

fn gemm_q5_0_x8(
    group: &[BlockQ5_0x8],
    x: &[BlockQ8_0],
    sums: &[i32],
    n: usize,
    out: &mut [f32],
    stride: usize,
) {
    gemm_sums_in_tiles(group, x, sums, n, out, stride, |take, xs, ss, res| {
        // SAFETY: as in `gemm_q4_0_x8i8`; every `ss` row is sliced to
        // `group.len()` as well.
        unsafe { by_take!(take, gemm_tile_q5_0_x8(group, xs, ss, res)) }
    });
}

fn gemm_q6_k_x8(group: &[BlockQ6Kx8], x: &[BlockQ8K], n: usize, out: &mut [f32], stride: usize) {
    gemm_in_tiles(group, x, n, out, stride, |take, xs, res| {
        // SAFETY: as in `gemm_q4_0_x8i8`.
        unsafe { by_take!(take, gemm_tile_q6_k_x8(group, xs, res)) }
    });
}

/// Four 8-byte runs of activations starting at `at`: the same run for each
/// of the four rows of a 32-byte group vector.
///
/// # Safety
/// The CPU must have avx2; `at..at + 8` must be within `qs`.
#[target_feature(enable = "avx2")]
#[inline]
unsafe fn run_of_8(qs: &[i8], at: usize) -> __m256i {
    debug_assert!(at + 8 <= qs.len());
    _mm256_set1_epi64x(qs.as_ptr().add(at).cast::<i64>().read_unaligned())
}

/// The eight rows' sums in row order, from two vectors whose 32-bit lanes
/// hold (row, half of the run) pairs of rows 0-3 and 4-7.
///
/// # Safety
/// The CPU must have avx2.
#[target_feature(enable = "avx2")]
#[inline]
unsafe fn add_lane_pairs(halves: [__m256i; 2]) -> __m256i {
    let order = _mm256_setr_epi32(0, 1, 4, 5, 2, 3, 6, 7);
    _mm256_permutevar8x32_epi32(_mm256_hadd_epi32(halves[0], halves[1]), order)
}

/// A row's scale in both 32-bit lanes of its 64-bit lane (low 16 bits, the
/// high 16 zero, as `vpdpwssd` with a 16-bit-exact sum wants it), for the
/// four rows whose scale bytes start at `bytes`.
///
/// # Safety
/// The CPU must have avx2; four bytes must be readable at `bytes`.
#[target_feature(enable = "avx2")]
#[inline]
unsafe fn row_scales(bytes: *const u8) -> __m256i {
    let wide = _mm256_cvtepu8_epi64(_mm_cvtsi32_si128(bytes.cast::<i32>().read_unaligned()));
    _mm256_or_si256(wide, _mm256_slli_epi64(wide, 32))
}

/// Eight repacked Q4_0 rows times `A` (1..=4) activation rows, rows 0-3 and
/// 4-7 in two vectors: the activations moved up by 128 (unsigned, a
/// sign-bit flip) against the signed weights q − 8 in `vpdpbusd`, from
/// lanes that start at −128 × Σ (q − 8), taken once per group block. Exact
/// block sums and `avx2::gemm_tile_x8i8`'s float steps, so the results
/// equal it bit for bit.
///
/// # Safety
/// The CPU must have the features `detected` checks. `A` must be 1..=4 and
/// each of the first `A` rows of `xs` at least `group.len()` blocks long.
#[target_feature(enable = "avx2,fma,f16c,avxvnni")]
unsafe fn gemm_tile_q4_0_x8<const A: usize>(
    group: &[BlockQ4_0x8],
    xs: &[&[BlockQ8_0]; 4],
    res: &mut [[f32; 8]; 4],
) {
    let low_mask = _mm256_set1_epi8(0x0F);
    let eights = _mm256_set1_epi8(8);
    let flip = _mm256_set1_epi8(-128);
    let mut acc = [_mm256_setzero_ps(); A];
    for (bi, b) in group.iter().enumerate() {
        // w[k][nib][half]: rows 4·half..'s values 16·nib + 8k.., less 8.
        let w: [[[__m256i; 2]; 2]; 2] = std::array::from_fn(|k| {
            let q: [__m256i; 2] = std::array::from_fn(|half| {
                _mm256_loadu_si256(b.qs.as_ptr().add(64 * k + 32 * half).cast())
            });
            [
                q.map(|q| _mm256_sub_epi8(_mm256_and_si256(q, low_mask), eights)),
                q.map(|q| {
                    _mm256_sub_epi8(_mm256_and_si256(_mm256_srli_epi16(q, 4), low_mask), eights)
                }),
            ]
        });
        let mut start = [_mm256_setzero_si256(); 2];
        for w in w.iter().flatten() {
            for (half, start) in start.iter_mut().enumerate() {
                let negated = _mm256_sub_epi8(_mm256_setzero_si256(), w[half]);
                *start = _mm256_dpbusd_avx_epi32(*start, flip, negated);
            }
        }
        let dw = _mm256_cvtph_ps(_mm_loadu_si128(b.d.as_ptr().cast()));
        for (j, a) in acc.iter_mut().enumerate() {
            let y = &xs[j][bi];
            let mut sums = start;
            for (k, w) in w.iter().enumerate() {
                for (nib, w) in w.iter().enumerate() {
                    let ya = _mm256_xor_si256(run_of_8(&y.qs, 16 * nib + 8 * k), flip);
                    for (half, sum) in sums.iter_mut().enumerate() {
                        *sum = _mm256_dpbusd_avx_epi32(*sum, ya, w[half]);
                    }
                }
            }
            let scaled = _mm256_mul_ps(
                _mm256_mul_ps(_mm256_cvtepi32_ps(add_lane_pairs(sums)), dw),
                _mm256_set1_ps(avx2::fp16(y.d)),
            );
            *a = _mm256_add_ps(*a, scaled);
        }
    }
    for (j, a) in acc.iter().enumerate() {
        _mm256_storeu_ps(res[j].as_mut_ptr(), *a);
    }
}

/// Eight repacked Q8_0 rows times `A` (1..=4) activation rows: the weights'
/// magnitudes (<= 128, unsigned) against the activations with the weights'
/// signs, four products per lane summed by `vpdpbusd`. Exact block sums and
/// `avx2::gemm_tile_q8_0_x8`'s float steps, so the results equal it.
///
/// # Safety
/// As `gemm_tile_q4_0_x8`.
#[target_feature(enable = "avx2,fma,f16c,avxvnni")]
unsafe fn gemm_tile_q8_0_x8<const A: usize>(
    group: &[BlockQ8_0x8],
    xs: &[&[BlockQ8_0]; 4],
    res: &mut [[f32; 8]; 4],
) {
    let mut acc = [_mm256_setzero_ps(); A];
    for (bi, b) in group.iter().enumerate() {
        // w[k][half]: rows 4·half.., values 8k..8k + 8.
        let w: [[__m256i; 2]; 4] = std::array::from_fn(|k| {
            std::array::from_fn(|half| {
                _mm256_loadu_si256(b.qs.as_ptr().add(64 * k + 32 * half).cast())
            })
        });
        let magnitudes = w.map(|pair| pair.map(|v| _mm256_abs_epi8(v)));
        let dw = _mm256_cvtph_ps(_mm_loadu_si128(b.d.as_ptr().cast()));
        for (j, a) in acc.iter_mut().enumerate() {
            let y = &xs[j][bi];
            let mut sums = [_mm256_setzero_si256(); 2];
            for k in 0..4 {
                let ya = run_of_8(&y.qs, 8 * k);
                for (half, sum) in sums.iter_mut().enumerate() {
                    *sum = _mm256_dpbusd_avx_epi32(
                        *sum,
                        magnitudes[k][half],
                        _mm256_sign_epi8(ya, w[k][half]),
                    );
                }
            }
            let scale = _mm256_mul_ps(dw, _mm256_set1_ps(avx2::fp16(y.d)));
            *a = _mm256_fmadd_ps(_mm256_cvtepi32_ps(add_lane_pairs(sums)), scale, *a);
        }
    }
    for (j, a) in acc.iter().enumerate() {
        _mm256_storeu_ps(res[j].as_mut_ptr(), *a);
    }
}

/// Eight repacked Q5_0 rows times `A` (1..=4) activation rows: AVX2's
/// unsigned values (value + 16, `avx2::q5_0x8_unsigned`) against the
/// activations in `vpdpbusd`, 16 × the activation block's sum off after.
/// Exact block sums and `avx2::gemm_tile_q5_0_x8`'s float steps, so the
/// results equal it bit for bit.
///
/// # Safety
/// As `gemm_tile_q4_0_x8`, and each of the first `A` rows of `sums` at
/// least `group.len()` long.
#[target_feature(enable = "avx2,fma,f16c,avxvnni")]
unsafe fn gemm_tile_q5_0_x8<const A: usize>(
    group: &[BlockQ5_0x8],
    xs: &[&[BlockQ8_0]; 4],
    sums: &[&[i32]; 4],
    res: &mut [[f32; 8]; 4],
) {
    let mut acc = [_mm256_setzero_ps(); A];
    for (bi, b) in group.iter().enumerate() {
        let u = avx2::q5_0x8_unsigned(b);
        let dw = _mm256_cvtph_ps(_mm_loadu_si128(b.d.as_ptr().cast()));
        for (j, a) in acc.iter_mut().enumerate() {
            let y = &xs[j][bi];
            let mut halves = [_mm256_setzero_si256(); 2];
            for (k, u) in u.iter().enumerate() {
                for (sum, u) in halves.iter_mut().zip(u) {
                    for (nib, u) in u.iter().enumerate() {
                        let ya = run_of_8(&y.qs, 16 * nib + 8 * k);
                        *sum = _mm256_dpbusd_avx_epi32(*sum, *u, ya);
                    }
                }
            }
            let rows =
                _mm256_sub_epi32(add_lane_pairs(halves), _mm256_set1_epi32(16 * sums[j][bi]));
            let d = _mm256_mul_ps(dw, _mm256_set1_ps(avx2::fp16(y.d)));
            *a = _mm256_fmadd_ps(_mm256_cvtepi32_ps(rows), d, *a);
        }
    }
    for (j, a) in acc.iter().enumerate() {
        _mm256_storeu_ps(res[j].as_mut_ptr(), *a);
    }
}

/// Eight repacked Q4_K rows times `A` (1..=4) activation rows. For each
/// sub-block of 32, four `vpdpbusd` give each (row, half of the run) lane
/// its 16 nibble × activation products, exactly and within 16 bits
/// (|sum| <= 16·15·128 < 2^15), and `vpdpwssd` against the row's scale adds
/// scale × that to the running sum. The integers and the float combination
/// are `avx2::gemm_tile_q4_k_x8`'s, so each result equals it bit for bit.
///
/// # Safety
/// As `gemm_tile_q4_0_x8`.
#[target_feature(enable = "avx2,fma,f16c,avxvnni")]
unsafe fn gemm_tile_q4_k_x8<const A: usize>(
    group: &[BlockQ4Kx8],
    xs: &[&[BlockQ8K]; 4],
    res: &mut [[f32; 8]; 4],
) {
    let low_mask = _mm256_set1_epi8(0x0F);
    let mut acc = [_mm256_setzero_ps(); A];
    for (bi, b) in group.iter().enumerate() {
        let mut sums = [[_mm256_setzero_si256(); 2]; A];
        for c in 0..4 {
            for nib in 0..2 {
                // w[k][half]: rows 4·half..'s values 64c + 32·nib + 8k..
                let w: [[__m256i; 2]; 4] = std::array::from_fn(|k| {
                    std::array::from_fn(|half| {
                        let at = 256 * c + 64 * k + 32 * half;
                        let q = _mm256_loadu_si256(b.qs.as_ptr().add(at).cast());
                        let q = if nib == 0 { q } else { _mm256_srli_epi16(q, 4) };
                        _mm256_and_si256(q, low_mask)
                    })
                });
                let s = 2 * c + nib;
                let scales: [__m256i; 2] =
                    std::array::from_fn(|half| row_scales(b.scales.as_ptr().add(8 * s + 4 * half)));
                for (j, sum) in sums.iter_mut().enumerate() {
                    let qs = &xs[j][bi].qs;
                    let ya: [__m256i; 4] =
                        std::array::from_fn(|k| run_of_8(qs, 64 * c + 32 * nib + 8 * k));
                    for (half, sum) in sum.iter_mut().enumerate() {
                        let mut run = _mm256_setzero_si256();
                        for k in 0..4 {
                            run = _mm256_dpbusd_avx_epi32(run, w[k][half], ya[k]);
                        }
                        *sum = _mm256_dpwssd_avx_epi32(*sum, run, scales[half]);
                    }
                }
            }
        }
        // mins[p]: each row's (min of sub-block 2p, of 2p + 1) in 16 bits.
        let mins: [__m256i; 4] = std::array::from_fn(|p| {
            _mm256_cvtepu8_epi16(_mm_loadu_si128(b.mins.as_ptr().add(16 * p).cast()))
        });
        let d = _mm256_cvtph_ps(_mm_loadu_si128(b.d.as_ptr().cast()));
        let dmin = _mm256_cvtph_ps(_mm_loadu_si128(b.dmin.as_ptr().cast()));
        for (j, a) in acc.iter_mut().enumerate() {
            let y = &xs[j][bi];
            let dots = add_lane_pairs(sums[j]);
            // Σ min × (sum of the sub-block's activations), the sub-block
            // sums as 16-bit pairs (s = 2p, 2p + 1) in every 32-bit lane.
            let bsums = _mm256_broadcastsi128_si256(_mm_hadd_epi16(
                _mm_loadu_si128(y.bsums.as_ptr().cast()),
                _mm_loadu_si128(y.bsums.as_ptr().add(8).cast()),
            ));
            let mut min_sums = _mm256_setzero_si256();
            for (p, mins) in mins.iter().enumerate() {
                let pair = _mm256_permutevar8x32_epi32(bsums, _mm256_set1_epi32(p as i32));
                min_sums = _mm256_dpwssd_avx_epi32(min_sums, *mins, pair);
            }
            let yd = _mm256_set1_ps(y.d);
            let scaled = _mm256_sub_ps(
                _mm256_mul_ps(_mm256_mul_ps(d, yd), _mm256_cvtepi32_ps(dots)),
                _mm256_mul_ps(_mm256_mul_ps(dmin, yd), _mm256_cvtepi32_ps(min_sums)),
            );
            *a = _mm256_add_ps(*a, scaled);
        }
    }
    for (j, a) in acc.iter().enumerate() {
        _mm256_storeu_ps(res[j].as_mut_ptr(), *a);
    }
}

/// Eight repacked Q6_K rows times `A` (1..=4) activation rows:
/// `avx2::gemm_tile_q6_k_x8` with `vpdpwssd` meeting each sub-block's
/// 16-bit sums with the rows' signed scales (one instruction for AVX2's
/// `madd` and add). The unsigned six-bit values are decoded per half
/// super-block for all `A` rows; two `maddubs` per sub-block of 16 are
/// summed in 16 bits (|sum| <= 2·2·63·128 < 2^15), and 32 × Σ scale ×
/// (Q8_K's 16-sums) comes off after. Integers and float steps are AVX2's,
/// so each result equals it bit for bit.
///
/// # Safety
/// As `gemm_tile_q4_0_x8`.
#[target_feature(enable = "avx2,fma,f16c,avxvnni")]
unsafe fn gemm_tile_q6_k_x8<const A: usize>(
    group: &[BlockQ6Kx8],
    xs: &[&[BlockQ8K]; 4],
    res: &mut [[f32; 8]; 4],
) {
    let widen_scale = [q6_scale_index(0), q6_scale_index(1)];
    let mut acc = [_mm256_setzero_ps(); A];
    for (bi, b) in group.iter().enumerate() {
        let mut sums = [[_mm256_setzero_si256(); 2]; A];
        for h in 0..2 {
            for half in 0..2 {
                // w[k][nib]: rows 4·half..'s values 128h + 64·nib + 8k..
                let w = avx2::q6_kx8_values(b, h, half);
                // scales[nib][m]: sub-block 8h + 4·nib + m's scale for rows
                // 4·half.., per 16-bit lane.
                let scales: [[__m256i; 4]; 2] = std::array::from_fn(|nib| {
                    std::array::from_fn(|m| {
                        let s = 8 * h + 4 * nib + m;
                        let at = 16 * (s / 2) + 8 * half;
                        let bytes = b.scales.as_ptr().add(at).cast::<i64>().read_unaligned();
                        let v = _mm256_shuffle_epi8(_mm256_set1_epi64x(bytes), widen_scale[s % 2]);
                        _mm256_srai_epi16(v, 8)
                    })
                });
                for (j, sum) in sums.iter_mut().enumerate() {
                    let qs = &xs[j][bi].qs;
                    for nib in 0..2 {
                        for m in 0..4 {
                            // Sub-block s: values 128h + 64·nib + 16m.., the
                            // chunks k = 2m, 2m + 1.
                            let at = 16 * (8 * h + 4 * nib + m);
                            let p = _mm256_add_epi16(
                                _mm256_maddubs_epi16(w[2 * m][nib], run_of_8(qs, at)),
                                _mm256_maddubs_epi16(w[2 * m + 1][nib], run_of_8(qs, at + 8)),
                            );
                            sum[half] = _mm256_dpwssd_avx_epi32(sum[half], p, scales[nib][m]);
                        }
                    }
                }
            }
        }
        // Each row's (scale of sub-block 2p, of 2p + 1) in 16 bits.
        let pair_scales: [__m256i; 8] = std::array::from_fn(|p| {
            _mm256_cvtepi8_epi16(_mm_loadu_si128(b.scales.as_ptr().add(16 * p).cast()))
        });
        let d = _mm256_cvtph_ps(_mm_loadu_si128(b.d.as_ptr().cast()));
        for (j, a) in acc.iter_mut().enumerate() {
            let y = &xs[j][bi];
            // Σ scale × (sub-block activation sum), per row.
            let mut runs = _mm256_setzero_si256();
            for (p, scales) in pair_scales.iter().enumerate() {
                let bsums = y.bsums.as_ptr().add(2 * p).cast::<i32>().read_unaligned();
                runs = _mm256_dpwssd_avx_epi32(runs, *scales, _mm256_set1_epi32(bsums));
            }
            let dots = _mm256_sub_epi32(add_lane_pairs(sums[j]), _mm256_slli_epi32(runs, 5));
            let yd = _mm256_set1_ps(y.d);
            *a = _mm256_add_ps(
                *a,
                _mm256_mul_ps(_mm256_mul_ps(d, yd), _mm256_cvtepi32_ps(dots)),
            );
        }
    }
    for (j, a) in acc.iter().enumerate() {
        _mm256_storeu_ps(res[j].as_mut_ptr(), *a);
    }
}

/// The `pshufb` index that takes, from 8 scale bytes (four rows at stride
/// 2, the sub-block's parity `t` the offset), each row's scale to the high
/// byte of its four 16-bit lanes (an arithmetic shift then sign-extends it).
///
/// # Safety
/// The CPU must have avx2.
#[target_feature(enable = "avx2")]
#[inline]
unsafe fn q6_scale_index(t: i8) -> __m256i {
    let mut idx = [-128i8; 32]; // -128: a pshufb index that writes zero
    for (i, v) in idx.iter_mut().enumerate() {
        if i % 2 == 1 {
            // Bytes 8r'..8r' + 8 are row 4·half + r''s (r' = i / 8 within
            // the vector; the 128-bit lanes both see the 8 bytes).
            *v = 2 * (i / 8) as i8 + t;
        }
    }
    _mm256_loadu_si256(idx.as_ptr().cast())
}

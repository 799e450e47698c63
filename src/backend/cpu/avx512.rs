//! x86_64 kernels for CPUs with AVX-512 (F, BW, VL) and VNNI, over the AVX2
//! table: where VNNI's `vpdpbusd` (four u8 × i8 products summed into each
//! i32 lane) replaces AVX2's `maddubs` + `madd` + add, the integer block
//! sums take a third of the instructions. The sums are exact either way, and
//! the float steps are AVX2's, so every result equals the AVX2 kernel's (and
//! the scalar twin's) bit for bit.

use std::arch::x86_64::*;

use super::avx2::{self, by_take};
use super::kernels::Kernels;
use super::repack::BlockQ4_0x8;
use super::repack_q8_0::BlockQ8_0x8;
use crate::tensor::blocks::*;

/// Whether this CPU has what the kernels here need.
pub(super) fn detected() -> bool {
    std::arch::is_x86_feature_detected!("avx2")
        && std::arch::is_x86_feature_detected!("fma")
        && std::arch::is_x86_feature_detected!("f16c")
        && std::arch::is_x86_feature_detected!("avx512f")
        && std::arch::is_x86_feature_detected!("avx512bw")
        && std::arch::is_x86_feature_detected!("avx512vl")
        && std::arch::is_x86_feature_detected!("avx512vnni")
}

/// The AVX-512 VNNI table over the AVX2 one. Panics unless this CPU has the
/// features (checked here, once per table, as `avx2::kernels` does).
pub(super) fn kernels(base: Kernels) -> Kernels {
    assert!(
        detected(),
        "the avx512 kernel table needs avx2, fma, f16c, avx512f/bw/vl and avx512vnni, which this CPU lacks"
    );
    Kernels {
        gemm_q4_0_x8i8: Some(gemm_q4_0_x8i8),
        gemm_q8_0_x8: Some(gemm_q8_0_x8),
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
    avx2::gemm_in_tiles(group, x, n, out, stride, |take, xs, res| {
        // SAFETY: only reachable through the table built after detecting
        // the features (`kernels`); `gemm_in_tiles` slices every `xs` row
        // to `group.len()` blocks, and `res` is typed.
        unsafe { by_take!(take, gemm_tile_q4_0_x8(group, xs, res)) }
    });
}

fn gemm_q8_0_x8(group: &[BlockQ8_0x8], x: &[BlockQ8_0], n: usize, out: &mut [f32], stride: usize) {
    avx2::gemm_in_tiles(group, x, n, out, stride, |take, xs, res| {
        // SAFETY: as in `gemm_q4_0_x8i8`.
        unsafe { by_take!(take, gemm_tile_q8_0_x8(group, xs, res)) }
    });
}

/// Eight repacked Q4_0 rows times `A` (1..=4) activation rows. The nibbles
/// go into `vpdpbusd` as they are (0..15, unsigned), so Σ (q − 8)·a is
/// Σ q·a − 8·Σ a, with Σ a taken once per activation block (also by
/// `vpdpbusd`, against bytes of 8). Each row's block sum is exact, and the
/// float steps are `avx2::gemm_tile_x8i8`'s, so the results equal it.
///
/// # Safety
/// The CPU must have the features `detected` checks. `A` must be 1..=4 and
/// each of the first `A` rows of `xs` at least `group.len()` blocks long.
#[target_feature(enable = "avx2,fma,f16c,avx512f,avx512bw,avx512vl,avx512vnni")]
unsafe fn gemm_tile_q4_0_x8<const A: usize>(
    group: &[BlockQ4_0x8],
    xs: &[&[BlockQ8_0]; 4],
    res: &mut [[f32; 8]; 4],
) {
    let low_mask = _mm256_set1_epi8(0x0F);
    let eights = _mm256_set1_epi8(8);
    let order = _mm256_setr_epi32(0, 1, 4, 5, 2, 3, 6, 7);
    let mut acc = [_mm256_setzero_ps(); A];
    for (bi, b) in group.iter().enumerate() {
        let mut sums = [[_mm256_setzero_si256(); 2]; A];
        // 8 · Σ a over the block, in every lane (the 32 values in four
        // 8-byte broadcasts: each lane sees 4 of every 8, so the lanes of
        // one 64-bit pair add to 8 · Σ a; `hadd` below pairs them).
        let mut offsets = [_mm256_setzero_si256(); A];
        for k in 0..2 {
            for half in 0..2 {
                let q = _mm256_loadu_si256(b.qs.as_ptr().add(64 * k + 32 * half).cast());
                let lo = _mm256_and_si256(q, low_mask);
                let hi = _mm256_and_si256(_mm256_srli_epi16(q, 4), low_mask);
                for (j, sum) in sums.iter_mut().enumerate() {
                    let y = &xs[j][bi];
                    let ylo =
                        _mm256_set1_epi64x(y.qs.as_ptr().add(8 * k).cast::<i64>().read_unaligned());
                    let yhi = _mm256_set1_epi64x(
                        y.qs.as_ptr().add(16 + 8 * k).cast::<i64>().read_unaligned(),
                    );
                    sum[half] =
                        _mm256_dpbusd_epi32(_mm256_dpbusd_epi32(sum[half], lo, ylo), hi, yhi);
                    if half == 0 {
                        offsets[j] = _mm256_dpbusd_epi32(
                            _mm256_dpbusd_epi32(offsets[j], eights, ylo),
                            eights,
                            yhi,
                        );
                    }
                }
            }
        }
        let dw = _mm256_cvtph_ps(_mm_loadu_si128(b.d.as_ptr().cast()));
        for (j, a) in acc.iter_mut().enumerate() {
            let raw = _mm256_hadd_epi32(sums[j][0], sums[j][1]);
            // Every lane of `offsets` holds 8 · (4 of every 8 values): the
            // pair sum `hadd` forms is 8 · Σ a for the block.
            let offset = _mm256_hadd_epi32(offsets[j], offsets[j]);
            let rows = _mm256_permutevar8x32_epi32(_mm256_sub_epi32(raw, offset), order);
            let scaled = _mm256_mul_ps(
                _mm256_mul_ps(_mm256_cvtepi32_ps(rows), dw),
                _mm256_set1_ps(avx2::fp16(xs[j][bi].d)),
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
#[target_feature(enable = "avx2,fma,f16c,avx512f,avx512bw,avx512vl,avx512vnni")]
unsafe fn gemm_tile_q8_0_x8<const A: usize>(
    group: &[BlockQ8_0x8],
    xs: &[&[BlockQ8_0]; 4],
    res: &mut [[f32; 8]; 4],
) {
    let order = _mm256_setr_epi32(0, 1, 4, 5, 2, 3, 6, 7);
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
                let ya =
                    _mm256_set1_epi64x(y.qs.as_ptr().add(8 * k).cast::<i64>().read_unaligned());
                for (half, sum) in sums.iter_mut().enumerate() {
                    *sum = _mm256_dpbusd_epi32(
                        *sum,
                        magnitudes[k][half],
                        _mm256_sign_epi8(ya, w[k][half]),
                    );
                }
            }
            let rows = _mm256_permutevar8x32_epi32(_mm256_hadd_epi32(sums[0], sums[1]), order);
            let scale = _mm256_mul_ps(dw, _mm256_set1_ps(avx2::fp16(y.d)));
            *a = _mm256_fmadd_ps(_mm256_cvtepi32_ps(rows), scale, *a);
        }
    }
    for (j, a) in acc.iter().enumerate() {
        _mm256_storeu_ps(res[j].as_mut_ptr(), *a);
    }
}

//! x86_64 kernels for CPUs with AVX-512 (F, BW, VL) and VNNI, over the AVX2
//! table: where VNNI's `vpdpbusd` (four u8 × i8 products summed into each
//! i32 lane) replaces AVX2's `maddubs` + `madd` + add, the integer block
//! sums take a third of the instructions. The sums are exact either way, and
//! the float steps are AVX2's, so every result equals the AVX2 kernel's (and
//! the scalar twin's) bit for bit.

use std::arch::x86_64::*;

use half::f16;

use super::avx2;
use super::group_tiles::{by_take, gemm_in_tiles, gemm_sums_in_tiles};
use super::kernels::Kernels;
use super::repack::BlockQ4_0x8;
use super::repack_q4_1::BlockQ4_1x8;
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
        gemm_q4_0_x8i8_sums: Some(gemm_q4_0_x8i8_sums),
        gemm_q8_0_x8: Some(gemm_q8_0_x8),
        gemm_q4_1_x8: Some(gemm_q4_1_x8),
        gemm_q4_k_x8: Some(gemm_q4_k_x8),
        gemm_q5_0_x8: Some(gemm_q5_0_x8),
        gemm_q6_k_x8: Some(gemm_q6_k_x8),
        tile_f32: Some(tile_f32),
        tile_f16: Some(tile_f16),
        gemv_f16: Some(gemv_f16),
        gemm_f32,
        ..avx2::kernels(base)
    }
}

fn gemm_q4_0_x8i8_sums(
    group: &[BlockQ4_0x8],
    x: &[BlockQ8_0],
    sums: &[i32],
    n: usize,
    out: &mut [f32],
    stride: usize,
) {
    gemm_sums_in_tiles(group, x, sums, n, out, stride, |take, xs, ss, res| {
        // SAFETY: only reachable through the table built after detecting
        // the features (`kernels`); `gemm_sums_in_tiles` slices every `xs`
        // and `ss` row to `group.len()`, and `res` is typed.
        unsafe { by_take!(take, gemm_tile_q4_0_x8(group, xs, ss, res)) }
    });
}

fn gemm_q8_0_x8(group: &[BlockQ8_0x8], x: &[BlockQ8_0], n: usize, out: &mut [f32], stride: usize) {
    gemm_in_tiles(group, x, n, out, stride, |take, xs, res| {
        // SAFETY: as in `gemm_q4_0_x8i8_sums`.
        unsafe { by_take!(take, gemm_tile_q8_0_x8(group, xs, res)) }
    });
}

fn gemm_q4_1_x8(group: &[BlockQ4_1x8], x: &[BlockQ8_1], n: usize, out: &mut [f32], stride: usize) {
    gemm_in_tiles(group, x, n, out, stride, |take, xs, res| {
        // SAFETY: as in `gemm_q4_0_x8i8_sums`.
        unsafe { by_take!(take, gemm_tile_q4_1_x8(group, xs, res)) }
    });
}

fn gemm_q4_k_x8(group: &[BlockQ4Kx8], x: &[BlockQ8K], n: usize, out: &mut [f32], stride: usize) {
    gemm_in_tiles(group, x, n, out, stride, |take, xs, res| {
        // SAFETY: as in `gemm_q4_0_x8i8_sums`.
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
        // SAFETY: as in `gemm_q4_0_x8i8_sums`; every `ss` row is sliced to
        // `group.len()` as well.
        unsafe { by_take!(take, gemm_tile_q5_0_x8(group, xs, ss, res)) }
    });
}

fn gemm_q6_k_x8(group: &[BlockQ6Kx8], x: &[BlockQ8K], n: usize, out: &mut [f32], stride: usize) {
    gemm_in_tiles(group, x, n, out, stride, |take, xs, res| {
        // SAFETY: as in `gemm_q4_0_x8i8_sums`.
        unsafe { by_take!(take, gemm_tile_q6_k_x8(group, xs, res)) }
    });
}

fn tile_f32(w: [&[f32]; 4], x: &[f32], out: &mut [f32], stride: usize, store: usize) {
    let n = super::scalar::check_tile(&w, x, out.len(), stride, store);
    // SAFETY: only reachable through the table built after detecting the
    // features (`kernels`); checked above: `x` holds `n` rows as long as
    // the `w` rows (the kernel slices them), and `out` is indexed with
    // checks.
    unsafe { tile_rows_f32(w, x, n, out, stride, store) }
}

fn tile_f16(w: [&[f16]; 4], x: &[f32], out: &mut [f32], stride: usize, store: usize) {
    super::scalar::f16_rows_in_chunks(w, x, out, stride, store, 6, |wr, xs, out| {
        // SAFETY: only reachable through the table built after detecting
        // the features (`kernels`); the frame checked the shapes: `xs` holds
        // whole rows as long as `wr`, and `out` is indexed with checks.
        unsafe {
            match xs.len() / wr.len() {
                6 => row_f16::<6>(wr, xs, out, stride),
                5 => row_f16::<5>(wr, xs, out, stride),
                4 => row_f16::<4>(wr, xs, out, stride),
                3 => row_f16::<3>(wr, xs, out, stride),
                2 => row_f16::<2>(wr, xs, out, stride),
                _ => row_f16::<1>(wr, xs, out, stride),
            }
        }
    });
}

fn gemm_f32(g: &super::rows::GemmShape, a: &[f32], b: &[f32], c: &mut [f32]) {
    super::rows::gemm_f32_in_row_groups(g, a, b, c, |take, a, c| {
        // SAFETY: only reachable through the table built after detecting
        // the features (`kernels`); the frame checked the shape, and `a` and
        // `c` start at a group of `take` rows of it.
        unsafe { by_take!(take, gemm_rows_f32(g, a, b, c)) }
    });
}

/// `R` rows of the product from the first rows of `a` and `c`, 32 (then 16)
/// columns per step with one lane per output: per `p` a broadcast of
/// `a[r][p]`, a multiply and an add, in the twin's order. The last columns
/// (under 16) go through masked loads and stores, which touch no value
/// outside the mask.
///
/// # Safety
/// The CPU must have the features `detected` checks; `a` and `c` hold `R`
/// rows of the shape, `b` all `k`.
#[target_feature(enable = "avx2,fma,f16c,avx512f,avx512bw,avx512vl,avx512vnni")]
#[inline]
unsafe fn gemm_rows_f32<const R: usize>(
    g: &super::rows::GemmShape,
    a: &[f32],
    b: &[f32],
    c: &mut [f32],
) {
    let (ap, bp, cp) = (a.as_ptr(), b.as_ptr(), c.as_mut_ptr());
    let mut j = 0;
    while j < g.n {
        let left = g.n - j;
        let lanes = if left >= 32 { 2 } else { 1 };
        // Every lane of the first vector, and of the second where there is
        // one; under 16 columns, the first `left` lanes.
        let mask: __mmask16 = if left >= 16 { !0 } else { (1u16 << left) - 1 };
        let mut acc = [[_mm512_setzero_ps(); 2]; R];
        for p in 0..g.k {
            let row = bp.add(p * g.ldb + j);
            let bv = [
                _mm512_maskz_loadu_ps(mask, row),
                _mm512_maskz_loadu_ps(mask, row.add(16 * (lanes - 1))),
            ];
            for (r, acc) in acc.iter_mut().enumerate() {
                let x = _mm512_set1_ps(*ap.add(r * g.lda + p));
                for (a, &bv) in acc.iter_mut().zip(&bv).take(lanes) {
                    *a = _mm512_add_ps(*a, _mm512_mul_ps(x, bv));
                }
            }
        }
        for (r, acc) in acc.iter().enumerate() {
            for (l, a) in acc.iter().enumerate().take(lanes) {
                _mm512_mask_storeu_ps(cp.add(r * g.ldc + j + 16 * l), mask, *a);
            }
        }
        j += (16 * lanes).min(left);
    }
}

fn gemv_f16(w: &[f16], x: &[f32], out: &mut [f32]) {
    super::scalar::f16_gemv_rows(w, x, out, |wr, x| {
        let mut sum = 0.0;
        // SAFETY: only reachable through the table built after detecting
        // the features (`kernels`); the frame gives `wr` as long as `x`,
        // and the output is a one-value slice.
        unsafe { row_f16::<1>(wr, x, std::slice::from_mut(&mut sum), 0) };
        sum
    });
}

/// One f16 weight row times `C` (1..=6) activation rows, converting 16
/// weights per step as they are loaded. Weight rows go one at a time:
/// reading four rows side by side (as `tile_f32_impl` reads its widened
/// rows) ran at half the memory speed of one stream. The accumulators and
/// reduction are `tile_f32_impl`'s (one per output, columns in order), so
/// the outputs equal it bit for bit. Output `c` goes to `out[c * stride]`.
///
/// # Safety
/// The CPU must have the features `detected` checks; `x` must hold `C`
/// rows as long as `w`.
#[target_feature(enable = "avx2,fma,f16c,avx512f,avx512bw,avx512vl,avx512vnni")]
unsafe fn row_f16<const C: usize>(w: &[f16], x: &[f32], out: &mut [f32], stride: usize) {
    let n = w.len();
    assert!(x.len() == C * n);
    let mut acc = [_mm512_setzero_ps(); C];
    let mut i = 0;
    while i + 16 <= n {
        let wv = _mm512_cvtph_ps(_mm256_loadu_si256(w.as_ptr().add(i).cast()));
        for c in 0..C {
            let xv = _mm512_loadu_ps(x.as_ptr().add(c * n + i));
            acc[c] = _mm512_fmadd_ps(wv, xv, acc[c]);
        }
        i += 16;
    }
    for c in 0..C {
        let mut sum = _mm512_reduce_add_ps(acc[c]);
        for j in i..n {
            sum += w[j].to_f32() * x[c * n + j];
        }
        out[c * stride] = sum;
    }
}

/// `tile_f32` over the `n` activation rows of `x`, six at a time.
///
/// # Safety
/// The CPU must have the features `detected` checks.
#[target_feature(enable = "avx2,fma,f16c,avx512f,avx512bw,avx512vl,avx512vnni")]
unsafe fn tile_rows_f32(
    w: [&[f32]; 4],
    x: &[f32],
    n: usize,
    out: &mut [f32],
    stride: usize,
    store: usize,
) {
    let cols = w[0].len();
    let mut i = 0;
    while i < n {
        let take = (n - i).min(6);
        let xs = &x[i * cols..(i + take) * cols];
        let out = &mut out[i * stride..];
        match take {
            6 => tile_f32_impl::<6>(w, xs, out, stride, store),
            5 => tile_f32_impl::<5>(w, xs, out, stride, store),
            4 => tile_f32_impl::<4>(w, xs, out, stride, store),
            3 => tile_f32_impl::<3>(w, xs, out, stride, store),
            2 => tile_f32_impl::<2>(w, xs, out, stride, store),
            _ => tile_f32_impl::<1>(w, xs, out, stride, store),
        }
        i += take;
    }
}

/// Four f32 weight rows times `C` (1..=6) f32 activation rows, 16 columns
/// per step: four weight loads and `C` activation loads feed 4·`C` FMAs
/// (24 accumulators at `C` = 6, within the 32 registers). One accumulator
/// per output, reduced the same way for every output, so an output does
/// not depend on the other rows of its tile. The sums are ordered
/// differently from the scalar twin's: the kernel tests compare them within
/// the f32 rounding of the products' magnitudes.
///
/// Output `r` of activation row `c` goes to `out[c * stride + r]` for the
/// first `store` rows (indexed with checks).
///
/// # Safety
/// The CPU must have the features `detected` checks. Every row of `w` must
/// have the same length, and `x` must hold `C` rows of it.
#[target_feature(enable = "avx2,fma,f16c,avx512f,avx512bw,avx512vl,avx512vnni")]
#[inline]
unsafe fn tile_f32_impl<const C: usize>(
    w: [&[f32]; 4],
    x: &[f32],
    out: &mut [f32],
    stride: usize,
    store: usize,
) {
    // (Plain loops and pointers: `array::from_fn` here is not inlined.)
    let n = w[0].len();
    assert!(x.len() == C * n);
    let mut acc = [[_mm512_setzero_ps(); C]; 4];
    let mut i = 0;
    while i + 16 <= n {
        let mut wv = [_mm512_setzero_ps(); 4];
        for r in 0..4 {
            wv[r] = _mm512_loadu_ps(w[r].as_ptr().add(i));
        }
        for c in 0..C {
            let xv = _mm512_loadu_ps(x.as_ptr().add(c * n + i));
            for r in 0..4 {
                acc[r][c] = _mm512_fmadd_ps(wv[r], xv, acc[r][c]);
            }
        }
        i += 16;
    }
    // Every accumulator reduced with constant indices, so the array stays
    // in registers (indexing it by the run-time `store` put it on the
    // stack, zeroed by a memset per call).
    let mut sums = [[0f32; C]; 4];
    for r in 0..4 {
        for c in 0..C {
            sums[r][c] = _mm512_reduce_add_ps(acc[r][c]);
        }
    }
    for r in 0..store {
        for c in 0..C {
            let mut sum = sums[r][c];
            for j in i..n {
                sum += w[r][j] * x[c * n + j];
            }
            out[c * stride + r] = sum;
        }
    }
}

/// Eight 8-byte runs of activations starting at `at`: the same run for
/// each of the eight rows of a 64-byte group vector.
///
/// # Safety
/// The CPU must have avx512f; `at..at + 8` must be within `qs`.
#[target_feature(enable = "avx512f")]
#[inline]
unsafe fn run_of_8(qs: &[i8], at: usize) -> __m512i {
    debug_assert!(at + 8 <= qs.len());
    _mm512_set1_epi64(qs.as_ptr().add(at).cast::<i64>().read_unaligned())
}

/// The sums in the 32-bit lanes (row r, half h) of `v`, added per row: the
/// eight rows' sums in row order.
///
/// # Safety
/// The CPU must have avx512f.
#[target_feature(enable = "avx512f")]
#[inline]
unsafe fn add_lane_pairs(v: __m512i) -> __m256i {
    _mm512_cvtepi64_epi32(_mm512_add_epi32(v, _mm512_srli_epi64(v, 32)))
}

/// Eight repacked Q4_K rows times `A` (1..=4) activation rows, all eight
/// rows in one 512-bit vector (the group's 64-byte runs are eight rows × 8
/// bytes). For each sub-block of 32, four `vpdpbusd` give each (row, half
/// of the run) lane its 16 nibble × activation products, exactly and within
/// 16 bits (|sum| <= 16·15·128 < 2^15); `vpdpwssd` against the row's scale
/// (low 16 bits of a 32-bit lane, the high 16 zero) multiplies and adds it
/// to the running sum. The integers are `avx2::gemm_tile_q4_k_x8`'s and so
/// is its float combination, so each result equals it (and `vec_dot`) bit
/// for bit.
///
/// # Safety
/// As `gemm_tile_q4_0_x8`.
#[target_feature(enable = "avx2,fma,f16c,avx512f,avx512bw,avx512vl,avx512vnni")]
unsafe fn gemm_tile_q4_k_x8<const A: usize>(
    group: &[BlockQ4Kx8],
    xs: &[&[BlockQ8K]; 4],
    res: &mut [[f32; 8]; 4],
) {
    let low_mask = _mm512_set1_epi8(0x0F);
    let mut acc = [_mm256_setzero_ps(); A];
    for (bi, b) in group.iter().enumerate() {
        let mut sums = [_mm512_setzero_si512(); A];
        for c in 0..4 {
            // w[k][nib]: the eight rows' values 64c + 32·nib + 8k..
            let w: [[__m512i; 2]; 4] = std::array::from_fn(|k| {
                let q = _mm512_loadu_si512(b.qs.as_ptr().add(256 * c + 64 * k).cast());
                [
                    _mm512_and_si512(q, low_mask),
                    _mm512_and_si512(_mm512_srli_epi16(q, 4), low_mask),
                ]
            });
            // Row r's scale of sub-blocks 2c and 2c + 1 in both 32-bit
            // lanes of 64-bit lane r.
            let scales: [__m512i; 2] = std::array::from_fn(|nib| {
                let bytes = _mm_loadl_epi64(b.scales.as_ptr().add(8 * (2 * c + nib)).cast());
                let wide = _mm512_cvtepu8_epi64(bytes);
                _mm512_or_si512(wide, _mm512_slli_epi64(wide, 32))
            });
            for (j, sum) in sums.iter_mut().enumerate() {
                let qs = &xs[j][bi].qs;
                for nib in 0..2 {
                    let mut run = _mm512_setzero_si512();
                    for (k, w) in w.iter().enumerate() {
                        run = _mm512_dpbusd_epi32(
                            run,
                            w[nib],
                            run_of_8(qs, 64 * c + 32 * nib + 8 * k),
                        );
                    }
                    *sum = _mm512_dpwssd_epi32(*sum, run, scales[nib]);
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
            let bsums = _mm_hadd_epi16(
                _mm_loadu_si128(y.bsums.as_ptr().cast()),
                _mm_loadu_si128(y.bsums.as_ptr().add(8).cast()),
            );
            let bsums = _mm256_broadcastsi128_si256(bsums);
            let mut min_sums = _mm256_setzero_si256();
            for (p, mins) in mins.iter().enumerate() {
                let pair = _mm256_permutevar8x32_epi32(bsums, _mm256_set1_epi32(p as i32));
                min_sums = _mm256_dpwssd_epi32(min_sums, *mins, pair);
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

/// Eight repacked Q5_0 rows times `A` (1..=4) activation rows, all eight
/// rows in one 512-bit vector. Each weight block is decoded once for all of
/// them to unsigned values (nibble | fifth bit << 4, i.e. value + 16); four
/// `vpdpbusd` give each (row, half of the run) lane its products, and 16 ×
/// the activation block's sum comes off after. Exact block sums and
/// `avx2::gemm_tile_q5_0_x8`'s float steps, so the results equal it bit for
/// bit.
///
/// # Safety
/// As `gemm_tile_q4_0_x8`, and each of the first `A` rows of `sums` at
/// least `group.len()` long.
#[target_feature(enable = "avx2,fma,f16c,avx512f,avx512bw,avx512vl,avx512vnni")]
unsafe fn gemm_tile_q5_0_x8<const A: usize>(
    group: &[BlockQ5_0x8],
    xs: &[&[BlockQ8_0]; 4],
    sums: &[&[i32]; 4],
    res: &mut [[f32; 8]; 4],
) {
    let low_mask = _mm512_set1_epi8(0x0F);
    let fifth = _mm512_set1_epi8(0x10);
    // Byte t of each 8-byte run tests bit t.
    let bits = _mm512_set1_epi64(0x8040_2010_0804_0201u64 as i64);
    // Each 128-bit lane gets the `qh` bytes of its two rows (2L, 2L + 1).
    let pair_rows = _mm512_setr_epi64(0, 0, 1, 1, 2, 2, 3, 3);
    // Byte m of the `qh` of the row behind each 8-byte run of a lane.
    let spread = |m: i8| {
        let (a, b) = (m, 4 + m);
        _mm512_set_epi8(
            b, b, b, b, b, b, b, b, a, a, a, a, a, a, a, a, b, b, b, b, b, b, b, b, a, a, a, a, a,
            a, a, a, b, b, b, b, b, b, b, b, a, a, a, a, a, a, a, a, b, b, b, b, b, b, b, b, a, a,
            a, a, a, a, a, a,
        )
    };
    let spreads = [spread(0), spread(1), spread(2), spread(3)];
    let mut acc = [_mm256_setzero_ps(); A];
    for (bi, b) in group.iter().enumerate() {
        let qh = _mm512_permutexvar_epi64(
            pair_rows,
            _mm512_castsi256_si512(_mm256_loadu_si256(b.qh.as_ptr().cast())),
        );
        // u[k][nib]: the eight rows' values 16·nib + 8k.., plus 16.
        let u: [[__m512i; 2]; 2] = std::array::from_fn(|k| {
            let q = _mm512_loadu_si512(b.qs.as_ptr().add(64 * k).cast());
            let nibbles = [
                _mm512_and_si512(q, low_mask),
                _mm512_and_si512(_mm512_srli_epi16(q, 4), low_mask),
            ];
            std::array::from_fn(|nib| {
                let set =
                    _mm512_test_epi8_mask(_mm512_shuffle_epi8(qh, spreads[2 * nib + k]), bits);
                _mm512_mask_add_epi8(nibbles[nib], set, nibbles[nib], fifth)
            })
        });
        let dw = _mm256_cvtph_ps(_mm_loadu_si128(b.d.as_ptr().cast()));
        for (j, a) in acc.iter_mut().enumerate() {
            let y = &xs[j][bi];
            let mut sum = _mm512_setzero_si512();
            for (k, u) in u.iter().enumerate() {
                for (nib, u) in u.iter().enumerate() {
                    sum = _mm512_dpbusd_epi32(sum, *u, run_of_8(&y.qs, 16 * nib + 8 * k));
                }
            }
            let rows = _mm256_sub_epi32(add_lane_pairs(sum), _mm256_set1_epi32(16 * sums[j][bi]));
            let d = _mm256_mul_ps(dw, _mm256_set1_ps(avx2::fp16(y.d)));
            *a = _mm256_fmadd_ps(_mm256_cvtepi32_ps(rows), d, *a);
        }
    }
    for (j, a) in acc.iter().enumerate() {
        _mm256_storeu_ps(res[j].as_mut_ptr(), *a);
    }
}

/// Eight repacked Q6_K rows times `A` (1..=4) activation rows, all eight
/// rows in one 512-bit vector. The unsigned six-bit values are decoded per
/// half super-block for all `A` rows; per sub-block of 16, two `maddubs`
/// summed in 16 bits (|sum| <= 2·2·63·128 < 2^15) meet the rows' signed
/// scales in `vpdpwssd`, and 32 × Σ scale × (Q8_K's 16-sums) comes off
/// after. (`vpdpbusd` would sum 8 products per lane, which can pass 16 bits
/// and so cannot meet the scales in `vpdpwssd`.) Integers and float steps
/// are `avx2::gemm_tile_q6_k_x8`'s, so each result equals it bit for bit.
///
/// # Safety
/// As `gemm_tile_q4_0_x8`.
#[target_feature(enable = "avx2,fma,f16c,avx512f,avx512bw,avx512vl,avx512vnni")]
unsafe fn gemm_tile_q6_k_x8<const A: usize>(
    group: &[BlockQ6Kx8],
    xs: &[&[BlockQ8K]; 4],
    res: &mut [[f32; 8]; 4],
) {
    let low_mask = _mm512_set1_epi8(0x0F);
    let high_mask = _mm512_set1_epi8(0x30);
    // From the 16 scale bytes of a sub-block pair (row r's at 2r + t, t the
    // sub-block's parity), broadcast to every 128-bit lane, row r's scale to
    // the high byte of its four 16-bit lanes (128-bit lane L holds rows 2L
    // and 2L + 1); an arithmetic shift then sign-extends it.
    let z = -128i8; // a pshufb index that writes zero
    let widen = |t: i8| {
        let mut idx = [z; 64];
        for (i, v) in idx.iter_mut().enumerate() {
            if i % 2 == 1 {
                let row = (i / 8) as i8;
                *v = 2 * row + t;
            }
        }
        _mm512_loadu_si512(idx.as_ptr().cast())
    };
    let widen_scale = [widen(0), widen(1)];
    let mut acc = [_mm256_setzero_ps(); A];
    for (bi, b) in group.iter().enumerate() {
        let mut sums = [_mm512_setzero_si512(); A];
        for h in 0..2 {
            // w[k][nib]: the eight rows' values 128h + 64·nib + 8k..
            let mut w = [[_mm512_setzero_si512(); 2]; 8];
            for k in 0..4 {
                let qh = _mm512_loadu_si512(b.qh.as_ptr().add(256 * h + 64 * k).cast());
                // The pair of bits 2i of byte l is value l + 32i's: i = 0, 2
                // for the nibbles of ql chunk k, 1, 3 for k + 4.
                let pairs = [
                    [_mm512_slli_epi16(qh, 4), qh],
                    [_mm512_slli_epi16(qh, 2), _mm512_srli_epi16(qh, 2)],
                ];
                for (kk, pairs) in [k, k + 4].into_iter().zip(pairs) {
                    let ql = _mm512_loadu_si512(b.ql.as_ptr().add(512 * h + 64 * kk).cast());
                    let nibbles = [
                        _mm512_and_si512(ql, low_mask),
                        _mm512_and_si512(_mm512_srli_epi16(ql, 4), low_mask),
                    ];
                    for nib in 0..2 {
                        w[kk][nib] =
                            _mm512_or_si512(nibbles[nib], _mm512_and_si512(pairs[nib], high_mask));
                    }
                }
            }
            // scales[nib][m]: sub-block 8h + 4·nib + m's scales per 16-bit
            // lane.
            let scales: [[__m512i; 4]; 2] = std::array::from_fn(|nib| {
                std::array::from_fn(|m| {
                    let s = 8 * h + 4 * nib + m;
                    let bytes = _mm_loadu_si128(b.scales.as_ptr().add(16 * (s / 2)).cast());
                    let v = _mm512_shuffle_epi8(_mm512_broadcast_i32x4(bytes), widen_scale[s % 2]);
                    _mm512_srai_epi16(v, 8)
                })
            });
            for (j, sum) in sums.iter_mut().enumerate() {
                let qs = &xs[j][bi].qs;
                for nib in 0..2 {
                    for m in 0..4 {
                        // Sub-block s: values 128h + 64·nib + 16m.., the
                        // chunks k = 2m, 2m + 1.
                        let at = 16 * (8 * h + 4 * nib + m);
                        let p = _mm512_add_epi16(
                            _mm512_maddubs_epi16(w[2 * m][nib], run_of_8(qs, at)),
                            _mm512_maddubs_epi16(w[2 * m + 1][nib], run_of_8(qs, at + 8)),
                        );
                        *sum = _mm512_dpwssd_epi32(*sum, p, scales[nib][m]);
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
                runs = _mm256_dpwssd_epi32(runs, *scales, _mm256_set1_epi32(bsums));
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

/// A group block's 128 nibble bytes (`BlockQ4_0x8`'s layout, which Q4_1's
/// shares) unpacked: `w[k][nib]` holds the eight rows' values 16·nib + 8k..,
/// unsigned, eight bytes per row.
///
/// # Safety
/// The CPU must have avx512f and avx512bw.
#[target_feature(enable = "avx512f,avx512bw")]
#[inline]
unsafe fn nibbles_x8(qs: &[u8; 128]) -> [[__m512i; 2]; 2] {
    let low_mask = _mm512_set1_epi8(0x0F);
    std::array::from_fn(|k| {
        let q = _mm512_loadu_si512(qs.as_ptr().add(64 * k).cast());
        [
            _mm512_and_si512(q, low_mask),
            _mm512_and_si512(_mm512_srli_epi16(q, 4), low_mask),
        ]
    })
}

/// The eight rows' exact Σ q·a of `nibbles_x8`'s values against one
/// activation block's 32 quants, in row order. Two independent chains of
/// `vpdpbusd` (their latency is long; integer sums, so the order changes
/// nothing).
///
/// # Safety
/// The CPU must have avx512f, avx512bw and avx512vnni.
#[target_feature(enable = "avx512f,avx512bw,avx512vnni")]
#[inline]
unsafe fn nibble_dots_x8(w: &[[__m512i; 2]; 2], y: &[i8; 32]) -> __m256i {
    let zero = _mm512_setzero_si512();
    let chains: [__m512i; 2] = [0, 1].map(|k| {
        let first = _mm512_dpbusd_epi32(zero, w[k][0], run_of_8(y, 8 * k));
        _mm512_dpbusd_epi32(first, w[k][1], run_of_8(y, 16 + 8 * k))
    });
    add_lane_pairs(_mm512_add_epi32(chains[0], chains[1]))
}

/// Eight repacked Q4_0 rows times `A` (1..=4) activation rows, all eight
/// rows in one 512-bit vector. `vpdpbusd` takes the weights' nibbles as
/// stored (q, unsigned) against the signed activations, so each lane sums
/// q·y, and 8·Σy, the same for all eight rows, comes off once the lane
/// pairs are added (`ss`: the activation blocks' sums). Nothing is flipped
/// or offset per activation run. Each row's block sum Σ (q − 8)·y is exact,
/// and the float steps are `avx2::gemm_tile_x8i8`'s, so the results equal
/// it (and the scalar twin) bit for bit.
///
/// # Safety
/// The CPU must have the features `detected` checks. `A` must be 1..=4 and
/// each of the first `A` rows of `xs` and `ss` at least `group.len()` long.
#[target_feature(enable = "avx2,fma,f16c,avx512f,avx512bw,avx512vl,avx512vnni")]
unsafe fn gemm_tile_q4_0_x8<const A: usize>(
    group: &[BlockQ4_0x8],
    xs: &[&[BlockQ8_0]; 4],
    ss: &[&[i32]; 4],
    res: &mut [[f32; 8]; 4],
) {
    let mut acc = [_mm256_setzero_ps(); A];
    for (bi, b) in group.iter().enumerate() {
        let w = nibbles_x8(&b.qs);
        let dw = _mm256_cvtph_ps(_mm_loadu_si128(b.d.as_ptr().cast()));
        for (j, a) in acc.iter_mut().enumerate() {
            let y = &xs[j][bi];
            let rows = nibble_dots_x8(&w, &y.qs);
            let rows = _mm256_sub_epi32(rows, _mm256_set1_epi32(8 * ss[j][bi]));
            let scaled = _mm256_mul_ps(
                _mm256_mul_ps(_mm256_cvtepi32_ps(rows), dw),
                _mm256_set1_ps(avx2::fp16(y.d)),
            );
            *a = _mm256_add_ps(*a, scaled);
        }
    }
    for (j, a) in acc.iter().enumerate() {
        _mm256_storeu_ps(res[j].as_mut_ptr(), *a);
    }
}

/// Eight repacked Q4_1 rows times `A` (1..=4) activation rows, all eight
/// rows in one 512-bit vector as in `gemm_tile_q4_0_x8`: the nibbles
/// (unsigned, as a Q4_1 weight less its minimum is) against the activations
/// by `vpdpbusd`, each block's sum exact; then `avx2::gemm_tile_q4_1_x8`'s
/// float steps, so the results equal it and the scalar twin bit for bit.
///
/// # Safety
/// As `gemm_tile_q4_0_x8`.
#[target_feature(enable = "avx2,fma,f16c,avx512f,avx512bw,avx512vl,avx512vnni")]
unsafe fn gemm_tile_q4_1_x8<const A: usize>(
    group: &[BlockQ4_1x8],
    xs: &[&[BlockQ8_1]; 4],
    res: &mut [[f32; 8]; 4],
) {
    let mut dots = [_mm256_setzero_ps(); A];
    let mut mins = [_mm256_setzero_ps(); A];
    for (bi, b) in group.iter().enumerate() {
        let w = nibbles_x8(&b.qs);
        let dw = _mm256_cvtph_ps(_mm_loadu_si128(b.d.as_ptr().cast()));
        let mw = _mm256_cvtph_ps(_mm_loadu_si128(b.m.as_ptr().cast()));
        for j in 0..A {
            let y = &xs[j][bi];
            let rows = nibble_dots_x8(&w, &y.qs);
            let scale = _mm256_mul_ps(dw, _mm256_set1_ps(avx2::fp16(y.d)));
            dots[j] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(rows), scale, dots[j]);
            mins[j] = _mm256_fmadd_ps(mw, _mm256_set1_ps(avx2::fp16(y.s)), mins[j]);
        }
    }
    for j in 0..A {
        _mm256_storeu_ps(res[j].as_mut_ptr(), _mm256_add_ps(dots[j], mins[j]));
    }
}

/// Eight repacked Q8_0 rows times `A` (1..=4) activation rows, all eight
/// rows in one 512-bit vector: the weights' magnitudes (<= 128, unsigned)
/// against the activations negated where the weight is negative (a masked
/// subtraction: AVX-512 has no `vpsignb`), four products per lane summed by
/// `vpdpbusd`. Exact block sums and `avx2::gemm_tile_q8_0_x8`'s float
/// steps, so the results equal it.
///
/// # Safety
/// As `gemm_tile_q4_0_x8`.
#[target_feature(enable = "avx2,fma,f16c,avx512f,avx512bw,avx512vl,avx512vnni")]
unsafe fn gemm_tile_q8_0_x8<const A: usize>(
    group: &[BlockQ8_0x8],
    xs: &[&[BlockQ8_0]; 4],
    res: &mut [[f32; 8]; 4],
) {
    let zero = _mm512_setzero_si512();
    let mut acc = [_mm256_setzero_ps(); A];
    for (bi, b) in group.iter().enumerate() {
        // w[k]: the eight rows' values 8k..8k + 8.
        let w: [__m512i; 4] =
            std::array::from_fn(|k| _mm512_loadu_si512(b.qs.as_ptr().add(64 * k).cast()));
        let magnitudes = w.map(|v| _mm512_abs_epi8(v));
        let negative = w.map(|v| _mm512_movepi8_mask(v));
        let dw = _mm256_cvtph_ps(_mm_loadu_si128(b.d.as_ptr().cast()));
        for (j, a) in acc.iter_mut().enumerate() {
            let y = &xs[j][bi];
            let mut sum = _mm512_setzero_si512();
            for k in 0..4 {
                let ya = run_of_8(&y.qs, 8 * k);
                let signed = _mm512_mask_sub_epi8(ya, negative[k], zero, ya);
                sum = _mm512_dpbusd_epi32(sum, magnitudes[k], signed);
            }
            let rows = add_lane_pairs(sum);
            let scale = _mm256_mul_ps(dw, _mm256_set1_ps(avx2::fp16(y.d)));
            *a = _mm256_fmadd_ps(_mm256_cvtepi32_ps(rows), scale, *a);
        }
    }
    for (j, a) in acc.iter().enumerate() {
        _mm256_storeu_ps(res[j].as_mut_ptr(), *a);
    }
}

//! x86_64 kernels with AVX2, FMA and F16C. Same names and signatures as
//! `scalar.rs`; the safe wrappers are only placed in a kernel table after the
//! registry has checked the features (see `Kernels::for_variant` and `SupportedVariant`).

use std::arch::x86_64::*;

use super::group_tiles::{by_take, gemm_in_tiles, gemm_sums_in_tiles};
use super::iq4_dot;
use super::kernels::Kernels;
use super::kquant_dot::{self, IntDots};
use super::repack::BlockQ4_0x8;
use super::repack_q4_1::BlockQ4_1x8;
use super::repack_q4_k::BlockQ4Kx8;
use super::repack_q5_0::BlockQ5_0x8;
use super::repack_q6_k::BlockQ6Kx8;
use super::repack_q8_0::BlockQ8_0x8;
use crate::tensor::blocks::*;
use crate::tensor::quants::IQ4_LEVELS;

/// The AVX2 table over `base`. Panics unless this CPU has avx2, fma and f16c:
/// every kernel below relies on it (see the module's safety note), so this is
/// checked here, once per table, and not only by the caller.
pub(super) fn kernels(base: Kernels) -> Kernels {
    assert!(
        std::arch::is_x86_feature_detected!("avx2")
            && std::arch::is_x86_feature_detected!("fma")
            && std::arch::is_x86_feature_detected!("f16c"),
        "the avx2 kernel table needs avx2, fma and f16c, which this CPU lacks"
    );
    Kernels {
        quantize_q8_0,
        quantize_q8_1,
        quantize_q8_k,
        vec_dot_q4_0_q8_0,
        vec_dot_q4_1_q8_1,
        vec_dot4_q4_1_q8_1: Some(vec_dot4_q4_1_q8_1),
        vec_dot_q5_0_q8_0,
        vec_dot4_q5_0_q8_0: Some(vec_dot4_q5_0_q8_0),
        vec_dot_q5_1_q8_1,
        vec_dot_q8_0_q8_0,
        vec_dot4_q8_0_q8_0: Some(vec_dot4_q8_0_q8_0),
        vec_dot_f32,
        vec_dot_f16,
        tile_f32: Some(tile_f32),
        tile_f16: Some(tile_f16),
        gemv_f16: Some(gemv_f16),
        vec_dot_q4_k_q8_k,
        vec_dot4_q4_k_q8_k: Some(vec_dot4_q4_k_q8_k),
        vec_dot_q5_k_q8_k,
        vec_dot_q6_k_q8_k,
        vec_dot4_q6_k_q8_k: Some(vec_dot4_q6_k_q8_k),
        vec_dot_q2_k_q8_k,
        vec_dot_q3_k_q8_k,
        vec_dot_iq4_nl_q8_0,
        vec_dot_iq4_xs_q8_k,
        gemv_q4_0_x8i8,
        gemm_q4_0_x8i8_sums: Some(gemm_q4_0_x8i8_sums),
        gemm_q5_0_x8: Some(gemm_q5_0_x8),
        gemm_q4_k_x8: Some(gemm_q4_k_x8),
        gemm_q6_k_x8: Some(gemm_q6_k_x8),
        gemm_q8_0_x8: Some(gemm_q8_0_x8),
        gemm_q4_1_x8: Some(gemm_q4_1_x8),
        scores_f16,
        wsum_f16,
        scores_f16_heads: Some(scores_f16_heads),
        wsum_f16_heads: Some(wsum_f16_heads),
        axpy_f32,
        delta_net_columns,
        causal_conv,
        silu_mul,
        gelu,
        gelu_mul,
        widen_f16,
        round_f16,
        scores_f32: Some(scores_f32),
        wsum_f32: Some(wsum_f32),
        gemm_f32,
        softmax_poly,
        ..base
    }
}

// Safety. Every `unsafe fn` in this module is unsafe for one reason, besides
// any pointer contract its own doc states: it uses AVX2, FMA and F16C
// instructions (`#[target_feature]`, or inlined only into such functions),
// so it may run only on a CPU that has them. The safe wrappers below are
// private and reachable only through the table `kernels` builds, which it
// builds only after detecting the three features; so each wrapper's call
// meets that contract. Each wrapper also checks its slices' lengths (the
// `check_*` functions of `scalar.rs` and `repack.rs`) before the call, so no
// kernel reads or writes out of bounds whatever it is passed.

fn quantize_q8_0(x: &[f32], y: &mut [BlockQ8_0]) {
    super::scalar::check_quantize(x, y);
    // SAFETY: this wrapper is only reachable through the table `kernels`
    // builds after detecting avx2, fma and f16c; lengths checked above (the
    // kernel reads whole chunks of 32 only).
    unsafe { quantize_q8_0_impl(x, y) }
}
fn quantize_q8_1(x: &[f32], y: &mut [BlockQ8_1]) {
    // `q8_1_from_q8_0` checks the lengths, then passes one block at a time.
    super::scalar::q8_1_from_q8_0(x, y, |x, y| {
        // SAFETY: only reachable through the table built after detecting
        // avx2, fma and f16c; one block and its 32 values (typed arrays).
        unsafe { quantize_q8_0_impl(x, y) }
    })
}
fn quantize_q8_k(x: &[f32], y: &mut [BlockQ8K]) {
    // `q8_k_with` checks the lengths, then passes one block at a time.
    super::scalar::q8_k_with(x, y, |x, iscale, q| {
        // SAFETY: only reachable through the table built after detecting
        // avx2, fma and f16c; 256 values in, 256 out (typed arrays).
        unsafe { round_scaled_q8_k(x, iscale, q) }
    })
}
fn vec_dot_q4_0_q8_0(x: &[BlockQ4_0], y: &[BlockQ8_0]) -> f32 {
    super::scalar::check_dot(x, y);
    // SAFETY: only reachable through the table built after detecting avx2,
    // fma and f16c; lengths checked above.
    unsafe { vec_dot_q4_0_q8_0_impl(x, y) }
}

/// q = min(127, round-half-even(iscale × x)) for 256 values, as ggml's
/// `nearest_int` rounds.
///
/// # Safety
/// The CPU must have avx2, fma and f16c.
#[target_feature(enable = "avx2,fma,f16c")]
unsafe fn round_scaled_q8_k(x: &[f32; QK_K], iscale: f32, q: &mut [i8; QK_K]) {
    let s = _mm256_set1_ps(iscale);
    let cap = _mm256_set1_epi32(127);
    for k in 0..QK_K / 32 {
        let i: [__m256i; 4] = std::array::from_fn(|j| {
            let v = _mm256_mul_ps(_mm256_loadu_ps(x.as_ptr().add(32 * k + 8 * j)), s);
            _mm256_min_epi32(
                _mm256_cvtps_epi32(_mm256_round_ps(
                    v,
                    _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC,
                )),
                cap,
            )
        });
        let i8s = _mm256_packs_epi16(
            _mm256_packs_epi32(i[0], i[1]),
            _mm256_packs_epi32(i[2], i[3]),
        );
        let i8s = _mm256_permutevar8x32_epi32(i8s, _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7));
        _mm256_storeu_si256(q.as_mut_ptr().add(32 * k).cast(), i8s);
    }
}
fn vec_dot_q4_1_q8_1(x: &[BlockQ4_1], y: &[BlockQ8_1]) -> f32 {
    super::scalar::check_dot(x, y);
    // SAFETY: only reachable through the table built after detecting avx2,
    // fma and f16c; lengths checked above.
    unsafe { vec_dot_q4_1_q8_1_impl(x, y) }
}
fn vec_dot4_q4_1_q8_1(x: &[BlockQ4_1], y: [&[BlockQ8_1]; 4]) -> [f32; 4] {
    super::scalar::check_dot4(x, &y);
    // SAFETY: only reachable through the table built after detecting avx2,
    // fma and f16c; lengths checked above.
    unsafe { vec_dot4_q4_1_q8_1_impl(x, y) }
}
fn vec_dot_q8_0_q8_0(x: &[BlockQ8_0], y: &[BlockQ8_0]) -> f32 {
    super::scalar::check_dot(x, y);
    // SAFETY: only reachable through the table built after detecting avx2,
    // fma and f16c; lengths checked above.
    unsafe { vec_dot_q8_0_q8_0_impl(x, y) }
}
fn vec_dot4_q8_0_q8_0(x: &[BlockQ8_0], y: [&[BlockQ8_0]; 4]) -> [f32; 4] {
    super::scalar::check_dot4(x, &y);
    // SAFETY: only reachable through the table built after detecting avx2,
    // fma and f16c; lengths checked above.
    unsafe { vec_dot4_q8_0_q8_0_impl(x, y) }
}
fn vec_dot_q5_0_q8_0(x: &[BlockQ5_0], y: &[BlockQ8_0]) -> f32 {
    super::scalar::check_dot(x, y);
    // SAFETY: only reachable through the table built after detecting avx2,
    // fma and f16c; lengths checked above.
    unsafe { vec_dot_q5_0_q8_0_impl(x, y) }
}
fn vec_dot4_q5_0_q8_0(x: &[BlockQ5_0], y: [&[BlockQ8_0]; 4]) -> [f32; 4] {
    super::scalar::check_dot4(x, &y);
    // SAFETY: only reachable through the table built after detecting avx2,
    // fma and f16c; lengths checked above.
    unsafe { vec_dot4_q5_0_q8_0_impl(x, y) }
}
fn vec_dot_q5_1_q8_1(x: &[BlockQ5_1], y: &[BlockQ8_1]) -> f32 {
    super::scalar::check_dot(x, y);
    // SAFETY: only reachable through the table built after detecting avx2,
    // fma and f16c; lengths checked above.
    unsafe { vec_dot_q5_1_q8_1_impl(x, y) }
}
fn vec_dot_f32(x: &[f32], y: &[f32]) -> f32 {
    super::scalar::check_dot(x, y);
    // SAFETY: only reachable through the table built after detecting avx2,
    // fma and f16c; lengths checked above.
    unsafe { vec_dot_f32_impl(x, y) }
}
fn vec_dot_f16(x: &[half::f16], y: &[half::f16]) -> f32 {
    super::scalar::check_dot(x, y);
    // SAFETY: only reachable through the table built after detecting avx2,
    // fma and f16c; lengths checked above.
    unsafe { vec_dot_f16_impl(x, y) }
}
fn scores_f16(
    k: &[half::f16],
    stride: usize,
    offset: usize,
    cells: &[u32],
    q: &[f32],
    out: &mut [f32],
) {
    super::rows::check_cells(k.len(), stride, offset, q.len(), cells, out.len());
    // SAFETY: only reachable through the table built after detecting avx2,
    // fma and f16c; every row read lies in `k` (checked above).
    unsafe { scores_f16_impl(k, stride, offset, cells, q, out) }
}
fn wsum_f16(
    v: &[half::f16],
    stride: usize,
    offset: usize,
    cells: &[u32],
    p: &[f32],
    out: &mut [f32],
) {
    super::rows::check_cells(v.len(), stride, offset, out.len(), cells, p.len());
    // SAFETY: as for `scores_f16`: every row read lies in `v`.
    unsafe { wsum_f16_impl(v, stride, offset, cells, p, out) }
}
fn scores_f16_heads(
    k: &[half::f16],
    stride: usize,
    offset: usize,
    cells: &[u32],
    q: &[f32],
    out: &mut [f32],
    heads: usize,
) {
    let hd =
        super::rows::check_head_scores(k.len(), stride, offset, cells, (q.len(), out.len()), heads);
    let n = cells.len();
    // Three heads at a time keep 12 accumulators and the row's 4 vectors
    // in the 16 registers.
    let mut h = 0;
    while h < heads {
        let take = (heads - h).min(3);
        let (q, out) = (&q[h * hd..(h + take) * hd], &mut out[h * n..(h + take) * n]);
        // SAFETY: only reachable through the table built after detecting
        // avx2, fma and f16c; every row read lies in `k` and `q`, `out` hold
        // `take` heads (checked above).
        unsafe {
            match take {
                3 => scores_f16_heads_impl::<3>(k, stride, offset, cells, q, out),
                2 => scores_f16_heads_impl::<2>(k, stride, offset, cells, q, out),
                _ => scores_f16_impl(k, stride, offset, cells, q, out),
            }
        }
        h += take;
    }
}
fn wsum_f16_heads(
    v: &[half::f16],
    stride: usize,
    offset: usize,
    cells: &[u32],
    p: &[f32],
    out: &mut [f32],
    heads: usize,
) {
    let w =
        super::rows::check_head_sums(v.len(), stride, offset, cells, (p.len(), out.len()), heads);
    let n = cells.len();
    let mut h = 0;
    while h < heads {
        let take = (heads - h).min(4);
        let (p, out) = (&p[h * n..(h + take) * n], &mut out[h * w..(h + take) * w]);
        // SAFETY: as for `scores_f16_heads`: every row read lies in `v`, and
        // `p`, `out` hold `take` heads.
        unsafe {
            match take {
                4 => wsum_f16_heads_impl::<4, 2>(v, stride, offset, cells, p, out),
                3 => wsum_f16_heads_impl::<3, 2>(v, stride, offset, cells, p, out),
                2 => wsum_f16_heads_impl::<2, 4>(v, stride, offset, cells, p, out),
                _ => wsum_f16_impl(v, stride, offset, cells, p, out),
            }
        }
        h += take;
    }
}
fn axpy_f32(p: f32, v: &[f32], out: &mut [f32]) {
    super::scalar::check_axpy(v, out);
    // SAFETY: only reachable through the table built after detecting avx2,
    // fma and f16c; lengths checked above.
    unsafe { axpy_f32_impl(p, v, out) }
}

fn scores_f32(k: &[f32], stride: usize, offset: usize, cells: &[u32], q: &[f32], out: &mut [f32]) {
    super::rows::check_cells(k.len(), stride, offset, q.len(), cells, out.len());
    // SAFETY: only reachable through the table built after detecting avx2,
    // fma and f16c; every row read lies in `k` (checked above; the kernel
    // slices them).
    unsafe { scores_f32_impl(k, stride, offset, cells, q, out) }
}

/// Each cell's score by `vec_dot_f32_impl`, so it equals this variant's
/// `vec_dot_f32` of the row and the query bit for bit.
///
/// # Safety
/// AVX2 (module note).
#[target_feature(enable = "avx2,fma,f16c")]
unsafe fn scores_f32_impl(
    k: &[f32],
    stride: usize,
    offset: usize,
    cells: &[u32],
    q: &[f32],
    out: &mut [f32],
) {
    for (o, &c) in out.iter_mut().zip(cells) {
        *o = vec_dot_f32_impl(&k[c as usize * stride + offset..][..q.len()], q);
    }
}

fn wsum_f32(v: &[f32], stride: usize, offset: usize, cells: &[u32], p: &[f32], out: &mut [f32]) {
    super::rows::check_cells(v.len(), stride, offset, out.len(), cells, p.len());
    // SAFETY: only reachable through the table built after detecting avx2,
    // fma and f16c; every row read lies in `v` (checked above: each is
    // `out.len()` values from `c * stride + offset`).
    unsafe { wsum_f32_impl(v, stride, offset, cells, p, out) }
}

/// `rows::wsum_f32` with the sums in registers, 32 (then 8) columns at a
/// time over all cells: per cell a multiply and an add, in cell order, so
/// bit-equal to the twin.
///
/// # Safety
/// AVX2 (module note); every cell's row (`out.len()` values from
/// `c * stride + offset`) inside `v`, and one `p` per cell.
#[target_feature(enable = "avx2,fma,f16c")]
unsafe fn wsum_f32_impl(
    v: &[f32],
    stride: usize,
    offset: usize,
    cells: &[u32],
    p: &[f32],
    out: &mut [f32],
) {
    let width = out.len();
    let mut i = 0;
    while i + 8 <= width {
        let lanes = if i + 32 <= width { 4 } else { 1 };
        let mut acc = [_mm256_setzero_ps(); 4];
        for (&c, &w) in cells.iter().zip(p) {
            let row = v.as_ptr().add(c as usize * stride + offset + i);
            let pv = _mm256_set1_ps(w);
            for (k, a) in acc.iter_mut().enumerate().take(lanes) {
                *a = _mm256_add_ps(*a, _mm256_mul_ps(pv, _mm256_loadu_ps(row.add(8 * k))));
            }
        }
        for (k, a) in acc.iter().enumerate().take(lanes) {
            _mm256_storeu_ps(out.as_mut_ptr().add(i + 8 * k), *a);
        }
        i += 8 * lanes;
    }
    for (j, o) in out.iter_mut().enumerate().skip(i) {
        let mut sum = 0.0f32;
        for (&c, &w) in cells.iter().zip(p) {
            sum += w * v[c as usize * stride + offset + j];
        }
        *o = sum;
    }
}

fn gemm_f32(g: &super::rows::GemmShape, a: &[f32], b: &[f32], c: &mut [f32]) {
    super::rows::gemm_f32_in_row_groups(g, a, b, c, |take, a, c| {
        // SAFETY: only reachable through the table built after detecting
        // avx2, fma and f16c; the frame checked the shape, and `a` and `c`
        // start at a group of `take` rows of it.
        unsafe { by_take!(take, gemm_rows_f32(g, a, b, c)) }
    });
}

/// `R` rows of the product from the first rows of `a` and `c`, 16 (then 8)
/// columns per step with one lane per output: per `p` a broadcast of
/// `a[r][p]`, a multiply and an add, in the twin's order. The last columns
/// (under 8) as the twin computes them.
///
/// # Safety
/// AVX2 (module note); `a` and `c` hold `R` rows of the shape, `b` all `k`.
#[target_feature(enable = "avx2,fma,f16c")]
#[inline]
unsafe fn gemm_rows_f32<const R: usize>(
    g: &super::rows::GemmShape,
    a: &[f32],
    b: &[f32],
    c: &mut [f32],
) {
    let (ap, bp, cp) = (a.as_ptr(), b.as_ptr(), c.as_mut_ptr());
    let mut j = 0;
    while j + 8 <= g.n {
        let lanes = if j + 16 <= g.n { 2 } else { 1 };
        let mut acc = [[_mm256_setzero_ps(); 2]; R];
        for p in 0..g.k {
            let row = bp.add(p * g.ldb + j);
            let bv = [
                _mm256_loadu_ps(row),
                _mm256_loadu_ps(row.add(8 * (lanes - 1))),
            ];
            for (r, acc) in acc.iter_mut().enumerate() {
                let x = _mm256_set1_ps(*ap.add(r * g.lda + p));
                for (a, &bv) in acc.iter_mut().zip(&bv).take(lanes) {
                    *a = _mm256_add_ps(*a, _mm256_mul_ps(x, bv));
                }
            }
        }
        for (r, acc) in acc.iter().enumerate() {
            for (l, a) in acc.iter().enumerate().take(lanes) {
                _mm256_storeu_ps(cp.add(r * g.ldc + j + 8 * l), *a);
            }
        }
        j += 8 * lanes;
    }
    super::rows::gemm_f32_columns(g, R, j, a, b, c);
}

fn widen_f16(x: &[half::f16], out: &mut [f32]) {
    super::rows::check_widen(x, out);
    // SAFETY: only reachable through the table built after detecting avx2,
    // fma and f16c; the lengths are equal (checked above).
    unsafe { widen_f16_impl(x, out) }
}

/// f16 to f32 eight at a time (`vcvtph2ps`, exact as the scalar twin).
///
/// # Safety
/// AVX2 (module note); `out` at least as long as `x`.
#[target_feature(enable = "avx2,fma,f16c")]
unsafe fn widen_f16_impl(x: &[half::f16], out: &mut [f32]) {
    let mut i = 0;
    while i + 8 <= x.len() {
        let v = _mm256_cvtph_ps(_mm_loadu_si128(x.as_ptr().add(i).cast()));
        _mm256_storeu_ps(out.as_mut_ptr().add(i), v);
        i += 8;
    }
    for (o, v) in out[i..].iter_mut().zip(&x[i..]) {
        *o = fp16(*v);
    }
}

fn round_f16(x: &[f32], out: &mut [f32]) {
    super::rows::check_round(x, out);
    // SAFETY: only reachable through the table built after detecting avx2,
    // fma and f16c; the lengths are equal (checked above).
    unsafe { round_f16_impl(x, out) }
}

/// f32 to f16 and back eight at a time (`vcvtps2ph` rounding to nearest,
/// ties to even, as the scalar twin; then `vcvtph2ps`, exact).
///
/// # Safety
/// AVX2 (module note); `out` at least as long as `x`.
#[target_feature(enable = "avx2,fma,f16c")]
unsafe fn round_f16_impl(x: &[f32], out: &mut [f32]) {
    let mut i = 0;
    while i + 8 <= x.len() {
        let h = _mm256_cvtps_ph::<_MM_FROUND_TO_NEAREST_INT>(_mm256_loadu_ps(x.as_ptr().add(i)));
        _mm256_storeu_ps(out.as_mut_ptr().add(i), _mm256_cvtph_ps(h));
        i += 8;
    }
    for (o, v) in out[i..].iter_mut().zip(&x[i..]) {
        *o = half::f16::from_f32(*v).to_f32();
    }
}

fn delta_net_columns(
    cols: &mut [f32],
    k: &[f32],
    q: &[f32],
    decay: f32,
    v: &[f32],
    b: f32,
    read: &mut [f32],
) {
    super::rows::delta_net_in_groups::<4>(
        cols,
        k,
        q,
        decay,
        v,
        b,
        read,
        // SAFETY (both): only reachable through the table built after
        // detecting avx2, fma and f16c; `delta_net_in_groups` passes whole
        // columns of `k.len()` (4 to a group), `q` as long, a multiple of
        // 8, and the kernels load and store only whole 8-lane chunks.
        |group, v| unsafe { delta_net_columns4_impl(group, k, q, decay, v, b) },
        |col, vc| unsafe { delta_net_column_impl(col, k, q, decay, vc, b) },
    );
}

/// Four columns' `delta_net_column_impl` interleaved: each column keeps
/// its own accumulators and the same operations in the same order (so the
/// bits are one column's at a time), while four dependency chains run at
/// once where one column alone waits on each add's latency.
///
/// # Safety
/// AVX2 (module note); `cols` 4 columns of `k.len()`, `q` as long as `k`,
/// a multiple of 8; `v` 4 values.
#[target_feature(enable = "avx2,fma,f16c")]
unsafe fn delta_net_columns4_impl(
    cols: &mut [f32],
    k: &[f32],
    q: &[f32],
    decay: f32,
    v: &[f32],
    b: f32,
) -> [f32; 4] {
    let d = k.len();
    let (c, kp, qp) = (cols.as_mut_ptr(), k.as_ptr(), q.as_ptr());
    let dv = _mm256_set1_ps(decay);
    let mut recall = [_mm256_setzero_ps(); 4];
    for i in (0..d).step_by(8) {
        let kk = _mm256_loadu_ps(kp.add(i));
        for (j, acc) in recall.iter_mut().enumerate() {
            let p = c.add(j * d + i);
            let s = _mm256_mul_ps(_mm256_loadu_ps(p), dv);
            _mm256_storeu_ps(p, s);
            *acc = _mm256_add_ps(*acc, _mm256_mul_ps(s, kk));
        }
    }
    let mut delta = [_mm256_setzero_ps(); 4];
    for j in 0..4 {
        delta[j] = _mm256_set1_ps((v[j] - sum8_256(recall[j])) * b);
    }
    let mut read = [_mm256_setzero_ps(); 4];
    for i in (0..d).step_by(8) {
        let (kk, qq) = (_mm256_loadu_ps(kp.add(i)), _mm256_loadu_ps(qp.add(i)));
        for (j, acc) in read.iter_mut().enumerate() {
            let p = c.add(j * d + i);
            let s = _mm256_add_ps(_mm256_loadu_ps(p), _mm256_mul_ps(kk, delta[j]));
            _mm256_storeu_ps(p, s);
            *acc = _mm256_add_ps(*acc, _mm256_mul_ps(s, qq));
        }
    }
    [
        sum8_256(read[0]),
        sum8_256(read[1]),
        sum8_256(read[2]),
        sum8_256(read[3]),
    ]
}

/// `rows::delta_net_column` on columns of a multiple of 8: one register
/// holds `dot8`'s eight lanes, multiplies and adds stay separate (no fused
/// multiply-add), and `sum8_256` adds the lanes in `dot8`'s order, so the
/// bits are the scalar twin's. Two sweeps instead of four: the decay with
/// the recall's dot, then the write with the read's.
///
/// # Safety
/// AVX2 (module note); `col`, `k` and `q` equally long, a multiple of 8.
#[target_feature(enable = "avx2,fma,f16c")]
unsafe fn delta_net_column_impl(
    col: &mut [f32],
    k: &[f32],
    q: &[f32],
    decay: f32,
    v: f32,
    b: f32,
) -> f32 {
    let (c, kp, qp) = (col.as_mut_ptr(), k.as_ptr(), q.as_ptr());
    let d = _mm256_set1_ps(decay);
    let mut recall = _mm256_setzero_ps();
    for i in (0..col.len()).step_by(8) {
        let s = _mm256_mul_ps(_mm256_loadu_ps(c.add(i)), d);
        _mm256_storeu_ps(c.add(i), s);
        recall = _mm256_add_ps(recall, _mm256_mul_ps(s, _mm256_loadu_ps(kp.add(i))));
    }
    let delta = _mm256_set1_ps((v - sum8_256(recall)) * b);
    let mut read = _mm256_setzero_ps();
    for i in (0..col.len()).step_by(8) {
        let s = _mm256_add_ps(
            _mm256_loadu_ps(c.add(i)),
            _mm256_mul_ps(_mm256_loadu_ps(kp.add(i)), delta),
        );
        _mm256_storeu_ps(c.add(i), s);
        read = _mm256_add_ps(read, _mm256_mul_ps(s, _mm256_loadu_ps(qp.add(i))));
    }
    sum8_256(read)
}

fn causal_conv(taps: &[f32], state: &[f32], x: &[f32], out: &mut [f32]) {
    super::rows::check_causal_conv(taps, state, x, out);
    // SAFETY: only reachable through the table built after detecting avx2,
    // fma and f16c; the shapes are checked above (the state and the taps
    // whole rows of `out.len()`), and the kernel loads and stores 8-lane
    // chunks only below `out.len()` in each row.
    unsafe { causal_conv_impl(taps, state, x, out) }
}

/// `rows::causal_conv_sums` eight channels at a time: a register starts at
/// zero and adds each tap's product in the twin's order, multiplies and
/// adds separate, so the bits are the twin's; the last channels go through
/// the twin's own per-channel sums.
///
/// # Safety
/// AVX2 (module note); shapes as `rows::check_causal_conv` asserts.
#[target_feature(enable = "avx2,fma,f16c")]
unsafe fn causal_conv_impl(taps: &[f32], state: &[f32], x: &[f32], out: &mut [f32]) {
    let n = out.len();
    let rows = state.len() / n;
    let (t, s) = (taps.as_ptr(), state.as_ptr());
    let mut ch = 0;
    while ch + 8 <= n {
        let mut acc = _mm256_setzero_ps();
        for k in 0..rows {
            let at = k * n + ch;
            acc = _mm256_add_ps(
                acc,
                _mm256_mul_ps(_mm256_loadu_ps(s.add(at)), _mm256_loadu_ps(t.add(at))),
            );
        }
        let last = _mm256_loadu_ps(t.add(rows * n + ch));
        acc = _mm256_add_ps(
            acc,
            _mm256_mul_ps(_mm256_loadu_ps(x.as_ptr().add(ch)), last),
        );
        _mm256_storeu_ps(out.as_mut_ptr().add(ch), acc);
        ch += 8;
    }
    super::rows::causal_conv_tail(taps, state, x, out, ch);
}

/// The eight lanes added as `rows::sum8`: the halves lane by lane, then
/// lanes 0 and 2 and lanes 1 and 3, then those two.
///
/// # Safety
/// AVX2 (module note).
#[target_feature(enable = "avx2,fma,f16c")]
unsafe fn sum8_256(a: __m256) -> f32 {
    let halves = _mm_add_ps(_mm256_castps256_ps128(a), _mm256_extractf128_ps(a, 1));
    let pairs = _mm_add_ps(halves, _mm_movehl_ps(halves, halves));
    _mm_cvtss_f32(_mm_add_ss(pairs, _mm_shuffle_ps(pairs, pairs, 1)))
}

fn silu_mul(gate: &mut [f32], up: &[f32]) {
    // SAFETY: only reachable through the table built after detecting avx2,
    // fma and f16c; the kernel loads and stores whole chunks of the slices.
    unsafe { silu_mul_impl(gate, up) }
}

/// `gate = silu(gate) · up` eight at a time: the scalar twin's steps
/// (`rows::exp`, then a divide and a multiply) lane by lane, so bit-equal.
///
/// # Safety
/// AVX2 (module note).
#[target_feature(enable = "avx2,fma,f16c")]
unsafe fn silu_mul_impl(gate: &mut [f32], up: &[f32]) {
    let mut gs = gate.chunks_exact_mut(8);
    let mut us = up.chunks_exact(8);
    for (g, u) in (&mut gs).zip(&mut us) {
        let x = _mm256_loadu_ps(g.as_ptr());
        let e = exp8(_mm256_xor_ps(x, _mm256_set1_ps(-0.0)));
        let silu = _mm256_div_ps(x, _mm256_add_ps(_mm256_set1_ps(1.0), e));
        _mm256_storeu_ps(
            g.as_mut_ptr(),
            _mm256_mul_ps(silu, _mm256_loadu_ps(u.as_ptr())),
        );
    }
    super::rows::silu_mul(gs.into_remainder(), us.remainder());
}

fn gelu(x: &mut [f32]) {
    // SAFETY: only reachable through the table built after detecting avx2,
    // fma and f16c; the kernel loads and stores whole chunks of the slice,
    // and gathers within the GELU table (`gelu8`).
    unsafe { gelu_impl(x) }
}

fn gelu_mul(gate: &mut [f32], up: &[f32]) {
    // SAFETY: as `gelu`.
    unsafe { gelu_mul_impl(gate, up) }
}

/// `rows::gelu` eight at a time: the same table, indexed by the same f16
/// rounding (`vcvtps2ph`, to nearest even), so bit-equal.
///
/// # Safety
/// AVX2 (module note).
#[target_feature(enable = "avx2,fma,f16c")]
unsafe fn gelu_impl(x: &mut [f32]) {
    let table = super::rows::gelu_table();
    let mut xs = x.chunks_exact_mut(8);
    for v in &mut xs {
        let x = _mm256_loadu_ps(v.as_ptr());
        _mm256_storeu_ps(v.as_mut_ptr(), gelu8(x, table, _mm256_set1_ps(1.0)));
    }
    super::rows::gelu(xs.into_remainder());
}

/// `rows::gelu_mul` eight at a time, as `gelu_impl`.
///
/// # Safety
/// AVX2 (module note).
#[target_feature(enable = "avx2,fma,f16c")]
unsafe fn gelu_mul_impl(gate: &mut [f32], up: &[f32]) {
    let table = super::rows::gelu_table();
    let mut gs = gate.chunks_exact_mut(8);
    let mut us = up.chunks_exact(8);
    for (g, u) in (&mut gs).zip(&mut us) {
        let x = _mm256_loadu_ps(g.as_ptr());
        let u = _mm256_loadu_ps(u.as_ptr());
        _mm256_storeu_ps(g.as_mut_ptr(), gelu8(x, table, u));
    }
    super::rows::gelu_mul(gs.into_remainder(), us.remainder());
}

/// GELU of eight lanes times `u`, as `rows::gelu_mul` computes it: 0 at or
/// below -10, x·u at or above 10, else the table's value at x rounded to
/// f16, times u. The table's f16 entries are gathered as 32-bit words at
/// their byte offsets (the table has an entry past the last input for the
/// top half of the last word) and cut to their low 16 bits.
///
/// # Safety
/// AVX2 (module note); `table` must be `rows::gelu_table()`.
#[target_feature(enable = "avx2,fma,f16c")]
#[inline]
unsafe fn gelu8(x: __m256, table: &[half::f16], u: __m256) -> __m256 {
    assert!(table.len() > u16::MAX as usize + 1);
    let bits = _mm256_cvtepu16_epi32(_mm256_cvtps_ph::<_MM_FROUND_TO_NEAREST_INT>(x));
    let words = _mm256_i32gather_epi32::<2>(table.as_ptr().cast(), bits);
    let halves = _mm256_and_si256(words, _mm256_set1_epi32(0xFFFF));
    let packed = _mm_packus_epi32(
        _mm256_castsi256_si128(halves),
        _mm256_extracti128_si256::<1>(halves),
    );
    let looked_up = _mm256_cvtph_ps(packed);
    let high = _mm256_cmp_ps::<_CMP_GE_OQ>(x, _mm256_set1_ps(10.0));
    let low = _mm256_cmp_ps::<_CMP_LE_OQ>(x, _mm256_set1_ps(-10.0));
    let y = _mm256_mul_ps(_mm256_blendv_ps(looked_up, x, high), u);
    _mm256_andnot_ps(low, y)
}

fn softmax_poly(x: &mut [f32]) {
    // SAFETY: only reachable through the table built after detecting avx2,
    // fma and f16c; the kernel loads and stores whole chunks of the slice.
    unsafe { softmax_poly_impl(x) }
}

/// `rows::softmax_poly` eight values at a time: the maximum by `vmaxps`
/// (which keeps the running maximum over a NaN, as the twin's comparison
/// does; a maximum is the same whatever the order), `exp8`, each chunk's
/// values widened to f64 and added to the eight partial sums (lane `l` is
/// sum `l`, as value `j` goes to sum `j % 8`), the tail as the twin.
///
/// # Safety
/// AVX2 (module note).
#[target_feature(enable = "avx2,fma,f16c")]
unsafe fn softmax_poly_impl(x: &mut [f32]) {
    let mut chunks = x.chunks_exact(8);
    let mut m8 = _mm256_set1_ps(f32::NEG_INFINITY);
    for c in &mut chunks {
        m8 = _mm256_max_ps(_mm256_loadu_ps(c.as_ptr()), m8);
    }
    let mut lanes = [0f32; 8];
    _mm256_storeu_ps(lanes.as_mut_ptr(), m8);
    let max = lanes
        .iter()
        .chain(chunks.remainder())
        .fold(f32::NEG_INFINITY, |m, &v| if v > m { v } else { m });
    let (mut lo, mut hi) = (_mm256_setzero_pd(), _mm256_setzero_pd());
    let full = x.len() / 8 * 8;
    for c in x[..full].chunks_exact_mut(8) {
        let e = exp8(_mm256_sub_ps(
            _mm256_loadu_ps(c.as_ptr()),
            _mm256_set1_ps(max),
        ));
        _mm256_storeu_ps(c.as_mut_ptr(), e);
        lo = _mm256_add_pd(lo, _mm256_cvtps_pd(_mm256_castps256_ps128(e)));
        hi = _mm256_add_pd(hi, _mm256_cvtps_pd(_mm256_extractf128_ps::<1>(e)));
    }
    let mut sums = [0f64; 8];
    _mm256_storeu_pd(sums.as_mut_ptr(), lo);
    _mm256_storeu_pd(sums.as_mut_ptr().add(4), hi);
    for (j, v) in x[full..].iter_mut().enumerate() {
        *v = super::rows::exp(*v - max);
        sums[j] += *v as f64;
    }
    let inv = _mm256_set1_ps((1.0 / super::rows::sum8_f64(sums)) as f32);
    let mut chunks = x.chunks_exact_mut(8);
    for c in &mut chunks {
        _mm256_storeu_ps(
            c.as_mut_ptr(),
            _mm256_mul_ps(_mm256_loadu_ps(c.as_ptr()), inv),
        );
    }
    let inv = _mm256_cvtss_f32(inv);
    for v in chunks.into_remainder() {
        *v *= inv;
    }
}

/// `rows::exp` on eight lanes, step for step (separate multiplies and adds:
/// no fused multiply-add, so every lane equals the scalar twin).
///
/// # Safety
/// AVX2 (module note).
#[target_feature(enable = "avx2,fma,f16c")]
unsafe fn exp8(x: __m256) -> __m256 {
    use super::rows::exp_consts::*;
    let set = _mm256_set1_ps;
    // (`vmaxps`/`vminps` return their second operand when either is NaN:
    // with `x` second, a NaN goes through, as the twin's clamp lets it.)
    let x = _mm256_min_ps(set(HI), _mm256_max_ps(set(LO), x));
    let n = _mm256_round_ps::<{ _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC }>(_mm256_mul_ps(
        x,
        set(LOG2E),
    ));
    let r = _mm256_sub_ps(
        _mm256_sub_ps(x, _mm256_mul_ps(n, set(LN2_HI))),
        _mm256_mul_ps(n, set(LN2_LO)),
    );
    let mut p = set(P[0]);
    for &c in &P[1..] {
        p = _mm256_add_ps(_mm256_mul_ps(p, r), set(c));
    }
    let e = _mm256_add_ps(
        _mm256_add_ps(_mm256_mul_ps(p, _mm256_mul_ps(r, r)), r),
        set(1.0),
    );
    let bits = _mm256_add_epi32(_mm256_cvtps_epi32(n), _mm256_set1_epi32(127));
    _mm256_mul_ps(e, _mm256_castsi256_ps(_mm256_slli_epi32::<23>(bits)))
}

/// One query against cached f16 K rows, each score with the same
/// operations in the same order as `vec_dot_f16_impl` of the row and the
/// query in f16 (so bit-equal to it), the query widened once for all rows.
///
/// # Safety
/// AVX2 and F16C (module note); `out.len() == cells.len()` and every row
/// `c * stride + offset .. + q.len()` inside `k` (`rows::check_cells`).
#[target_feature(enable = "avx2,fma,f16c")]
unsafe fn scores_f16_impl(
    k: &[half::f16],
    stride: usize,
    offset: usize,
    cells: &[u32],
    q: &[f32],
    out: &mut [f32],
) {
    let n = q.len();
    for (j, (o, &c)) in out.iter_mut().zip(cells).enumerate() {
        let x = k.as_ptr().add(c as usize * stride + offset);
        prefetch_row(k, stride, offset, cells, j + PREFETCH_CELLS, n);
        let mut acc = [_mm256_setzero_ps(); 4];
        let mut i = 0;
        while i + 32 <= n {
            for (j, a) in acc.iter_mut().enumerate() {
                let xv = _mm256_cvtph_ps(_mm_loadu_si128(x.add(i + 8 * j).cast()));
                *a = _mm256_fmadd_ps(xv, _mm256_loadu_ps(q.as_ptr().add(i + 8 * j)), *a);
            }
            i += 32;
        }
        let mut sum = hsum_f32(_mm256_add_ps(
            _mm256_add_ps(acc[0], acc[1]),
            _mm256_add_ps(acc[2], acc[3]),
        ));
        while i < n {
            sum += fp16(*x.add(i)) * q[i];
            i += 1;
        }
        *o = sum;
    }
}

/// The weighted sum of cached f16 V rows with the sums held in registers
/// across the cells (32 columns at a time): per value one exact widening
/// (VCVTPH2PS), one multiply and one add in cell order, as the scalar twin.
///
/// # Safety
/// AVX2 and F16C (module note); `p.len() == cells.len()` and every row
/// `c * stride + offset .. + out.len()` inside `v` (`rows::check_cells`).
#[target_feature(enable = "avx2,fma,f16c")]
unsafe fn wsum_f16_impl(
    v: &[half::f16],
    stride: usize,
    offset: usize,
    cells: &[u32],
    p: &[f32],
    out: &mut [f32],
) {
    let n = out.len();
    let row = |c: u32, col: usize| v.as_ptr().add(c as usize * stride + offset + col);
    let mut col = 0;
    while col + 32 <= n {
        let mut acc = [_mm256_setzero_ps(); 4];
        for (j, (&c, &w)) in cells.iter().zip(p).enumerate() {
            prefetch_row(v, stride, offset + col, cells, j + PREFETCH_CELLS, 32);
            let (r, pw) = (row(c, col), _mm256_set1_ps(w));
            for (j, a) in acc.iter_mut().enumerate() {
                let x = _mm256_cvtph_ps(_mm_loadu_si128(r.add(8 * j).cast()));
                *a = _mm256_add_ps(*a, _mm256_mul_ps(pw, x));
            }
        }
        for (j, a) in acc.iter().enumerate() {
            _mm256_storeu_ps(out.as_mut_ptr().add(col + 8 * j), *a);
        }
        col += 32;
    }
    while col + 8 <= n {
        let mut acc = _mm256_setzero_ps();
        for (&c, &w) in cells.iter().zip(p) {
            let x = _mm256_cvtph_ps(_mm_loadu_si128(row(c, col).cast()));
            acc = _mm256_add_ps(acc, _mm256_mul_ps(_mm256_set1_ps(w), x));
        }
        _mm256_storeu_ps(out.as_mut_ptr().add(col), acc);
        col += 8;
    }
    for (d, o) in out.iter_mut().enumerate().skip(col) {
        let mut sum = 0.0f32;
        for (&c, &w) in cells.iter().zip(p) {
            sum += w * fp16(*row(c, d));
        }
        *o = sum;
    }
}

/// Cells ahead of the one in use whose rows are fetched into the cache: at
/// a token's attention the rows come from memory (the layers' weights have
/// passed through the cache since), and a head's slice of a row is only a
/// cache line or two, so the loads of one cell alone leave memory idle.
const PREFETCH_CELLS: usize = 16;

/// Asks for the cache lines of `width` values from `offset` in the row of
/// cell `cells[j]`, if there is such a cell. A prefetch never faults, so the
/// address only needs to be computed, not valid.
///
/// # Safety
/// SSE (every x86_64 CPU).
#[inline(always)]
unsafe fn prefetch_row(
    rows: &[half::f16],
    stride: usize,
    offset: usize,
    cells: &[u32],
    j: usize,
    width: usize,
) {
    if let Some(&c) = cells.get(j) {
        let start = rows
            .as_ptr()
            .wrapping_add(c as usize * stride + offset)
            .cast::<i8>();
        let mut b = 0;
        while b < 2 * width {
            _mm_prefetch::<_MM_HINT_T0>(start.wrapping_add(b));
            b += 64;
        }
    }
}

/// `scores_f16_impl` for `G` query heads (`q` and `out` hold them back to
/// back): each row widened once for all of them, each head's score with
/// the operations of `scores_f16_impl` in its order, so bit-equal to it.
///
/// # Safety
/// AVX2 and F16C (module note); `q.len() == G * hd`, `out.len() == G *
/// cells.len()`, and every row `c * stride + offset .. + hd` inside `k`.
#[target_feature(enable = "avx2,fma,f16c")]
unsafe fn scores_f16_heads_impl<const G: usize>(
    k: &[half::f16],
    stride: usize,
    offset: usize,
    cells: &[u32],
    q: &[f32],
    out: &mut [f32],
) {
    let hd = q.len() / G;
    let n = cells.len();
    for (j, &c) in cells.iter().enumerate() {
        let x = k.as_ptr().add(c as usize * stride + offset);
        prefetch_row(k, stride, offset, cells, j + PREFETCH_CELLS, hd);
        let mut acc = [[_mm256_setzero_ps(); 4]; G];
        let mut i = 0;
        while i + 32 <= hd {
            for t in 0..4 {
                let xv = _mm256_cvtph_ps(_mm_loadu_si128(x.add(i + 8 * t).cast()));
                for (g, a) in acc.iter_mut().enumerate() {
                    let qv = _mm256_loadu_ps(q.as_ptr().add(g * hd + i + 8 * t));
                    a[t] = _mm256_fmadd_ps(xv, qv, a[t]);
                }
            }
            i += 32;
        }
        for (g, a) in acc.iter().enumerate() {
            let mut sum = hsum_f32(_mm256_add_ps(
                _mm256_add_ps(a[0], a[1]),
                _mm256_add_ps(a[2], a[3]),
            ));
            for t in i..hd {
                sum += fp16(*x.add(t)) * q[g * hd + t];
            }
            out[g * n + j] = sum;
        }
    }
}

/// `wsum_f16_impl` for `G` heads (`p` and `out` hold them back to back):
/// `V` vectors of 8 columns per pass over the cells, each row's values
/// widened once for all heads, and per head and column one multiply and
/// one add in cell order, so bit-equal to it (and to the scalar twin).
///
/// # Safety
/// AVX2 and F16C (module note); `p.len() == G * cells.len()`, `out.len()`
/// a multiple of `G`, and every row `c * stride + offset .. + out.len() /
/// G` inside `v`.
#[target_feature(enable = "avx2,fma,f16c")]
unsafe fn wsum_f16_heads_impl<const G: usize, const V: usize>(
    v: &[half::f16],
    stride: usize,
    offset: usize,
    cells: &[u32],
    p: &[f32],
    out: &mut [f32],
) {
    let (n, w) = (cells.len(), out.len() / G);
    let row = |c: u32, col: usize| v.as_ptr().add(c as usize * stride + offset + col);
    let mut col = 0;
    while col + 8 * V <= w {
        let mut acc = [[_mm256_setzero_ps(); V]; G];
        for (j, &c) in cells.iter().enumerate() {
            let r = row(c, col);
            prefetch_row(v, stride, offset + col, cells, j + PREFETCH_CELLS, 8 * V);
            let mut x = [_mm256_setzero_ps(); V];
            for (t, x) in x.iter_mut().enumerate() {
                *x = _mm256_cvtph_ps(_mm_loadu_si128(r.add(8 * t).cast()));
            }
            for (g, a) in acc.iter_mut().enumerate() {
                let pw = _mm256_set1_ps(*p.get_unchecked(g * n + j));
                for t in 0..V {
                    a[t] = _mm256_add_ps(a[t], _mm256_mul_ps(pw, x[t]));
                }
            }
        }
        for (g, a) in acc.iter().enumerate() {
            for (t, a) in a.iter().enumerate() {
                _mm256_storeu_ps(out.as_mut_ptr().add(g * w + col + 8 * t), *a);
            }
        }
        col += 8 * V;
    }
    // The columns left (fewer than 8 · V): each head's own pass.
    if col < w {
        for g in 0..G {
            let o = &mut out[g * w..(g + 1) * w];
            wsum_f16_impl(
                v,
                stride,
                offset + col,
                cells,
                &p[g * n..(g + 1) * n],
                &mut o[col..],
            );
        }
    }
}

/// `out += p · v` for f32 rows, eight at a time (multiply, then add).
///
/// # Safety
/// AVX2 (module note); `v.len() == out.len()`.
#[target_feature(enable = "avx2,fma,f16c")]
unsafe fn axpy_f32_impl(p: f32, v: &[f32], out: &mut [f32]) {
    let n = v.len();
    let pv = _mm256_set1_ps(p);
    let mut i = 0;
    while i + 8 <= n {
        let x = _mm256_loadu_ps(v.as_ptr().add(i));
        let o = out.as_mut_ptr().add(i);
        _mm256_storeu_ps(o, _mm256_add_ps(_mm256_loadu_ps(o), _mm256_mul_ps(pv, x)));
        i += 8;
    }
    for (o, x) in out[i..].iter_mut().zip(&v[i..]) {
        *o += p * x;
    }
}
fn tile_f32(w: [&[f32]; 4], x: &[f32], out: &mut [f32], stride: usize, store: usize) {
    let n = super::scalar::check_tile(&w, x, out.len(), stride, store);
    // SAFETY: only reachable through the table built after detecting avx2,
    // fma and f16c; checked above: `x` holds `n` rows as long as the `w`
    // rows (the kernel slices them), and `out` is indexed with checks.
    unsafe { tile_rows_f32(w, x, n, out, stride, store) }
}
fn gemv_q4_0_x8i8(group: &[BlockQ4_0x8], x: &[BlockQ8_0], out: &mut [f32]) {
    super::repack::check_gemv(group, x, out, 8);
    // SAFETY: only reachable through the table built after detecting avx2,
    // fma and f16c; checked above: `out` holds the 8 values stored.
    unsafe { gemv_q4_0_x8i8_impl(group, x, out) }
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
        // SAFETY: only reachable through the table built after detecting
        // avx2, fma and f16c; `gemm_sums_in_tiles` slices every `xs` and
        // `ss` row to `group.len()`, and `res` is typed.
        unsafe { by_take!(take, gemm_tile_q5_0_x8(group, xs, ss, res)) }
    });
}
fn gemm_q4_k_x8(group: &[BlockQ4Kx8], x: &[BlockQ8K], n: usize, out: &mut [f32], stride: usize) {
    gemm_in_tiles(group, x, n, out, stride, |take, xs, res| {
        // SAFETY: only reachable through the table built after detecting
        // avx2, fma and f16c; `gemm_in_tiles` slices every `xs` row to
        // `group.len()` blocks, and `res` is typed.
        unsafe { by_take!(take, gemm_tile_q4_k_x8(group, xs, res)) }
    });
}
fn gemm_q6_k_x8(group: &[BlockQ6Kx8], x: &[BlockQ8K], n: usize, out: &mut [f32], stride: usize) {
    gemm_in_tiles(group, x, n, out, stride, |take, xs, res| {
        // SAFETY: as in `gemm_q4_k_x8`.
        unsafe { by_take!(take, gemm_tile_q6_k_x8(group, xs, res)) }
    });
}
fn gemm_q8_0_x8(group: &[BlockQ8_0x8], x: &[BlockQ8_0], n: usize, out: &mut [f32], stride: usize) {
    gemm_in_tiles(group, x, n, out, stride, |take, xs, res| {
        // SAFETY: as in `gemm_q4_k_x8`.
        unsafe { by_take!(take, gemm_tile_q8_0_x8(group, xs, res)) }
    });
}
fn gemm_q4_1_x8(group: &[BlockQ4_1x8], x: &[BlockQ8_1], n: usize, out: &mut [f32], stride: usize) {
    gemm_in_tiles(group, x, n, out, stride, |take, xs, res| {
        // SAFETY: as in `gemm_q4_k_x8`.
        unsafe { by_take!(take, gemm_tile_q4_1_x8(group, xs, res)) }
    });
}
fn vec_dot_q4_k_q8_k(x: &[BlockQ4K], y: &[BlockQ8K]) -> f32 {
    super::scalar::check_dot(x, y);
    // SAFETY: only reachable through the table built after detecting avx2,
    // fma and f16c; lengths checked above.
    unsafe { q4_k_impl(x, y) }
}
fn vec_dot4_q4_k_q8_k(x: &[BlockQ4K], y: [&[BlockQ8K]; 4]) -> [f32; 4] {
    // SAFETY: only reachable through the table built after detecting avx2,
    // fma and f16c; any lengths (the shortest row counts).
    unsafe { q4_k4_impl(x, y) }
}
fn vec_dot4_q6_k_q8_k(x: &[BlockQ6K], y: [&[BlockQ8K]; 4]) -> [f32; 4] {
    // SAFETY: as `vec_dot4_q4_k_q8_k`.
    unsafe { q6_k4_impl(x, y) }
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
        // SAFETY: as in `gemm_q4_k_x8`; every `ss` row is sliced to
        // `group.len()` as well.
        unsafe { by_take!(take, gemm_tile_x8i8(group, xs, ss, res)) }
    });
}
fn vec_dot_q2_k_q8_k(x: &[BlockQ2K], y: &[BlockQ8K]) -> f32 {
    super::scalar::check_dot(x, y);
    // SAFETY: only reachable through the table built after detecting avx2,
    // fma and f16c; lengths checked above.
    unsafe { q2_k_impl(x, y) }
}
fn vec_dot_q3_k_q8_k(x: &[BlockQ3K], y: &[BlockQ8K]) -> f32 {
    super::scalar::check_dot(x, y);
    // SAFETY: only reachable through the table built after detecting avx2,
    // fma and f16c; lengths checked above.
    unsafe { q3_k_impl(x, y) }
}
fn vec_dot_q5_k_q8_k(x: &[BlockQ5K], y: &[BlockQ8K]) -> f32 {
    super::scalar::check_dot(x, y);
    // SAFETY: only reachable through the table built after detecting avx2,
    // fma and f16c; lengths checked above.
    unsafe { q5_k_impl(x, y) }
}
fn vec_dot_q6_k_q8_k(x: &[BlockQ6K], y: &[BlockQ8K]) -> f32 {
    super::scalar::check_dot(x, y);
    // SAFETY: only reachable through the table built after detecting avx2,
    // fma and f16c; lengths checked above.
    unsafe { q6_k_impl(x, y) }
}
fn vec_dot_iq4_nl_q8_0(x: &[BlockIQ4NL], y: &[BlockQ8_0]) -> f32 {
    super::scalar::check_dot(x, y);
    // SAFETY: only reachable through the table built after detecting avx2,
    // fma and f16c; lengths checked above.
    unsafe { iq4_nl_impl(x, y) }
}
fn vec_dot_iq4_xs_q8_k(x: &[BlockIQ4XS], y: &[BlockQ8K]) -> f32 {
    super::scalar::check_dot(x, y);
    // SAFETY: only reachable through the table built after detecting avx2,
    // fma and f16c; lengths checked above.
    unsafe { iq4_xs_impl(x, y) }
}

/// # Safety
/// The CPU must have avx2, fma and f16c.
#[target_feature(enable = "avx2,fma,f16c")]
unsafe fn iq4_nl_impl(x: &[BlockIQ4NL], y: &[BlockQ8_0]) -> f32 {
    iq4_dot::iq4_nl::<Avx2Dots>(x, y)
}
/// # Safety
/// The CPU must have avx2, fma and f16c.
#[target_feature(enable = "avx2,fma,f16c")]
unsafe fn iq4_xs_impl(x: &[BlockIQ4XS], y: &[BlockQ8K]) -> f32 {
    iq4_dot::iq4_xs::<Avx2Dots>(x, y)
}
/// # Safety
/// The CPU must have avx2, fma and f16c.
#[target_feature(enable = "avx2,fma,f16c")]
unsafe fn q2_k_impl(x: &[BlockQ2K], y: &[BlockQ8K]) -> f32 {
    kquant_dot::q2_k::<Avx2Dots>(x, y)
}
/// # Safety
/// The CPU must have avx2, fma and f16c.
#[target_feature(enable = "avx2,fma,f16c")]
unsafe fn q3_k_impl(x: &[BlockQ3K], y: &[BlockQ8K]) -> f32 {
    kquant_dot::q3_k::<Avx2Dots>(x, y)
}
/// # Safety
/// The CPU must have avx2, fma and f16c.
#[target_feature(enable = "avx2,fma,f16c")]
unsafe fn q4_k_impl(x: &[BlockQ4K], y: &[BlockQ8K]) -> f32 {
    kquant_dot::q4_k::<Avx2Dots>(x, y)
}
/// # Safety
/// The CPU must have avx2, fma and f16c.
#[target_feature(enable = "avx2,fma,f16c")]
unsafe fn q4_k4_impl(x: &[BlockQ4K], y: [&[BlockQ8K]; 4]) -> [f32; 4] {
    kquant_dot::q4_k4::<Avx2Dots>(x, y)
}
/// # Safety
/// The CPU must have avx2, fma and f16c.
#[target_feature(enable = "avx2,fma,f16c")]
unsafe fn q6_k4_impl(x: &[BlockQ6K], y: [&[BlockQ8K]; 4]) -> [f32; 4] {
    kquant_dot::q6_k4::<Avx2Dots>(x, y)
}
/// # Safety
/// The CPU must have avx2, fma and f16c.
#[target_feature(enable = "avx2,fma,f16c")]
unsafe fn q5_k_impl(x: &[BlockQ5K], y: &[BlockQ8K]) -> f32 {
    kquant_dot::q5_k::<Avx2Dots>(x, y)
}
/// # Safety
/// The CPU must have avx2, fma and f16c.
#[target_feature(enable = "avx2,fma,f16c")]
unsafe fn q6_k_impl(x: &[BlockQ6K], y: &[BlockQ8K]) -> f32 {
    kquant_dot::q6_k::<Avx2Dots>(x, y)
}

/// Sum of the eight i32 lanes.
///
/// # Safety
/// The CPU must have avx2.
#[target_feature(enable = "avx2")]
#[inline]
unsafe fn hsum_i32(v: __m256i) -> i32 {
    let s = _mm_add_epi32(_mm256_castsi256_si128(v), _mm256_extracti128_si256(v, 1));
    let s = _mm_add_epi32(s, _mm_unpackhi_epi64(s, s));
    let s = _mm_add_epi32(s, _mm_shuffle_epi32(s, 0b01));
    _mm_cvtsi128_si32(s)
}

/// u8 (at most 127, so pairs never saturate i16) times i8 (at least
/// -127), summed in groups of four bytes into i32 lanes.
///
/// # Safety
/// The CPU must have avx2.
#[target_feature(enable = "avx2")]
#[inline]
unsafe fn madd_u8_i8(u: __m256i, s: __m256i) -> __m256i {
    _mm256_madd_epi16(_mm256_maddubs_epi16(u, s), _mm256_set1_epi16(1))
}

/// 32 six-bit Q6_K values (0..63): the high or low nibbles of `ql`, with
/// bits `shift` and `shift + 1` of `qh` above them.
///
/// # Safety
/// The CPU must have avx2.
#[target_feature(enable = "avx2")]
#[inline]
unsafe fn q6_values(ql: __m256i, high: bool, qh: __m256i, shift: u32) -> __m256i {
    let nib = if high { _mm256_srli_epi16(ql, 4) } else { ql };
    let nib = _mm256_and_si256(nib, _mm256_set1_epi8(0x0F));
    let h = _mm256_srl_epi16(qh, _mm_cvtsi32_si128(shift as i32));
    _mm256_or_si256(
        nib,
        _mm256_slli_epi16(_mm256_and_si256(h, _mm256_set1_epi8(3)), 4),
    )
}

struct Avx2Dots;

// The methods' safety contract is the trait's: call them only where the CPU
// has the variant's features (here avx2); their arguments are typed arrays.
impl IntDots for Avx2Dots {
    // The block sums stay in eight i32 lanes (each run's products are
    // multiplied by its scale in 16-bit lanes) and are added across lanes
    // once per block, not once per run.
    #[target_feature(enable = "avx2")]
    #[inline]
    unsafe fn q4_k_scaled(x: &BlockQ4K, y: &BlockQ8K) -> i32 {
        let m = _mm256_set1_epi8(0x0F);
        let (scales, _) = kquant_dot::k4_scales_mins(&x.scales);
        let mut acc = _mm256_setzero_si256();
        for c in 0..4 {
            let q = _mm256_loadu_si256(x.qs.as_ptr().add(32 * c).cast());
            let a = _mm256_loadu_si256(y.qs.as_ptr().add(64 * c).cast());
            let b = _mm256_loadu_si256(y.qs.as_ptr().add(64 * c + 32).cast());
            // Nibbles (0..15) times i8: pairs stay far inside i16.
            let lo = _mm256_maddubs_epi16(_mm256_and_si256(q, m), a);
            let hi = _mm256_maddubs_epi16(_mm256_and_si256(_mm256_srli_epi16(q, 4), m), b);
            let (s0, s1) = (scales[2 * c] as i16, scales[2 * c + 1] as i16);
            acc = _mm256_add_epi32(acc, _mm256_madd_epi16(lo, _mm256_set1_epi16(s0)));
            acc = _mm256_add_epi32(acc, _mm256_madd_epi16(hi, _mm256_set1_epi16(s1)));
        }
        hsum_i32(acc)
    }

    // Each weight chunk's nibbles and its two scales are made once for the
    // four activation rows.
    #[target_feature(enable = "avx2")]
    #[inline]
    unsafe fn q4_k_scaled4(x: &BlockQ4K, y: [&BlockQ8K; 4]) -> [i32; 4] {
        let m = _mm256_set1_epi8(0x0F);
        let (scales, _) = kquant_dot::k4_scales_mins(&x.scales);
        let mut acc = [_mm256_setzero_si256(); 4];
        for c in 0..4 {
            let q = _mm256_loadu_si256(x.qs.as_ptr().add(32 * c).cast());
            let (lo, hi) = (
                _mm256_and_si256(q, m),
                _mm256_and_si256(_mm256_srli_epi16(q, 4), m),
            );
            let s0 = _mm256_set1_epi16(scales[2 * c] as i16);
            let s1 = _mm256_set1_epi16(scales[2 * c + 1] as i16);
            for r in 0..4 {
                let a = _mm256_loadu_si256(y[r].qs.as_ptr().add(64 * c).cast());
                let b = _mm256_loadu_si256(y[r].qs.as_ptr().add(64 * c + 32).cast());
                let lo = _mm256_madd_epi16(_mm256_maddubs_epi16(lo, a), s0);
                let hi = _mm256_madd_epi16(_mm256_maddubs_epi16(hi, b), s1);
                acc[r] = _mm256_add_epi32(acc[r], _mm256_add_epi32(lo, hi));
            }
        }
        [
            hsum_i32(acc[0]),
            hsum_i32(acc[1]),
            hsum_i32(acc[2]),
            hsum_i32(acc[3]),
        ]
    }

    // Each weight chunk's six-bit values (0..63) are made once; the − 32
    // comes last, from Q8_K's 16-value sums: Σ_j scale_j × 32 × Σ run j
    // (run j of 16 values is the activations' 16-sum j). Same integers.
    #[target_feature(enable = "avx2")]
    #[inline]
    unsafe fn q6_k_scaled4(x: &BlockQ6K, y: [&BlockQ8K; 4]) -> [i32; 4] {
        let mut acc = [_mm256_setzero_si256(); 4];
        for half in 0..2 {
            let qh = _mm256_loadu_si256(x.qh.as_ptr().add(32 * half).cast());
            for k in 0..4 {
                let l = _mm256_loadu_si256(x.ql.as_ptr().add(64 * half + 32 * (k % 2)).cast());
                let q = q6_values(l, k >= 2, qh, 2 * k as u32);
                let sc = &x.scales[8 * half + 2 * k..];
                let scale =
                    _mm256_set_m128i(_mm_set1_epi16(sc[1] as i16), _mm_set1_epi16(sc[0] as i16));
                for r in 0..4 {
                    let a = _mm256_loadu_si256(y[r].qs.as_ptr().add(128 * half + 32 * k).cast());
                    // q·a pairs: at most 2·63·127, inside i16.
                    let d = _mm256_madd_epi16(_mm256_maddubs_epi16(q, a), scale);
                    acc[r] = _mm256_add_epi32(acc[r], d);
                }
            }
        }
        let mut out = [0i32; 4];
        for r in 0..4 {
            let runs: i32 = (0..16)
                .map(|j| x.scales[j] as i32 * y[r].bsums[j] as i32)
                .sum();
            out[r] = hsum_i32(acc[r]) - 32 * runs;
        }
        out
    }

    #[target_feature(enable = "avx2")]
    #[inline]
    unsafe fn q6_k_scaled(x: &BlockQ6K, y: &BlockQ8K) -> i32 {
        let mut acc = _mm256_setzero_si256();
        for half in 0..2 {
            let qh = _mm256_loadu_si256(x.qh.as_ptr().add(32 * half).cast());
            for k in 0..4 {
                let l = _mm256_loadu_si256(x.ql.as_ptr().add(64 * half + 32 * (k % 2)).cast());
                let q = q6_values(l, k >= 2, qh, 2 * k as u32);
                let a = _mm256_loadu_si256(y.qs.as_ptr().add(128 * half + 32 * k).cast());
                // (q − 32)·a in i16 pairs: q·a − 32·a, both inside i16.
                let d = _mm256_sub_epi16(
                    _mm256_maddubs_epi16(q, a),
                    _mm256_maddubs_epi16(_mm256_set1_epi8(32), a),
                );
                // Bytes 0..15 (the first run of 16) are the low 128 bits.
                let sc = &x.scales[8 * half + 2 * k..];
                let scale =
                    _mm256_set_m128i(_mm_set1_epi16(sc[1] as i16), _mm_set1_epi16(sc[0] as i16));
                acc = _mm256_add_epi32(acc, _mm256_madd_epi16(d, scale));
            }
        }
        hsum_i32(acc)
    }

    #[target_feature(enable = "avx2")]
    #[inline]
    unsafe fn level_dots(q: &[u8; 16], a: &[i8; 32]) -> i32 {
        let grid = _mm_loadu_si128(IQ4_LEVELS.as_ptr().cast());
        let v = _mm_loadu_si128(q.as_ptr().cast());
        let m = _mm_set1_epi8(0x0F);
        let lo = _mm_shuffle_epi8(grid, _mm_and_si128(v, m));
        let hi = _mm_shuffle_epi8(grid, _mm_and_si128(_mm_srli_epi16(v, 4), m));
        let levels = _mm256_set_m128i(hi, lo);
        let av = _mm256_loadu_si256(a.as_ptr().cast());
        // Signed × signed through maddubs: |level| times a with the level's
        // sign (pairs stay below 2·127·127, no saturation).
        let prod = madd_u8_i8(
            _mm256_sign_epi8(levels, levels),
            _mm256_sign_epi8(av, levels),
        );
        hsum_i32(prod)
    }

    #[target_feature(enable = "avx2")]
    #[inline]
    unsafe fn nibble_dots(q: &[u8; 32], a: &[i8; 32], b: &[i8; 32]) -> (i32, i32) {
        let v = _mm256_loadu_si256(q.as_ptr().cast());
        let m = _mm256_set1_epi8(0x0F);
        let lo = _mm256_and_si256(v, m);
        let hi = _mm256_and_si256(_mm256_srli_epi16(v, 4), m);
        (
            hsum_i32(madd_u8_i8(lo, _mm256_loadu_si256(a.as_ptr().cast()))),
            hsum_i32(madd_u8_i8(hi, _mm256_loadu_si256(b.as_ptr().cast()))),
        )
    }

    #[target_feature(enable = "avx2")]
    #[inline]
    unsafe fn bit_sums(h: &[u8; 32], bit: u32, a: &[i8; 32], b: &[i8; 32]) -> (i32, i32) {
        let v = _mm256_loadu_si256(h.as_ptr().cast());
        let one = _mm256_set1_epi8(1);
        let shift = _mm_cvtsi32_si128(bit as i32);
        let lo = _mm256_and_si256(_mm256_srl_epi16(v, shift), one);
        let hi = _mm256_and_si256(_mm256_srl_epi16(v, _mm_cvtsi32_si128(bit as i32 + 1)), one);
        (
            hsum_i32(madd_u8_i8(lo, _mm256_loadu_si256(a.as_ptr().cast()))),
            hsum_i32(madd_u8_i8(hi, _mm256_loadu_si256(b.as_ptr().cast()))),
        )
    }

    #[target_feature(enable = "avx2")]
    #[inline]
    unsafe fn q6_dots(
        ql: &[u8; 32],
        high: bool,
        qh: &[u8; 32],
        shift: u32,
        a: &[i8; 32],
    ) -> (i32, i32) {
        let q = q6_values(
            _mm256_loadu_si256(ql.as_ptr().cast()),
            high,
            _mm256_loadu_si256(qh.as_ptr().cast()),
            shift,
        );
        // Unsigned q (0..63) times a, minus 32 × Σa, per 16-value half.
        let av = _mm256_loadu_si256(a.as_ptr().cast());
        let prod = madd_u8_i8(q, av);
        let sums = madd_u8_i8(_mm256_set1_epi8(32), av);
        sum_halves(_mm256_sub_epi32(prod, sums))
    }

    #[target_feature(enable = "avx2")]
    #[inline]
    unsafe fn crumb_dots(q: &[u8; 32], shift: u32, a: &[i8; 32]) -> (i32, i32) {
        // Shifting 16-bit lanes: bits from the next byte land above the two
        // kept (shift <= 6).
        let v = _mm256_srl_epi16(
            _mm256_loadu_si256(q.as_ptr().cast()),
            _mm_cvtsi32_si128(shift as i32),
        );
        let v = _mm256_and_si256(v, _mm256_set1_epi8(3));
        sum_halves(madd_u8_i8(v, _mm256_loadu_si256(a.as_ptr().cast())))
    }

    #[target_feature(enable = "avx2")]
    #[inline]
    unsafe fn masked_sums(h: &[u8; 32], bit: u32, a: &[i8; 32]) -> (i32, i32) {
        let v = _mm256_srl_epi16(
            _mm256_loadu_si256(h.as_ptr().cast()),
            _mm_cvtsi32_si128(bit as i32),
        );
        let v = _mm256_and_si256(v, _mm256_set1_epi8(1));
        sum_halves(madd_u8_i8(v, _mm256_loadu_si256(a.as_ptr().cast())))
    }
}

/// The sums of the low four and the high four i32 lanes (the two 16-value
/// halves of a 32-value dot).
///
/// # Safety
/// The CPU must have avx2.
#[target_feature(enable = "avx2")]
#[inline]
unsafe fn sum_halves(d: __m256i) -> (i32, i32) {
    let h128 = |s: __m128i| {
        let s = _mm_add_epi32(s, _mm_unpackhi_epi64(s, s));
        _mm_cvtsi128_si32(_mm_add_epi32(s, _mm_shuffle_epi32(s, 0b01)))
    };
    (
        h128(_mm256_castsi256_si128(d)),
        h128(_mm256_extracti128_si256(d, 1)),
    )
}

/// One f16 to f32 with F16C (exact), without `half`'s run-time dispatch.
///
/// # Safety
/// The CPU must have avx2, fma and f16c.
#[target_feature(enable = "avx2,fma,f16c")]
pub(super) unsafe fn fp16(h: half::f16) -> f32 {
    // A table load: one uop, where F16C's scalar path takes three, two of
    // them on the shuffle port the integer dot products need (ggml does the
    // same on x86). Same value: every f16 is exact in f32.
    F16_TO_F32[h.to_bits() as usize]
}

/// Every f16 bit pattern as f32 (256 KiB), built at compile time.
static F16_TO_F32: [f32; 1 << 16] = {
    let mut t = [0.0f32; 1 << 16];
    let mut i = 0;
    while i < 1 << 16 {
        t[i] = half::f16::from_bits(i as u16).to_f32_const();
        i += 1;
    }
    t
};

/// # Safety
/// The CPU must have avx2 and fma.
#[target_feature(enable = "avx2,fma")]
unsafe fn hsum_f32(v: __m256) -> f32 {
    let s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    let s = _mm_add_ps(s, _mm_movehl_ps(s, s));
    let s = _mm_add_ss(s, _mm_movehdup_ps(s));
    _mm_cvtss_f32(s)
}

/// # Safety
/// The CPU must have avx2, fma and f16c. Any lengths: only whole chunks of 32 values
/// that have a block to go to are read.
#[target_feature(enable = "avx2,fma,f16c")]
unsafe fn quantize_q8_0_impl(x: &[f32], y: &mut [BlockQ8_0]) {
    let abs_mask = _mm256_set1_ps(-0.0);
    for (x, b) in x.chunks_exact(QK).zip(y) {
        let p = x.as_ptr();
        let v = [
            _mm256_loadu_ps(p),
            _mm256_loadu_ps(p.add(8)),
            _mm256_loadu_ps(p.add(16)),
            _mm256_loadu_ps(p.add(24)),
        ];
        let mut m = _mm256_andnot_ps(abs_mask, v[0]);
        for vi in &v[1..] {
            m = _mm256_max_ps(m, _mm256_andnot_ps(abs_mask, *vi));
        }
        let m128 = _mm_max_ps(_mm256_castps256_ps128(m), _mm256_extractf128_ps(m, 1));
        let m128 = _mm_max_ps(m128, _mm_movehl_ps(m128, m128));
        let amax = _mm_cvtss_f32(_mm_max_ss(m128, _mm_movehdup_ps(m128)));
        b.d = half::f16::from_f32(amax / 127.0);
        let idv = _mm256_set1_ps(super::scalar::activation_scale(amax));
        // cvtps rounds half to even (the default rounding mode).
        let i: [__m256i; 4] = std::array::from_fn(|k| _mm256_cvtps_epi32(_mm256_mul_ps(v[k], idv)));
        // Pack 32 x i32 to i8 (packs interleave 128-bit lanes; permute back).
        let i01 = _mm256_packs_epi32(i[0], i[1]);
        let i23 = _mm256_packs_epi32(i[2], i[3]);
        let i8s = _mm256_packs_epi16(i01, i23);
        let i8s = _mm256_permutevar8x32_epi32(i8s, _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7));
        _mm256_storeu_si256(b.qs.as_mut_ptr().cast(), i8s);
    }
}

/// The 32 nibbles of a 16-byte array as bytes: low nibbles, then high nibbles.
///
/// # Safety
/// The CPU must have avx2.
#[target_feature(enable = "avx2")]
unsafe fn nibbles(qs: &[u8; 16]) -> __m256i {
    let t = _mm_loadu_si128(qs.as_ptr().cast());
    let both = _mm256_insertf128_si256(_mm256_castsi128_si256(t), _mm_srli_epi16(t, 4), 1);
    _mm256_and_si256(both, _mm256_set1_epi8(0x0F))
}

/// Eight i32 sums of products of u8 `a` and i8 `b`, as floats (exact: the sums
/// are far below 2^24).
///
/// # Safety
/// The CPU must have avx2.
#[target_feature(enable = "avx2")]
unsafe fn dot_u8_i8(a: __m256i, b: __m256i) -> __m256 {
    let pairs = _mm256_maddubs_epi16(a, b);
    _mm256_cvtepi32_ps(_mm256_madd_epi16(pairs, _mm256_set1_epi16(1)))
}

/// The same for two i8 vectors (neither holding -128 where the other is
/// negative, as quantized activations never do).
///
/// # Safety
/// The CPU must have avx2.
#[target_feature(enable = "avx2")]
unsafe fn dot_i8_i8(a: __m256i, b: __m256i) -> __m256 {
    dot_u8_i8(_mm256_sign_epi8(a, a), _mm256_sign_epi8(b, a))
}

/// Sums `scale(block) × term(block)` (a vector of 8 partial products) plus
/// `extra(block)` over blocks, with two accumulators of each so consecutive
/// blocks do not wait on each other.
///
/// # Safety
/// Call only from a function with avx2 and fma enabled (it is inlined
/// into its caller and uses their intrinsics), on a CPU that has them;
/// `scale`, `term` and `extra` must be sound for any pair of blocks.
#[inline(always)]
unsafe fn sum_blocks<X, Y>(
    x: &[X],
    y: &[Y],
    scale: impl Fn(&X, &Y) -> f32,
    term: impl Fn(&X, &Y) -> __m256,
    extra: impl Fn(&X, &Y) -> f32,
) -> f32 {
    let mut acc = [_mm256_setzero_ps(); 2];
    let mut more = [0.0f32; 2];
    for (xs, ys) in x.chunks_exact(2).zip(y.chunks_exact(2)) {
        for k in 0..2 {
            acc[k] = _mm256_fmadd_ps(
                _mm256_set1_ps(scale(&xs[k], &ys[k])),
                term(&xs[k], &ys[k]),
                acc[k],
            );
            more[k] += extra(&xs[k], &ys[k]);
        }
    }
    let n = x.len().min(y.len());
    if n % 2 == 1 {
        let (xl, yl) = (&x[n - 1], &y[n - 1]);
        acc[0] = _mm256_fmadd_ps(_mm256_set1_ps(scale(xl, yl)), term(xl, yl), acc[0]);
        more[0] += extra(xl, yl);
    }
    hsum_f32(_mm256_add_ps(acc[0], acc[1])) + (more[0] + more[1])
}

/// # Safety
/// The CPU must have avx2, fma and f16c. Any lengths (the shorter one counts).
#[target_feature(enable = "avx2,fma,f16c")]
unsafe fn vec_dot_q4_0_q8_0_impl(x: &[BlockQ4_0], y: &[BlockQ8_0]) -> f32 {
    sum_blocks(
        x,
        y,
        |x, y| fp16(x.d) * fp16(y.d),
        |x, y| {
            let qx = _mm256_sub_epi8(nibbles(&x.qs), _mm256_set1_epi8(8));
            dot_i8_i8(qx, _mm256_loadu_si256(y.qs.as_ptr().cast()))
        },
        |_, _| 0.0,
    )
}

/// # Safety
/// The CPU must have avx2, fma and f16c. Any lengths (the shorter one counts).
#[target_feature(enable = "avx2,fma,f16c")]
unsafe fn vec_dot_q4_1_q8_1_impl(x: &[BlockQ4_1], y: &[BlockQ8_1]) -> f32 {
    sum_blocks(
        x,
        y,
        |x, y| fp16(x.d) * fp16(y.d),
        |x, y| dot_u8_i8(nibbles(&x.qs), _mm256_loadu_si256(y.qs.as_ptr().cast())),
        |x, y| fp16(x.m) * fp16(y.s),
    )
}

/// `sum_blocks` for one weight row and four activation rows: `prep` decodes a
/// weight block once, `term` meets it with each activation block; the scale
/// of a pair of blocks is the product of their f16 scales `d` (the one-row
/// kernels' `scale`). Per row the accumulators and their order are
/// `sum_blocks`'s, so each result equals the one-row kernel's bit for bit.
///
/// # Safety
/// As `sum_blocks`, with f16c. Any lengths: every row is cut to the
/// shortest one.
#[inline(always)]
unsafe fn sum_blocks4<X, Y, P>(
    x: &[X],
    y: [&[Y]; 4],
    prep: impl Fn(&X) -> P,
    d: (impl Fn(&X) -> half::f16, impl Fn(&Y) -> half::f16),
    term: impl Fn(&P, &Y) -> __m256,
    extra: impl Fn(&X, &Y) -> f32,
) -> [f32; 4] {
    let n = y.iter().fold(x.len(), |n, r| n.min(r.len()));
    // Cut to the common length, so the compiler drops the bounds checks.
    let (x, y) = (&x[..n], y.map(|r| &r[..n]));
    let mut acc = [[_mm256_setzero_ps(); 2]; 4];
    let mut more = [[0.0f32; 2]; 4];
    let mut scales = [0.0f32; 4];
    // Two blocks per step so each accumulator index is known at compile time
    // (a run-time index would keep the accumulators in memory). A macro, not
    // a closure: a closure here would not inherit the caller's target
    // features, and its intrinsics would become calls. The four rows'
    // scales `d(x) × d(y)` are made in one vector (the same products as one
    // at a time), then each is broadcast to its row's lanes.
    macro_rules! step {
        ($b:expr, $k:expr) => {{
            let xb = &x[$b];
            let p = prep(xb);
            let yd = |r: usize| d.1(&y[r][$b]).to_bits() as i64;
            let packed = yd(0) | yd(1) << 16 | yd(2) << 32 | yd(3) << 48;
            let dy = _mm_cvtph_ps(_mm_cvtsi64_si128(packed));
            _mm_storeu_ps(
                scales.as_mut_ptr(),
                _mm_mul_ps(_mm_set1_ps(fp16(d.0(xb))), dy),
            );
            for r in 0..4 {
                let yb = &y[r][$b];
                acc[r][$k] =
                    _mm256_fmadd_ps(_mm256_broadcast_ss(&scales[r]), term(&p, yb), acc[r][$k]);
                more[r][$k] += extra(xb, yb);
            }
        }};
    }
    let mut b = 0;
    while b + 2 <= n {
        step!(b, 0);
        step!(b + 1, 1);
        b += 2;
    }
    if b < n {
        step!(b, 0);
    }
    std::array::from_fn(|r| {
        hsum_f32(_mm256_add_ps(acc[r][0], acc[r][1])) + (more[r][0] + more[r][1])
    })
}

/// The Q8_0 dot for four activation rows (the weight block loaded once).
///
/// # Safety
/// The CPU must have avx2, fma and f16c. Any lengths (the shortest one counts).
#[target_feature(enable = "avx2,fma,f16c")]
unsafe fn vec_dot4_q8_0_q8_0_impl(x: &[BlockQ8_0], y: [&[BlockQ8_0]; 4]) -> [f32; 4] {
    sum_blocks4(
        x,
        y,
        |x| {
            let q = _mm256_loadu_si256(x.qs.as_ptr().cast());
            (_mm256_sign_epi8(q, q), q)
        },
        (|x: &BlockQ8_0| x.d, |y: &BlockQ8_0| y.d),
        |&(abs, q), y| {
            let yq = _mm256_loadu_si256(y.qs.as_ptr().cast());
            dot_u8_i8(abs, _mm256_sign_epi8(yq, q))
        },
        |_, _| 0.0,
    )
}

/// `vec_dot_q4_1_q8_1_impl` for four activation rows at once: each weight
/// block's nibbles and scales are decoded once. Per row, the accumulators,
/// their order and the final sums are exactly `sum_blocks`'s, so each result
/// equals the one-row kernel's bit for bit.
///
/// # Safety
/// The CPU must have avx2, fma and f16c. Any lengths (the shortest one counts).
#[target_feature(enable = "avx2,fma,f16c")]
unsafe fn vec_dot4_q4_1_q8_1_impl(x: &[BlockQ4_1], y: [&[BlockQ8_1]; 4]) -> [f32; 4] {
    sum_blocks4(
        x,
        y,
        |x| nibbles(&x.qs),
        (|x: &BlockQ4_1| x.d, |y: &BlockQ8_1| y.d),
        |&q, y| dot_u8_i8(q, _mm256_loadu_si256(y.qs.as_ptr().cast())),
        |x, y| fp16(x.m) * fp16(y.s),
    )
}

/// The 32 five-bit values of a Q5 block (0..31): nibbles, plus 16 where the
/// value's bit in `qh` is set.
///
/// # Safety
/// The CPU must have avx2.
#[target_feature(enable = "avx2")]
#[inline]
unsafe fn q5_values(qs: &[u8; 16], qh: [u8; 4]) -> __m256i {
    _mm256_or_si256(
        nibbles(qs),
        _mm256_and_si256(q5_high_set(qh), _mm256_set1_epi8(0x10)),
    )
}

/// The 32 values of a Q5_0 block less 16 (-16..15): a value whose high bit
/// is clear is its nibble minus 16, which in two's complement is the nibble
/// with the top four bits set.
///
/// # Safety
/// The CPU must have avx2.
#[target_feature(enable = "avx2")]
#[inline]
unsafe fn q5_signed(qs: &[u8; 16], qh: [u8; 4]) -> __m256i {
    let clear = _mm256_andnot_si256(q5_high_set(qh), _mm256_set1_epi8(0xF0u8 as i8));
    _mm256_or_si256(nibbles(qs), clear)
}

/// 0xFF in byte j where bit j of `qh` (the fifth bits of a Q5 block) is set.
///
/// # Safety
/// The CPU must have avx2.
#[target_feature(enable = "avx2")]
#[inline]
unsafe fn q5_high_set(qh: [u8; 4]) -> __m256i {
    let h = _mm256_set1_epi32(i32::from_le_bytes(qh));
    // Byte j takes byte j/8 of qh, then tests bit j%8.
    let spread = _mm256_shuffle_epi8(
        h,
        _mm256_setr_epi64x(
            0,
            0x0101_0101_0101_0101,
            0x0202_0202_0202_0202,
            0x0303_0303_0303_0303,
        ),
    );
    let bit = _mm256_set1_epi64x(0x8040_2010_0804_0201u64 as i64);
    _mm256_cmpeq_epi8(_mm256_and_si256(spread, bit), bit)
}

/// # Safety
/// The CPU must have avx2, fma and f16c. Any lengths (the shorter one counts).
#[target_feature(enable = "avx2,fma,f16c")]
unsafe fn vec_dot_q5_0_q8_0_impl(x: &[BlockQ5_0], y: &[BlockQ8_0]) -> f32 {
    sum_blocks(
        x,
        y,
        |x, y| fp16(x.d) * fp16(y.d),
        |x, y| {
            dot_i8_i8(
                q5_signed(&x.qs, x.qh),
                _mm256_loadu_si256(y.qs.as_ptr().cast()),
            )
        },
        |_, _| 0.0,
    )
}

/// `vec_dot_q5_0_q8_0_impl` for four activation rows: each weight block's
/// five-bit values are assembled once (the costly part of the one-row
/// kernel); per row the terms and their order are `sum_blocks`'s, so each
/// result equals the one-row kernel's bit for bit.
///
/// # Safety
/// The CPU must have avx2, fma and f16c. Any lengths (the shortest one counts).
#[target_feature(enable = "avx2,fma,f16c")]
unsafe fn vec_dot4_q5_0_q8_0_impl(x: &[BlockQ5_0], y: [&[BlockQ8_0]; 4]) -> [f32; 4] {
    sum_blocks4(
        x,
        y,
        |x| {
            let q = q5_signed(&x.qs, x.qh);
            (_mm256_sign_epi8(q, q), q)
        },
        (|x: &BlockQ5_0| x.d, |y: &BlockQ8_0| y.d),
        |&(abs, q), y| {
            let yq = _mm256_loadu_si256(y.qs.as_ptr().cast());
            dot_u8_i8(abs, _mm256_sign_epi8(yq, q))
        },
        |_, _| 0.0,
    )
}

/// # Safety
/// The CPU must have avx2, fma and f16c. Any lengths (the shorter one counts).
#[target_feature(enable = "avx2,fma,f16c")]
unsafe fn vec_dot_q5_1_q8_1_impl(x: &[BlockQ5_1], y: &[BlockQ8_1]) -> f32 {
    sum_blocks(
        x,
        y,
        |x, y| fp16(x.d) * fp16(y.d),
        |x, y| {
            dot_u8_i8(
                q5_values(&x.qs, x.qh),
                _mm256_loadu_si256(y.qs.as_ptr().cast()),
            )
        },
        |x, y| fp16(x.m) * fp16(y.s),
    )
}

/// # Safety
/// The CPU must have avx2, fma and f16c. Any lengths (the shorter one counts).
#[target_feature(enable = "avx2,fma,f16c")]
unsafe fn vec_dot_q8_0_q8_0_impl(x: &[BlockQ8_0], y: &[BlockQ8_0]) -> f32 {
    sum_blocks(
        x,
        y,
        |x, y| fp16(x.d) * fp16(y.d),
        |x, y| {
            dot_i8_i8(
                _mm256_loadu_si256(x.qs.as_ptr().cast()),
                _mm256_loadu_si256(y.qs.as_ptr().cast()),
            )
        },
        |_, _| 0.0,
    )
}

/// # Safety
/// The CPU must have avx2 and fma. Any lengths: loads stay below the shorter
/// length.
#[target_feature(enable = "avx2,fma")]
unsafe fn vec_dot_f32_impl(x: &[f32], y: &[f32]) -> f32 {
    let n = x.len().min(y.len());
    let mut acc = [_mm256_setzero_ps(); 4];
    let mut i = 0;
    while i + 32 <= n {
        for (k, a) in acc.iter_mut().enumerate() {
            let xv = _mm256_loadu_ps(x.as_ptr().add(i + 8 * k));
            let yv = _mm256_loadu_ps(y.as_ptr().add(i + 8 * k));
            *a = _mm256_fmadd_ps(xv, yv, *a);
        }
        i += 32;
    }
    let mut sum = hsum_f32(_mm256_add_ps(
        _mm256_add_ps(acc[0], acc[1]),
        _mm256_add_ps(acc[2], acc[3]),
    ));
    while i < n {
        sum += x[i] * y[i];
        i += 1;
    }
    sum
}

/// Eight rows at once: each 32-byte load holds 8 bytes of 4 rows; the matching
/// 8 activation bytes are broadcast to all four. Per block the eight integer
/// sums are exact and are scaled in `vec_dot`'s order (no FMA), so each output
/// equals the scalar `vec_dot` of its row.
///
/// # Safety
/// The CPU must have avx2, fma and f16c. `out` must hold at least 8 values (8 are
/// stored); `group` and `x` may have any lengths (they are zipped).
#[target_feature(enable = "avx2,fma,f16c")]
unsafe fn gemv_q4_0_x8i8_impl(group: &[BlockQ4_0x8], x: &[BlockQ8_0], out: &mut [f32]) {
    let low_mask = _mm256_set1_epi8(0x0F);
    let eight = _mm256_set1_epi8(8);
    let order = _mm256_setr_epi32(0, 1, 4, 5, 2, 3, 6, 7);
    let mut acc = _mm256_setzero_ps();
    for (b, y) in group.iter().zip(x) {
        let mut sums = [_mm256_setzero_si256(); 2]; // rows 0-3, rows 4-7
        for k in 0..2 {
            let ylo = _mm256_set1_epi64x(y.qs.as_ptr().add(8 * k).cast::<i64>().read_unaligned());
            let yhi =
                _mm256_set1_epi64x(y.qs.as_ptr().add(16 + 8 * k).cast::<i64>().read_unaligned());
            for (half, sum) in sums.iter_mut().enumerate() {
                let q = _mm256_loadu_si256(b.qs.as_ptr().add(64 * k + 32 * half).cast());
                let lo = _mm256_sub_epi8(_mm256_and_si256(q, low_mask), eight);
                let hi =
                    _mm256_sub_epi8(_mm256_and_si256(_mm256_srli_epi16(q, 4), low_mask), eight);
                let pairs = _mm256_add_epi16(
                    _mm256_maddubs_epi16(_mm256_sign_epi8(lo, lo), _mm256_sign_epi8(ylo, lo)),
                    _mm256_maddubs_epi16(_mm256_sign_epi8(hi, hi), _mm256_sign_epi8(yhi, hi)),
                );
                *sum = _mm256_add_epi32(*sum, _mm256_madd_epi16(pairs, _mm256_set1_epi16(1)));
            }
        }
        // Lanes hold (row, half-of-8-bytes) pairs: add each pair, restore row order.
        let rows = _mm256_permutevar8x32_epi32(_mm256_hadd_epi32(sums[0], sums[1]), order);
        let dw = _mm256_cvtph_ps(_mm_loadu_si128(b.d.as_ptr().cast()));
        let scaled = _mm256_mul_ps(
            _mm256_mul_ps(_mm256_cvtepi32_ps(rows), dw),
            _mm256_set1_ps(fp16(y.d)),
        );
        acc = _mm256_add_ps(acc, scaled);
    }
    _mm256_storeu_ps(out.as_mut_ptr(), acc);
}

/// # Safety
/// The CPU must have avx2, fma and f16c. Any lengths: loads stay below the shorter
/// length.
#[target_feature(enable = "avx2,fma,f16c")]
unsafe fn vec_dot_f16_impl(x: &[half::f16], y: &[half::f16]) -> f32 {
    let n = x.len().min(y.len());
    let mut acc = [_mm256_setzero_ps(); 4];
    let mut i = 0;
    while i + 32 <= n {
        for (k, a) in acc.iter_mut().enumerate() {
            let xv = _mm256_cvtph_ps(_mm_loadu_si128(x.as_ptr().add(i + 8 * k).cast()));
            let yv = _mm256_cvtph_ps(_mm_loadu_si128(y.as_ptr().add(i + 8 * k).cast()));
            *a = _mm256_fmadd_ps(xv, yv, *a);
        }
        i += 32;
    }
    let mut sum = hsum_f32(_mm256_add_ps(
        _mm256_add_ps(acc[0], acc[1]),
        _mm256_add_ps(acc[2], acc[3]),
    ));
    while i < n {
        sum += fp16(x[i]) * fp16(y[i]);
        i += 1;
    }
    sum
}

fn tile_f16(w: [&[half::f16]; 4], x: &[f32], out: &mut [f32], stride: usize, store: usize) {
    super::scalar::f16_rows_in_chunks(w, x, out, stride, store, 4, |wr, xs, out| {
        // SAFETY: only reachable through the table built after detecting
        // avx2, fma and f16c; the frame checked the shapes: `xs` holds whole
        // rows as long as `wr`, and `out` is indexed with checks.
        unsafe {
            match xs.len() / wr.len() {
                4 => row_f16::<4>(wr, xs, out, stride),
                3 => row_f16::<3>(wr, xs, out, stride),
                2 => row_f16::<2>(wr, xs, out, stride),
                _ => row_f16::<1>(wr, xs, out, stride),
            }
        }
    });
}

fn gemv_f16(w: &[half::f16], x: &[f32], out: &mut [f32]) {
    super::scalar::f16_gemv_rows(w, x, out, |wr, x| {
        let mut sum = 0.0;
        // SAFETY: only reachable through the table built after detecting
        // avx2, fma and f16c; the frame gives `wr` as long as `x`, and the
        // output is a one-value slice.
        unsafe { row_f16::<1>(wr, x, std::slice::from_mut(&mut sum), 0) };
        sum
    });
}

/// One f16 weight row times `C` (1..=4) activation rows, converting 8
/// weights per step as they are loaded; one weight row at a time, as
/// `avx512::row_f16` explains. The accumulators and reduction are
/// `tile_f32_impl`'s, so the outputs equal it bit for bit. Output `c` goes
/// to `out[c * stride]`.
///
/// # Safety
/// The CPU must have avx2, fma and f16c; `x` must hold `C` rows as long as
/// `w`.
#[target_feature(enable = "avx2,fma,f16c")]
unsafe fn row_f16<const C: usize>(w: &[half::f16], x: &[f32], out: &mut [f32], stride: usize) {
    let n = w.len();
    assert!(x.len() == C * n);
    let mut acc = [_mm256_setzero_ps(); C];
    let mut i = 0;
    while i + 8 <= n {
        let wv = _mm256_cvtph_ps(_mm_loadu_si128(w.as_ptr().add(i).cast()));
        for c in 0..C {
            let xv = _mm256_loadu_ps(x.as_ptr().add(c * n + i));
            acc[c] = _mm256_fmadd_ps(wv, xv, acc[c]);
        }
        i += 8;
    }
    for c in 0..C {
        let mut sum = hsum_f32(acc[c]);
        for j in i..n {
            sum += fp16(w[j]) * x[c * n + j];
        }
        out[c * stride] = sum;
    }
}

/// `tile_f32` over the `n` activation rows of `x`, two at a time (an odd
/// last one paired with itself).
///
/// # Safety
/// The CPU must have avx2, fma and f16c.
#[target_feature(enable = "avx2,fma,f16c")]
unsafe fn tile_rows_f32(
    w: [&[f32]; 4],
    x: &[f32],
    n: usize,
    out: &mut [f32],
    stride: usize,
    store: usize,
) {
    let cols = w[0].len();
    let row = |i: usize| &x[i * cols..(i + 1) * cols];
    for i in (0..n).step_by(2) {
        let res = tile_f32_impl(w, [row(i), row((i + 1).min(n - 1))]);
        for c in 0..(n - i).min(2) {
            for (r, res) in res.iter().enumerate().take(store) {
                out[(i + c) * stride + r] = res[c];
            }
        }
    }
}

/// Four f32 weight rows times two f32 activation rows: per 8 columns, six
/// loads and eight FMAs. One accumulator per output, reduced the same way
/// for every output, whatever the other rows of the tile are.
///
/// # Safety
/// The CPU must have avx2, fma and f16c. Every row of `w` must hold at least as many
/// values as the shorter row of `x` (loads go that far in each).
#[target_feature(enable = "avx2,fma,f16c")]
#[inline]
unsafe fn tile_f32_impl(w: [&[f32]; 4], x: [&[f32]; 2]) -> [[f32; 2]; 4] {
    let n = x[0].len().min(x[1].len());
    let mut acc = [[_mm256_setzero_ps(); 2]; 4];
    let mut i = 0;
    while i + 8 <= n {
        let x0 = _mm256_loadu_ps(x[0].as_ptr().add(i));
        let x1 = _mm256_loadu_ps(x[1].as_ptr().add(i));
        for r in 0..4 {
            let wv = _mm256_loadu_ps(w[r].as_ptr().add(i));
            acc[r][0] = _mm256_fmadd_ps(wv, x0, acc[r][0]);
            acc[r][1] = _mm256_fmadd_ps(wv, x1, acc[r][1]);
        }
        i += 8;
    }
    let mut out = [[0.0f32; 2]; 4];
    for r in 0..4 {
        for c in 0..2 {
            let mut sum = hsum_f32(acc[r][c]);
            for j in i..n {
                sum += w[r][j] * x[c][j];
            }
            out[r][c] = sum;
        }
    }
    out
}

/// The eight rows' exact Σ q·a of a group block's 128 nibble bytes
/// (`BlockQ4_0x8`'s layout, which Q4_1's shares; nibbles unsigned) against
/// each of `A` activation blocks' 32 quants, in row order. Each block is
/// unpacked once for all of them; `maddubs` takes the nibbles against the
/// signed activations without sign tricks (pairs summed in 16 bits: |sum|
/// <= 4·15·128 < 2^15), widened to 32 bits at once.
///
/// # Safety
/// The CPU must have avx2.
#[target_feature(enable = "avx2")]
#[inline]
unsafe fn nibble_dots_x8<const A: usize>(qs: &[u8; 128], ys: [&[i8; 32]; A]) -> [__m256i; A] {
    let low_mask = _mm256_set1_epi8(0x0F);
    let ones = _mm256_set1_epi16(1);
    let order = _mm256_setr_epi32(0, 1, 4, 5, 2, 3, 6, 7);
    let mut sums = [[_mm256_setzero_si256(); 2]; A];
    for k in 0..2 {
        for half in 0..2 {
            let q = _mm256_loadu_si256(qs.as_ptr().add(64 * k + 32 * half).cast());
            let lo = _mm256_and_si256(q, low_mask);
            let hi = _mm256_and_si256(_mm256_srli_epi16(q, 4), low_mask);
            for (sum, y) in sums.iter_mut().zip(ys) {
                let ylo = _mm256_set1_epi64x(y.as_ptr().add(8 * k).cast::<i64>().read_unaligned());
                let yhi =
                    _mm256_set1_epi64x(y.as_ptr().add(16 + 8 * k).cast::<i64>().read_unaligned());
                let pairs =
                    _mm256_add_epi16(_mm256_maddubs_epi16(lo, ylo), _mm256_maddubs_epi16(hi, yhi));
                sum[half] = _mm256_add_epi32(sum[half], _mm256_madd_epi16(pairs, ones));
            }
        }
    }
    sums.map(|s| _mm256_permutevar8x32_epi32(_mm256_hadd_epi32(s[0], s[1]), order))
}

/// Eight repacked Q4_0 rows times `A` (1..=4) activation rows: the
/// nibbles' exact sums (`nibble_dots_x8`, q unsigned as stored), less 8 ×
/// the activation block's sum (`ss`) in 32 bits: each row's exact
/// Σ (q − 8)·y, scaled in `vec_dot`'s order, as in the GEMV.
///
/// # Safety
/// The CPU must have avx2, fma and f16c. `A` must be 1..=4 and each of the
/// first `A` rows of `xs` and `ss` at least `group.len()` long (indexed
/// with bounds checks).
#[target_feature(enable = "avx2,fma,f16c")]
unsafe fn gemm_tile_x8i8<const A: usize>(
    group: &[BlockQ4_0x8],
    xs: &[&[BlockQ8_0]; 4],
    ss: &[&[i32]; 4],
    res: &mut [[f32; 8]; 4],
) {
    let mut acc = [_mm256_setzero_ps(); A];
    for (bi, b) in group.iter().enumerate() {
        let rows = nibble_dots_x8::<A>(&b.qs, std::array::from_fn(|j| &xs[j][bi].qs));
        let dw = _mm256_cvtph_ps(_mm_loadu_si128(b.d.as_ptr().cast()));
        for (j, a) in acc.iter_mut().enumerate() {
            let rows = _mm256_sub_epi32(rows[j], _mm256_set1_epi32(8 * ss[j][bi]));
            let scaled = _mm256_mul_ps(
                _mm256_mul_ps(_mm256_cvtepi32_ps(rows), dw),
                _mm256_set1_ps(fp16(xs[j][bi].d)),
            );
            *a = _mm256_add_ps(*a, scaled);
        }
    }
    for (j, a) in acc.iter().enumerate() {
        _mm256_storeu_ps(res[j].as_mut_ptr(), *a);
    }
}

/// Eight repacked Q4_1 rows times `A` (1..=4) activation rows: each row's
/// exact block sum Σ q·a (`nibble_dots_x8`) is added with one FMA by d(w)·d(a), and the
/// minimum's term m·s with one FMA into a second sum, as the scalar twin
/// `repack_q4_1::gemm_q4_1_x8` does: the results equal it bit for bit.
///
/// # Safety
/// As `gemm_tile_q4_k_x8`.
#[target_feature(enable = "avx2,fma,f16c")]
unsafe fn gemm_tile_q4_1_x8<const A: usize>(
    group: &[BlockQ4_1x8],
    xs: &[&[BlockQ8_1]; 4],
    res: &mut [[f32; 8]; 4],
) {
    let mut dots = [_mm256_setzero_ps(); A];
    let mut mins = [_mm256_setzero_ps(); A];
    for (bi, b) in group.iter().enumerate() {
        let rows = nibble_dots_x8::<A>(&b.qs, std::array::from_fn(|j| &xs[j][bi].qs));
        let dw = _mm256_cvtph_ps(_mm_loadu_si128(b.d.as_ptr().cast()));
        let mw = _mm256_cvtph_ps(_mm_loadu_si128(b.m.as_ptr().cast()));
        for j in 0..A {
            let y = &xs[j][bi];
            let scale = _mm256_mul_ps(dw, _mm256_set1_ps(fp16(y.d)));
            dots[j] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(rows[j]), scale, dots[j]);
            mins[j] = _mm256_fmadd_ps(mw, _mm256_set1_ps(fp16(y.s)), mins[j]);
        }
    }
    for j in 0..A {
        _mm256_storeu_ps(res[j].as_mut_ptr(), _mm256_add_ps(dots[j], mins[j]));
    }
}

/// Eight repacked Q5_0 rows times `A` (1..=4) activation rows. Each weight
/// block is decoded once for all of them to unsigned values (nibble | fifth
/// bit << 4, i.e. value + 16), so `maddubs` takes them without sign tricks;
/// four products per lane are summed in 16 bits (|sum| <= 4·2·31·128 <
/// 2^15), and 16 × the activation block's sum comes off in 32 bits. The
/// result is each row's exact block sum, added with one FMA as the scalar
/// kernel does.
///
/// # Safety
/// The CPU must have avx2, fma and f16c. `A` must be 1..=4 and each of the
/// first `A` rows of `xs` and `sums` at least `group.len()` long (indexed
/// with bounds checks).
#[target_feature(enable = "avx2,fma,f16c")]
unsafe fn gemm_tile_q5_0_x8<const A: usize>(
    group: &[BlockQ5_0x8],
    xs: &[&[BlockQ8_0]; 4],
    sums: &[&[i32]; 4],
    res: &mut [[f32; 8]; 4],
) {
    let ones = _mm256_set1_epi16(1);
    let order = _mm256_setr_epi32(0, 1, 4, 5, 2, 3, 6, 7);
    let mut acc = [_mm256_setzero_ps(); A];
    for (bi, b) in group.iter().enumerate() {
        let u = q5_0x8_unsigned(b);
        let dw = _mm256_cvtph_ps(_mm_loadu_si128(b.d.as_ptr().cast()));
        for (j, a) in acc.iter_mut().enumerate() {
            let y = &xs[j][bi];
            // Values 8m..8m+8 of the activation block, in every 8-byte run.
            let ya: [__m256i; 4] = std::array::from_fn(|m| {
                _mm256_set1_epi64x(y.qs.as_ptr().add(8 * m).cast::<i64>().read_unaligned())
            });
            let halves: [__m256i; 2] = std::array::from_fn(|half| {
                let p = _mm256_add_epi16(
                    _mm256_add_epi16(
                        _mm256_maddubs_epi16(u[0][half][0], ya[0]),
                        _mm256_maddubs_epi16(u[0][half][1], ya[2]),
                    ),
                    _mm256_add_epi16(
                        _mm256_maddubs_epi16(u[1][half][0], ya[1]),
                        _mm256_maddubs_epi16(u[1][half][1], ya[3]),
                    ),
                );
                _mm256_madd_epi16(p, ones)
            });
            // Lanes hold (row, half-of-8-bytes) pairs: add each pair,
            // restore row order, take off 16 × the activation sum.
            let rows = _mm256_sub_epi32(
                _mm256_permutevar8x32_epi32(_mm256_hadd_epi32(halves[0], halves[1]), order),
                _mm256_set1_epi32(16 * sums[j][bi]),
            );
            let d = _mm256_mul_ps(dw, _mm256_set1_ps(fp16(y.d)));
            *a = _mm256_fmadd_ps(_mm256_cvtepi32_ps(rows), d, *a);
        }
    }
    for (j, a) in acc.iter().enumerate() {
        _mm256_storeu_ps(res[j].as_mut_ptr(), *a);
    }
}

/// A Q5_0 group block's values as unsigned bytes (nibble | fifth bit << 4,
/// i.e. value + 16): `u[k][half][nibble]` holds rows 4·half..'s values 8k..
/// (low nibbles) or 16 + 8k.. (high nibbles), 8 bytes per row.
///
/// # Safety
/// The CPU must have avx2.
#[target_feature(enable = "avx2")]
#[inline]
pub(super) unsafe fn q5_0x8_unsigned(b: &BlockQ5_0x8) -> [[[__m256i; 2]; 2]; 2] {
    let low_mask = _mm256_set1_epi8(0x0F);
    let fifth = _mm256_set1_epi8(0x10);
    // Byte t of each 8-byte run tests bit t.
    let bits = _mm256_set1_epi64x(0x8040_2010_0804_0201u64 as i64);
    // A vector holds 8 bytes of each of four rows; `qh` byte `m` of the
    // row behind each 8-byte run (the four rows' `qh` in both 128-bit lanes).
    let spread = |m: i8| {
        let (a, b, c, d) = (m, 4 + m, 8 + m, 12 + m);
        _mm256_setr_epi8(
            a, a, a, a, a, a, a, a, b, b, b, b, b, b, b, b, c, c, c, c, c, c, c, c, d, d, d, d, d,
            d, d, d,
        )
    };
    let spreads = [spread(0), spread(1), spread(2), spread(3)];
    // u[k][half][nibble]: rows 4·half.., values 8k.. (low nibbles) or
    // 16 + 8k.. (high nibbles).
    let mut u = [[[_mm256_setzero_si256(); 2]; 2]; 2];
    for half in 0..2 {
        let qh = _mm256_broadcastsi128_si256(_mm_loadu_si128(b.qh.as_ptr().add(16 * half).cast()));
        for (k, u_k) in u.iter_mut().enumerate() {
            let q = _mm256_loadu_si256(b.qs.as_ptr().add(64 * k + 32 * half).cast());
            let high_bit = |m: usize| {
                let sel = _mm256_and_si256(_mm256_shuffle_epi8(qh, spreads[m]), bits);
                _mm256_and_si256(_mm256_cmpeq_epi8(sel, bits), fifth)
            };
            u_k[half][0] = _mm256_or_si256(_mm256_and_si256(q, low_mask), high_bit(k));
            u_k[half][1] = _mm256_or_si256(
                _mm256_and_si256(_mm256_srli_epi16(q, 4), low_mask),
                high_bit(2 + k),
            );
        }
    }
    u
}

/// Eight repacked Q4_K rows times `A` (1..=4) activation rows. Per
/// super-block the weights' nibbles, scale vectors and min vectors are
/// decoded once for all `A` rows. For each sub-block of 32, four `maddubs`
/// per half (rows 0-3, rows 4-7) are summed in 16 bits (|sum| <= 4·2·15·128
/// < 2^15) and `madd` with the rows' scales widens them, so each lane pair
/// ends as one row's Σ scale × (quants · activations), exactly; the mins
/// meet Q8_K's 16-sums in `madd` too. The float combination is
/// `kquant_dot::q4_k`'s, for eight rows at once (no FMA): each result equals
/// `vec_dot_q4_k_q8_k` bit for bit.
///
/// # Safety
/// The CPU must have avx2, fma and f16c. `A` must be 1..=4 and each of the
/// first `A` rows of `xs` at least `group.len()` blocks long (indexed with
/// bounds checks).
#[target_feature(enable = "avx2,fma,f16c")]
unsafe fn gemm_tile_q4_k_x8<const A: usize>(
    group: &[BlockQ4Kx8],
    xs: &[&[BlockQ8K]; 4],
    res: &mut [[f32; 8]; 4],
) {
    let low_mask = _mm256_set1_epi8(0x0F);
    let order = _mm256_setr_epi32(0, 1, 4, 5, 2, 3, 6, 7);
    // Byte i of a 4-byte word to the four 16-bit lanes of its row (lane 0
    // of the vector: bytes 0, 1; lane 1: bytes 2, 3).
    let z = -128i8; // a pshufb index that writes zero
    let widen_scales = _mm256_setr_epi8(
        0, z, 0, z, 0, z, 0, z, 1, z, 1, z, 1, z, 1, z, 2, z, 2, z, 2, z, 2, z, 3, z, 3, z, 3, z,
        3, z,
    );
    let mut acc = [_mm256_setzero_ps(); A];
    for (bi, b) in group.iter().enumerate() {
        // w[(4c + k) * 2 + half][nibble]: rows 4·half.., values 64c + 8k..
        // (low nibbles) or 64c + 32 + 8k.. (high nibbles).
        let mut w = [[_mm256_setzero_si256(); 2]; 32];
        for (v, w) in w.iter_mut().enumerate() {
            let q = _mm256_loadu_si256(b.qs.as_ptr().add(32 * v).cast());
            w[0] = _mm256_and_si256(q, low_mask);
            w[1] = _mm256_and_si256(_mm256_srli_epi16(q, 4), low_mask);
        }
        // scales[s][half]: rows 4·half..'s scale of sub-block s, per lane.
        let scales: [[__m256i; 2]; 8] = std::array::from_fn(|s| {
            std::array::from_fn(|half| {
                let word = b
                    .scales
                    .as_ptr()
                    .add(8 * s + 4 * half)
                    .cast::<i32>()
                    .read_unaligned();
                _mm256_shuffle_epi8(_mm256_set1_epi32(word), widen_scales)
            })
        });
        // mins[p]: each row's (min of sub-block 2p, of 2p + 1) in 16 bits.
        let mins: [__m256i; 4] = std::array::from_fn(|p| {
            _mm256_cvtepu8_epi16(_mm_loadu_si128(b.mins.as_ptr().add(16 * p).cast()))
        });
        let d = _mm256_cvtph_ps(_mm_loadu_si128(b.d.as_ptr().cast()));
        let dmin = _mm256_cvtph_ps(_mm_loadu_si128(b.dmin.as_ptr().cast()));
        for (j, a) in acc.iter_mut().enumerate() {
            let y = &xs[j][bi];
            let mut sums = [_mm256_setzero_si256(); 2];
            for c in 0..4 {
                // Activations 64c + 32h + 8k.., in every 8-byte run.
                let ya: [[__m256i; 4]; 2] = std::array::from_fn(|h| {
                    std::array::from_fn(|k| {
                        let at = 64 * c + 32 * h + 8 * k;
                        _mm256_set1_epi64x(y.qs.as_ptr().add(at).cast::<i64>().read_unaligned())
                    })
                });
                for (half, sum) in sums.iter_mut().enumerate() {
                    for nib in 0..2 {
                        let wv = |k: usize| w[(4 * c + k) * 2 + half][nib];
                        let p = _mm256_add_epi16(
                            _mm256_add_epi16(
                                _mm256_maddubs_epi16(wv(0), ya[nib][0]),
                                _mm256_maddubs_epi16(wv(1), ya[nib][1]),
                            ),
                            _mm256_add_epi16(
                                _mm256_maddubs_epi16(wv(2), ya[nib][2]),
                                _mm256_maddubs_epi16(wv(3), ya[nib][3]),
                            ),
                        );
                        *sum =
                            _mm256_add_epi32(*sum, _mm256_madd_epi16(p, scales[2 * c + nib][half]));
                    }
                }
            }
            // Lanes hold (row, half-of-the-run) pairs: add each pair and
            // restore row order.
            let dots = _mm256_permutevar8x32_epi32(_mm256_hadd_epi32(sums[0], sums[1]), order);
            // Σ min × (sum of the sub-block's activations), the sub-block
            // sums as 16-bit pairs (s = 2p, 2p + 1) in every 32-bit lane.
            let bsums = _mm_hadd_epi16(
                _mm_loadu_si128(y.bsums.as_ptr().cast()),
                _mm_loadu_si128(y.bsums.as_ptr().add(8).cast()),
            );
            let bsums = _mm256_broadcastsi128_si256(bsums);
            let pair = |p: usize| match p {
                0 => _mm256_shuffle_epi32(bsums, 0x00),
                1 => _mm256_shuffle_epi32(bsums, 0x55),
                2 => _mm256_shuffle_epi32(bsums, 0xAA),
                _ => _mm256_shuffle_epi32(bsums, 0xFF),
            };
            let min_sums = _mm256_add_epi32(
                _mm256_add_epi32(
                    _mm256_madd_epi16(mins[0], pair(0)),
                    _mm256_madd_epi16(mins[1], pair(1)),
                ),
                _mm256_add_epi32(
                    _mm256_madd_epi16(mins[2], pair(2)),
                    _mm256_madd_epi16(mins[3], pair(3)),
                ),
            );
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

/// Eight repacked Q6_K rows times `A` (1..=4) activation rows. Per
/// super-block the weights' six-bit values (unsigned, 0..63) and the scale
/// vectors are decoded once for all `A` rows. For each sub-block of 16, two
/// `maddubs` per half (rows 0-3, rows 4-7) are summed in 16 bits (|sum| <=
/// 2·2·63·128 < 2^15) and `madd` with the rows' signed scales widens them;
/// the − 32 of every value comes after, as 32 × Σ scale × (the sub-block's
/// activation sum from Q8_K), also through `madd`. The integers are
/// `kquant_dot::q6_k`'s, and so is the float combination (no FMA): each
/// result equals `vec_dot_q6_k_q8_k` bit for bit.
///
/// # Safety
/// As `gemm_tile_q4_k_x8`.
// The loop indices address the blocks' bytes as well as the arrays.
#[allow(clippy::needless_range_loop)]
#[target_feature(enable = "avx2,fma,f16c")]
unsafe fn gemm_tile_q6_k_x8<const A: usize>(
    group: &[BlockQ6Kx8],
    xs: &[&[BlockQ8K]; 4],
    res: &mut [[f32; 8]; 4],
) {
    let order = _mm256_setr_epi32(0, 1, 4, 5, 2, 3, 6, 7);
    // From 8 scale bytes (rows 4·half.. at stride 2, sub-block parity t in
    // the byte's position), row r's scale to the high byte of its four
    // 16-bit lanes; an arithmetic shift then sign-extends it.
    let z = -128i8; // a pshufb index that writes zero
    let widen = |t: i8| {
        _mm256_setr_epi8(
            z,
            t,
            z,
            t,
            z,
            t,
            z,
            t,
            z,
            t + 2,
            z,
            t + 2,
            z,
            t + 2,
            z,
            t + 2,
            z,
            t + 4,
            z,
            t + 4,
            z,
            t + 4,
            z,
            t + 4,
            z,
            t + 6,
            z,
            t + 6,
            z,
            t + 6,
            z,
            t + 6,
        )
    };
    let widen_scale = [widen(0), widen(1)];
    let mut acc = [_mm256_setzero_ps(); A];
    for (bi, b) in group.iter().enumerate() {
        // w[h][k][nib][half]: rows 4·half.., values 128h + 64·nib + 8k..
        let mut w = [[[[_mm256_setzero_si256(); 2]; 2]; 8]; 2];
        for (h, w) in w.iter_mut().enumerate() {
            for half in 0..2 {
                for (w, values) in w.iter_mut().zip(q6_kx8_values(b, h, half)) {
                    for (w, v) in w.iter_mut().zip(values) {
                        w[half] = v;
                    }
                }
            }
        }
        // scales[s][half]: rows 4·half..'s scale of sub-block s, per lane.
        let scales: [[__m256i; 2]; 16] = std::array::from_fn(|s| {
            std::array::from_fn(|half| {
                let bytes = b
                    .scales
                    .as_ptr()
                    .add(16 * (s / 2) + 8 * half)
                    .cast::<i64>()
                    .read_unaligned();
                let v = _mm256_shuffle_epi8(_mm256_set1_epi64x(bytes), widen_scale[s % 2]);
                _mm256_srai_epi16(v, 8)
            })
        });
        // Each row's (scale of sub-block 2p, of 2p + 1) in 16 bits.
        let pair_scales: [__m256i; 8] = std::array::from_fn(|p| {
            _mm256_cvtepi8_epi16(_mm_loadu_si128(b.scales.as_ptr().add(16 * p).cast()))
        });
        let d = _mm256_cvtph_ps(_mm_loadu_si128(b.d.as_ptr().cast()));
        for (j, a) in acc.iter_mut().enumerate() {
            let y = &xs[j][bi];
            let mut sums = [_mm256_setzero_si256(); 2];
            for h in 0..2 {
                for nib in 0..2 {
                    for m in 0..4 {
                        // Sub-block s: values 128h + 64·nib + 16m.., the
                        // chunks k = 2m, 2m + 1.
                        let s = 8 * h + 4 * nib + m;
                        let at = 16 * s;
                        let y0 = _mm256_set1_epi64x(
                            y.qs.as_ptr().add(at).cast::<i64>().read_unaligned(),
                        );
                        let y1 = _mm256_set1_epi64x(
                            y.qs.as_ptr().add(at + 8).cast::<i64>().read_unaligned(),
                        );
                        for (half, sum) in sums.iter_mut().enumerate() {
                            let p = _mm256_add_epi16(
                                _mm256_maddubs_epi16(w[h][2 * m][nib][half], y0),
                                _mm256_maddubs_epi16(w[h][2 * m + 1][nib][half], y1),
                            );
                            *sum = _mm256_add_epi32(*sum, _mm256_madd_epi16(p, scales[s][half]));
                        }
                    }
                }
            }
            // Lanes hold (row, half-of-the-run) pairs: add each pair and
            // restore row order.
            let dots = _mm256_permutevar8x32_epi32(_mm256_hadd_epi32(sums[0], sums[1]), order);
            // Σ scale × (sub-block activation sum), per row.
            let mut runs = _mm256_setzero_si256();
            for (p, scales) in pair_scales.iter().enumerate() {
                let bsums = y.bsums.as_ptr().add(2 * p).cast::<i32>().read_unaligned();
                runs = _mm256_add_epi32(runs, _mm256_madd_epi16(*scales, _mm256_set1_epi32(bsums)));
            }
            let dots = _mm256_sub_epi32(dots, _mm256_slli_epi32(runs, 5));
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

/// A Q6_K group block's unsigned six-bit values (0..63) of half
/// super-block `h` for rows 4·half..: `w[k][nib]` holds values
/// 128h + 64·nib + 8k.., 8 bytes per row.
///
/// # Safety
/// The CPU must have avx2.
#[target_feature(enable = "avx2")]
#[inline]
pub(super) unsafe fn q6_kx8_values(b: &BlockQ6Kx8, h: usize, half: usize) -> [[__m256i; 2]; 8] {
    let low_mask = _mm256_set1_epi8(0x0F);
    let high_mask = _mm256_set1_epi8(0x30);
    let mut w = [[_mm256_setzero_si256(); 2]; 8];
    for k in 0..4 {
        let qh = _mm256_loadu_si256(b.qh.as_ptr().add(256 * h + 64 * k + 32 * half).cast());
        // The pair of bits 2i of byte l is value l + 32i's: i = 0, 2 for
        // the nibbles of ql chunk k, 1, 3 for k + 4.
        let pairs = [
            [_mm256_slli_epi16(qh, 4), qh],
            [_mm256_slli_epi16(qh, 2), _mm256_srli_epi16(qh, 2)],
        ];
        for (kk, pairs) in [k, k + 4].into_iter().zip(pairs) {
            let ql = _mm256_loadu_si256(b.ql.as_ptr().add(512 * h + 64 * kk + 32 * half).cast());
            let nibbles = [
                _mm256_and_si256(ql, low_mask),
                _mm256_and_si256(_mm256_srli_epi16(ql, 4), low_mask),
            ];
            for (w, (nibbles, pairs)) in w[kk].iter_mut().zip(nibbles.into_iter().zip(pairs)) {
                *w = _mm256_or_si256(nibbles, _mm256_and_si256(pairs, high_mask));
            }
        }
    }
    w
}

/// Eight repacked Q8_0 rows times `A` (1..=4) activation rows. Per block the
/// weights' magnitudes are taken once for all `A` rows; each activation
/// vector takes the weights' signs (`sign`), so `maddubs` multiplies |w|
/// (<= 128) by ±a (activations from `quantize_q8_0` are within ±127, as
/// ggml's dots also assume): a lane pair is at most 2·128·127 < 2^15. Each pair
/// sum is widened at once (two would overflow 16 bits), so every row's
/// block sum is exact, and it is added with one FMA by d(w)·d(a) as the
/// scalar twin does: results equal `repack_q8_0::gemm_q8_0_x8` bit for bit.
///
/// # Safety
/// As `gemm_tile_q4_k_x8`.
#[target_feature(enable = "avx2,fma,f16c")]
unsafe fn gemm_tile_q8_0_x8<const A: usize>(
    group: &[BlockQ8_0x8],
    xs: &[&[BlockQ8_0]; 4],
    res: &mut [[f32; 8]; 4],
) {
    let ones = _mm256_set1_epi16(1);
    let order = _mm256_setr_epi32(0, 1, 4, 5, 2, 3, 6, 7);
    let mut acc = [_mm256_setzero_ps(); A];
    for (bi, b) in group.iter().enumerate() {
        // w[k][half]: rows 4·half.., values 8k..8k + 8.
        let w: [[__m256i; 2]; 4] = std::array::from_fn(|k| {
            std::array::from_fn(|half| {
                _mm256_loadu_si256(b.qs.as_ptr().add(64 * k + 32 * half).cast())
            })
        });
        let magnitudes = w.map(|pair| pair.map(|v| _mm256_sign_epi8(v, v)));
        let dw = _mm256_cvtph_ps(_mm_loadu_si128(b.d.as_ptr().cast()));
        for (j, a) in acc.iter_mut().enumerate() {
            let y = &xs[j][bi];
            let mut sums = [_mm256_setzero_si256(); 2];
            for k in 0..4 {
                let ya =
                    _mm256_set1_epi64x(y.qs.as_ptr().add(8 * k).cast::<i64>().read_unaligned());
                for (half, sum) in sums.iter_mut().enumerate() {
                    let p =
                        _mm256_maddubs_epi16(magnitudes[k][half], _mm256_sign_epi8(ya, w[k][half]));
                    *sum = _mm256_add_epi32(*sum, _mm256_madd_epi16(p, ones));
                }
            }
            let rows = _mm256_permutevar8x32_epi32(_mm256_hadd_epi32(sums[0], sums[1]), order);
            let scale = _mm256_mul_ps(dw, _mm256_set1_ps(fp16(y.d)));
            *a = _mm256_fmadd_ps(_mm256_cvtepi32_ps(rows), scale, *a);
        }
    }
    for (j, a) in acc.iter().enumerate() {
        _mm256_storeu_ps(res[j].as_mut_ptr(), *a);
    }
}

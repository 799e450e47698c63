//! Scalar kernels: the reference every SIMD kernel is tested against, and the
//! fallback where a variant has no kernel of its own. Integer parts are exact;
//! per-block float scaling follows ggml's scalar code.
//!
//! The `check_*` functions here state the lengths every variant's kernel of
//! that kind takes; each kernel (scalar or SIMD) calls its check once per
//! call, before touching memory, so all variants accept and reject the same
//! slices, and no slice safe code passes can make a SIMD kernel read or
//! write out of bounds.

use half::f16;

use super::iq4_dot;
use super::kquant_dot::{self, ScalarDots};
use super::widen::f16_to_f32;
use crate::tensor::blocks::*;
use crate::tensor::quants::q8_k;

/// Panics unless `x` fills `y` exactly (`y.len()` blocks of `B::ELEMENTS`).
#[inline(always)]
#[track_caller]
pub(crate) fn check_quantize<B: Block>(x: &[f32], y: &[B]) {
    assert!(
        y.len().checked_mul(B::ELEMENTS) == Some(x.len()),
        "quantize {}: {} values do not fill {} blocks of {}",
        B::TYPE,
        x.len(),
        y.len(),
        B::ELEMENTS
    );
}

/// Panics unless the two operands of a dot product have the same length.
#[inline(always)]
#[track_caller]
pub(crate) fn check_dot<X, Y>(x: &[X], y: &[Y]) {
    assert!(
        x.len() == y.len(),
        "vec_dot: operands of {} and {} elements",
        x.len(),
        y.len()
    );
}

/// Panics unless a row and the output it is added to have the same length.
#[inline(always)]
#[track_caller]
pub(crate) fn check_axpy<X>(v: &[X], out: &[f32]) {
    assert!(
        v.len() == out.len(),
        "axpy: a row of {} values added to {} outputs",
        v.len(),
        out.len()
    );
}

/// Panics unless each of the four activation rows has the weight row's length.
// Used by the SIMD variants only (none in a wasm build without simd128).
#[cfg_attr(
    all(target_family = "wasm", not(target_feature = "simd128")),
    allow(dead_code)
)]
#[inline(always)]
#[track_caller]
pub(crate) fn check_dot4<X, Y>(x: &[X], y: &[&[Y]; 4]) {
    assert!(
        y.iter().all(|r| r.len() == x.len()),
        "vec_dot4: a weight row of {} blocks against activation rows of {:?}",
        x.len(),
        y.map(|r| r.len())
    );
}

/// The frame of the SIMD `tile_f16` kernels, which go one weight row at a
/// time: `check_tile`, then `row(w_r, xs, out)` for each of the first
/// `store` weight rows and each run `xs` of up to `chunk` whole activation
/// rows, output `c` of the run going to `out[c * stride]`. (Only the x86
/// variants have `tile_f16` kernels.)
#[cfg(target_arch = "x86_64")]
#[inline(always)]
#[track_caller]
pub(crate) fn f16_rows_in_chunks(
    w: [&[f16]; 4],
    x: &[f32],
    out: &mut [f32],
    stride: usize,
    store: usize,
    chunk: usize,
    mut row: impl FnMut(&[f16], &[f32], &mut [f32]),
) {
    check_tile(&w, x, out.len(), stride, store);
    let cols = w[0].len();
    for (r, wr) in w.iter().enumerate().take(store) {
        for (i, xs) in x.chunks(chunk * cols).enumerate() {
            row(wr, xs, &mut out[chunk * i * stride + r..]);
        }
    }
}

/// Panics unless a float tile's shapes agree: four non-empty weight rows of
/// one length, a whole number of activation rows of that length, `store`
/// in 1..=4, and `out` reaching the last output. Returns the number of
/// activation rows.
#[inline(always)]
#[track_caller]
pub(crate) fn check_tile<W>(
    w: &[&[W]; 4],
    x: &[f32],
    out: usize,
    stride: usize,
    store: usize,
) -> usize {
    let cols = w[0].len();
    let n = x.len().checked_div(cols).unwrap_or(0);
    let last = n
        .checked_sub(1)
        .map_or(Some(0), |i| i.checked_mul(stride)?.checked_add(store));
    assert!(
        cols > 0
            && w.iter().all(|r| r.len() == cols)
            && x.len() == n * cols
            && (1..=4).contains(&store)
            && last.is_some_and(|end| end <= out),
        "float tile: weight rows of {:?} against {} activation values, {store} rows stored \
         at a stride of {stride} into {out} values",
        w.map(|r| r.len()),
        x.len()
    );
    n
}

/// Activations to Q8_0 as the reference build's SIMD quantizer computes
/// them (ggml's x86 `quantize_row_q8_0`): d = amax / 127, each value times
/// 127 / amax rounded half to even. The weight quantizer (`q8_0::quantize`,
/// ggml's reference, behind llama-quantize) multiplies by 1 / d and rounds
/// half away from zero instead; with large activations (Gemma's reach a few
/// hundred) the two differ in enough quants to move logits by 0.4 RMS.
pub fn quantize_q8_0(x: &[f32], y: &mut [BlockQ8_0]) {
    check_quantize(x, y);
    for (x, b) in x.chunks_exact(QK).zip(y) {
        let amax = x.iter().fold(0.0f32, |m, &v| m.max(v.abs()));
        let id = activation_scale(amax);
        b.d = f16::from_f32(amax / 127.0);
        for (q, &v) in b.qs.iter_mut().zip(x) {
            *q = (v * id).round_ties_even() as i8;
        }
    }
}

/// 127 / amax (0 for a block of zeros): the multiplier of the activation
/// quantizers, shared with their SIMD twins.
#[inline(always)]
pub(crate) fn activation_scale(amax: f32) -> f32 {
    if amax != 0.0 {
        127.0 / amax
    } else {
        0.0
    }
}

/// Activations to Q8_1: `quantize_q8_0`'s scale and quants, plus
/// s = d × Σq (ggml's x86 `quantize_row_q8_1`).
pub fn quantize_q8_1(x: &[f32], y: &mut [BlockQ8_1]) {
    q8_1_from_q8_0(x, y, |x, y| quantize_q8_0(x, y))
}

pub fn quantize_q8_k(x: &[f32], y: &mut [BlockQ8K]) {
    check_quantize(x, y);
    q8_k::quantize(x, y)
}

/// Q8_1 from a Q8_0 quantizer: the same scale and quants (ggml computes both
/// the same way), plus s = d × Σq with d before its rounding to f16.
/// `q8_0` is given one block and its 32 values at a time. Checks the
/// lengths (`check_quantize`) once.
#[inline(always)]
#[track_caller]
pub(crate) fn q8_1_from_q8_0(
    x: &[f32],
    y: &mut [BlockQ8_1],
    q8_0: impl Fn(&[f32; QK], &mut [BlockQ8_0; 1]),
) {
    check_quantize(x, y);
    for (x, b) in x.chunks_exact(QK).zip(y) {
        let x: &[f32; QK] = x.try_into().expect("chunks of QK");
        let mut t = [BlockQ8_0::zeroed()];
        q8_0(x, &mut t);
        b.d = t[0].d;
        b.qs = t[0].qs;
        let sum: i32 = b.qs.iter().map(|&q| q as i32).sum();
        let d = x.iter().fold(0.0f32, |a, &v| a.max(v.abs())) / 127.0;
        b.s = f16::from_f32(sum as f32 * d);
    }
}

/// Q8_K's scale: the value of largest magnitude (first on ties), -127 / it,
/// and the block's 16-value sums; `round_scaled` rounds iscale·x to nearest
/// even for a block of 256. Checks the lengths (`check_quantize`) once.
// Used by the SIMD variants only (none in a wasm build without simd128).
#[cfg_attr(
    all(target_family = "wasm", not(target_feature = "simd128")),
    allow(dead_code)
)]
#[inline(always)]
#[track_caller]
pub(crate) fn q8_k_with(
    x: &[f32],
    y: &mut [BlockQ8K],
    round_scaled: impl Fn(&[f32; QK_K], f32, &mut [i8; QK_K]),
) {
    check_quantize(x, y);
    for (x, b) in x.chunks_exact(QK_K).zip(y) {
        let x: &[f32; QK_K] = x.try_into().expect("chunks of QK_K");
        let (mut amax, mut max) = (0.0f32, 0.0f32);
        for &v in x {
            if v.abs() > amax {
                amax = v.abs();
                max = v;
            }
        }
        if amax == 0.0 {
            *b = BlockQ8K::zeroed();
            continue;
        }
        let iscale = -127.0 / max;
        round_scaled(x, iscale, &mut b.qs);
        for (sum, q) in b.bsums.iter_mut().zip(b.qs.chunks_exact(16)) {
            *sum = q.iter().map(|&q| q as i16).sum();
        }
        b.d = 1.0 / iscale;
    }
}

pub fn vec_dot_q4_0_q8_0(x: &[BlockQ4_0], y: &[BlockQ8_0]) -> f32 {
    check_dot(x, y);
    let mut sum = 0.0f32;
    for (x, y) in x.iter().zip(y) {
        let mut sumi = 0i32;
        for j in 0..QK / 2 {
            let v0 = (x.qs[j] & 0x0F) as i32 - 8;
            let v1 = (x.qs[j] >> 4) as i32 - 8;
            sumi += v0 * y.qs[j] as i32 + v1 * y.qs[j + QK / 2] as i32;
        }
        sum += sumi as f32 * f16_to_f32(x.d) * f16_to_f32(y.d);
    }
    sum
}

pub fn vec_dot_q4_1_q8_1(x: &[BlockQ4_1], y: &[BlockQ8_1]) -> f32 {
    check_dot(x, y);
    let mut sum = 0.0f32;
    for (x, y) in x.iter().zip(y) {
        let mut sumi = 0i32;
        for j in 0..QK / 2 {
            sumi += (x.qs[j] & 0x0F) as i32 * y.qs[j] as i32
                + (x.qs[j] >> 4) as i32 * y.qs[j + QK / 2] as i32;
        }
        sum +=
            (f16_to_f32(x.d) * f16_to_f32(y.d)) * sumi as f32 + f16_to_f32(x.m) * f16_to_f32(y.s);
    }
    sum
}

/// The 32 five-bit values of a Q5 block, without the offset.
fn q5_values(qs: &[u8; 16], qh: [u8; 4]) -> [i32; 32] {
    let qh = u32::from_le_bytes(qh);
    let mut v = [0i32; 32];
    for j in 0..16 {
        v[j] = ((qs[j] & 0x0F) as u32 | (((qh >> j) & 1) << 4)) as i32;
        v[j + 16] = ((qs[j] >> 4) as u32 | (((qh >> (j + 16)) & 1) << 4)) as i32;
    }
    v
}

pub fn vec_dot_q5_0_q8_0(x: &[BlockQ5_0], y: &[BlockQ8_0]) -> f32 {
    check_dot(x, y);
    let mut sum = 0.0f32;
    for (x, y) in x.iter().zip(y) {
        let v = q5_values(&x.qs, x.qh);
        let sumi: i32 = v
            .iter()
            .zip(&y.qs)
            .map(|(&v, &q)| (v - 16) * q as i32)
            .sum();
        sum += sumi as f32 * f16_to_f32(x.d) * f16_to_f32(y.d);
    }
    sum
}

pub fn vec_dot_q5_1_q8_1(x: &[BlockQ5_1], y: &[BlockQ8_1]) -> f32 {
    check_dot(x, y);
    let mut sum = 0.0f32;
    for (x, y) in x.iter().zip(y) {
        let v = q5_values(&x.qs, x.qh);
        let sumi: i32 = v.iter().zip(&y.qs).map(|(&v, &q)| v * q as i32).sum();
        sum +=
            (f16_to_f32(x.d) * f16_to_f32(y.d)) * sumi as f32 + f16_to_f32(x.m) * f16_to_f32(y.s);
    }
    sum
}

pub fn vec_dot_q8_0_q8_0(x: &[BlockQ8_0], y: &[BlockQ8_0]) -> f32 {
    check_dot(x, y);
    let mut sum = 0.0f32;
    for (x, y) in x.iter().zip(y) {
        let sumi: i32 =
            x.qs.iter()
                .zip(&y.qs)
                .map(|(&a, &b)| a as i32 * b as i32)
                .sum();
        sum += sumi as f32 * (f16_to_f32(x.d) * f16_to_f32(y.d));
    }
    sum
}

pub fn vec_dot_q4_k_q8_k(x: &[BlockQ4K], y: &[BlockQ8K]) -> f32 {
    check_dot(x, y);
    // SAFETY: ScalarDots is plain Rust (needs no CPU feature); lengths
    // checked above (and the k-quant loops only zip the two slices).
    unsafe { kquant_dot::q4_k::<ScalarDots>(x, y) }
}

pub fn vec_dot_q5_k_q8_k(x: &[BlockQ5K], y: &[BlockQ8K]) -> f32 {
    check_dot(x, y);
    // SAFETY: ScalarDots is plain Rust (needs no CPU feature); lengths
    // checked above.
    unsafe { kquant_dot::q5_k::<ScalarDots>(x, y) }
}

pub fn vec_dot_q2_k_q8_k(x: &[BlockQ2K], y: &[BlockQ8K]) -> f32 {
    check_dot(x, y);
    // SAFETY: ScalarDots is plain Rust (needs no CPU feature); lengths
    // checked above.
    unsafe { kquant_dot::q2_k::<ScalarDots>(x, y) }
}

pub fn vec_dot_q3_k_q8_k(x: &[BlockQ3K], y: &[BlockQ8K]) -> f32 {
    check_dot(x, y);
    // SAFETY: ScalarDots is plain Rust (needs no CPU feature); lengths
    // checked above.
    unsafe { kquant_dot::q3_k::<ScalarDots>(x, y) }
}

pub fn vec_dot_iq4_nl_q8_0(x: &[BlockIQ4NL], y: &[BlockQ8_0]) -> f32 {
    check_dot(x, y);
    // SAFETY: ScalarDots is plain Rust (needs no CPU feature); lengths
    // checked above.
    unsafe { iq4_dot::iq4_nl::<ScalarDots>(x, y) }
}

pub fn vec_dot_iq4_xs_q8_k(x: &[BlockIQ4XS], y: &[BlockQ8K]) -> f32 {
    check_dot(x, y);
    // SAFETY: ScalarDots is plain Rust (needs no CPU feature); lengths
    // checked above.
    unsafe { iq4_dot::iq4_xs::<ScalarDots>(x, y) }
}

pub fn vec_dot_q6_k_q8_k(x: &[BlockQ6K], y: &[BlockQ8K]) -> f32 {
    check_dot(x, y);
    // SAFETY: ScalarDots is plain Rust (needs no CPU feature); lengths
    // checked above.
    unsafe { kquant_dot::q6_k::<ScalarDots>(x, y) }
}

pub fn vec_dot_f16(x: &[f16], y: &[f16]) -> f32 {
    check_dot(x, y);
    // ggml accumulates f16 dot products in double.
    let sum: f64 = x
        .iter()
        .zip(y)
        .map(|(a, b)| f16_to_f32(*a) as f64 * f16_to_f32(*b) as f64)
        .sum();
    sum as f32
}

/// The scalar twin of the SIMD `tile_f32` kernels: each output a plain dot
/// product accumulated in f64 (the SIMD tiles match it within rounding).
pub fn tile_f32(w: [&[f32]; 4], x: &[f32], out: &mut [f32], stride: usize, store: usize) {
    tile(w, x, out, stride, store, |v| v);
}

/// The scalar twin of the SIMD `tile_f16` kernels (f16 weight rows), as
/// `tile_f32`.
pub fn tile_f16(w: [&[f16]; 4], x: &[f32], out: &mut [f32], stride: usize, store: usize) {
    tile(w, x, out, stride, store, f16::to_f32);
}

/// The scalar twin of the SIMD `gemv_f16` kernels: each output a plain dot
/// product accumulated in f64, as `tile_f16`.
pub fn gemv_f16(w: &[f16], x: &[f32], out: &mut [f32]) {
    f16_gemv_rows(w, x, out, |wr, x| {
        let sum: f64 = wr
            .iter()
            .zip(x)
            .map(|(a, b)| a.to_f32() as f64 * *b as f64)
            .sum();
        sum as f32
    });
}

/// The frame of the SIMD `gemv_f16` kernels: checks the shapes, then
/// `out[r] = row(w_r, x)` for each weight row in order.
pub(crate) fn f16_gemv_rows(
    w: &[f16],
    x: &[f32],
    out: &mut [f32],
    mut row: impl FnMut(&[f16], &[f32]) -> f32,
) {
    let cols = check_gemv(w, x, out);
    for (wr, o) in w.chunks_exact(cols).zip(out.iter_mut()) {
        *o = row(wr, x);
    }
}

/// Panics unless `w` holds `out.len()` rows as long as a non-empty `x`;
/// returns that length.
#[inline(always)]
#[track_caller]
pub(crate) fn check_gemv(w: &[f16], x: &[f32], out: &[f32]) -> usize {
    let cols = x.len();
    assert!(
        cols > 0 && Some(w.len()) == out.len().checked_mul(cols),
        "a GEMV of {} f16 weights into {} rows of {cols}",
        w.len(),
        out.len()
    );
    cols
}

fn tile<W: Copy>(
    w: [&[W]; 4],
    x: &[f32],
    out: &mut [f32],
    stride: usize,
    store: usize,
    widen: impl Fn(W) -> f32,
) {
    check_tile(&w, x, out.len(), stride, store);
    for (i, xi) in x.chunks_exact(w[0].len()).enumerate() {
        for (r, wr) in w.iter().enumerate().take(store) {
            out[i * stride + r] = wr
                .iter()
                .zip(xi)
                .map(|(&a, &b)| widen(a) as f64 * b as f64)
                .sum::<f64>() as f32;
        }
    }
}

pub fn vec_dot_f32(x: &[f32], y: &[f32]) -> f32 {
    check_dot(x, y);
    x.iter().zip(y).map(|(a, b)| a * b).sum()
}

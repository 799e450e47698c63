//! The IQ4 dot products (IQ4_NL with Q8_0, IQ4_XS with Q8_K), written once
//! over `IntDots::level_dots`, the exact integer primitive each instruction
//! set implements with a table look-up. As for the k-quants, the float
//! combination is this one code, so every variant equals the scalar kernel
//! bit for bit.

use super::kquant_dot::IntDots;
use super::widen::f16_to_f32;
use crate::tensor::blocks::*;
use crate::tensor::quants::iq4_xs::iq4_xs_scale;

#[inline(always)]
fn arr<T, const N: usize>(s: &[T]) -> &[T; N] {
    s[..N].try_into().expect("a whole run")
}

/// IQ4_NL · Q8_0: per block, both scales times the exact integer sum (ggml's
/// `ggml_vec_dot_iq4_nl_q8_0` order: the activation's scale first).
///
/// # Safety
/// `D`'s methods must be callable here: the CPU has the features of the
/// variant `D` belongs to. Any lengths: the slices are zipped, and every
/// block is read through typed arrays.
#[inline(always)]
pub(crate) unsafe fn iq4_nl<D: IntDots>(x: &[BlockIQ4NL], y: &[BlockQ8_0]) -> f32 {
    let mut sum = 0.0f32;
    for (x, y) in x.iter().zip(y) {
        let dot = D::level_dots(&x.qs, &y.qs);
        sum += f16_to_f32(y.d) * f16_to_f32(x.d) * dot as f32;
    }
    sum
}

/// IQ4_XS · Q8_K: the runs' integer sums weighted by their 6-bit scales,
/// then the two super-block scales (as ggml's SIMD kernels combine them).
///
/// # Safety
/// As `iq4_nl`.
#[inline(always)]
pub(crate) unsafe fn iq4_xs<D: IntDots>(x: &[BlockIQ4XS], y: &[BlockQ8K]) -> f32 {
    let mut sum = 0.0f32;
    for (x, y) in x.iter().zip(y) {
        let mut dot = 0i32;
        for ib in 0..QK_K / 32 {
            let run = D::level_dots(arr(&x.qs[16 * ib..]), arr(&y.qs[32 * ib..]));
            dot += iq4_xs_scale(x, ib) * run;
        }
        sum += f16_to_f32(x.d) * y.d * dot as f32;
    }
    sum
}

//! Scale choice and rounding shared by several types' reference quantizers,
//! with ggml's float operations in ggml's order.

/// The value with the largest magnitude (the first one on ties), and that magnitude.
pub(super) fn signed_absmax(x: &[f32]) -> (f32, f32) {
    let (mut amax, mut max) = (0.0f32, 0.0f32);
    for &v in x {
        if amax < v.abs() {
            amax = v.abs();
            max = v;
        }
    }
    (max, amax)
}

pub(super) fn min_max(x: &[f32]) -> (f32, f32) {
    let (mut min, mut max) = (f32::MAX, -f32::MAX);
    for &v in x {
        if v < min {
            min = v;
        }
        if v > max {
            max = v;
        }
    }
    (min, max)
}

pub(super) fn inverse(d: f32) -> f32 {
    if d != 0.0 {
        1.0 / d
    } else {
        0.0
    }
}

/// C's float-to-int8 conversion (truncation) of an in-range value.
pub(super) fn trunc_i8(v: f32) -> i8 {
    v as i32 as i8
}

pub(super) fn absmax(x: &[f32]) -> f32 {
    x.iter().fold(0.0f32, |a, &v| a.max(v.abs()))
}

/// ggml's `nearest_int`: round to nearest, ties to even, via the float trick
/// (valid for |v| <= 4194303, which every caller guarantees).
pub(super) fn nearest_int(v: f32) -> i32 {
    let bits = (v + 12582912.0).to_bits() as i32;
    (bits & 0x007f_ffff) - 0x0040_0000
}

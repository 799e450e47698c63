//! The 4-bit non-linear grid IQ4_NL and IQ4_XS share: sixteen signed levels,
//! denser near zero, and ggml's scale search over them (without an importance
//! matrix, as `llama-quantize` runs it when none is given).

use super::rounding::{inverse, signed_absmax};

/// The levels a 4-bit index selects (ggml's `kvalues_iq4nl`).
pub const IQ4_LEVELS: [i8; 16] = [
    -127, -104, -83, -65, -49, -35, -22, -10, 1, 13, 25, 38, 53, 69, 89, 113,
];

/// Scale candidates tried either side of the first guess (ggml's `ntry` in
/// `quantize_iq4_nl` / `quantize_iq4_xs`).
const TRIES: i32 = 7;
/// A run whose largest magnitude is below this is stored as zeros.
const GROUP_MAX_EPS: f32 = 1e-15;

/// The levels as floats, for the search.
const LEVELS_F32: [f32; 16] = {
    let mut out = [0.0f32; 16];
    let mut i = 0;
    while i < 16 {
        out[i] = IQ4_LEVELS[i] as f32;
        i += 1;
    }
    out
};

/// The index of the level nearest `x` (the lower one on ties, as ggml's
/// `best_index_int8` compares).
#[inline]
pub(super) fn nearest_level(x: f32) -> u8 {
    let v = &LEVELS_F32;
    if x <= v[0] {
        return 0;
    }
    if x >= v[15] {
        return 15;
    }
    // Binary search for the first level above x (always 1..=15 here).
    let (mut lo, mut hi) = (0usize, 15usize);
    while hi - lo > 1 {
        let mid = (lo + hi) / 2;
        if x < v[mid] {
            hi = mid;
        } else {
            lo = mid;
        }
    }
    if x - v[hi - 1] < v[hi] - x {
        (hi - 1) as u8
    } else {
        hi as u8
    }
}

/// Σ w·q·x and Σ w·q² of the run `x` on the grid scaled by `1/id`.
#[inline]
fn fit(x: &[f32], id: f32) -> (f32, f32) {
    let (mut sumqx, mut sumq2) = (0.0f32, 0.0f32);
    for &v in x {
        let q = LEVELS_F32[nearest_level(id * v) as usize];
        // The weight without an importance matrix is x².
        let w = v * v;
        sumqx += w * q * v;
        sumq2 += w * q * q;
    }
    (sumqx, sumq2)
}

/// The best scale for one run of 32 (ggml's search in
/// `quantize_row_iq4_nl_impl`): a first guess from the largest magnitude,
/// then `2·TRIES + 1` inverse scales around the grid's end, keeping the one
/// with the smallest weighted error. Zero for a run of (near) zeros.
pub(super) fn best_scale(x: &[f32]) -> f32 {
    let (max, amax) = signed_absmax(x);
    if amax < GROUP_MAX_EPS {
        return 0.0;
    }
    let first = IQ4_LEVELS[0] as f32;
    let d = -max / first;
    let (sumqx, sumq2) = fit(x, 1.0 / d);
    let mut d = if sumq2 > 0.0 { sumqx / sumq2 } else { 0.0 };
    let mut best = d * sumqx;
    for t in -TRIES..=TRIES {
        let id = (t + IQ4_LEVELS[0] as i32) as f32 / max;
        let (sumqx, sumq2) = fit(x, id);
        if sumq2 > 0.0 && sumqx * sumqx > best * sumq2 {
            d = sumqx / sumq2;
            best = d * sumqx;
        }
    }
    d
}

/// The indices of `x` on the grid scaled by `d` (level 8, the one nearest
/// zero, for a zero scale).
pub(super) fn indices(x: &[f32], d: f32, l: &mut [u8]) {
    let id = inverse(d);
    for (l, &v) in l.iter_mut().zip(x) {
        *l = nearest_level(id * v);
    }
}

/// Packs 32 indices as ggml stores them: index j in the low nibble of byte j,
/// index j + 16 in its high nibble.
pub(super) fn pack(l: &[u8], qs: &mut [u8]) {
    for j in 0..16 {
        qs[j] = l[j] | (l[j + 16] << 4);
    }
}

/// The 32 values of packed indices `qs`, times `d`.
pub(super) fn unpack(qs: &[u8], d: f32, y: &mut [f32]) {
    for j in 0..16 {
        y[j] = d * IQ4_LEVELS[(qs[j] & 0xF) as usize] as f32;
        y[j + 16] = d * IQ4_LEVELS[(qs[j] >> 4) as usize] as f32;
    }
}

//! The k-quant dot products (Q2_K to Q6_K with Q8_K), written once over a
//! small set of exact integer primitives (`IntDots`) that each instruction set
//! implements (the IQ4 products in `iq4_dot.rs` use the same trait). An
//! instruction set may also override a whole block's integer sum (Q4_K,
//! Q6_K) to keep it in vector lanes. Integer results are exact and the float
//! combination is this one code, so every variant's k-quant kernels equal the
//! scalar ones bit for bit.

use super::widen::f16_to_f32;
use crate::tensor::blocks::*;
use crate::tensor::quants::q3_k::q3_k_scales;
use crate::tensor::quants::{scale_min_k4, IQ4_LEVELS};

/// Exact integer dot products over 32 values, per instruction set.
///
/// # Safety
/// Implementations may use instructions the CPU must support: call them only
/// from a kernel table of a variant the registry found supported.
pub(crate) trait IntDots {
    /// (Σ low_nibble(q[l])·a[l], Σ high_nibble(q[l])·b[l]) over 32 bytes.
    unsafe fn nibble_dots(q: &[u8; 32], a: &[i8; 32], b: &[i8; 32]) -> (i32, i32);
    /// (Σ a[l] where bit `bit` of h[l] is set, Σ b[l] where bit `bit + 1` is).
    unsafe fn bit_sums(h: &[u8; 32], bit: u32, a: &[i8; 32], b: &[i8; 32]) -> (i32, i32);
    /// With q[l] = (nibble of ql[l], high or low) | ((qh[l] >> shift) & 3) << 4,
    /// minus 32: (Σ q·a over l < 16, Σ q·a over l >= 16).
    unsafe fn q6_dots(
        ql: &[u8; 32],
        high: bool,
        qh: &[u8; 32],
        shift: u32,
        a: &[i8; 32],
    ) -> (i32, i32);
    /// Σ ((q[l] >> shift) & 3)·a[l] (2-bit values), over l < 16 and l >= 16.
    unsafe fn crumb_dots(q: &[u8; 32], shift: u32, a: &[i8; 32]) -> (i32, i32);
    /// Σ a[l] where bit `bit` of h[l] is set, over l < 16 and l >= 16.
    unsafe fn masked_sums(h: &[u8; 32], bit: u32, a: &[i8; 32]) -> (i32, i32);
    /// Σ L[low_nibble(q[j])]·a[j] + L[high_nibble(q[j])]·a[j + 16] over
    /// j < 16, with L the IQ4 grid (`IQ4_LEVELS`).
    unsafe fn level_dots(q: &[u8; 16], a: &[i8; 32]) -> i32;

    /// A Q4_K block's Σ scale_j × (its quants · the activations of run j),
    /// the mins aside. An instruction set may override it to keep the sums
    /// in vector lanes; the integer result is the same.
    #[inline(always)]
    unsafe fn q4_k_scaled(x: &BlockQ4K, y: &BlockQ8K) -> i32 {
        let (scales, _) = k4_scales_mins(&x.scales);
        let mut dot = 0i32;
        for c in 0..4 {
            let (d0, d1) = Self::nibble_dots(
                arr32(&x.qs[32 * c..]),
                arr32(&y.qs[64 * c..]),
                arr32(&y.qs[64 * c + 32..]),
            );
            dot += scales[2 * c] as i32 * d0 + scales[2 * c + 1] as i32 * d1;
        }
        dot
    }

    /// `q4_k_scaled` for one weight block and four activation blocks; an
    /// instruction set may override it to decode the weight block once.
    #[inline(always)]
    unsafe fn q4_k_scaled4(x: &BlockQ4K, y: [&BlockQ8K; 4]) -> [i32; 4] {
        [
            Self::q4_k_scaled(x, y[0]),
            Self::q4_k_scaled(x, y[1]),
            Self::q4_k_scaled(x, y[2]),
            Self::q4_k_scaled(x, y[3]),
        ]
    }

    /// `q6_k_scaled` for one weight block and four activation blocks;
    /// overridable as `q4_k_scaled4`.
    #[inline(always)]
    unsafe fn q6_k_scaled4(x: &BlockQ6K, y: [&BlockQ8K; 4]) -> [i32; 4] {
        [
            Self::q6_k_scaled(x, y[0]),
            Self::q6_k_scaled(x, y[1]),
            Self::q6_k_scaled(x, y[2]),
            Self::q6_k_scaled(x, y[3]),
        ]
    }

    /// A Q6_K block's Σ scale_j × ((its quants − 32) · the activations of
    /// run j of 16); overridable as `q4_k_scaled`.
    #[inline(always)]
    unsafe fn q6_k_scaled(x: &BlockQ6K, y: &BlockQ8K) -> i32 {
        let mut dot = 0i32;
        for half in 0..2 {
            let qh = arr32(&x.qh[32 * half..]);
            for k in 0..4 {
                let ql = arr32(&x.ql[64 * half + 32 * (k % 2)..]);
                let a = arr32(&y.qs[128 * half + 32 * k..]);
                let (s0, s1) = Self::q6_dots(ql, k >= 2, qh, 2 * k as u32, a);
                let sc = &x.scales[8 * half + 2 * k..];
                dot += sc[0] as i32 * s0 + sc[1] as i32 * s1;
            }
        }
        dot
    }
}

#[inline(always)]
fn arr32<T>(s: &[T]) -> &[T; 32] {
    s[..32].try_into().expect("32 elements")
}

/// The eight 6-bit scales and eight 6-bit mins of a Q4_K/Q5_K block
/// (`scale_min_k4` for every run), unpacked four at a time in u32 words.
#[inline(always)]
pub(crate) fn k4_scales_mins(packed: &[u8; 12]) -> ([u8; 8], [u8; 8]) {
    let w = |i: usize| u32::from_le_bytes(packed[4 * i..4 * i + 4].try_into().expect("4 bytes"));
    let (w0, w1, w2) = (w(0), w(1), w(2));
    const LOW6: u32 = 0x3f3f_3f3f;
    const LOW4: u32 = 0x0f0f_0f0f;
    const LOW2: u32 = 0x0303_0303;
    let scales_lo = w0 & LOW6;
    let scales_hi = (w2 & LOW4) | (((w0 >> 6) & LOW2) << 4);
    let mins_lo = w1 & LOW6;
    let mins_hi = ((w2 >> 4) & LOW4) | (((w1 >> 6) & LOW2) << 4);
    let join = |lo: u32, hi: u32| (lo as u64 | (hi as u64) << 32).to_le_bytes();
    (join(scales_lo, scales_hi), join(mins_lo, mins_hi))
}

/// Σ min_j × (sum of the 32 activations of sub-block j), from Q8_K's 16-sums.
#[inline(always)]
fn k4_mins(scales: &[u8; 12], y: &BlockQ8K) -> i32 {
    mins_dot(&k4_scales_mins(scales).1, y)
}

/// `k4_mins` with the mins unpacked.
#[inline(always)]
fn mins_dot(mins: &[u8; 8], y: &BlockQ8K) -> i32 {
    (0..8)
        .map(|j| mins[j] as i32 * (y.bsums[2 * j] as i32 + y.bsums[2 * j + 1] as i32))
        .sum()
}

/// The blocks of four activation rows cut to the shortest of them and `n`.
#[inline(always)]
fn rows4(n: usize, y: [&[BlockQ8K]; 4]) -> (usize, [&[BlockQ8K]; 4]) {
    let n = y.iter().fold(n, |n, r| n.min(r.len()));
    (n, y.map(|r| &r[..n]))
}

/// Q4_K · Q8_K.
///
/// # Safety
/// `D`'s methods must be callable here: the CPU has the features of the
/// variant `D` belongs to (`IntDots`). Any lengths: the slices are zipped,
/// and every block is read through typed arrays.
#[inline(always)]
pub(crate) unsafe fn q4_k<D: IntDots>(x: &[BlockQ4K], y: &[BlockQ8K]) -> f32 {
    let mut sum = 0.0f32;
    for (x, y) in x.iter().zip(y) {
        let dot = D::q4_k_scaled(x, y);
        sum += f16_to_f32(x.d) * y.d * dot as f32
            - f16_to_f32(x.dmin) * y.d * k4_mins(&x.scales, y) as f32;
    }
    sum
}

/// `q4_k` for four activation rows: the weight block's scales are unpacked
/// once and its quants may be decoded once (`IntDots::q4_k_scaled4`); per
/// row the integer sums are exact and the float combination is `q4_k`'s, so
/// each result equals `q4_k`'s bit for bit.
///
/// # Safety
/// As `q4_k`. Any lengths: the shortest row counts.
#[inline(always)]
pub(crate) unsafe fn q4_k4<D: IntDots>(x: &[BlockQ4K], y: [&[BlockQ8K]; 4]) -> [f32; 4] {
    let (n, y) = rows4(x.len(), y);
    let mut sum = [0.0f32; 4];
    for (b, x) in x[..n].iter().enumerate() {
        let yb = y.map(|r| &r[b]);
        let dots = D::q4_k_scaled4(x, yb);
        let (_, mins) = k4_scales_mins(&x.scales);
        let (d, dmin) = (f16_to_f32(x.d), f16_to_f32(x.dmin));
        for r in 0..4 {
            sum[r] += d * yb[r].d * dots[r] as f32 - dmin * yb[r].d * mins_dot(&mins, yb[r]) as f32;
        }
    }
    sum
}

/// Q5_K · Q8_K: the Q4_K sums plus 16 × the activations whose fifth bit is set.
///
/// # Safety
/// `D`'s methods must be callable here: the CPU has the features of the
/// variant `D` belongs to (`IntDots`). Any lengths: the slices are zipped,
/// and every block is read through typed arrays.
#[inline(always)]
pub(crate) unsafe fn q5_k<D: IntDots>(x: &[BlockQ5K], y: &[BlockQ8K]) -> f32 {
    let mut sum = 0.0f32;
    for (x, y) in x.iter().zip(y) {
        let mut dot = 0i32;
        for c in 0..4 {
            let (a, b) = (arr32(&y.qs[64 * c..]), arr32(&y.qs[64 * c + 32..]));
            let (d0, d1) = D::nibble_dots(arr32(&x.qs[32 * c..]), a, b);
            let (h0, h1) = D::bit_sums(&x.qh, 2 * c as u32, a, b);
            dot += scale_min_k4(2 * c, &x.scales).0 as i32 * (d0 + 16 * h0)
                + scale_min_k4(2 * c + 1, &x.scales).0 as i32 * (d1 + 16 * h1);
        }
        sum += f16_to_f32(x.d) * y.d * dot as f32
            - f16_to_f32(x.dmin) * y.d * k4_mins(&x.scales, y) as f32;
    }
    sum
}

/// Q6_K · Q8_K.
///
/// # Safety
/// `D`'s methods must be callable here: the CPU has the features of the
/// variant `D` belongs to (`IntDots`). Any lengths: the slices are zipped,
/// and every block is read through typed arrays.
#[inline(always)]
pub(crate) unsafe fn q6_k<D: IntDots>(x: &[BlockQ6K], y: &[BlockQ8K]) -> f32 {
    let mut sum = 0.0f32;
    for (x, y) in x.iter().zip(y) {
        let dot = D::q6_k_scaled(x, y);
        sum += f16_to_f32(x.d) * y.d * dot as f32;
    }
    sum
}

/// `q6_k` for four activation rows, as `q4_k4` is for `q4_k` (bit for bit).
///
/// # Safety
/// As `q6_k`. Any lengths: the shortest row counts.
#[inline(always)]
pub(crate) unsafe fn q6_k4<D: IntDots>(x: &[BlockQ6K], y: [&[BlockQ8K]; 4]) -> [f32; 4] {
    let (n, y) = rows4(x.len(), y);
    let mut sum = [0.0f32; 4];
    for (b, x) in x[..n].iter().enumerate() {
        let yb = y.map(|r| &r[b]);
        let dots = D::q6_k_scaled4(x, yb);
        let d = f16_to_f32(x.d);
        for r in 0..4 {
            sum[r] += d * yb[r].d * dots[r] as f32;
        }
    }
    sum
}

/// Q2_K · Q8_K: 2-bit values with a 4-bit scale and a 4-bit min per 16;
/// the mins meet the activations through Q8_K's 16-value sums.
///
/// # Safety
/// As `q4_k`.
#[inline(always)]
pub(crate) unsafe fn q2_k<D: IntDots>(x: &[BlockQ2K], y: &[BlockQ8K]) -> f32 {
    let mut sum = 0.0f32;
    for (x, y) in x.iter().zip(y) {
        let mins: i32 = (0..16)
            .map(|j| (x.scales[j] >> 4) as i32 * y.bsums[j] as i32)
            .sum();
        let mut dot = 0i32;
        for half in 0..2 {
            let q = arr32(&x.qs[32 * half..]);
            for k in 0..4 {
                let (s0, s1) = D::crumb_dots(q, 2 * k as u32, arr32(&y.qs[128 * half + 32 * k..]));
                let sc = &x.scales[8 * half + 2 * k..];
                dot += (sc[0] & 0xF) as i32 * s0 + (sc[1] & 0xF) as i32 * s1;
            }
        }
        // ggml's combination: d·Σ - dmin·Σmins, both scaled by Q8_K's d.
        sum += y.d * f16_to_f32(x.d) * dot as f32 - y.d * f16_to_f32(x.dmin) * mins as f32;
    }
    sum
}

/// Q3_K · Q8_K: 2 low bits per value and a high bit in `hmask` (clear: the
/// value is 4 less), signed 6-bit scales per 16. Σ q·a = Σ low·a − 4·(Σ a −
/// Σ a where the bit is set), with Σ a from Q8_K's 16-value sums.
///
/// # Safety
/// As `q4_k`.
#[inline(always)]
pub(crate) unsafe fn q3_k<D: IntDots>(x: &[BlockQ3K], y: &[BlockQ8K]) -> f32 {
    let mut sum = 0.0f32;
    for (x, y) in x.iter().zip(y) {
        let scales = q3_k_scales(&x.scales);
        let mut dot = 0i32;
        for half in 0..2 {
            let q = arr32(&x.qs[32 * half..]);
            for k in 0..4 {
                // The j-th run of 32 values: bit j of hmask, scales 2j, 2j+1.
                let j = 4 * half + k;
                let a = arr32(&y.qs[32 * j..]);
                let (c0, c1) = D::crumb_dots(q, 2 * k as u32, a);
                let (m0, m1) = D::masked_sums(&x.hmask, j as u32, a);
                let s0 = c0 - 4 * (y.bsums[2 * j] as i32 - m0);
                let s1 = c1 - 4 * (y.bsums[2 * j + 1] as i32 - m1);
                dot += scales[2 * j] as i32 * s0 + scales[2 * j + 1] as i32 * s1;
            }
        }
        sum += f16_to_f32(x.d) * y.d * dot as f32;
    }
    sum
}

/// The reference primitives, in plain Rust.
pub(crate) struct ScalarDots;

// Plain Rust on typed arrays: the methods are `unsafe` only because the
// trait's are, and have no requirement.
impl IntDots for ScalarDots {
    unsafe fn nibble_dots(q: &[u8; 32], a: &[i8; 32], b: &[i8; 32]) -> (i32, i32) {
        let lo = (0..32).map(|l| (q[l] & 0xF) as i32 * a[l] as i32).sum();
        let hi = (0..32).map(|l| (q[l] >> 4) as i32 * b[l] as i32).sum();
        (lo, hi)
    }

    unsafe fn bit_sums(h: &[u8; 32], bit: u32, a: &[i8; 32], b: &[i8; 32]) -> (i32, i32) {
        let lo = (0..32)
            .filter(|&l| (h[l] >> bit) & 1 != 0)
            .map(|l| a[l] as i32)
            .sum();
        let hi = (0..32)
            .filter(|&l| (h[l] >> (bit + 1)) & 1 != 0)
            .map(|l| b[l] as i32)
            .sum();
        (lo, hi)
    }

    unsafe fn q6_dots(
        ql: &[u8; 32],
        high: bool,
        qh: &[u8; 32],
        shift: u32,
        a: &[i8; 32],
    ) -> (i32, i32) {
        let q = |l: usize| {
            let nib = if high { ql[l] >> 4 } else { ql[l] & 0xF };
            (nib | (((qh[l] >> shift) & 3) << 4)) as i32 - 32
        };
        let s0 = (0..16).map(|l| q(l) * a[l] as i32).sum();
        let s1 = (16..32).map(|l| q(l) * a[l] as i32).sum();
        (s0, s1)
    }

    unsafe fn crumb_dots(q: &[u8; 32], shift: u32, a: &[i8; 32]) -> (i32, i32) {
        let v = |l: usize| ((q[l] >> shift) & 3) as i32 * a[l] as i32;
        ((0..16).map(v).sum(), (16..32).map(v).sum())
    }

    unsafe fn masked_sums(h: &[u8; 32], bit: u32, a: &[i8; 32]) -> (i32, i32) {
        let v = |l: usize| ((h[l] >> bit) & 1) as i32 * a[l] as i32;
        ((0..16).map(v).sum(), (16..32).map(v).sum())
    }

    unsafe fn level_dots(q: &[u8; 16], a: &[i8; 32]) -> i32 {
        let level = |n: u8| IQ4_LEVELS[n as usize] as i32;
        (0..16)
            .map(|j| level(q[j] & 0xF) * a[j] as i32 + level(q[j] >> 4) * a[j + 16] as i32)
            .sum()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    #[cfg(target_family = "wasm")]
    use wasm_bindgen_test::wasm_bindgen_test as test;

    #[test]
    fn word_unpacking_equals_scale_min_k4() {
        let mut state = 0x2545_f491_4f6c_dd1du64;
        for _ in 0..1000 {
            let mut packed = [0u8; 12];
            for b in packed.iter_mut() {
                state ^= state << 13;
                state ^= state >> 7;
                state ^= state << 17;
                *b = state as u8;
            }
            let (scales, mins) = k4_scales_mins(&packed);
            for j in 0..8 {
                assert_eq!(
                    (scales[j], mins[j]),
                    scale_min_k4(j, &packed),
                    "{packed:?} {j}"
                );
            }
        }
    }
}

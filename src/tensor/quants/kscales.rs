//! The k-quants' shared parts: ggml's scale searches (the same candidates,
//! the same float operations in the same order), the 6-bit scale packing of
//! Q4_K/Q5_K, and one super-block's quantization for both.

use super::*;

/// Below this, a group counts as all zeros.
pub(super) const GROUP_MAX_EPS: f32 = 1e-15;

/// Symmetric quantization of `x` to `-nmax..nmax-1` (stored with +nmax in `l`),
/// searching 19 scales around the max for the least weighted (x²) error.
/// Returns the scale.
pub(super) fn make_qx_quants(nmax: i32, x: &[f32], l: &mut [i8]) -> f32 {
    let (mut max, mut amax) = (0.0f32, 0.0f32);
    for &v in x {
        if v.abs() > amax {
            amax = v.abs();
            max = v;
        }
    }
    if amax < GROUP_MAX_EPS {
        l.fill(0);
        return 0.0;
    }
    let quant = |iscale: f32, v: f32| nearest_int(iscale * v).clamp(-nmax, nmax - 1);
    let sums = |iscale: f32| {
        let (mut sumlx, mut suml2) = (0.0f32, 0.0f32);
        for &v in x {
            let q = quant(iscale, v) as f32;
            let w = v * v;
            sumlx += w * v * q;
            suml2 += w * q * q;
        }
        (sumlx, suml2)
    };
    let mut iscale = -(nmax as f32) / max;
    for (l, &v) in l.iter_mut().zip(x) {
        *l = (quant(iscale, v) + nmax) as i8;
    }
    let (sumlx, suml2) = sums(iscale);
    let mut scale = if suml2 != 0.0 { sumlx / suml2 } else { 0.0 };
    let mut best = scale * sumlx;
    for is in -9..=9 {
        if is == 0 {
            continue;
        }
        iscale = -(nmax as f32 + 0.1 * is as f32) / max;
        let (sumlx, suml2) = sums(iscale);
        if suml2 > 0.0 && sumlx * sumlx > best * suml2 {
            for (l, &v) in l.iter_mut().zip(x) {
                *l = (quant(iscale, v) + nmax) as i8;
            }
            scale = sumlx / suml2;
            best = scale * sumlx;
        }
    }
    scale
}

/// Symmetric quantization of `x` to `-nmax..nmax-1` (stored with +nmax in
/// `l`) from the value of largest magnitude, refined (with `do_rmse`) by up
/// to five passes that move single values while the x²-weighted fit
/// improves (ggml's `make_q3_quants`). Returns the scale.
pub(super) fn make_q3_quants(nmax: i32, x: &[f32], l: &mut [i8], do_rmse: bool) -> f32 {
    let (max, amax) = signed_absmax(x);
    if amax < GROUP_MAX_EPS {
        l.fill(0);
        return 0.0;
    }
    let iscale = -(nmax as f32) / max;
    let clamp = |q: i32| q.clamp(-nmax, nmax - 1);
    if !do_rmse {
        for (q, &v) in l.iter_mut().zip(x) {
            *q = (clamp(nearest_int(iscale * v)) + nmax) as i8;
        }
        return 1.0 / iscale;
    }
    let (mut sumlx, mut suml2) = (0.0f32, 0.0f32);
    for (q, &v) in l.iter_mut().zip(x) {
        let li = clamp(nearest_int(iscale * v));
        *q = li as i8;
        let w = v * v;
        sumlx += w * v * li as f32;
        suml2 += w * li as f32 * li as f32;
    }
    for _ in 0..5 {
        let mut changed = false;
        for (q, &v) in l.iter_mut().zip(x) {
            let w = v * v;
            let cur = *q as f32;
            let mut slx = sumlx - w * v * cur;
            if slx > 0.0 {
                let mut sl2 = suml2 - w * cur * cur;
                let new_l = clamp(nearest_int(v * sl2 / slx));
                if new_l != *q as i32 {
                    slx += w * v * new_l as f32;
                    sl2 += w * new_l as f32 * new_l as f32;
                    if sl2 > 0.0 && slx * slx * suml2 > sumlx * sumlx * sl2 {
                        *q = new_l as i8;
                        sumlx = slx;
                        suml2 = sl2;
                        changed = true;
                    }
                }
            }
        }
        if !changed {
            break;
        }
    }
    for q in l.iter_mut() {
        *q += nmax as i8;
    }
    if suml2 > 0.0 {
        sumlx / suml2
    } else {
        0.0
    }
}

/// Asymmetric quantization of `x` to `0..=nmax` with a minimum, searching
/// `nstep + 1` scales for the least weighted error: squared, or absolute
/// with `use_mad` (Q2_K). Returns the scale and the (positive) minimum to
/// subtract.
#[allow(clippy::too_many_arguments)]
pub(super) fn make_qkx2_quants(
    nmax: i32,
    x: &[f32],
    weights: &[f32],
    l: &mut [u8],
    laux: &mut [u8],
    rmin: f32,
    rdelta: f32,
    nstep: i32,
    use_mad: bool,
) -> (f32, f32) {
    let err = |diff: f32| if use_mad { diff.abs() } else { diff * diff };
    let n = x.len();
    let (mut min, mut max) = (x[0], x[0]);
    let mut sum_w = weights[0];
    let mut sum_x = sum_w * x[0];
    for i in 1..n {
        if x[i] < min {
            min = x[i];
        }
        if x[i] > max {
            max = x[i];
        }
        let w = weights[i];
        sum_w += w;
        sum_x += w * x[i];
    }
    if min > 0.0 {
        min = 0.0;
    }
    if max == min {
        l.fill(0);
        return (0.0, -min);
    }
    let mut iscale = nmax as f32 / (max - min);
    let mut scale = 1.0 / iscale;
    let mut best_mad = 0.0f32;
    for i in 0..n {
        let q = nearest_int(iscale * (x[i] - min)).clamp(0, nmax);
        l[i] = q as u8;
        let diff = scale * l[i] as f32 + min - x[i];
        best_mad += weights[i] * err(diff);
    }
    for is in 0..=nstep {
        iscale = (rmin + rdelta * is as f32 + nmax as f32) / (max - min);
        let (mut sum_l, mut sum_l2, mut sum_xl) = (0.0f32, 0.0f32, 0.0f32);
        for i in 0..n {
            let q = nearest_int(iscale * (x[i] - min)).clamp(0, nmax);
            laux[i] = q as u8;
            let w = weights[i];
            let q = q as f32;
            sum_l += w * q;
            sum_l2 += w * q * q;
            sum_xl += w * q * x[i];
        }
        let d = sum_w * sum_l2 - sum_l * sum_l;
        if d > 0.0 {
            let mut this_scale = (sum_w * sum_xl - sum_x * sum_l) / d;
            let mut this_min = (sum_l2 * sum_x - sum_l * sum_xl) / d;
            if this_min > 0.0 {
                this_min = 0.0;
                this_scale = sum_xl / sum_l2;
            }
            let mut mad = 0.0f32;
            for i in 0..n {
                let diff = this_scale * laux[i] as f32 + this_min - x[i];
                mad += weights[i] * err(diff);
            }
            if mad < best_mad {
                l[..n].copy_from_slice(&laux[..n]);
                best_mad = mad;
                scale = this_scale;
                min = this_min;
            }
        }
    }
    (scale, -min)
}

/// Packs eight 6-bit scales and mins into the 12 bytes Q4_K and Q5_K use.
pub(super) fn pack_scales_k4(ls: &[u8; 8], lm: &[u8; 8]) -> [u8; 12] {
    let mut s = [0u8; 12];
    for j in 0..8 {
        if j < 4 {
            s[j] = ls[j];
            s[j + 4] = lm[j];
        } else {
            s[j + 4] = (ls[j] & 0xF) | ((lm[j] & 0xF) << 4);
            s[j - 4] |= (ls[j] >> 4) << 6;
            s[j] |= (lm[j] >> 4) << 6;
        }
    }
    s
}

/// The shared first half of Q4_K and Q5_K: per-32 scales and mins found by
/// `make_qkx2_quants`, quantized to 6 bits against the block's largest, then
/// every value re-quantized against the 6-bit scale it will be decoded with.
/// Returns (d, dmin, packed scales, levels 0..=nmax).
pub(super) fn quantize_k_block(
    x: &[f32],
    nmax: i32,
    rmin: f32,
    nstep: i32,
) -> (f16, f16, [u8; 12], [u8; QK_K]) {
    let mut l = [0u8; QK_K];
    let mut laux = [0u8; 32];
    let mut weights = [0f32; 32];
    let mut scales = [0f32; 8];
    let mut mins = [0f32; 8];
    let (mut max_scale, mut max_min) = (0.0f32, 0.0f32);
    for j in 0..8 {
        let xs = &x[32 * j..32 * j + 32];
        let mut sum_x2 = 0.0f32;
        for &v in xs {
            sum_x2 += v * v;
        }
        let av_x = (sum_x2 / 32.0).sqrt();
        for (w, &v) in weights.iter_mut().zip(xs) {
            *w = av_x + v.abs();
        }
        let (scale, min) = make_qkx2_quants(
            nmax,
            xs,
            &weights,
            &mut l[32 * j..32 * j + 32],
            &mut laux,
            rmin,
            0.1,
            nstep,
            false,
        );
        scales[j] = scale;
        mins[j] = min;
        if scale > max_scale {
            max_scale = scale;
        }
        if min > max_min {
            max_min = min;
        }
    }
    let inv_scale = if max_scale > 0.0 {
        63.0 / max_scale
    } else {
        0.0
    };
    let inv_min = if max_min > 0.0 { 63.0 / max_min } else { 0.0 };
    let mut ls = [0u8; 8];
    let mut lm = [0u8; 8];
    for j in 0..8 {
        // ggml stores the int in a uint8_t before clamping.
        ls[j] = (nearest_int(inv_scale * scales[j]) as u8).min(63);
        lm[j] = (nearest_int(inv_min * mins[j]) as u8).min(63);
    }
    let packed = pack_scales_k4(&ls, &lm);
    let d = f16::from_f32(max_scale / 63.0);
    let dmin = f16::from_f32(max_min / 63.0);
    for j in 0..8 {
        let (sc, m) = scale_min_k4(j, &packed);
        let dj = d.to_f32() * sc as f32;
        if dj == 0.0 {
            continue;
        }
        let dm = dmin.to_f32() * m as f32;
        for i in 0..32 {
            let q = nearest_int((x[32 * j + i] + dm) / dj).clamp(0, nmax);
            l[32 * j + i] = q as u8;
        }
    }
    (d, dmin, packed, l)
}

/// Scale and min of sub-block `j` (0..8) from the 12 packed bytes of a Q4_K or
/// Q5_K block: 6 bits each.
pub fn scale_min_k4(j: usize, q: &[u8; 12]) -> (u8, u8) {
    if j < 4 {
        (q[j] & 63, q[j + 4] & 63)
    } else {
        (
            (q[j + 4] & 0xF) | ((q[j - 4] >> 6) << 4),
            (q[j + 4] >> 4) | ((q[j] >> 6) << 4),
        )
    }
}

/// 2-bit values (0..=3) packed four to a byte, as Q2_K and Q3_K store them:
/// in each half of 128 values, byte i holds values i, i+32, i+64 and i+96.
pub(super) fn pack_2bit(l: &[u8; QK_K], qs: &mut [u8; QK_K / 4]) {
    for half in (0..QK_K).step_by(128) {
        for i in 0..32 {
            let v = |k: usize| l[half + i + 32 * k] << (2 * k);
            qs[half / 4 + i] = v(0) | v(1) | v(2) | v(3);
        }
    }
}

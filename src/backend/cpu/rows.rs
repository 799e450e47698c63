//! Row operations in ggml's numerics, the scalar twins of the variants'
//! element-wise kernels: RMSNorm and LayerNorm (sums in f64), RoPE (angles by
//! ggml's recurrence), SwiGLU (with a polynomial exp every SIMD twin
//! repeats), GELU through ggml's f16 table, the attention's scores and
//! weighted sums over cached rows, and the f32 products and softmax of
//! attention over blocks of queries.

use half::f16;

use super::kernels::{CausalConvFn, DeltaNetColumnsFn};
use crate::backend::ops::{Rope, RopeKind};

/// RMSNorm of one row, with the sum of squares in f64 as ggml keeps it.
pub fn rms_norm(x: &[f32], w: &[f32], eps: f32, out: &mut [f32]) {
    let sum: f64 = x.iter().map(|&v| (v * v) as f64).sum();
    let scale = 1.0 / ((sum / x.len() as f64) as f32 + eps).sqrt();
    for ((o, &v), &g) in out.iter_mut().zip(x).zip(w) {
        *o = (v * scale) * g;
    }
}

/// LayerNorm of one row in place: (x - mean) / sqrt(var + eps) · w + b, with
/// the sums in f64 and mean and variance in f32, as ggml's norm.
pub fn layer_norm(x: &mut [f32], w: &[f32], b: &[f32], eps: f32) {
    let n = x.len() as f64;
    let mean = (x.iter().map(|&v| v as f64).sum::<f64>() / n) as f32;
    let mut sum2 = 0.0f64;
    for v in x.iter_mut() {
        *v -= mean;
        sum2 += (*v * *v) as f64;
    }
    let scale = 1.0 / ((sum2 / n) as f32 + eps).sqrt();
    for ((v, &g), &c) in x.iter_mut().zip(w).zip(b) {
        *v = *v * scale * g + c;
    }
}

/// `gate = silu(gate) * up`, with silu(g) = g / (1 + exp(-g)) and `exp` the
/// polynomial below, so every variant's SIMD kernel gives the same bits.
pub fn silu_mul(gate: &mut [f32], up: &[f32]) {
    for (g, u) in gate.iter_mut().zip(up) {
        *g = (*g / (1.0 + exp(-*g))) * u;
    }
}

/// The constants of `exp`, shared with the SIMD kernels.
pub(super) mod exp_consts {
    /// Inputs are clamped to [LO, HI]: exp stays a normal, finite f32.
    pub const LO: f32 = -87.3;
    pub const HI: f32 = 88.3;
    pub const LOG2E: f32 = std::f32::consts::LOG2_E;
    /// ln 2 in two parts (Cody–Waite): `n · LN2_HI` is exact for |n| < 2^15.
    pub const LN2_HI: f32 = 0.693_359_4;
    pub const LN2_LO: f32 = -2.121_944_4e-4;
    /// Cephes' expf polynomial, highest degree first.
    pub const P: [f32; 6] = [
        1.987_569_1e-4,
        1.398_199_9e-3,
        8.333_452e-3,
        4.166_579_6e-2,
        1.666_666_5e-1,
        0.5, // Cephes' 5.0000001201e-1, which rounds to 0.5 in f32
    ];
}

/// exp(x) within 2 ulp on [-87.3, 88.3] (clamped outside), from multiplies,
/// adds and one rounding to an integer only: no fused multiply-add and no
/// library call, so a SIMD kernel doing the same steps lane by lane is
/// bit-equal on every target. x = n·ln2 + r with |r| <= ln2/2; exp(r) by
/// Cephes' polynomial; 2^n from its exponent bits (n in [-126, 127]).
pub(super) fn exp(x: f32) -> f32 {
    use exp_consts::*;
    let x = x.clamp(LO, HI);
    let n = (x * LOG2E).round_ties_even();
    let r = (x - n * LN2_HI) - n * LN2_LO;
    let mut p = P[0];
    for c in &P[1..] {
        p = p * r + c;
    }
    let e = (p * (r * r) + r) + 1.0;
    e * f32::from_bits(((n as i32 + 127) as u32) << 23)
}

/// GELU (tanh approximation) as ggml evaluates it: 0 at or below -10, the
/// identity at or above 10, else looked up in a table over every f16 input
/// (the input rounded to f16, the result an f16).
pub fn gelu(x: &mut [f32]) {
    let table = gelu_table();
    for v in x {
        *v = if *v <= -10.0 {
            0.0
        } else if *v >= 10.0 {
            *v
        } else {
            table[f16::from_f32(*v).to_bits() as usize].to_f32()
        };
    }
}

/// `gate = gelu(gate) * up`, GELU as `gelu` evaluates it (ggml's GeGLU:
/// the f16 table's value times `up` in f32).
pub fn gelu_mul(gate: &mut [f32], up: &[f32]) {
    let table = gelu_table();
    for (g, &u) in gate.iter_mut().zip(up) {
        *g = if *g <= -10.0 {
            0.0
        } else if *g >= 10.0 {
            *g * u
        } else {
            table[f16::from_f32(*g).to_bits() as usize].to_f32() * u
        };
    }
}

/// ggml's GELU table: every f16 input's result as an f16, and one entry
/// more (zero), since SIMD gathers read four bytes at an entry.
pub(super) fn gelu_table() -> &'static [f16] {
    static TABLE: std::sync::OnceLock<Vec<f16>> = std::sync::OnceLock::new();
    TABLE.get_or_init(|| {
        const SQRT_2_OVER_PI: f32 = 0.797_884_6;
        const COEF_A: f32 = 0.044715;
        (0..=u16::MAX)
            .map(|bits| {
                let x = f16::from_bits(bits).to_f32();
                let y = 0.5 * x * (1.0 + (SQRT_2_OVER_PI * x * (1.0 + COEF_A * x * x)).tanh());
                f16::from_f32(y)
            })
            .chain([f16::ZERO])
            .collect()
    })
}

/// Rotates every head of `x` (heads of `rope.head_dim` values) to position
/// `pos`. The angle of pair i is pos * base^(-2i/dim), built by ggml's
/// recurrence (multiplying by base^(-2/dim) per pair) so values match its
/// rounding.
pub fn rope(rope: &Rope, x: &mut [f32], pos: i32) {
    let theta_scale = rope.base.powf(-2.0 / rope.dim as f32);
    let half = rope.dim / 2;
    // Every head turns by the same angles: each sine and cosine is computed
    // once per row, not once per head.
    let mut theta = pos as f32;
    for i in 0..half {
        let factor = rope.freq_factors.as_ref().map_or(1.0, |f| f[i]);
        let (s, c) = (rope.freq_scale * theta / factor).sin_cos();
        let (s, c) = (s * rope.attn_factor, c * rope.attn_factor);
        let (a, b) = match rope.kind {
            RopeKind::Normal => (2 * i, 2 * i + 1),
            RopeKind::Neox => (i, i + half),
        };
        for head in x.chunks_exact_mut(rope.head_dim) {
            let (x0, x1) = (head[a], head[b]);
            head[a] = x0 * c - x1 * s;
            head[b] = x0 * s + x1 * c;
        }
        theta *= theta_scale;
    }
}

/// Panics unless every cached row `cells[j]` (`width` values from
/// `c * stride + offset`) lies inside a cache of `len` values, and `per_cell`
/// (scores or weights) has one value per cell: the attention kernels then
/// index with no further check.
pub(crate) fn check_cells(
    len: usize,
    stride: usize,
    offset: usize,
    width: usize,
    cells: &[u32],
    per_cell: usize,
) {
    assert_eq!(
        cells.len(),
        per_cell,
        "attention rows: {per_cell} values for {} cells",
        cells.len()
    );
    let Some(max) = cells.iter().copied().max() else {
        return;
    };
    let end = (max as usize)
        .checked_mul(stride)
        .and_then(|s| s.checked_add(offset))
        .and_then(|s| s.checked_add(width));
    assert!(
        end.is_some_and(|e| e <= len),
        "attention rows: cell {max} (rows of {stride} from {offset}, {width} wide) past a cache of {len} values"
    );
}

/// Checks a call over cached rows for `heads` heads sharing them: `q_len`
/// values of `heads` queries against `out_len` scores (`heads` rows of one
/// per cell), every row read inside the cache (panics otherwise, as
/// `check_cells`). Returns the head width.
#[cfg_attr(
    all(target_family = "wasm", not(target_feature = "simd128")),
    allow(dead_code)
)] // (only SIMD variants have head-group kernels)
pub(crate) fn check_head_scores(
    len: usize,
    stride: usize,
    offset: usize,
    cells: &[u32],
    (q_len, out_len): (usize, usize),
    heads: usize,
) -> usize {
    assert!(
        heads > 0 && q_len % heads == 0 && out_len == heads * cells.len(),
        "attention rows: {q_len} query values and {out_len} scores for {heads} heads over {} cells",
        cells.len()
    );
    let width = q_len / heads;
    check_cells(len, stride, offset, width, cells, cells.len());
    width
}

/// Checks a weighted sum over cached rows for `heads` heads: `p_len`
/// weights (`heads` rows of one per cell) into `out_len` values (`heads`
/// rows), as `check_head_scores`. Returns the width of a head's output.
#[cfg_attr(
    all(target_family = "wasm", not(target_feature = "simd128")),
    allow(dead_code)
)] // (only SIMD variants have head-group kernels)
pub(crate) fn check_head_sums(
    len: usize,
    stride: usize,
    offset: usize,
    cells: &[u32],
    (p_len, out_len): (usize, usize),
    heads: usize,
) -> usize {
    assert!(
        heads > 0 && out_len % heads == 0 && p_len == heads * cells.len(),
        "attention rows: {p_len} weights and {out_len} outputs for {heads} heads over {} cells",
        cells.len()
    );
    let width = out_len / heads;
    check_cells(len, stride, offset, width, cells, cells.len());
    width
}

/// One query against cached f16 K rows: `out[j] = K[cells[j]] · q`, row `c`
/// being `q.len()` values from `c * stride + offset`. `q` holds f16 values
/// as f32 (exactly), so each score equals `vec_dot_f16` of the row and the
/// query in f16 (an f64 sum here, as ggml's scalar f16 dot).
pub fn scores_f16(
    k: &[f16],
    stride: usize,
    offset: usize,
    cells: &[u32],
    q: &[f32],
    out: &mut [f32],
) {
    check_cells(k.len(), stride, offset, q.len(), cells, out.len());
    for (o, &c) in out.iter_mut().zip(cells) {
        let row = &k[c as usize * stride + offset..][..q.len()];
        let sum: f64 = row
            .iter()
            .zip(q)
            .map(|(a, &b)| a.to_f32() as f64 * b as f64)
            .sum();
        *o = sum as f32;
    }
}

/// The attention's weighted sum of cached f16 V rows, `out = Σ p[j] ·
/// V[cells[j]]` (rows as in `scores_f16`, `out.len()` wide), overwriting
/// `out`: from zero, in cell order, each value widened exactly, then one
/// multiply and one add (no fused multiply-add, so every variant gives the
/// same bits).
pub fn wsum_f16(
    v: &[f16],
    stride: usize,
    offset: usize,
    cells: &[u32],
    p: &[f32],
    out: &mut [f32],
) {
    check_cells(v.len(), stride, offset, out.len(), cells, p.len());
    out.fill(0.0);
    for (&c, &w) in cells.iter().zip(p) {
        let row = &v[c as usize * stride + offset..][..out.len()];
        for (o, x) in out.iter_mut().zip(row) {
            *o += w * x.to_f32();
        }
    }
}

/// One query against cached f32 K rows: `out[j] = K[cells[j]] · q` (rows
/// as in `scores_f16`), each summed as `scalar::vec_dot_f32` sums.
pub fn scores_f32(
    k: &[f32],
    stride: usize,
    offset: usize,
    cells: &[u32],
    q: &[f32],
    out: &mut [f32],
) {
    check_cells(k.len(), stride, offset, q.len(), cells, out.len());
    for (o, &c) in out.iter_mut().zip(cells) {
        *o = super::scalar::vec_dot_f32(&k[c as usize * stride + offset..][..q.len()], q);
    }
}

/// The attention's weighted sum of cached f32 V rows, `out = Σ p[j] ·
/// V[cells[j]]` (rows as in `scores_f16`), overwriting `out`: from zero, in
/// cell order, one multiply and one add, as `axpy_f32` per cell gives it.
pub fn wsum_f32(
    v: &[f32],
    stride: usize,
    offset: usize,
    cells: &[u32],
    p: &[f32],
    out: &mut [f32],
) {
    check_cells(v.len(), stride, offset, out.len(), cells, p.len());
    out.fill(0.0);
    for (&c, &w) in cells.iter().zip(p) {
        let row = &v[c as usize * stride + offset..][..out.len()];
        for (o, x) in out.iter_mut().zip(row) {
            *o += w * x;
        }
    }
}

/// Panics unless `out` has one value per f16 value.
#[track_caller]
pub(crate) fn check_widen(x: &[f16], out: &[f32]) {
    assert_eq!(
        x.len(),
        out.len(),
        "widen_f16: {} values into {}",
        x.len(),
        out.len()
    );
}

/// f16 values to f32 (exactly).
pub fn widen_f16(x: &[f16], out: &mut [f32]) {
    check_widen(x, out);
    for (o, v) in out.iter_mut().zip(x) {
        *o = v.to_f32();
    }
}

/// f32 values rounded to the nearest f16 (ties to even) and back to f32.
pub fn round_f16(x: &[f32], out: &mut [f32]) {
    check_round(x, out);
    for (o, v) in out.iter_mut().zip(x) {
        *o = f16::from_f32(*v).to_f32();
    }
}

/// Panics unless `out` has one value per value of `x`.
#[track_caller]
pub(crate) fn check_round(x: &[f32], out: &[f32]) {
    assert_eq!(
        x.len(),
        out.len(),
        "round_f16: {} values into {}",
        x.len(),
        out.len()
    );
}

/// 1 / (1 + exp(-x)) in place, as ggml's CPU sigmoid.
pub fn sigmoid(x: &mut [f32]) {
    for v in x {
        *v = 1.0 / (1.0 + (-*v).exp());
    }
}

/// Softmax of one row in place, as ggml's CPU softmax: the row's maximum
/// off, exp, the sum in f64, then every value times the sum's inverse.
pub fn soft_max(x: &mut [f32]) {
    let max = x.iter().copied().fold(f32::NEG_INFINITY, f32::max);
    let mut sum = 0f64;
    for v in x.iter_mut() {
        *v = (*v - max).exp();
        sum += *v as f64;
    }
    let inv = (1.0 / sum) as f32;
    for v in x.iter_mut() {
        *v *= inv;
    }
}

/// Softmax of one row in place with the polynomial `exp`, in the steps a
/// SIMD kernel can repeat lane by lane: the row's maximum (NaNs skipped),
/// exp of each value minus it, the values' sum in f64 as eight partial sums
/// (value `j` to sum `j % 8`, combined by `sum8_f64`), then every value times
/// the sum's inverse. ggml's CPU softmax also takes a SIMD exp and adds
/// vector lanes before its f64 sum; this is its order for eight lanes.
pub fn softmax_poly(x: &mut [f32]) {
    let max = x
        .iter()
        .fold(f32::NEG_INFINITY, |m, &v| if v > m { v } else { m });
    let mut sums = [0f64; 8];
    for (j, v) in x.iter_mut().enumerate() {
        *v = exp(*v - max);
        sums[j % 8] += *v as f64;
    }
    let inv = (1.0 / sum8_f64(sums)) as f32;
    for v in x.iter_mut() {
        *v *= inv;
    }
}

/// The eight partial sums of `softmax_poly` added as vector halves are:
/// lanes `i` and `i + 4`, then `i` and `i + 2`, then the last two.
pub(super) fn sum8_f64(s: [f64; 8]) -> f64 {
    let t = [s[0] + s[4], s[1] + s[5], s[2] + s[6], s[3] + s[7]];
    (t[0] + t[2]) + (t[1] + t[3])
}

/// One token of a causal depthwise convolution (shapes checked by the
/// caller): `taps` holds `len` rows of `n` (row `k`: every channel's `k`-th
/// tap, oldest first), `state` the last `len - 1` inputs (rows of `n`,
/// oldest first). `out` takes the window times the taps (`kernel` computes
/// it: the variant's `causal_conv`), then the state moves on by `x`.
pub fn causal_conv(
    kernel: CausalConvFn,
    taps: &[f32],
    state: &mut [f32],
    x: &[f32],
    out: &mut [f32],
) {
    kernel(taps, state, x, out);
    let n = x.len();
    state.copy_within(n.., 0);
    let keep = state.len();
    state[keep - n..].copy_from_slice(x);
}

/// The scalar twin of a causal convolution's sums (`CausalConvFn`): per
/// channel, the state's values times their taps, oldest first, then the new
/// input times the last tap, summed in f32 from 0 in that order (as ggml's
/// `ssm_conv`). Tap-major rows keep the inner loop on channels, so the
/// compiler can keep it in vector lanes; the order per channel is fixed.
pub fn causal_conv_sums(taps: &[f32], state: &[f32], x: &[f32], out: &mut [f32]) {
    let n = check_causal_conv(taps, state, x, out);
    out.fill(0.0);
    for (s, w) in state.chunks_exact(n).zip(taps.chunks_exact(n)) {
        for ((o, &s), &w) in out.iter_mut().zip(s).zip(w) {
            *o += s * w;
        }
    }
    let last = &taps[state.len()..];
    for ((o, &x), &w) in out.iter_mut().zip(x).zip(last) {
        *o += x * w;
    }
}

/// `causal_conv_sums` for the channels from `from` on (a SIMD kernel's
/// last channels, fewer than its width), in the same order.
pub(super) fn causal_conv_tail(
    taps: &[f32],
    state: &[f32],
    x: &[f32],
    out: &mut [f32],
    from: usize,
) {
    let n = out.len();
    for ch in from..n {
        let mut sum = 0.0f32;
        for k in 0..state.len() / n {
            sum += state[k * n + ch] * taps[k * n + ch];
        }
        out[ch] = sum + x[ch] * taps[state.len() + ch];
    }
}

/// The shapes every `CausalConvFn` needs, asserted (a variant's kernel reads
/// whole rows): `n` = `out.len()` channels, `x` of `n`, the state whole
/// rows of `n` and one tap row more than it. Returns `n`.
pub(super) fn check_causal_conv(taps: &[f32], state: &[f32], x: &[f32], out: &[f32]) -> usize {
    let n = out.len();
    assert!(
        n > 0 && x.len() == n && state.len() % n == 0 && taps.len() == state.len() + n,
        "causal_conv: {} taps, a state of {}, {} inputs for {n} channels",
        taps.len(),
        state.len(),
        x.len()
    );
    n
}

/// `a · b` with eight running sums (lane `i % 8` takes term `i`), added
/// pairwise at the end: a fixed order, which the compiler can keep in
/// vector lanes.
fn dot8(a: &[f32], b: &[f32]) -> f32 {
    let mut acc = [0.0f32; 8];
    let mut ac = a.chunks_exact(8);
    let mut bc = b.chunks_exact(8);
    for (x, y) in (&mut ac).zip(&mut bc) {
        for l in 0..8 {
            acc[l] += x[l] * y[l];
        }
    }
    for (l, (x, y)) in ac.remainder().iter().zip(bc.remainder()).enumerate() {
        acc[l] += x * y;
    }
    sum8(acc)
}

/// One state column's step of the gated DeltaNet (`delta_net_head`): the
/// column decays, the delta of value `v` against its recall of `k` (times
/// strength `beta`) is written along `k`, and the column's read of `q` is
/// returned (unscaled). Both dots are `dot8`s, so SIMD kernels that keep
/// eight lanes (one 8-wide register, or two 4-wide) and add them in its
/// order give the same bits.
pub fn delta_net_column(
    col: &mut [f32],
    k: &[f32],
    q: &[f32],
    decay: f32,
    v: f32,
    beta: f32,
) -> f32 {
    check_delta_net_column(col, k, q);
    for s in col.iter_mut() {
        *s *= decay;
    }
    let delta = (v - dot8(col, k)) * beta;
    for (s, &ki) in col.iter_mut().zip(k) {
        *s += ki * delta;
    }
    dot8(col, q)
}

/// `delta_net_column` for the columns of `cols` (back to back, each as long
/// as `k`), column `c` with value `v[c]`, its read into `read[c]`: the
/// scalar twin of a variant's `delta_net_columns`, which may interleave
/// columns (they are independent) but keeps each one's operations, so the
/// bits are these.
pub fn delta_net_columns(
    cols: &mut [f32],
    k: &[f32],
    q: &[f32],
    decay: f32,
    v: &[f32],
    beta: f32,
    read: &mut [f32],
) {
    let d = check_delta_net_columns(cols, k, v, read);
    for ((col, &vc), r) in cols.chunks_exact_mut(d).zip(v).zip(read) {
        *r = delta_net_column(col, k, q, decay, vc, beta);
    }
}

/// How a SIMD variant's `delta_net_columns` walks its columns: columns
/// whose length is not a multiple of 8 (or a query of another length) go
/// through the scalar twin; otherwise `group` takes `G` columns at a time
/// with their values and returns their reads, and `one` takes each column
/// left over. Either gets only whole columns of `k.len()` (`group` exactly
/// `G` of them), each a multiple of 8 long: what their kernels rely on.
#[allow(clippy::too_many_arguments)]
#[cfg_attr(
    not(any(
        target_arch = "x86_64",
        target_arch = "aarch64",
        target_feature = "simd128"
    )),
    allow(dead_code)
)]
pub(super) fn delta_net_in_groups<const G: usize>(
    cols: &mut [f32],
    k: &[f32],
    q: &[f32],
    decay: f32,
    v: &[f32],
    beta: f32,
    read: &mut [f32],
    group: impl Fn(&mut [f32], &[f32]) -> [f32; G],
    one: impl Fn(&mut [f32], f32) -> f32,
) {
    let d = check_delta_net_columns(cols, k, v, read);
    if d % 8 != 0 || q.len() != d {
        return delta_net_columns(cols, k, q, decay, v, beta, read);
    }
    let mut groups = cols.chunks_exact_mut(G * d);
    let (mut values, mut reads) = (v.chunks_exact(G), read.chunks_exact_mut(G));
    for ((cols, v), r) in (&mut groups).zip(&mut values).zip(&mut reads) {
        r.copy_from_slice(&group(cols, v));
    }
    let last = groups.into_remainder().chunks_exact_mut(d);
    for ((col, &vc), r) in last.zip(values.remainder()).zip(reads.into_remainder()) {
        *r = one(col, vc);
    }
}

/// `delta_net_columns`' shapes, asserted: a non-empty key, as many columns
/// of its length as values, and a read per value (the query is checked
/// per column). Returns the column length.
pub(super) fn check_delta_net_columns(cols: &[f32], k: &[f32], v: &[f32], read: &[f32]) -> usize {
    assert!(
        !k.is_empty() && Some(cols.len()) == v.len().checked_mul(k.len()) && read.len() == v.len(),
        "delta_net_columns: {} state values for {} values and reads of {} against a key of {}",
        cols.len(),
        v.len(),
        read.len(),
        k.len()
    );
    k.len()
}

/// The column, the key and the query must be equally long (the SIMD
/// variants check the same in `delta_net_columns`).
fn check_delta_net_column(col: &[f32], k: &[f32], q: &[f32]) {
    assert!(
        col.len() == k.len() && col.len() == q.len(),
        "delta_net_column: a column of {} against a key of {} and a query of {}",
        col.len(),
        k.len(),
        q.len()
    );
}

/// The eight lanes of `dot8` added in its order.
pub(super) fn sum8(acc: [f32; 8]) -> f32 {
    ((acc[0] + acc[4]) + (acc[2] + acc[6])) + ((acc[1] + acc[5]) + (acc[3] + acc[7]))
}

/// Gated DeltaNet for one value head over `n` tokens (`DeltaNetArgs`'s
/// recurrence; shapes checked by the caller): `q`, `k` and `v` give each
/// token's head vector at `stride` from the last, `g` and `beta` each
/// token's decay and strength at `hstride`; `state` is the head's `dim x
/// dim` matrix by output column, and `out` takes `dim` values per token at
/// `stride_out`. The arithmetic is the reference's fused op's (decay,
/// delta against the decayed state, the rank-one write, then the read),
/// but since output `j` needs only column `j` of the state, each column
/// takes all four steps in one visit (`columns`: the variant's
/// `delta_net_columns`, which interleaves independent columns to hide its
/// dots' latency) instead of the whole matrix being swept four times. And
/// since columns are independent, a group of `DELTA_NET_GROUP` columns
/// takes a run of up to `DELTA_NET_RUN` tokens while it is in L1 (their
/// keys and queries stay there too) before the next group: the matrix then
/// passes through L1 once per run rather than once per token. Each column
/// sees its tokens in order, so the bits depend on neither size.
#[allow(clippy::too_many_arguments)]
pub fn delta_net_head(
    columns: DeltaNetColumnsFn,
    q: &[f32],
    k: &[f32],
    v: &[f32],
    stride: usize,
    g: &[f32],
    beta: &[f32],
    hstride: usize,
    state: &mut [f32],
    out: &mut [f32],
    stride_out: usize,
    dim: usize,
    n: usize,
) {
    let scale = 1.0 / (dim as f32).sqrt();
    let mut decay = [0.0f32; DELTA_NET_RUN];
    for start in (0..n).step_by(DELTA_NET_RUN) {
        let run = start..n.min(start + DELTA_NET_RUN);
        for (d, t) in decay.iter_mut().zip(run.clone()) {
            *d = g[t * hstride].exp();
        }
        for (group, cols) in state.chunks_mut(DELTA_NET_GROUP * dim).enumerate() {
            let (j, width) = (group * DELTA_NET_GROUP, cols.len() / dim);
            for (i, t) in run.clone().enumerate() {
                let row = t * stride..t * stride + dim;
                let at = t * stride_out + j;
                let read = &mut out[at..at + width];
                columns(
                    cols,
                    &k[row.clone()],
                    &q[row],
                    decay[i],
                    &v[t * stride + j..t * stride + j + width],
                    beta[t * hstride],
                    read,
                );
                for r in read {
                    *r *= scale;
                }
            }
        }
    }
}

/// State columns a `delta_net_columns` call takes (4 KiB with heads of 128).
const DELTA_NET_GROUP: usize = 8;

/// Tokens a DeltaNet state column takes per visit (`delta_net_head`): with
/// heads of 128, their keys and queries fill 16 KiB, within any L1.
const DELTA_NET_RUN: usize = 16;

/// `out += p · v` for an f32 row.
pub fn axpy_f32(p: f32, v: &[f32], out: &mut [f32]) {
    super::scalar::check_axpy(v, out);
    for (o, &x) in out.iter_mut().zip(v) {
        *o += p * x;
    }
}

/// The shape of a product `c = a · b` of row-major f32 matrices, each row
/// `ld*` values after the one before it: `a` is `m × k`, `b` is `k × n`, `c`
/// is `m × n`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct GemmShape {
    pub m: usize,
    pub n: usize,
    pub k: usize,
    pub lda: usize,
    pub ldb: usize,
    pub ldc: usize,
}

impl GemmShape {
    /// Panics unless every row is at least as long as the matrix is wide
    /// and every row the product reads or writes lies inside its slice: the
    /// kernels then index with no further check.
    #[track_caller]
    pub fn check(&self, a: usize, b: usize, c: usize) {
        let &GemmShape {
            m,
            n,
            k,
            lda,
            ldb,
            ldc,
        } = self;
        // Values from the first row's start to the last row's end.
        let span = |rows: usize, ld: usize, cols: usize| match (rows, cols) {
            (0, _) | (_, 0) => Some(0),
            _ => (rows - 1).checked_mul(ld).and_then(|s| s.checked_add(cols)),
        };
        assert!(
            lda >= k && ldb >= n && ldc >= n,
            "gemm_f32: rows of {lda}, {ldb}, {ldc} for a {m}×{k} by {k}×{n} product"
        );
        for (what, len, need) in [
            ("a", a, span(m, lda, k)),
            ("b", b, span(k, ldb, n)),
            ("c", c, span(m, ldc, n)),
        ] {
            assert!(
                need.is_some_and(|need| need <= len),
                "gemm_f32: {what} holds {len} values, too few for a {m}×{k} by {k}×{n} product"
            );
        }
    }
}

/// `c = a · b` (shapes as `GemmShape`): each output summed from zero over
/// `p = 0..k` in order, one multiply and one add per step (no fused
/// multiply-add), so a SIMD kernel that keeps one lane per output and takes
/// the same steps gives the same bits. Used by attention over many queries,
/// where `a` is a head's queries or weights and `b` its keys (transposed)
/// or values.
pub fn gemm_f32(g: &GemmShape, a: &[f32], b: &[f32], c: &mut [f32]) {
    g.check(a.len(), b.len(), c.len());
    for i in 0..g.m {
        let row = &mut c[i * g.ldc..][..g.n];
        row.fill(0.0);
        for p in 0..g.k {
            let x = a[i * g.lda + p];
            for (o, &y) in row.iter_mut().zip(&b[p * g.ldb..][..g.n]) {
                *o += x * y;
            }
        }
    }
}

/// The frame of the SIMD `gemm_f32` kernels: checks the shape against the
/// slices, then hands `rows(take, a, c)` each group of up to four rows of
/// `a` and `c` (`take` of them, from the group's first row on).
#[cfg_attr(
    all(target_family = "wasm", not(target_feature = "simd128")),
    allow(dead_code)
)] // (only SIMD variants group rows)
pub(super) fn gemm_f32_in_row_groups(
    g: &GemmShape,
    a: &[f32],
    b: &[f32],
    c: &mut [f32],
    mut rows: impl FnMut(usize, &[f32], &mut [f32]),
) {
    g.check(a.len(), b.len(), c.len());
    let mut i = 0;
    while i < g.m {
        let take = (g.m - i).min(4);
        rows(take, &a[i * g.lda..], &mut c[i * g.ldc..]);
        i += take;
    }
}

/// Columns `from..n` of the first `rows` rows of `gemm_f32` (the columns
/// past a SIMD kernel's last whole vector), each summed as the twin sums.
#[cfg_attr(
    all(target_family = "wasm", not(target_feature = "simd128")),
    allow(dead_code)
)] // (only SIMD variants have a last vector)
pub(super) fn gemm_f32_columns(
    g: &GemmShape,
    rows: usize,
    from: usize,
    a: &[f32],
    b: &[f32],
    c: &mut [f32],
) {
    for r in 0..rows {
        for j in from..g.n {
            let mut sum = 0.0f32;
            for p in 0..g.k {
                sum += a[r * g.lda + p] * b[p * g.ldb + j];
            }
            c[r * g.ldc + j] = sum;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    #[cfg(target_family = "wasm")]
    use wasm_bindgen_test::wasm_bindgen_test as test;

    fn params(kind: RopeKind) -> Rope {
        Rope {
            kind,
            head_dim: 8,
            dim: 8,
            base: 10000.0,
            freq_scale: 1.0,
            freq_factors: None,
            attn_factor: 1.0,
        }
    }

    #[test]
    fn the_polynomial_exp_is_within_two_ulp() {
        let mut worst = 0.0f64;
        for i in 0..=200_000 {
            let x = -87.0 + 175.0 * i as f32 / 200_000.0;
            let want = (x as f64).exp();
            let err = ((exp(x) as f64 - want) / want).abs();
            worst = worst.max(err);
        }
        // 2 ulp of an f32 is 2^-22 relative, at most.
        assert!(worst <= 2.0f64.powi(-22), "worst relative error {worst}");
        // Clamped outside: finite, never zero, so silu stays finite.
        assert!(exp(1000.0).is_finite() && exp(-1000.0) > 0.0);
        let (mut g, u) = ([-1000.0, -1.0, 0.0, 1.0, 1000.0], [1.0; 5]);
        silu_mul(&mut g, &u);
        assert!(g.iter().all(|v| v.is_finite()), "{g:?}");
        assert_eq!((g[2], g[4]), (0.0, 1000.0));
        assert!((g[3] - 0.731_058_6).abs() < 1e-6, "{}", g[3]);
    }

    #[test]
    fn rotations_compose_and_keep_norms() {
        for kind in [RopeKind::Normal, RopeKind::Neox] {
            let r = params(kind);
            let x: Vec<f32> = (0..16).map(|i| (i as f32 * 0.37).sin()).collect();
            let mut a = x.clone();
            rope(&r, &mut a, 7);
            let mut b = x.clone();
            rope(&r, &mut b, 3);
            rope(&r, &mut b, 4);
            for (p, q) in a.iter().zip(&b) {
                assert!((p - q).abs() < 1e-5, "{kind:?}: {p} vs {q}");
            }
            let norm = |v: &[f32]| v.iter().map(|t| t * t).sum::<f32>();
            assert!((norm(&a) - norm(&x)).abs() < 1e-4);
            let mut z = x.clone();
            rope(&r, &mut z, 0);
            assert_eq!(z, x);
        }
    }

    #[test]
    fn normal_and_neox_rotate_different_pairs() {
        let mut a = vec![1.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0];
        rope(&params(RopeKind::Normal), &mut a, 1);
        assert!(a[1] != 0.0 && a[4] == 0.0);
        let mut b = vec![1.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0];
        rope(&params(RopeKind::Neox), &mut b, 1);
        assert!(b[1] == 0.0 && b[4] != 0.0);
    }
}

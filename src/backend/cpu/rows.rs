//! Row operations in ggml's numerics, the scalar twins of the variants'
//! element-wise kernels: RMSNorm and LayerNorm (sums in f64), RoPE (angles by
//! ggml's recurrence), SwiGLU, GELU through ggml's f16 table, and the
//! attention's weighted sum of V rows.

use half::f16;

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

/// `gate = silu(gate) * up`.
pub fn silu_mul(gate: &mut [f32], up: &[f32]) {
    for (g, u) in gate.iter_mut().zip(up) {
        *g = (*g / (1.0 + (-*g).exp())) * u;
    }
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

fn gelu_table() -> &'static [f16] {
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
    for head in x.chunks_exact_mut(rope.head_dim) {
        let mut theta = pos as f32;
        for i in 0..half {
            let factor = rope.freq_factors.as_ref().map_or(1.0, |f| f[i]);
            let (s, c) = (rope.freq_scale * theta / factor).sin_cos();
            let (a, b) = match rope.kind {
                RopeKind::Normal => (2 * i, 2 * i + 1),
                RopeKind::Neox => (i, i + half),
            };
            let (x0, x1) = (head[a], head[b]);
            head[a] = x0 * c - x1 * s;
            head[b] = x0 * s + x1 * c;
            theta *= theta_scale;
        }
    }
}

/// `out += p · v` for an f16 row (each value widened exactly, then one
/// multiply and one add in f32: no fused multiply-add, so every variant
/// gives the same bits).
pub fn axpy_f16(p: f32, v: &[f16], out: &mut [f32]) {
    super::scalar::check_axpy(v, out);
    for (o, &x) in out.iter_mut().zip(v) {
        *o += p * x.to_f32();
    }
}

/// `out += p · v` for an f32 row.
pub fn axpy_f32(p: f32, v: &[f32], out: &mut [f32]) {
    super::scalar::check_axpy(v, out);
    for (o, &x) in out.iter_mut().zip(v) {
        *o += p * x;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    #[cfg(target_arch = "wasm32")]
    use wasm_bindgen_test::wasm_bindgen_test as test;

    fn params(kind: RopeKind) -> Rope {
        Rope {
            kind,
            head_dim: 8,
            dim: 8,
            base: 10000.0,
            freq_scale: 1.0,
            freq_factors: None,
        }
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

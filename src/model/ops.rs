//! Row operations: RMSNorm and rotary position embedding (llama), LayerNorm
//! and GELU (BERT), in ggml's numerics.

/// RMSNorm of one row, with the sum of squares in f64 as ggml keeps it.
pub fn rms_norm(x: &[f32], w: &[f32], eps: f32, out: &mut [f32]) {
    let sum: f64 = x.iter().map(|&v| (v * v) as f64).sum();
    let scale = 1.0 / ((sum / x.len() as f64) as f32 + eps).sqrt();
    for ((o, &v), &g) in out.iter_mut().zip(x).zip(w) {
        *o = (v * scale) * g;
    }
}

/// LayerNorm of one row: (x - mean) / sqrt(var + eps) · w + b, with the sums
/// in f64 and mean and variance in f32, as ggml's norm.
pub fn layer_norm(x: &[f32], w: &[f32], b: &[f32], eps: f32, out: &mut [f32]) {
    let n = x.len() as f64;
    let mean = (x.iter().map(|&v| v as f64).sum::<f64>() / n) as f32;
    let mut sum2 = 0.0f64;
    for (o, &v) in out.iter_mut().zip(x) {
        *o = v - mean;
        sum2 += (*o * *o) as f64;
    }
    let scale = 1.0 / ((sum2 / n) as f32 + eps).sqrt();
    for ((o, &g), &c) in out.iter_mut().zip(w).zip(b) {
        *o = *o * scale * g + c;
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
            table[half::f16::from_f32(*v).to_bits() as usize].to_f32()
        };
    }
}

fn gelu_table() -> &'static [half::f16] {
    static TABLE: std::sync::OnceLock<Vec<half::f16>> = std::sync::OnceLock::new();
    TABLE.get_or_init(|| {
        const SQRT_2_OVER_PI: f32 = 0.797_884_6;
        const COEF_A: f32 = 0.044715;
        (0..=u16::MAX)
            .map(|bits| {
                let x = half::f16::from_bits(bits).to_f32();
                let y = 0.5 * x * (1.0 + (SQRT_2_OVER_PI * x * (1.0 + COEF_A * x * x)).tanh());
                half::f16::from_f32(y)
            })
            .collect()
    })
}

/// Which elements RoPE rotates together.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RopeKind {
    /// Neighbours (2i, 2i+1): llama's ordering.
    Normal,
    /// Halves (i, i + dim/2): GPT-NeoX's ordering.
    Neox,
}

/// Rotary embedding parameters from the model's metadata.
#[derive(Clone, Debug, PartialEq)]
pub struct Rope {
    pub kind: RopeKind,
    pub head_dim: usize,
    /// Leading dimensions of each head that rotate (the rest pass through).
    pub dim: usize,
    pub base: f32,
    /// Position scale (1 / linear scaling factor).
    pub freq_scale: f32,
    /// Per-pair divisors of the angle (llama 3.1's `rope_freqs.weight`).
    pub freq_factors: Option<Vec<f32>>,
}

impl Rope {
    /// Rotates every head of `x` (heads of `head_dim` values) to position `pos`.
    /// The angle of pair i is pos * base^(-2i/dim), built by ggml's recurrence
    /// (multiplying by base^(-2/dim) per pair) so values match its rounding.
    pub fn apply(&self, x: &mut [f32], pos: i32) {
        let theta_scale = self.base.powf(-2.0 / self.dim as f32);
        let half = self.dim / 2;
        for head in x.chunks_exact_mut(self.head_dim) {
            let mut theta = pos as f32;
            for i in 0..half {
                let factor = self.freq_factors.as_ref().map_or(1.0, |f| f[i]);
                let (s, c) = (self.freq_scale * theta / factor).sin_cos();
                let (a, b) = match self.kind {
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
}

#[cfg(test)]
mod tests {
    use super::*;
    #[cfg(target_arch = "wasm32")]
    use wasm_bindgen_test::wasm_bindgen_test as test;

    fn rope(kind: RopeKind) -> Rope {
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
            let r = rope(kind);
            let x: Vec<f32> = (0..16).map(|i| (i as f32 * 0.37).sin()).collect();
            let mut a = x.clone();
            r.apply(&mut a, 7);
            let mut b = x.clone();
            r.apply(&mut b, 3);
            r.apply(&mut b, 4);
            for (p, q) in a.iter().zip(&b) {
                assert!((p - q).abs() < 1e-5, "{kind:?}: {p} vs {q}");
            }
            let norm = |v: &[f32]| v.iter().map(|t| t * t).sum::<f32>();
            assert!((norm(&a) - norm(&x)).abs() < 1e-4);
            let mut z = x.clone();
            r.apply(&mut z, 0);
            assert_eq!(z, x);
        }
    }

    #[test]
    fn normal_and_neox_rotate_different_pairs() {
        let mut a = vec![1.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0];
        rope(RopeKind::Normal).apply(&mut a, 1);
        assert!(a[1] != 0.0 && a[4] == 0.0);
        let mut b = vec![1.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0];
        rope(RopeKind::Neox).apply(&mut b, 1);
        assert!(b[1] == 0.0 && b[4] != 0.0);
    }
}

//! llama-embedding's normalisation of embeddings.

/// llama-embedding's `--embd-normalize`: -1 none, 0 scaled so the largest
/// magnitude is 32760 (int16 range), 1 taxicab, 2 euclidean, p > 2 the
/// p-norm. A zero vector stays zero.
pub fn normalize(v: &[f32], mode: i32) -> Vec<f32> {
    let sum: f64 = match mode {
        m if m < 0 => 1.0,
        0 => v.iter().fold(0.0f64, |m, &x| m.max(x.abs() as f64)) / 32760.0,
        2 => v.iter().map(|&x| x as f64 * x as f64).sum::<f64>().sqrt(),
        p => v
            .iter()
            .map(|&x| (x.abs() as f64).powi(p))
            .sum::<f64>()
            .powf(1.0 / p as f64),
    };
    let scale = if sum > 0.0 { (1.0 / sum) as f32 } else { 0.0 };
    v.iter().map(|&x| x * scale).collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    #[cfg(target_family = "wasm")]
    use wasm_bindgen_test::wasm_bindgen_test as test;

    #[test]
    fn normalisations_follow_llama_embedding() {
        let v = [3.0f32, -4.0];
        assert_eq!(normalize(&v, -1), vec![3.0, -4.0]);
        assert_eq!(normalize(&v, 2), vec![0.6, -0.8]);
        // The scale is 1/sum in f64, rounded to f32, then applied.
        let taxicab = (1.0 / 7.0f64) as f32;
        assert_eq!(normalize(&v, 1), vec![3.0 * taxicab, -4.0 * taxicab]);
        assert_eq!(normalize(&v, 0), vec![3.0 * 32760.0 / 4.0, -32760.0]);
        let p3 = (1.0 / (27.0f64 + 64.0).powf(1.0 / 3.0)) as f32;
        assert_eq!(normalize(&v, 3), vec![3.0 * p3, -4.0 * p3]);
        assert_eq!(normalize(&[0.0, 0.0], 2), vec![0.0, 0.0]);
    }
}

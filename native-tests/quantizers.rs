//! The reference quantizers and dequantizers are bit-exact with ggml's: their
//! outputs hash to what ggml (llama.cpp b4748) produced for the same inputs, and
//! requantizing SmolLM2 reproduces llama-quantize's files byte for byte.

mod common;

#[cfg(target_arch = "wasm32")]
use wasm_bindgen_test::wasm_bindgen_test as test;

use common::{f32_bytes, ggml_test_values, golden_path, read_file, sha256_hex, Rng};
use half::f16;
use lamina::tensor::{convert, DType};

fn golden() -> serde_json::Value {
    let text = read_file(&golden_path("ggml_quantizers.json"));
    serde_json::from_slice(&text).expect("valid golden JSON")
}

fn expected(golden: &serde_json::Value, file: &str) -> String {
    golden["sha256"][file]
        .as_str()
        .unwrap_or_else(|| panic!("no golden hash for {file}"))
        .to_string()
}

const QUANTIZABLE: [DType; 10] = [
    DType::Q4_0,
    DType::Q4_1,
    DType::Q5_0,
    DType::Q5_1,
    DType::Q8_0,
    DType::Q8_1,
    DType::Q8_K,
    DType::Q4_K,
    DType::Q5_K,
    DType::Q6_K,
];

fn ggml_name(d: DType) -> String {
    // ggml's type names are lower case except for the K.
    d.name().to_lowercase().replace("_k", "_K")
}

#[test]
fn quantizers_match_ggml_bit_for_bit() {
    let golden = golden();
    let n = golden["n"].as_u64().unwrap() as usize;
    for dtype in QUANTIZABLE {
        for seed in 1..=3u64 {
            let x = ggml_test_values(seed, n);
            let q = convert::from_f32(dtype, &x).unwrap();
            let name = ggml_name(dtype);
            assert_eq!(
                sha256_hex(&q),
                expected(&golden, &format!("quant_{name}_{seed}.bin")),
                "{dtype} quantization of seed {seed}"
            );
            // ggml's base library has no to_float for the activation types.
            if matches!(dtype, DType::Q8_1 | DType::Q8_K) {
                continue;
            }
            let y = convert::to_f32(dtype, &q, n).unwrap();
            assert_eq!(
                sha256_hex(&f32_bytes(&y)),
                expected(&golden, &format!("dequant_{name}_{seed}.bin")),
                "{dtype} dequantization of seed {seed}"
            );
        }
    }
}

#[test]
fn q2_k_and_q3_k_dequantize_like_ggml() {
    let golden = golden();
    let n = golden["n"].as_u64().unwrap() as usize;
    for (i, dtype) in [DType::Q2_K, DType::Q3_K].into_iter().enumerate() {
        let mut rng = Rng::new(100 + i as u64);
        let block = dtype.block_bytes();
        let mut blocks: Vec<u8> = (0..block * n / 256).map(|_| rng.next_u64() as u8).collect();
        for b in blocks.chunks_exact_mut(block) {
            let d = f16::from_f32((rng.below(1000) as f32 + 1.0) / 4096.0);
            let m = f16::from_f32(rng.below(1000) as f32 / 8192.0);
            if dtype == DType::Q2_K {
                b[80..82].copy_from_slice(&d.to_le_bytes());
                b[82..84].copy_from_slice(&m.to_le_bytes());
            } else {
                b[108..110].copy_from_slice(&d.to_le_bytes());
            }
        }
        let name = ggml_name(dtype);
        assert_eq!(
            sha256_hex(&blocks),
            expected(&golden, &format!("blocks_{name}.bin"))
        );
        let y = convert::to_f32(dtype, &blocks, n).unwrap();
        assert_eq!(
            sha256_hex(&f32_bytes(&y)),
            expected(&golden, &format!("dequant_{name}_random.bin")),
            "{dtype}"
        );
    }
}

/// Round trips stay within what each format can represent, block by block:
/// half a quantization step, plus the rounding of the block's scales to f16
/// (and, for k-quants, of the sub-block scales to 6 bits).
#[test]
fn round_trip_error_is_bounded_by_the_step() {
    let x = ggml_test_values(9, 4096);
    for dtype in [
        DType::Q4_0,
        DType::Q4_1,
        DType::Q5_0,
        DType::Q5_1,
        DType::Q8_0,
        DType::Q4_K,
        DType::Q5_K,
        DType::Q6_K,
        DType::F16,
        DType::BF16,
    ] {
        let y = convert::to_f32(dtype, &convert::from_f32(dtype, &x).unwrap(), x.len()).unwrap();
        let block = dtype.block_size().max(32);
        for (xs, ys) in x.chunks(block).zip(y.chunks(block)) {
            let (lo, hi) = xs
                .iter()
                .fold((0f32, 0f32), |(lo, hi), &v| (lo.min(v), hi.max(v)));
            let amax = hi.max(-lo);
            let scale_rounding = amax * 1e-3;
            for (&a, &b) in xs.iter().zip(ys) {
                let bound = match dtype {
                    // The value opposite the largest one can clamp: a full step.
                    DType::Q4_0 => amax / 8.0 + scale_rounding,
                    DType::Q5_0 => amax / 16.0 + scale_rounding,
                    DType::Q8_0 => amax / 127.0 * 0.5 + scale_rounding,
                    DType::Q4_1 => (hi - lo) / 15.0 * 0.5 + scale_rounding,
                    DType::Q5_1 => (hi - lo) / 31.0 * 0.5 + scale_rounding,
                    DType::Q4_K => (hi - lo) / 15.0 * 3.0,
                    DType::Q5_K => (hi - lo) / 31.0 * 3.0,
                    DType::Q6_K => amax / 32.0 * 3.0,
                    DType::F16 => a.abs() / 2048.0 + 6e-8,
                    _ => a.abs() / 256.0,
                };
                assert!(
                    (a - b).abs() <= bound,
                    "{dtype}: {a} became {b} (bound {bound})"
                );
            }
        }
    }
}

#[test]
fn conversions_check_lengths() {
    let mut out = vec![0f32; 32];
    assert!(convert::dequantize(DType::Q4_0, &[0u8; 17], &mut out).is_err());
    assert!(convert::dequantize(DType::Q4_0, &[0u8; 18], &mut out[..31]).is_err());
    assert!(convert::from_f32(DType::Q4_K, &[0.0; 255]).is_err());
    assert!(convert::from_f32(DType::Q3_K, &[0.0; 257]).is_err());
    // A buffer at an odd address works (through an aligned copy).
    let q = convert::from_f32(DType::Q8_K, &ggml_test_values(1, 256)).unwrap();
    let mut shifted = vec![0u8; q.len() + 1];
    shifted[1..].copy_from_slice(&q);
    let a = convert::to_f32(DType::Q8_K, &q, 256).unwrap();
    let b = convert::to_f32(DType::Q8_K, &shifted[1..], 256).unwrap();
    assert_eq!(a, b);
}

//! Helpers shared by the behaviour tests: file access that works natively, under
//! qemu and in Node, a deterministic random generator, and random GGUF models.
#![allow(dead_code)]

#[cfg(not(target_arch = "wasm32"))]
pub mod big_model;
pub mod synth;
pub mod teacher;

use std::sync::{Arc, OnceLock};

use lamina::backend::cpu::CpuDevice;
use lamina::gguf::{Array, GgufFile, GgufWriter, Value};
use lamina::model::Model;
use lamina::tensor::GgmlType;

/// The repository root, where `models/` and `native-tests/golden/` live.
pub const REPO: &str = env!("CARGO_MANIFEST_DIR");

/// SmolLM2-135M-Instruct Q4_1 (the goldens' model), loaded once per test
/// binary on the best variant.
pub fn smollm2_q4_1() -> Arc<Model> {
    static MODEL: OnceLock<Arc<Model>> = OnceLock::new();
    MODEL
        .get_or_init(|| {
            let file =
                GgufFile::from_bytes(read_file(&model_path("SmolLM2-135M-Instruct.Q4_1.gguf")))
                    .unwrap();
            let device = CpuDevice::new(None).unwrap();
            Arc::new(Model::load(Arc::new(file), device.shared(), None).unwrap())
        })
        .clone()
}

/// A JSON array of token ids (golden files).
pub fn json_ids(v: &serde_json::Value) -> Vec<u32> {
    v.as_array()
        .expect("a JSON array of token ids")
        .iter()
        .map(|x| x.as_u64().expect("a token id") as u32)
        .collect()
}

pub fn golden_path(rel: &str) -> String {
    format!("{REPO}/native-tests/golden/{rel}")
}

/// A model from ./models (put there by scripts/fetch-models.sh). A missing model
/// fails the test with what to do; it never lets the test pass.
pub fn model_path(name: &str) -> String {
    let path = format!("{REPO}/models/{name}");
    if !exists(&path) {
        panic!(
            "model {name} is missing at {path}: run scripts/fetch-models.sh \
             (with LAMINA_TEST_MODELS=../shared/models for the embedding models)"
        );
    }
    path
}

#[cfg(not(target_arch = "wasm32"))]
pub fn read_file(path: &str) -> Vec<u8> {
    std::fs::read(path).unwrap_or_else(|e| panic!("cannot read {path}: {e}"))
}

#[cfg(not(target_arch = "wasm32"))]
pub fn exists(path: &str) -> bool {
    std::path::Path::new(path).exists()
}

#[cfg(not(target_arch = "wasm32"))]
pub fn list_dir(path: &str) -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(path)
        .unwrap_or_else(|e| panic!("cannot list {path}: {e}"))
        .map(|e| {
            e.expect("directory entry")
                .file_name()
                .to_string_lossy()
                .into_owned()
        })
        .collect();
    names.sort();
    names
}

/// In Node, files are read through `fs` (wasm32-unknown-unknown has no file
/// system of its own). In a browser these panic: tests that read files are not
/// run there.
#[cfg(target_arch = "wasm32")]
mod node_fs {
    use wasm_bindgen::prelude::*;

    #[wasm_bindgen(inline_js = "
        const fs = () => globalThis.process.getBuiltinModule('fs');
        export function read_file(path) { return new Uint8Array(fs().readFileSync(path)); }
        export function exists(path) { return fs().existsSync(path); }
        export function list_dir(path) { return fs().readdirSync(path).sort(); }
    ")]
    extern "C" {
        #[wasm_bindgen(catch)]
        pub fn read_file(path: &str) -> Result<Vec<u8>, JsValue>;
        pub fn exists(path: &str) -> bool;
        pub fn list_dir(path: &str) -> Vec<String>;
    }
}

#[cfg(target_arch = "wasm32")]
pub fn read_file(path: &str) -> Vec<u8> {
    node_fs::read_file(path).unwrap_or_else(|e| panic!("cannot read {path}: {e:?}"))
}

#[cfg(target_arch = "wasm32")]
pub fn exists(path: &str) -> bool {
    node_fs::exists(path)
}

#[cfg(target_arch = "wasm32")]
pub fn list_dir(path: &str) -> Vec<String> {
    node_fs::list_dir(path)
}

/// SplitMix64: small, fast, and the same sequence on every target.
pub struct Rng(u64);

impl Rng {
    pub fn new(seed: u64) -> Rng {
        Rng(seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) ^ 0xD1B5_4A32_D192_ED03)
    }

    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// Uniform in `0..n` (n > 0).
    pub fn below(&mut self, n: u64) -> u64 {
        self.next_u64() % n
    }

    pub fn chance(&mut self, percent: u64) -> bool {
        self.below(100) < percent
    }

    pub fn bytes(&mut self, n: usize) -> Vec<u8> {
        (0..n).map(|_| self.next_u64() as u8).collect()
    }

    /// A string of mixed ASCII and multi-byte UTF-8, possibly empty.
    pub fn string(&mut self, max_chars: u64) -> String {
        const CHARS: &[char] = &[
            'a', 'Z', '0', ' ', '.', '\n', '\0', 'é', 'Ġ', '▁', '中', '😀',
        ];
        let n = self.below(max_chars + 1);
        (0..n)
            .map(|_| CHARS[self.below(CHARS.len() as u64) as usize])
            .collect()
    }

    /// A finite float with its bits varied (NaN compares unequal, so none here).
    pub fn f32(&mut self) -> f32 {
        let v = f32::from_bits(self.next_u64() as u32);
        if v.is_finite() {
            v
        } else {
            self.below(1000) as f32 / 7.0
        }
    }

    pub fn f64(&mut self) -> f64 {
        let v = f64::from_bits(self.next_u64());
        if v.is_finite() {
            v
        } else {
            -(self.below(1000) as f64) / 3.0
        }
    }
}

/// A random scalar or array value of any GGUF type (arrays nest up to `depth`).
pub fn random_value(rng: &mut Rng, depth: u32) -> Value {
    match rng.below(if depth > 0 { 14 } else { 12 }) {
        0 => Value::U8(rng.next_u64() as u8),
        1 => Value::I8(rng.next_u64() as i8),
        2 => Value::U16(rng.next_u64() as u16),
        3 => Value::I16(rng.next_u64() as i16),
        4 => Value::U32(rng.next_u64() as u32),
        5 => Value::I32(rng.next_u64() as i32),
        6 => Value::F32(rng.f32()),
        7 => Value::Bool(rng.chance(50)),
        8 => Value::String(rng.string(40)),
        9 => Value::U64(rng.next_u64()),
        10 => Value::I64(rng.next_u64() as i64),
        11 => Value::F64(rng.f64()),
        _ => Value::Array(random_array(rng, depth - 1)),
    }
}

pub fn random_array(rng: &mut Rng, depth: u32) -> Array {
    let n = rng.below(12) as usize;
    match rng.below(if depth > 0 { 13 } else { 12 }) {
        0 => Array::U8(rng.bytes(n)),
        1 => Array::I8((0..n).map(|_| rng.next_u64() as i8).collect()),
        2 => Array::U16((0..n).map(|_| rng.next_u64() as u16).collect()),
        3 => Array::I16((0..n).map(|_| rng.next_u64() as i16).collect()),
        4 => Array::U32((0..n).map(|_| rng.next_u64() as u32).collect()),
        5 => Array::I32((0..n).map(|_| rng.next_u64() as i32).collect()),
        6 => Array::F32((0..n).map(|_| rng.f32()).collect()),
        7 => Array::Bool((0..n).map(|_| rng.chance(50)).collect()),
        8 => Array::String((0..n).map(|_| rng.string(12)).collect()),
        9 => Array::U64((0..n).map(|_| rng.next_u64()).collect()),
        10 => Array::I64((0..n).map(|_| rng.next_u64() as i64).collect()),
        11 => Array::F64((0..n).map(|_| rng.f64()).collect()),
        _ => Array::Array(
            (0..n.min(4))
                .map(|_| random_array(rng, depth - 1))
                .collect(),
        ),
    }
}

/// What a random model was built from, to compare with what is read back.
pub struct ModelSpec {
    pub version: u32,
    pub alignment: u64,
    pub metadata: Vec<(String, Value)>,
    /// name, type, shape, data
    pub tensors: Vec<(String, GgmlType, Vec<u64>, Vec<u8>)>,
}

impl ModelSpec {
    pub fn write(&self) -> Vec<u8> {
        let mut w = GgufWriter::new();
        w.set_version(self.version).expect("version 2 or 3");
        for (k, v) in &self.metadata {
            w.add_metadata(k.clone(), v.clone())
                .expect("valid metadata");
        }
        for (name, ty, shape, data) in &self.tensors {
            w.add_tensor(name.clone(), *ty, shape, data.as_slice())
                .expect("valid tensor");
        }
        w.to_bytes()
    }
}

/// A random model: every value type, nested arrays, tensors of every ggml type
/// with small random shapes (zero-sized ones included), a random alignment.
pub fn random_model(seed: u64) -> ModelSpec {
    let mut rng = Rng::new(seed);
    let version = 2 + rng.below(2) as u32;
    let mut metadata = Vec::new();
    let alignment = if rng.chance(50) {
        let a = 1u32 << rng.below(8);
        metadata.push(("general.alignment".to_string(), Value::U32(a)));
        a as u64
    } else {
        32
    };
    for i in 0..rng.below(24) {
        let key = format!("test.{i}.{}", rng.string(6));
        metadata.push((key, random_value(&mut rng, 3)));
    }
    let mut tensors = Vec::new();
    for i in 0..rng.below(20) {
        let ty = GgmlType::ALL[rng.below(GgmlType::ALL.len() as u64) as usize];
        let mut n_dims = rng.below(5) as usize;
        if n_dims == 0 && ty.block_size() > 1 {
            n_dims = 1; // a scalar cannot hold a block
        }
        let mut shape: Vec<u64> = (0..n_dims).map(|_| rng.below(4)).collect();
        if let Some(first) = shape.first_mut() {
            *first *= ty.block_size();
        }
        let elements_per_block = ty.block_size();
        let n_elements: u64 = shape.iter().product();
        let n_bytes = n_elements / elements_per_block * ty.block_bytes();
        let data = rng.bytes(n_bytes as usize);
        tensors.push((format!("blk.{i}.{}", rng.string(5)), ty, shape, data));
    }
    ModelSpec {
        version,
        alignment,
        metadata,
        tensors,
    }
}

/// The deterministic inputs behind native-tests/golden/ggml_quantizers.json
/// (its "inputs" field describes them; every operation is exact in f32, so
/// ggml's C harness and this produce the same floats).
pub fn ggml_test_values(seed: u64, n: usize) -> Vec<f32> {
    let mut rng = Rng::new(seed);
    let mut x = Vec::with_capacity(n);
    for _ in 0..n / 32 {
        let kind = rng.below(40);
        let scale = 2f32.powi(rng.below(16) as i32 - 8);
        for _ in 0..32 {
            let mut v = ((rng.next_u64() >> 40) as f32 / 16777216.0 - 0.5) * scale;
            if kind == 0 {
                v = 0.0;
            } else if kind == 1 {
                v = scale;
            } else if kind == 2 {
                v = v.abs() + scale;
            } else if rng.below(64) == 0 {
                v *= 16.0;
            }
            x.push(v);
        }
    }
    x
}

/// Hex sha256 of `bytes`.
pub fn sha256_hex(bytes: &[u8]) -> String {
    use sha2::{Digest, Sha256};
    Sha256::digest(bytes)
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

/// The bytes of f32 values, little-endian.
pub fn f32_bytes(values: &[f32]) -> Vec<u8> {
    values.iter().flat_map(|v| v.to_le_bytes()).collect()
}

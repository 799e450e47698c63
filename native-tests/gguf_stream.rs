//! The chunked loader (what the browser uses): same result as a whole-buffer
//! parse, header available before the data, errors as early as the bytes allow.

mod common;

#[cfg(target_arch = "wasm32")]
use wasm_bindgen_test::wasm_bindgen_test as test;

use common::{random_model, Rng};
use lamina::gguf::{GgufFile, GgufWriter, StreamLoader, Value};
use lamina::tensor::GgmlType;
use lamina::Error;

fn stream(bytes: &[u8], rng: &mut Rng) -> Result<GgufFile, Error> {
    let mut loader = StreamLoader::new(bytes.len() as u64)?;
    let mut pos = 0;
    while pos < bytes.len() {
        let n = (1 + rng.below(64) as usize).min(bytes.len() - pos);
        loader.push(&bytes[pos..pos + n])?;
        pos += n;
    }
    loader.finish()
}

#[test]
fn streamed_models_equal_whole_parses() {
    let mut rng = Rng::new(7);
    for seed in 0..150 {
        let bytes = random_model(seed).write();
        let whole = GgufFile::from_bytes(bytes.clone()).unwrap();
        let streamed = stream(&bytes, &mut rng).unwrap();
        assert_eq!(streamed.metadata(), whole.metadata(), "seed {seed}");
        assert_eq!(streamed.tensors(), whole.tensors(), "seed {seed}");
        assert_eq!(streamed.data_offset(), whole.data_offset(), "seed {seed}");
        assert_eq!(streamed.bytes(), bytes.as_slice(), "seed {seed}");
    }
}

fn model_with_big_tensor() -> Vec<u8> {
    let mut w = GgufWriter::new();
    w.add_metadata("general.architecture", Value::String("llama".into()))
        .unwrap();
    w.add_tensor("big", GgmlType::F32, &[1024, 64], vec![3u8; 4 * 1024 * 64])
        .unwrap();
    w.to_bytes()
}

#[test]
fn header_is_ready_before_the_data() {
    let bytes = model_with_big_tensor();
    let data_offset = GgufFile::from_bytes(bytes.clone()).unwrap().data_offset() as usize;
    let mut loader = StreamLoader::new(bytes.len() as u64).unwrap();
    for chunk in bytes[..data_offset].chunks(5) {
        loader.push(chunk).unwrap();
    }
    assert!(loader.header_ready());
    assert_eq!(loader.tensors().unwrap()[0].name, "big");
    assert_eq!(
        loader
            .metadata()
            .unwrap()
            .get_str("general.architecture")
            .unwrap(),
        "llama"
    );
    loader.push(&bytes[data_offset..]).unwrap();
    assert_eq!(loader.received(), bytes.len() as u64);
    let file = loader.finish().unwrap();
    assert_eq!(
        file.tensor_data_by_name("big").unwrap(),
        &bytes[data_offset..data_offset + 4 * 1024 * 64]
    );
}

#[test]
fn wrong_magic_is_reported_on_the_first_chunk() {
    let mut loader = StreamLoader::new(1 << 20).unwrap();
    loader.push(b"PK").unwrap(); // not enough to judge yet
    let e = loader.push(b"\x03\x04").unwrap_err();
    assert_eq!(e.to_string(), "not a GGUF file: starts with 50 4b 03 04");
}

#[test]
fn bad_header_is_reported_before_the_data_arrives() {
    // The header declares a tensor that lies beyond the declared file length.
    let bytes = model_with_big_tensor();
    let mut loader = StreamLoader::new(bytes.len() as u64 - 1).unwrap();
    let e = loader.push(&bytes[..4096]).unwrap_err();
    assert!(matches!(e, Error::TensorOutOfRange { .. }), "{e}");
}

#[test]
fn lengths_are_enforced() {
    let bytes = model_with_big_tensor();
    let mut loader = StreamLoader::new(100).unwrap();
    assert!(matches!(
        loader.push(&bytes[..101]),
        Err(Error::InvalidArgument(_))
    ));
    assert_eq!(loader.received(), 0, "a rejected chunk is not kept");

    let mut loader = StreamLoader::new(bytes.len() as u64).unwrap();
    loader.push(&bytes[..1000]).unwrap();
    assert!(matches!(loader.finish(), Err(Error::Truncated { .. })));

    let e = StreamLoader::new(u64::MAX)
        .err()
        .expect("cannot reserve 2^64 bytes");
    // Refused with both sizes before any reservation (which in wasm traps).
    assert!(
        e.to_string()
            .contains("a model file of 18446744073709551615 bytes needs")
            && e.to_string().contains("of memory are available"),
        "{e}"
    );

    let loader = StreamLoader::new(0).unwrap();
    let e = loader.finish().unwrap_err();
    assert_eq!(e.to_string(), "not a GGUF file: the input is empty");
}

//! reader(writer(x)) == x for generated models, the writer's layout, and the
//! typed metadata getters.

mod common;

#[cfg(target_arch = "wasm32")]
use wasm_bindgen_test::wasm_bindgen_test as test;

use common::{random_model, ModelSpec};
use lamina::gguf::{Array, GgufFile, GgufWriter, Value};
use lamina::tensor::GgmlType;
use lamina::Error;

fn assert_reads_back(spec: &ModelSpec, seed: u64) {
    let bytes = spec.write();
    let file = GgufFile::from_bytes(bytes.clone())
        .unwrap_or_else(|e| panic!("seed {seed}: written file does not parse: {e}"));
    assert_eq!(file.version(), spec.version, "seed {seed}");
    assert_eq!(file.alignment(), spec.alignment, "seed {seed}");
    let read: Vec<(String, Value)> = file
        .metadata()
        .iter()
        .map(|(k, v)| (k.to_string(), v.clone()))
        .collect();
    assert_eq!(read, spec.metadata, "seed {seed}: metadata");
    assert_eq!(file.tensors().len(), spec.tensors.len(), "seed {seed}");

    // llama.cpp's layout: data section aligned, tensors packed in order, each
    // padded to the alignment, and the file ends after the last padding.
    assert_eq!(file.data_offset() % spec.alignment, 0, "seed {seed}");
    let mut expected_offset = 0u64;
    for (info, (name, ty, shape, data)) in file.tensors().iter().zip(&spec.tensors) {
        assert_eq!(&info.name, name, "seed {seed}");
        assert_eq!(info.ggml_type, *ty, "seed {seed} tensor {name}");
        assert_eq!(&info.shape, shape, "seed {seed} tensor {name}");
        assert_eq!(info.offset, expected_offset, "seed {seed} tensor {name}");
        assert_eq!(
            file.tensor_data(info).unwrap(),
            data.as_slice(),
            "seed {seed} tensor {name}"
        );
        expected_offset += info.n_bytes.div_ceil(spec.alignment) * spec.alignment;
    }
    assert_eq!(
        file.file_len(),
        file.data_offset() + expected_offset,
        "seed {seed}: file length"
    );
}

#[test]
fn random_models_read_back_exactly() {
    for seed in 0..300 {
        assert_reads_back(&random_model(seed), seed);
    }
}

#[test]
fn every_value_type_reads_back() {
    let all = vec![
        ("u8".to_string(), Value::U8(255)),
        ("i8".to_string(), Value::I8(-128)),
        ("u16".to_string(), Value::U16(65535)),
        ("i16".to_string(), Value::I16(-32768)),
        ("u32".to_string(), Value::U32(u32::MAX)),
        ("i32".to_string(), Value::I32(i32::MIN)),
        ("f32".to_string(), Value::F32(-1.5e-7)),
        ("bool".to_string(), Value::Bool(true)),
        (
            "string".to_string(),
            Value::String("Ġhello ▁wörld 😀\0".into()),
        ),
        ("u64".to_string(), Value::U64(u64::MAX)),
        ("i64".to_string(), Value::I64(i64::MIN)),
        ("f64".to_string(), Value::F64(std::f64::consts::PI)),
        ("empty.string".to_string(), Value::String(String::new())),
        ("empty.array".to_string(), Value::Array(Array::F64(vec![]))),
        (
            "nested".to_string(),
            Value::Array(Array::Array(vec![
                Array::String(vec!["a".into(), "".into()]),
                Array::Array(vec![Array::Bool(vec![true, false]), Array::U8(vec![])]),
                Array::I16(vec![-1, 2]),
            ])),
        ),
    ];
    let spec = ModelSpec {
        version: 3,
        alignment: 32,
        metadata: all,
        tensors: vec![(
            "t".into(),
            GgmlType::Q8_0,
            vec![64, 3],
            vec![7u8; 34 * 2 * 3],
        )],
    };
    assert_reads_back(&spec, 0);
}

#[test]
fn typed_getters_name_the_key_and_the_types() {
    let mut w = GgufWriter::new();
    w.add_metadata("llama.block_count", Value::U32(30)).unwrap();
    w.add_metadata("general.name", Value::String("x".into()))
        .unwrap();
    w.add_metadata("tokens", Value::Array(Array::String(vec!["a".into()])))
        .unwrap();
    let file = GgufFile::from_bytes(w.to_bytes()).unwrap();
    let md = file.metadata();
    assert_eq!(md.get_u32("llama.block_count").unwrap(), 30);
    assert_eq!(md.get_str("general.name").unwrap(), "x");
    assert_eq!(md.get_str_array("tokens").unwrap(), ["a".to_string()]);

    let e = md.get_str("llama.block_count").unwrap_err();
    assert!(matches!(e, Error::WrongType { .. }));
    assert_eq!(
        e.to_string(),
        "metadata key 'llama.block_count' has type u32, expected string"
    );
    let e = md.get_u32("tokens").unwrap_err();
    assert_eq!(
        e.to_string(),
        "metadata key 'tokens' has type array of string, expected u32"
    );
    let e = md.get_u32("llama.context_length").unwrap_err();
    assert!(matches!(e, Error::MissingKey { .. }));
    assert_eq!(
        e.to_string(),
        "metadata key 'llama.context_length' is missing"
    );
}

#[test]
fn writer_refuses_what_readers_would_reject() {
    let mut w = GgufWriter::new();
    assert!(w.set_version(1).is_err());
    assert!(w.set_version(4).is_err());
    assert!(w.add_metadata("general.alignment", Value::U32(24)).is_err());
    assert!(w.add_metadata("general.alignment", Value::U64(32)).is_err());
    w.add_metadata("k", Value::U8(1)).unwrap();
    assert!(matches!(
        w.add_metadata("k", Value::U8(2)),
        Err(Error::DuplicateKey { .. })
    ));
    // Q4_0 rows must be whole blocks of 32.
    assert!(matches!(
        w.add_tensor("a", GgmlType::Q4_0, &[31], vec![0u8; 18]),
        Err(Error::BadShape { .. })
    ));
    assert!(w
        .add_tensor("a", GgmlType::F32, &[4], vec![0u8; 15])
        .is_err());
    assert!(matches!(
        w.add_tensor("a", GgmlType::F32, &[1, 1, 1, 1, 1], vec![0u8; 4]),
        Err(Error::TooManyDims { .. })
    ));
    w.add_tensor("a", GgmlType::F32, &[4], vec![0u8; 16])
        .unwrap();
    assert!(matches!(
        w.add_tensor("a", GgmlType::F32, &[4], vec![0u8; 16]),
        Err(Error::DuplicateTensor { .. })
    ));
}

/// The streamed writer (header first, then one tensor at a time) writes the
/// same bytes as the in-memory one, at the default alignment and at the
/// largest (1 MiB of padding per tensor: more than a wasm stack holds), and
/// refuses tensors out of order, of the wrong size, or missing.
#[test]
fn streamed_files_equal_in_memory_ones() {
    use lamina::gguf::GgufLayout;
    for alignment in [None, Some(1u32 << 20)] {
        let tensors: [(&str, GgmlType, Vec<u64>); 2] = [
            ("a", GgmlType::F32, vec![3, 2]),
            ("b", GgmlType::Q8_0, vec![64]),
        ];
        let mut memory = GgufWriter::new();
        let mut layout = GgufLayout::new();
        for (k, v) in [
            ("general.architecture", Value::String("llama".into())),
            ("x", Value::U32(7)),
        ] {
            memory.add_metadata(k, v.clone()).unwrap();
            layout.add_metadata(k, v).unwrap();
        }
        if let Some(a) = alignment {
            memory
                .add_metadata("general.alignment", Value::U32(a))
                .unwrap();
            layout
                .add_metadata("general.alignment", Value::U32(a))
                .unwrap();
        }
        let data: Vec<Vec<u8>> = vec![vec![1u8; 24], vec![2u8; 68]];
        for ((name, ty, shape), bytes) in tensors.iter().zip(&data) {
            memory.add_tensor(*name, *ty, shape, bytes.clone()).unwrap();
            assert_eq!(
                layout.add_tensor(*name, *ty, shape).unwrap(),
                bytes.len() as u64
            );
        }
        let mut stream = layout.clone().stream_to(Vec::new()).unwrap();
        for ((name, _, _), bytes) in tensors.iter().zip(&data) {
            stream.write_tensor(name, bytes).unwrap();
        }
        let streamed = stream.finish().unwrap();
        assert_eq!(streamed, memory.to_bytes(), "alignment {alignment:?}");
        assert!(GgufFile::from_bytes(streamed).is_ok());

        let mut stream = layout.clone().stream_to(Vec::new()).unwrap();
        assert!(stream.write_tensor("b", &data[1]).is_err(), "out of order");
        assert!(stream.write_tensor("a", &data[1]).is_err(), "wrong size");
        stream.write_tensor("a", &data[0]).unwrap();
        assert!(stream.finish().is_err(), "a declared tensor is missing");
    }
}

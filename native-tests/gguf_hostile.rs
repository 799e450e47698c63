//! Hostile input: every malformed file is an `Err` of the right kind, never a
//! panic, an overflow, or an allocation out of proportion to the file.

mod common;

#[cfg(target_arch = "wasm32")]
use wasm_bindgen_test::wasm_bindgen_test as test;

use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;

use common::{random_model, Rng};
use lamina::gguf::{GgufFile, GgufWriter, Value};
use lamina::tensor::GgmlType;
use lamina::Error;

// ---- Allocation accounting: the peak heap use of this thread during a parse.

struct CountingAllocator;

thread_local! {
    static LIVE: Cell<usize> = const { Cell::new(0) };
    static PEAK: Cell<usize> = const { Cell::new(0) };
}

// SAFETY: forwards to the system allocator; only adds bookkeeping in
// const-initialised thread-locals, which never allocate.
unsafe impl GlobalAlloc for CountingAllocator {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        let p = System.alloc(layout);
        if !p.is_null() {
            let _ = LIVE.try_with(|live| {
                live.set(live.get() + layout.size());
                let _ = PEAK.try_with(|peak| peak.set(peak.get().max(live.get())));
            });
        }
        p
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        System.dealloc(ptr, layout);
        let _ = LIVE.try_with(|live| live.set(live.get().saturating_sub(layout.size())));
    }
}

#[global_allocator]
static ALLOCATOR: CountingAllocator = CountingAllocator;

/// Parses `bytes` and returns the result with the peak heap the parse used
/// beyond the input itself.
fn parse_measured(bytes: &[u8]) -> (Result<GgufFile, Error>, usize) {
    let input = bytes.to_vec();
    let base = LIVE.with(|l| l.get());
    PEAK.with(|p| p.set(base));
    let result = GgufFile::from_bytes(input);
    let peak = PEAK.with(|p| p.get()) - base;
    (result, peak)
}

/// The promise to users: parsing never needs more than four times the file
/// plus 1 MiB (the input buffer itself is not counted).
fn assert_bounded(bytes: &[u8], what: &str) -> Result<GgufFile, Error> {
    let (result, peak) = parse_measured(bytes);
    let limit = 4 * bytes.len() + (1 << 20) + 4096;
    assert!(
        peak <= limit,
        "{what}: parsing {} bytes allocated {peak} bytes (limit {limit})",
        bytes.len()
    );
    result
}

fn parse_err(bytes: &[u8], what: &str) -> Error {
    match assert_bounded(bytes, what) {
        Ok(_) => panic!("{what}: a malformed file was accepted"),
        Err(e) => e,
    }
}

// ---- A little builder for hand-made headers.

#[derive(Clone, Default)]
struct Raw(Vec<u8>);

impl Raw {
    fn header(version: u32, n_tensors: u64, n_kv: u64) -> Raw {
        Raw::default()
            .bytes(b"GGUF")
            .u32(version)
            .u64(n_tensors)
            .u64(n_kv)
    }
    fn bytes(mut self, b: &[u8]) -> Raw {
        self.0.extend_from_slice(b);
        self
    }
    fn u32(self, v: u32) -> Raw {
        self.bytes(&v.to_le_bytes())
    }
    fn u64(self, v: u64) -> Raw {
        self.bytes(&v.to_le_bytes())
    }
    fn string(self, s: &str) -> Raw {
        self.u64(s.len() as u64).bytes(s.as_bytes())
    }
    /// A tensor info: name, dims, type id, offset.
    fn tensor(self, name: &str, dims: &[u64], type_id: u32, offset: u64) -> Raw {
        let mut r = self.string(name).u32(dims.len() as u32);
        for &d in dims {
            r = r.u64(d);
        }
        r.u32(type_id).u64(offset)
    }
    fn pad_to(mut self, alignment: usize) -> Raw {
        while self.0.len() % alignment != 0 {
            self.0.push(0);
        }
        self
    }
}

fn sample_model() -> Vec<u8> {
    let mut w = GgufWriter::new();
    w.add_metadata("general.architecture", Value::String("llama".into()))
        .unwrap();
    w.add_metadata(
        "tokenizer.ggml.tokens",
        Value::Array(lamina::gguf::Array::String(vec!["a".into(), "bc".into()])),
    )
    .unwrap();
    w.add_metadata("llama.block_count", Value::U32(2)).unwrap();
    w.add_tensor("a", GgmlType::F32, &[3, 2], vec![1u8; 24])
        .unwrap();
    w.add_tensor("b", GgmlType::Q8_0, &[32], vec![2u8; 34])
        .unwrap();
    w.to_bytes()
}

// ---- The suite.

#[test]
fn truncated_at_every_position() {
    let full = sample_model();
    let file = GgufFile::from_bytes(full.clone()).unwrap();
    let data_offset = file.data_offset() as usize;
    // The last tensor's padding may be missing: the data itself is complete.
    let data_end = file
        .tensors()
        .iter()
        .map(|t| t.offset + t.n_bytes)
        .max()
        .unwrap();
    let data_end = data_offset + data_end as usize;
    assert!(GgufFile::from_bytes(full[..data_end].to_vec()).is_ok());
    let mut header_complete = false;
    for len in 0..data_end {
        let e = parse_err(&full[..len], &format!("prefix of {len} bytes"));
        // Once the header is whole, only the data can be missing.
        header_complete |= matches!(e, Error::TensorOutOfRange { .. });
        match len {
            0..=3 => assert!(matches!(e, Error::NotGguf { .. }), "{len}: {e}"),
            // A truncated header either runs out mid-read or declares more
            // entries than the bytes left can hold.
            l if l < data_offset && !header_complete => assert!(
                matches!(e, Error::Truncated { .. } | Error::CountTooLarge { .. }),
                "{len}: {e}"
            ),
            _ => assert!(matches!(e, Error::TensorOutOfRange { .. }), "{len}: {e}"),
        }
    }
    assert!(header_complete);
}

#[test]
fn wrong_magic_names_what_was_found() {
    let e = parse_err(b"PK\x03\x04rest of a zip file", "zip");
    assert!(matches!(e, Error::NotGguf { .. }));
    assert_eq!(e.to_string(), "not a GGUF file: starts with 50 4b 03 04");
    let e = parse_err(b"GGU", "short");
    assert_eq!(e.to_string(), "not a GGUF file: only 3 bytes (47 47 55)");
    let e = parse_err(b"", "empty");
    assert_eq!(e.to_string(), "not a GGUF file: the input is empty");
    // The magic is checked before anything else, however broken the rest is.
    let e = parse_err(b"ggufffffffffffffffffffffffffff", "lower case");
    assert!(matches!(e, Error::NotGguf { .. }));
}

#[test]
fn bad_versions() {
    for version in [0u32, 1, 4, 0x0300_0000, 0x0200_0000, u32::MAX] {
        let e = parse_err(&Raw::header(version, 0, 0).0, "version");
        assert!(
            matches!(e, Error::UnsupportedVersion { version: v, .. } if v == version),
            "{version}: {e}"
        );
    }
    let e = parse_err(&Raw::header(0x0300_0000, 0, 0).0, "big endian");
    assert!(e.to_string().contains("big-endian"), "{e}");
    // Versions 2 and 3 are read.
    for version in [2, 3] {
        assert_bounded(&Raw::header(version, 0, 0).0, "v2/v3").unwrap();
    }
}

#[test]
fn huge_counts_and_lengths() {
    let cases: Vec<(&str, Raw)> = vec![
        ("tensor count", Raw::header(3, u64::MAX, 0)),
        ("tensor count just too big", Raw::header(3, 1, 0)),
        ("kv count", Raw::header(3, 0, 1 << 40)),
        ("key length", Raw::header(3, 0, 1).u64(u64::MAX)),
        (
            "string value length",
            Raw::header(3, 0, 1).string("k").u32(8).u64(1 << 50),
        ),
        (
            "array length",
            Raw::header(3, 0, 1).string("k").u32(9).u32(0).u64(1 << 40),
        ),
        (
            "array of u64 length",
            Raw::header(3, 0, 1)
                .string("k")
                .u32(9)
                .u32(10)
                .u64(100)
                .bytes(&[0; 80]),
        ),
        (
            "array of strings length",
            Raw::header(3, 0, 1)
                .string("k")
                .u32(9)
                .u32(8)
                .u64(1 << 30)
                .bytes(&[0; 64]),
        ),
        (
            "array of arrays length",
            Raw::header(3, 0, 1)
                .string("k")
                .u32(9)
                .u32(9)
                .u64(u64::MAX / 2),
        ),
        (
            "tensor name length",
            Raw::header(3, 1, 0).u64(u64::MAX - 3).bytes(&[0; 40]),
        ),
    ];
    for (what, raw) in cases {
        let e = parse_err(&raw.0, what);
        assert!(matches!(e, Error::CountTooLarge { .. }), "{what}: {e}");
    }
}

#[test]
fn value_and_element_types_are_checked_before_reading() {
    let e = parse_err(
        &Raw::header(3, 0, 1).string("k").u32(13).bytes(&[0; 16]).0,
        "value type",
    );
    assert!(matches!(e, Error::BadValueType { type_id: 13, .. }), "{e}");
    assert_eq!(e.to_string(), "metadata key 'k': unknown value type 13");
    let e = parse_err(
        &Raw::header(3, 0, 1)
            .string("arr")
            .u32(9)
            .u32(99)
            .u64(1)
            .bytes(&[0; 16])
            .0,
        "element type",
    );
    assert!(matches!(e, Error::BadValueType { type_id: 99, .. }), "{e}");
    // An array whose declared element type disagrees with its contents: a u32
    // array read as strings finds a length far past the end.
    let e = parse_err(
        &Raw::header(3, 0, 1)
            .string("arr")
            .u32(9)
            .u32(8)
            .u64(1)
            .u32(7)
            .u32(0xFFFF_FFFF)
            .0,
        "strings that are not",
    );
    assert!(matches!(e, Error::CountTooLarge { .. }), "{e}");
    let e = parse_err(
        &Raw::header(3, 0, 1).string("b").u32(7).bytes(&[2]).0,
        "bool 2",
    );
    assert!(matches!(e, Error::InvalidValue { .. }), "{e}");
    let e = parse_err(
        &Raw::header(3, 0, 1)
            .string("k\u{0}")
            .u32(8)
            .u64(2)
            .bytes(&[0xC3, 0x28])
            .0,
        "utf8",
    );
    assert!(matches!(e, Error::InvalidUtf8 { .. }), "{e}");
    let e = parse_err(
        &Raw::header(3, 0, 1)
            .u64(2)
            .bytes(&[0xFF, 0xFE])
            .u32(4)
            .u32(1)
            .0,
        "key utf8",
    );
    assert!(matches!(e, Error::InvalidUtf8 { .. }), "{e}");
}

#[test]
fn deeply_nested_arrays() {
    let mut raw = Raw::header(3, 0, 1).string("deep").u32(9);
    for _ in 0..64 {
        raw = raw.u32(9).u64(1);
    }
    raw = raw.u32(0).u64(0);
    let e = parse_err(&raw.0, "nesting");
    assert!(matches!(e, Error::NestingTooDeep { .. }), "{e}");
}

#[test]
fn duplicate_keys_and_tensors() {
    let raw = Raw::header(3, 0, 2)
        .string("k")
        .u32(0)
        .bytes(&[1])
        .string("k")
        .u32(0)
        .bytes(&[2]);
    let e = parse_err(&raw.0, "dup key");
    assert!(matches!(e, Error::DuplicateKey { .. }), "{e}");
    let raw = Raw::header(3, 2, 0)
        .tensor("t", &[8], 0, 0)
        .tensor("t", &[8], 0, 32)
        .pad_to(32)
        .bytes(&[0; 64]);
    let e = parse_err(&raw.0, "dup tensor");
    assert!(matches!(e, Error::DuplicateTensor { .. }), "{e}");
}

#[test]
fn tensor_shapes_and_types() {
    let data = [0u8; 256];
    let one = |dims: &[u64], type_id: u32| {
        Raw::header(3, 1, 0)
            .tensor("w", dims, type_id, 0)
            .pad_to(32)
            .bytes(&data)
    };

    let e = parse_err(&one(&[1, 1, 1, 1, 1], 0).0, "5 dims");
    assert!(matches!(e, Error::TooManyDims { n_dims: 5, .. }), "{e}");
    let e = parse_err(
        &Raw::header(3, 1, 0)
            .string("w")
            .u32(u32::MAX)
            .bytes(&data)
            .0,
        "4G dims",
    );
    assert!(matches!(e, Error::TooManyDims { .. }), "{e}");
    for dims in [
        &[1u64 << 40, 1 << 40][..],
        &[u64::MAX][..],
        &[1 << 63][..],
        &[2, 1 << 62, 4][..],
        &[1 << 31, 1 << 31, 1 << 31, 1 << 31][..],
    ] {
        let e = parse_err(&one(dims, 0).0, "overflow");
        assert!(matches!(e, Error::BadShape { .. }), "{dims:?}: {e}");
    }
    let e = parse_err(&one(&[31], 2).0, "partial block");
    assert!(matches!(e, Error::BadShape { .. }), "{e}");
    for type_id in [4u32, 5, 31, 36, 40, 1000, u32::MAX] {
        let e = parse_err(&one(&[32], type_id).0, "type");
        assert!(
            matches!(e, Error::UnknownTensorType { type_id: t, .. } if t == type_id),
            "{type_id}: {e}"
        );
        assert!(e.to_string().contains("'w'"), "{e}");
    }
}

#[test]
fn tensor_data_ranges() {
    // misaligned
    let raw = Raw::header(3, 1, 0)
        .tensor("w", &[4], 0, 4)
        .pad_to(32)
        .bytes(&[0; 64]);
    let e = parse_err(&raw.0, "misaligned");
    assert!(matches!(e, Error::TensorMisaligned { .. }), "{e}");
    // out of range, and offsets that overflow when added
    for offset in [64u64, 1 << 40, u64::MAX - 31, !31] {
        let raw = Raw::header(3, 1, 0)
            .tensor("w", &[4], 0, offset)
            .pad_to(32)
            .bytes(&[0; 64]);
        let e = parse_err(&raw.0, "out of range");
        assert!(matches!(e, Error::TensorOutOfRange { .. }), "{offset}: {e}");
    }
    // overlapping
    let raw = Raw::header(3, 2, 0)
        .tensor("a", &[16], 0, 0)
        .tensor("b", &[16], 0, 32)
        .pad_to(32)
        .bytes(&[0; 128]);
    let e = parse_err(&raw.0, "overlap");
    assert!(matches!(e, Error::TensorOverlap { .. }), "{e}");
    // the same data shared by two tensors is an overlap too
    let raw = Raw::header(3, 2, 0)
        .tensor("a", &[4], 0, 0)
        .tensor("b", &[4], 0, 0)
        .pad_to(32)
        .bytes(&[0; 32]);
    assert!(matches!(
        parse_err(&raw.0, "alias"),
        Error::TensorOverlap { .. }
    ));
    // and the well-formed neighbour of the overlap case parses
    let raw = Raw::header(3, 2, 0)
        .tensor("a", &[8], 0, 0)
        .tensor("b", &[16], 0, 32)
        .pad_to(32)
        .bytes(&[0; 96]);
    assert_bounded(&raw.0, "packed").unwrap();
}

#[test]
fn bad_alignment() {
    for alignment in [0u32, 3, 24, 1 << 21, 1 << 31] {
        let raw = Raw::header(3, 0, 1)
            .string("general.alignment")
            .u32(4)
            .u32(alignment);
        let e = parse_err(&raw.0, "alignment");
        assert!(matches!(e, Error::BadAlignment { .. }), "{alignment}: {e}");
    }
    let raw = Raw::header(3, 0, 1)
        .string("general.alignment")
        .u32(10)
        .u64(32);
    let e = parse_err(&raw.0, "alignment type");
    assert!(matches!(e, Error::WrongType { .. }), "{e}");
}

/// Random corruptions of valid files: whatever the bytes, a parse returns
/// (Ok or Err) without panicking and within the allocation bound.
#[test]
fn random_mutations_never_panic() {
    let mut rng = Rng::new(42);
    for seed in 0..200 {
        let original = random_model(seed).write();
        for _ in 0..10 {
            let mut bytes = original.clone();
            for _ in 0..1 + rng.below(4) {
                let i = rng.below(bytes.len() as u64) as usize;
                match rng.below(3) {
                    0 => bytes[i] = rng.next_u64() as u8,
                    1 => bytes[i] ^= 0x80,
                    _ => bytes[i] = 0xFF,
                }
            }
            if rng.chance(20) {
                bytes.truncate(rng.below(bytes.len() as u64) as usize);
            }
            let _ = assert_bounded(&bytes, &format!("mutation of seed {seed}"));
        }
    }
}

/// A 100-byte file that claims gigabytes of metadata allocates almost nothing.
#[test]
fn small_file_cannot_claim_gigabytes() {
    let raw = Raw::header(3, 0, 1)
        .string("k")
        .u32(9)
        .u32(0)
        .u64(4 << 30)
        .bytes(&[0; 51]);
    assert_eq!(raw.0.len(), 100);
    let (result, peak) = parse_measured(&raw.0);
    assert!(result.is_err());
    assert!(peak < 4096, "allocated {peak} bytes for a 100-byte file");
    // The accounting itself works: a valid file's metadata is counted.
    let (result, peak) = parse_measured(&sample_model());
    assert!(result.is_ok());
    assert!(peak > 100, "only {peak} bytes counted for a valid parse");
}

//! Fuzzes the GGUF parser: whole-buffer parsing and chunked streaming must agree,
//! and neither may panic, overflow or run out of memory on any input.
#![no_main]

use lamina::gguf::{GgufFile, StreamLoader};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let whole = GgufFile::from_bytes(data.to_vec());

    // Stream the same bytes in chunks whose size comes from the first byte.
    let chunk = 1 + data.first().copied().unwrap_or(0) as usize;
    let streamed = StreamLoader::new(data.len() as u64).and_then(|mut loader| {
        for part in data.chunks(chunk) {
            loader.push(part)?;
        }
        loader.finish()
    });

    match (&whole, &streamed) {
        (Ok(a), Ok(b)) => {
            // Compared through Debug text: a NaN value is unequal to itself.
            let entries = |f: &GgufFile| format!("{:?}", f.metadata().iter().collect::<Vec<_>>());
            assert_eq!(entries(a), entries(b));
            assert_eq!(a.tensors(), b.tensors());
            for t in a.tensors() {
                assert_eq!(a.tensor_data(t).unwrap().len() as u64, t.n_bytes);
            }
            let _ = lamina::gguf::describe::to_text(a);
        }
        (Err(a), Err(b)) => assert_eq!(a.to_string(), b.to_string()),
        (a, b) => panic!("whole and streamed parses disagree: {a:?} vs {b:?}"),
    }
});

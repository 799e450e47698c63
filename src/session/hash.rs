//! The two 64-bit hashes of a session file: its checksum and the model
//! fingerprint. Both are FNV-1a over 64-bit little-endian words (the tail
//! byte by byte): not cryptographic, which a file the user keeps beside
//! their model does not need, and eight times faster than FNV-1a over
//! bytes, which matters for sessions of tens of megabytes in wasm.

use crate::model::Model;

const OFFSET: u64 = 0xcbf2_9ce4_8422_2325;
const PRIME: u64 = 0x0000_0100_0000_01b3;

fn fnv1a_words(mut h: u64, bytes: &[u8]) -> u64 {
    let mut words = bytes.chunks_exact(8);
    for w in &mut words {
        h = (h ^ u64::from_le_bytes(w.try_into().expect("8 bytes"))).wrapping_mul(PRIME);
    }
    for &b in words.remainder() {
        h = (h ^ u64::from(b)).wrapping_mul(PRIME);
    }
    h
}

/// The checksum of a session file's body.
pub fn checksum(bytes: &[u8]) -> u64 {
    fnv1a_words(OFFSET, bytes)
}

/// Bytes of each tensor's data the fingerprint reads: enough to tell two
/// fine-tunes of one shape apart, little enough to take no time.
const SAMPLE: usize = 256;

/// What identifies a model for its sessions: the GGUF header (metadata,
/// vocabulary, tensor names, types and shapes) and the first bytes of every
/// tensor's data. A requantized or fine-tuned model differs.
pub fn fingerprint(model: &Model) -> u64 {
    let file = model.file();
    let header_len = usize::try_from(file.data_offset())
        .unwrap_or(usize::MAX)
        .min(file.bytes().len());
    let mut h = fnv1a_words(OFFSET, &file.bytes()[..header_len]);
    for info in file.tensors() {
        if let Ok(data) = file.tensor_data(info) {
            h = fnv1a_words(h, &data[..data.len().min(SAMPLE)]);
        }
    }
    h
}

#[cfg(test)]
mod tests {
    use super::*;
    #[cfg(target_family = "wasm")]
    use wasm_bindgen_test::wasm_bindgen_test as test;

    #[test]
    fn fnv1a_of_single_bytes_is_the_published_fnv1a() {
        // FNV-1a 64 of "a" (a tail byte): 0xaf63dc4c8601ec8c.
        assert_eq!(checksum(b"a"), 0xaf63_dc4c_8601_ec8c);
        assert_eq!(checksum(b""), OFFSET);
    }

    #[test]
    fn every_byte_counts() {
        let base: Vec<u8> = (0..100u8).collect();
        let h = checksum(&base);
        for i in 0..base.len() {
            let mut b = base.clone();
            b[i] ^= 1;
            assert_ne!(checksum(&b), h, "byte {i}");
        }
        assert_ne!(checksum(&base[..99]), h);
    }
}

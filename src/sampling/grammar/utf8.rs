//! Token text as code points, with a UTF-8 sequence that a token leaves
//! unfinished carried into the next token (byte tokens split characters).
//! Decoding follows llama.cpp's grammar: text ends at a NUL byte, and an
//! invalid sequence ends the decode with `Partial::INVALID`.

/// An unfinished UTF-8 sequence: the bits so far and the bytes it still
/// needs; `remain` −1 marks an invalid sequence.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct Partial {
    pub value: u32,
    pub remain: i32,
}

impl Partial {
    pub const INVALID: Partial = Partial {
        value: 0,
        remain: -1,
    };
}

/// Sequence lengths by the high four bits of the first byte (0: a
/// continuation byte, which cannot start a character).
const LENGTHS: [i32; 16] = [1, 1, 1, 1, 1, 1, 1, 1, 0, 0, 0, 0, 2, 2, 3, 4];

/// The complete code points of `bytes` after the unfinished sequence
/// `start`, and the sequence `bytes` leaves unfinished.
pub fn decode(bytes: &[u8], start: Partial) -> (Vec<u32>, Partial) {
    let end = bytes.iter().position(|&b| b == 0).unwrap_or(bytes.len());
    let bytes = &bytes[..end];
    let mut out = Vec::with_capacity(bytes.len());
    let mut at = 0;
    let (mut value, mut remain) = (start.value, start.remain);
    while at < bytes.len() && remain > 0 {
        let b = bytes[at];
        if b >> 6 != 2 {
            return (out, Partial::INVALID);
        }
        value = (value << 6) + (b & 0x3f) as u32;
        at += 1;
        remain -= 1;
    }
    if start.remain > 0 && remain == 0 {
        out.push(value);
    }
    while at < bytes.len() {
        let first = bytes[at];
        remain = LENGTHS[(first >> 4) as usize] - 1;
        if remain < 0 {
            // As llama.cpp: an invalid start drops the whole token's text.
            out.clear();
            return (out, Partial::INVALID);
        }
        value = (first & ((1u8 << (7 - remain)) - 1)) as u32;
        at += 1;
        while at < bytes.len() && remain > 0 {
            value = (value << 6) + (bytes[at] & 0x3f) as u32;
            at += 1;
            remain -= 1;
        }
        if remain == 0 {
            out.push(value);
        }
    }
    (out, Partial { value, remain })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn characters_split_across_tokens_are_joined() {
        let euro = "€".as_bytes(); // e2 82 ac
        let (cps, rest) = decode(&euro[..1], Partial::default());
        assert!(cps.is_empty());
        assert_eq!(rest.remain, 2);
        let (cps, rest) = decode(&[euro[1], euro[2], b'x'], rest);
        assert_eq!(cps, vec!['€' as u32, 'x' as u32]);
        assert_eq!(rest.remain, 0);
        // A continuation byte where a character starts, or a new start
        // where a continuation is due: invalid.
        assert_eq!(
            decode(&[b'a', 0x82], Partial::default()).1,
            Partial::INVALID
        );
        assert_eq!(
            decode(
                b"a",
                Partial {
                    value: 2,
                    remain: 1
                }
            )
            .1,
            Partial::INVALID
        );
        // Text ends at a NUL byte.
        assert_eq!(decode(b"ab\0c", Partial::default()).0, vec![97, 98]);
    }
}

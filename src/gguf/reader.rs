//! A bounds-checked little-endian cursor over the bytes of a GGUF header, with an
//! allocation budget. Every read checks the bytes that are present; every count
//! is checked against the bytes the whole file can still hold.

use crate::error::{Error, Result};

/// How much memory parsing may allocate, relative to the file: typed arrays keep
/// metadata at about the file's size, so four times the file plus 1 MiB is ample
/// for real files and stops a crafted header from asking for gigabytes.
const BUDGET_FACTOR: u64 = 4;
const BUDGET_SLACK: u64 = 1 << 20;

pub(crate) struct Reader<'a> {
    /// The bytes available now (in streaming, a prefix of the file).
    buf: &'a [u8],
    /// The length of the whole file.
    file_len: u64,
    pos: usize,
    allocated: u64,
}

impl<'a> Reader<'a> {
    pub fn new(buf: &'a [u8], file_len: u64) -> Reader<'a> {
        debug_assert!(buf.len() as u64 <= file_len);
        Reader {
            buf,
            file_len,
            pos: 0,
            allocated: 0,
        }
    }

    pub fn pos(&self) -> u64 {
        self.pos as u64
    }

    /// Bytes of the whole file after the cursor (not only those present now).
    pub fn remaining_in_file(&self) -> u64 {
        self.file_len.saturating_sub(self.pos as u64)
    }

    /// Takes `n` bytes, or reports what was being read and where it ran out.
    pub fn take(&mut self, n: u64, what: impl FnOnce() -> String) -> Result<&'a [u8]> {
        let available = (self.buf.len() - self.pos) as u64;
        if n > available {
            return Err(Error::Truncated {
                what: what(),
                offset: self.pos as u64,
                needed: n,
                available,
            });
        }
        let start = self.pos;
        self.pos += n as usize; // n <= available, which is a usize
        Ok(&self.buf[start..self.pos])
    }

    pub fn array<const N: usize>(&mut self, what: impl FnOnce() -> String) -> Result<[u8; N]> {
        let bytes = self.take(N as u64, what)?;
        let mut out = [0u8; N];
        out.copy_from_slice(bytes);
        Ok(out)
    }

    pub fn u32(&mut self, what: impl FnOnce() -> String) -> Result<u32> {
        Ok(u32::from_le_bytes(self.array(what)?))
    }

    pub fn u64(&mut self, what: impl FnOnce() -> String) -> Result<u64> {
        Ok(u64::from_le_bytes(self.array(what)?))
    }

    /// A count of items that each take at least `min_item_bytes`: rejected when
    /// the rest of the file could not hold that many.
    pub fn count(&mut self, min_item_bytes: u64, what: impl Fn() -> String) -> Result<u64> {
        let count = self.u64(&what)?;
        let remaining = self.remaining_in_file();
        if count > remaining / min_item_bytes.max(1) {
            return Err(Error::CountTooLarge {
                what: what(),
                count,
                remaining,
            });
        }
        Ok(count)
    }

    /// A GGUF string: u64 length, then that many bytes of UTF-8.
    pub fn string(&mut self, what: impl Fn() -> String) -> Result<String> {
        let len = self.count(1, || format!("{} length", what()))?;
        let bytes = self.take(len, &what)?;
        self.charge(len + std::mem::size_of::<String>() as u64)?;
        match std::str::from_utf8(bytes) {
            Ok(s) => Ok(s.to_owned()),
            Err(_) => Err(Error::InvalidUtf8 { what: what() }),
        }
    }

    /// Records `bytes` of heap the parse is about to hold; fails past the budget.
    pub fn charge(&mut self, bytes: u64) -> Result<()> {
        self.allocated = self.allocated.saturating_add(bytes);
        let budget = self
            .file_len
            .saturating_mul(BUDGET_FACTOR)
            .saturating_add(BUDGET_SLACK);
        if self.allocated > budget {
            return Err(Error::TooLarge {
                needed: self.allocated,
                file_len: self.file_len,
            });
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    #[cfg(target_family = "wasm")]
    use wasm_bindgen_test::wasm_bindgen_test as test;

    #[test]
    fn budget_is_four_times_the_file_plus_one_mib() {
        let bytes = [0u8; 1000];
        let mut r = Reader::new(&bytes, 1000);
        r.charge(4000 + (1 << 20)).unwrap();
        let e = r.charge(1).unwrap_err();
        assert!(matches!(e, Error::TooLarge { file_len: 1000, .. }), "{e}");
    }

    #[test]
    fn counts_are_bounded_by_the_whole_file_reads_by_the_bytes_present() {
        // 16 bytes present of a 1000-byte file: a count of 100 eight-byte items
        // fits the file, but reading past the 16 bytes is a truncation.
        let mut bytes = 100u64.to_le_bytes().to_vec();
        bytes.extend_from_slice(&[0; 8]);
        let mut r = Reader::new(&bytes, 1000);
        assert_eq!(r.count(8, || "items".into()).unwrap(), 100);
        assert!(matches!(
            r.take(9, || "item".into()),
            Err(Error::Truncated { .. })
        ));
        let mut r = Reader::new(&bytes, 16);
        assert!(matches!(
            r.count(8, || "items".into()),
            Err(Error::CountTooLarge { .. })
        ));
    }
}

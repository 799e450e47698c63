//! Loading a GGUF file from chunks as they arrive (a browser reading a `File` or
//! a `fetch` body): the magic is checked with the first four bytes, the header
//! is parsed and validated as soon as it is complete, and the bytes are gathered
//! into one buffer sized for the whole file, so the model is held once.

use super::header::{self, Header};
use super::GgufFile;
use crate::error::{Error, Result};

pub struct StreamLoader {
    buf: Vec<u8>,
    total_len: u64,
    header: Option<Header>,
    /// Parse the header again only once this many bytes are present.
    next_attempt: usize,
}

impl StreamLoader {
    /// A loader for a file of `total_len` bytes. The buffer is reserved up front;
    /// a size this machine cannot hold is an error, not an abort.
    pub fn new(total_len: u64) -> Result<StreamLoader> {
        let too_big = || {
            Error::InvalidArgument(format!(
                "cannot hold a {total_len}-byte model in memory on this target"
            ))
        };
        // The named sizes first: a failed reservation in wasm is a trap.
        crate::memory::check_fits(
            &format!("a model file of {total_len} bytes"),
            total_len,
            "the whole file is held in memory",
        )?;
        let len = usize::try_from(total_len).map_err(|_| too_big())?;
        let mut buf = Vec::new();
        buf.try_reserve_exact(len).map_err(|_| too_big())?;
        Ok(StreamLoader {
            buf,
            total_len,
            header: None,
            next_attempt: 4,
        })
    }

    pub fn total_len(&self) -> u64 {
        self.total_len
    }

    pub fn received(&self) -> u64 {
        self.buf.len() as u64
    }

    /// The header, once the bytes received so far contain all of it.
    pub fn header_ready(&self) -> bool {
        self.header.is_some()
    }

    pub fn metadata(&self) -> Option<&super::Metadata> {
        self.header.as_ref().map(|h| &h.metadata)
    }

    pub fn tensors(&self) -> Option<&[super::TensorInfo]> {
        self.header.as_ref().map(|h| h.tensors.as_slice())
    }

    /// Appends a chunk. Errors as soon as the bytes show the file is bad: a wrong
    /// magic after four bytes, a bad header once it is complete, or more bytes
    /// than the declared length (that chunk is not kept).
    pub fn push(&mut self, chunk: &[u8]) -> Result<()> {
        let room = self.total_len - self.buf.len() as u64;
        if chunk.len() as u64 > room {
            return Err(Error::InvalidArgument(format!(
                "received {} bytes past the declared length of {} bytes",
                chunk.len() as u64 - room,
                self.total_len
            )));
        }
        let before = self.buf.len();
        self.buf.extend_from_slice(chunk);
        if before < 4 && self.buf.len() >= 4 {
            header::check_magic(&self.buf)?;
        }
        if self.header.is_none() && self.buf.len() >= self.next_attempt {
            self.try_parse_header()?;
        }
        Ok(())
    }

    fn try_parse_header(&mut self) -> Result<()> {
        match header::parse(&self.buf, self.total_len) {
            Ok(h) => {
                self.header = Some(h);
                Ok(())
            }
            Err(Error::Truncated { offset, needed, .. }) if self.received() < self.total_len => {
                // Wait for what the parse stopped at. Past 64 KiB, also for 1/16
                // more than we have: a big header (a vocabulary) arriving in small
                // chunks is then parsed O(log n) times, not once per chunk.
                let received = self.received();
                let step = if received > 1 << 16 { received / 16 } else { 0 };
                let want = offset.saturating_add(needed).max(received + step);
                self.next_attempt = want.min(self.total_len) as usize;
                Ok(())
            }
            Err(e) => Err(e),
        }
    }

    /// The loaded file, once every declared byte has arrived.
    pub fn finish(self) -> Result<GgufFile> {
        if self.received() < self.total_len {
            return Err(Error::Truncated {
                what: "the streamed file".into(),
                offset: self.received(),
                needed: self.total_len - self.received(),
                available: 0,
            });
        }
        let header = match self.header {
            Some(h) => h,
            None => header::parse(&self.buf, self.total_len)?,
        };
        Ok(GgufFile::from_header_and_bytes(header, self.buf))
    }
}

//! Streaming detokenization: token pieces are bytes, and a UTF-8 character can
//! span several tokens (emoji, CJK in byte-level BPE). The stream hands out
//! only complete characters and holds back an incomplete tail until the next
//! piece completes it.

#[derive(Default, Debug)]
pub struct TextStream {
    pending: Vec<u8>,
}

impl TextStream {
    pub fn new() -> TextStream {
        TextStream::default()
    }

    /// Adds a token's bytes; returns the text that is now complete. Bytes that
    /// can never become valid UTF-8 come out as U+FFFD.
    pub fn push(&mut self, bytes: &[u8]) -> String {
        self.pending.extend_from_slice(bytes);
        let mut out = String::new();
        loop {
            match std::str::from_utf8(&self.pending) {
                Ok(s) => {
                    out.push_str(s);
                    self.pending.clear();
                    return out;
                }
                Err(e) => {
                    let valid = e.valid_up_to();
                    // The first `valid` bytes were just checked.
                    out.push_str(std::str::from_utf8(&self.pending[..valid]).unwrap_or_default());
                    match e.error_len() {
                        // An incomplete character at the end: wait for more.
                        None => {
                            self.pending.drain(..valid);
                            return out;
                        }
                        Some(bad) => {
                            out.push('\u{FFFD}');
                            self.pending.drain(..valid + bad);
                        }
                    }
                }
            }
        }
    }

    /// Whether bytes are being held back.
    pub fn has_pending(&self) -> bool {
        !self.pending.is_empty()
    }

    /// The rest, at the end of generation (an incomplete tail becomes U+FFFD).
    pub fn finish(&mut self) -> String {
        let out = String::from_utf8_lossy(&self.pending).into_owned();
        self.pending.clear();
        out
    }
}

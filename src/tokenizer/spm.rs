//! SentencePiece-style BPE (`tokenizer.ggml.model` = "llama"): characters are
//! merged pair by pair, the pair whose merged text has the highest score first
//! (leftmost on ties); pieces the vocabulary lacks are split back along their
//! merges and, at the bottom, written as byte tokens `<0xXX>`.

use std::cmp::Ordering;
use std::collections::{BinaryHeap, HashMap};

use crate::error::{Error, Result};

#[derive(Clone, Copy)]
struct Symbol {
    start: usize,
    len: usize,
    prev: isize,
    next: isize,
}

struct Bigram {
    left: usize,
    right: usize,
    score: f32,
    size: usize,
}

impl PartialEq for Bigram {
    fn eq(&self, other: &Self) -> bool {
        self.cmp(other) == Ordering::Equal
    }
}
impl Eq for Bigram {}
impl Ord for Bigram {
    /// Highest score first; on equal scores the leftmost pair.
    fn cmp(&self, other: &Self) -> Ordering {
        self.score
            .partial_cmp(&other.score)
            .unwrap_or(Ordering::Equal)
            .then_with(|| other.left.cmp(&self.left))
    }
}
impl PartialOrd for Bigram {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

pub struct Spm<'v> {
    pub token_to_id: &'v HashMap<String, u32>,
    pub scores: &'v [f32],
}

impl Spm<'_> {
    /// Tokenizes `text` (already space-prefixed and with spaces as U+2581).
    pub fn tokenize(&self, text: &str, out: &mut Vec<u32>) -> Result<()> {
        let mut symbols: Vec<Symbol> = Vec::new();
        for (i, (start, c)) in text.char_indices().enumerate() {
            let len = c.len_utf8();
            symbols.push(Symbol {
                start,
                len,
                prev: i as isize - 1,
                next: if start + len == text.len() {
                    -1
                } else {
                    i as isize + 1
                },
            });
        }
        let mut queue = BinaryHeap::new();
        let mut rev_merge: HashMap<String, (usize, usize)> = HashMap::new();
        let try_add = |queue: &mut BinaryHeap<Bigram>,
                       rev: &mut HashMap<String, (usize, usize)>,
                       symbols: &[Symbol],
                       left: isize,
                       right: isize| {
            if left < 0 || right < 0 {
                return;
            }
            let (l, r) = (symbols[left as usize], symbols[right as usize]);
            let merged = &text[l.start..r.start + r.len];
            if let Some(&id) = self.token_to_id.get(merged) {
                queue.push(Bigram {
                    left: left as usize,
                    right: right as usize,
                    score: self.scores.get(id as usize).copied().unwrap_or(0.0),
                    size: merged.len(),
                });
                rev.insert(merged.to_string(), (left as usize, right as usize));
            }
        };
        for i in 1..symbols.len() {
            try_add(
                &mut queue,
                &mut rev_merge,
                &symbols,
                i as isize - 1,
                i as isize,
            );
        }
        while let Some(b) = queue.pop() {
            let (l, r) = (symbols[b.left], symbols[b.right]);
            if l.len == 0 || r.len == 0 || l.len + r.len != b.size {
                continue;
            }
            symbols[b.left].len += r.len;
            symbols[b.right].len = 0;
            symbols[b.left].next = r.next;
            if r.next >= 0 {
                symbols[r.next as usize].prev = b.left as isize;
            }
            let (prev, next) = (symbols[b.left].prev, symbols[b.left].next);
            try_add(&mut queue, &mut rev_merge, &symbols, prev, b.left as isize);
            try_add(&mut queue, &mut rev_merge, &symbols, b.left as isize, next);
        }
        let mut i: isize = if symbols.is_empty() { -1 } else { 0 };
        while i >= 0 {
            self.resegment(text, &symbols, symbols[i as usize], &rev_merge, out)?;
            i = symbols[i as usize].next;
        }
        Ok(())
    }

    fn resegment(
        &self,
        text: &str,
        symbols: &[Symbol],
        s: Symbol,
        rev_merge: &HashMap<String, (usize, usize)>,
        out: &mut Vec<u32>,
    ) -> Result<()> {
        let piece = &text[s.start..s.start + s.len];
        if let Some(&id) = self.token_to_id.get(piece) {
            out.push(id);
            return Ok(());
        }
        match rev_merge.get(piece) {
            Some(&(l, r)) => {
                self.resegment(text, symbols, symbols[l], rev_merge, out)?;
                self.resegment(text, symbols, symbols[r], rev_merge, out)
            }
            None => {
                for b in piece.bytes() {
                    out.push(self.byte_token(b)?);
                }
                Ok(())
            }
        }
    }

    fn byte_token(&self, b: u8) -> Result<u32> {
        let hex = format!("<0x{b:02X}>");
        self.token_to_id
            .get(&hex)
            .or_else(|| {
                std::str::from_utf8(&[b])
                    .ok()
                    .and_then(|s| self.token_to_id.get(s))
            })
            .copied()
            .ok_or_else(|| {
                Error::InvalidArgument(format!("the vocabulary has no token for byte {hex}"))
            })
    }
}

//! BPE as llama.cpp runs it: byte-level (GPT-2 style: bytes are mapped to
//! printable characters) or SentencePiece-style (Gemma 4: spaces as U+2581,
//! raw UTF-8, `<0xXX>` byte tokens); words are merged pair by pair in
//! merge-rank order (lowest rank first, the leftmost pair on ties), as
//! llama.cpp and Hugging Face do.

use std::cmp::{Ordering, Reverse};
use std::collections::{BinaryHeap, HashMap};
use std::sync::OnceLock;

use super::pretokenize::PreTokenizer;
use crate::error::Result;

/// GPT-2's byte-to-character table: printable Latin-1 bytes map to
/// themselves, the other 68 to U+0100 onwards in byte order.
fn byte_chars() -> &'static [char; 256] {
    static TABLE: OnceLock<[char; 256]> = OnceLock::new();
    TABLE.get_or_init(|| {
        let mut table = ['\0'; 256];
        let mut next = 256u32;
        for b in 0..256u32 {
            let printable =
                (33..=126).contains(&b) || (161..=172).contains(&b) || (174..=255).contains(&b);
            table[b as usize] = if printable {
                char::from_u32(b).unwrap_or('\0')
            } else {
                let c = char::from_u32(next).unwrap_or('\0');
                next += 1;
                c
            };
        }
        table
    })
}

fn char_bytes() -> &'static HashMap<char, u8> {
    static MAP: OnceLock<HashMap<char, u8>> = OnceLock::new();
    MAP.get_or_init(|| {
        byte_chars()
            .iter()
            .enumerate()
            .map(|(b, &c)| (c, b as u8))
            .collect()
    })
}

/// The bytes a byte-level token text stands for (characters outside the table
/// are kept as their UTF-8).
pub fn decode_bytes(text: &str) -> Vec<u8> {
    let map = char_bytes();
    let mut out = Vec::with_capacity(text.len());
    for c in text.chars() {
        match map.get(&c) {
            Some(&b) => out.push(b),
            None => {
                let mut buf = [0u8; 4];
                out.extend_from_slice(c.encode_utf8(&mut buf).as_bytes());
            }
        }
    }
    out
}

pub struct Bpe {
    /// "left right" -> rank.
    ranks: HashMap<String, u32>,
    pre: PreTokenizer,
}

/// A candidate merge in the queue: lowest rank first, then leftmost.
#[derive(PartialEq, Eq)]
struct Candidate {
    rank: u32,
    left: usize,
    right: usize,
    text: String,
}

impl Ord for Candidate {
    fn cmp(&self, other: &Self) -> Ordering {
        (self.rank, self.left).cmp(&(other.rank, other.left))
    }
}

impl PartialOrd for Candidate {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

impl Bpe {
    /// Whether token texts are SentencePiece-style (U+2581 for spaces, raw
    /// UTF-8) rather than GPT-2 byte characters.
    pub fn spm_style(&self) -> bool {
        self.pre.spm_style
    }

    pub fn new(merges: &[String], pre: PreTokenizer) -> Bpe {
        let ranks = merges
            .iter()
            .enumerate()
            .map(|(i, m)| (m.clone(), i as u32))
            .collect();
        Bpe { ranks, pre }
    }

    fn rank(&self, left: &str, right: &str) -> Option<u32> {
        let mut key = String::with_capacity(left.len() + right.len() + 1);
        key.push_str(left);
        key.push(' ');
        key.push_str(right);
        self.ranks.get(&key).copied()
    }

    pub fn tokenize(
        &self,
        text: &str,
        vocab: &HashMap<String, u32>,
        out: &mut Vec<u32>,
    ) -> Result<()> {
        let table = byte_chars();
        let spm_style = self.pre.spm_style;
        let escaped;
        let text = if spm_style {
            escaped = text.replace(' ', "\u{2581}");
            escaped.as_str()
        } else {
            text
        };
        for range in self.pre.split(text)? {
            let word: String = if spm_style {
                text[range].to_string()
            } else {
                text.as_bytes()[range]
                    .iter()
                    .map(|&b| table[b as usize])
                    .collect()
            };
            // llama3 takes whole words in the vocabulary as they are; Gemma 4
            // its runs of newlines.
            let whole = self.pre.ignore_merges || (spm_style && word.bytes().all(|b| b == b'\n'));
            if whole {
                if let Some(&id) = vocab.get(&word) {
                    out.push(id);
                    continue;
                }
            }
            for piece in self.merge(&word) {
                match vocab.get(piece.as_str()) {
                    Some(&id) => out.push(id),
                    // Unknown merge result: fall back to single-byte tokens.
                    None if spm_style => {
                        for b in piece.bytes() {
                            if let Some(&id) = vocab.get(&format!("<0x{b:02X}>")) {
                                out.push(id);
                            }
                        }
                    }
                    None => {
                        for b in piece.bytes() {
                            if let Some(&id) = vocab.get(std::str::from_utf8(&[b]).unwrap_or("")) {
                                out.push(id);
                            }
                        }
                    }
                }
            }
        }
        Ok(())
    }

    /// Merges one word's characters by rank; returns the final symbols in order.
    fn merge(&self, word: &str) -> Vec<String> {
        let mut symbols: Vec<String> = word.chars().map(String::from).collect();
        let n = symbols.len();
        if n < 2 {
            return symbols;
        }
        let mut prev: Vec<isize> = (0..n as isize).map(|i| i - 1).collect();
        let mut next: Vec<isize> = (0..n as isize)
            .map(|i| if i + 1 < n as isize { i + 1 } else { -1 })
            .collect();
        let mut queue = BinaryHeap::new();
        let push =
            |queue: &mut BinaryHeap<Reverse<Candidate>>, symbols: &[String], l: isize, r: isize| {
                if l < 0 || r < 0 {
                    return;
                }
                let (l, r) = (l as usize, r as usize);
                if let Some(rank) = self.rank(&symbols[l], &symbols[r]) {
                    queue.push(Reverse(Candidate {
                        rank,
                        left: l,
                        right: r,
                        text: format!("{}{}", symbols[l], symbols[r]),
                    }));
                }
            };
        for i in 1..n {
            push(&mut queue, &symbols, i as isize - 1, i as isize);
        }
        while let Some(Reverse(c)) = queue.pop() {
            let (l, r) = (c.left, c.right);
            if symbols[l].is_empty() || symbols[r].is_empty() || next[l] != r as isize {
                continue;
            }
            let current = symbols[l].len() + symbols[r].len() == c.text.len()
                && c.text.starts_with(symbols[l].as_str())
                && c.text.ends_with(symbols[r].as_str());
            if !current {
                continue; // stale: one side changed since this pair was queued
            }
            let right = std::mem::take(&mut symbols[r]);
            symbols[l].push_str(&right);
            next[l] = next[r];
            if next[r] >= 0 {
                prev[next[r] as usize] = l as isize;
            }
            push(&mut queue, &symbols, prev[l], l as isize);
            push(&mut queue, &symbols, l as isize, next[l]);
        }
        symbols.into_iter().filter(|s| !s.is_empty()).collect()
    }
}

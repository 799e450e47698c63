//! WordPiece (`tokenizer.ggml.model` = "bert"), as llama.cpp runs it: base letters,
//! lower case, control characters dropped, punctuation, ASCII symbols and CJK
//! characters split off as words of their own; then each word, with a leading
//! U+2581 (how GGUF marks word starts), is cut greedily into the longest
//! vocabulary pieces, or becomes the unknown token when it cannot be.

use std::collections::HashMap;
use std::sync::OnceLock;

use aho_corasick::{AhoCorasick, Anchored, Input, MatchKind, StartKind};
use regex::Regex;
use unicode_normalization::UnicodeNormalization;

use crate::error::{Error, Result};

fn category(re: &'static OnceLock<Regex>, pattern: &str, c: char) -> bool {
    let re = re.get_or_init(|| Regex::new(pattern).expect("valid category pattern"));
    let mut buf = [0u8; 4];
    re.is_match(c.encode_utf8(&mut buf))
}

fn is_punctuation(c: char) -> bool {
    static RE: OnceLock<Regex> = OnceLock::new();
    category(&RE, r"^\p{P}$", c)
}

fn is_symbol(c: char) -> bool {
    static RE: OnceLock<Regex> = OnceLock::new();
    category(&RE, r"^\p{S}$", c)
}

/// Any "Other" category (Cc, Cf, Cs, Co, Cn), as llama.cpp's control flag.
fn is_control(c: char) -> bool {
    static RE: OnceLock<Regex> = OnceLock::new();
    category(&RE, r"^\p{C}$", c)
}

fn is_chinese(c: char) -> bool {
    let c = c as u32;
    (0x4E00..=0x9FFF).contains(&c)
        || (0x3400..=0x4DBF).contains(&c)
        || (0x20000..=0x2A6DF).contains(&c)
        || (0x2A700..=0x2B73F).contains(&c)
        || (0x2B740..=0x2B81F).contains(&c)
        || (0x2B920..=0x2CEAF).contains(&c)
        || (0xF900..=0xFAFF).contains(&c)
        || (0x2F800..=0x2FA1F).contains(&c)
}

/// Lower case as a single character (llama.cpp's table is 1:1).
fn lower(c: char) -> char {
    let mut l = c.to_lowercase();
    match (l.next(), l.next()) {
        (Some(a), None) => a,
        _ => c,
    }
}

/// The words of `text` after normalisation.
fn words(text: &str) -> Vec<String> {
    let mut words = vec![String::new()];
    // llama.cpp's "NFD" maps a composed character to the first character of its
    // decomposition only (so accents on composed letters drop out, as BERT's
    // accent stripping does); marks already written separately stay.
    for c in text
        .chars()
        .map(|c| std::iter::once(c).nfd().next().unwrap_or(c))
    {
        if c.is_whitespace() {
            if !words.last().is_some_and(|w| w.is_empty()) {
                words.push(String::new());
            }
            continue;
        }
        if c == '\0' || c == '\u{FFFD}' || is_control(c) {
            continue;
        }
        let l = lower(c);
        if is_punctuation(c) || (c < '\u{7F}' && is_symbol(c)) || is_chinese(c) {
            if !words.last().is_some_and(|w| w.is_empty()) {
                words.push(String::new());
            }
            if let Some(w) = words.last_mut() {
                w.push(l);
            }
            words.push(String::new());
        } else if let Some(w) = words.last_mut() {
            w.push(l);
        }
    }
    if words.last().is_some_and(|w| w.is_empty()) {
        words.pop();
    }
    words
}

/// The vocabulary as an automaton for WordPiece's greedy cut: from a
/// position, the longest token that starts there is found by one walk that
/// stops where no token continues, instead of hashing every candidate
/// length up to the longest token (a 1 MiB token in a hostile vocabulary
/// made that hours on one long word).
#[derive(Clone, Debug)]
pub struct WordPieces {
    longest_at: AhoCorasick,
}

impl WordPieces {
    pub fn new(tokens: &[String]) -> Result<WordPieces> {
        // Empty tokens match nowhere (and an empty pattern would match
        // everywhere): they stay out.
        let longest_at = AhoCorasick::builder()
            .match_kind(MatchKind::LeftmostLongest)
            .start_kind(StartKind::Anchored)
            .build(tokens.iter().filter(|t| !t.is_empty()))
            .map_err(|e| Error::InvalidArgument(format!("cannot index the vocabulary: {e}")))?;
        Ok(WordPieces { longest_at })
    }

    /// The longest token starting at byte `at` of `word`: its end.
    fn longest_at(&self, word: &str, at: usize) -> Option<usize> {
        let input = Input::new(word)
            .span(at..word.len())
            .anchored(Anchored::Yes);
        self.longest_at.find(input).map(|m| m.end())
    }

    /// Token ids of `text`: each word (with its U+2581 start mark) cut
    /// greedily into the longest vocabulary pieces, or the unknown token
    /// when a position has none.
    pub fn tokenize(
        &self,
        text: &str,
        token_to_id: &HashMap<String, u32>,
        unk: Option<u32>,
        out: &mut Vec<u32>,
    ) {
        for word in words(text) {
            if word.is_empty() {
                continue;
            }
            let word = format!("\u{2581}{word}");
            let start_len = out.len();
            let mut i = 0;
            while i < word.len() {
                // A match is a whole token, so its text is in the map (the
                // first id of a duplicated token, as the map keeps).
                match self
                    .longest_at(&word, i)
                    .and_then(|end| Some((end, *token_to_id.get(&word[i..end])?)))
                {
                    Some((end, id)) => {
                        out.push(id);
                        i = end;
                    }
                    None => {
                        out.truncate(start_len);
                        break;
                    }
                }
            }
            if out.len() == start_len {
                if let Some(unk) = unk {
                    out.push(unk);
                }
            }
        }
    }
}

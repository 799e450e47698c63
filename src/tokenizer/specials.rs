//! Finding special tokens in text before the rest is tokenized, with
//! llama.cpp's semantics: the specials are tried one after another, longest
//! first, each cutting every occurrence (left to right, not overlapping) out
//! of the text the earlier ones left.
//!
//! Done that way literally, a vocabulary of 40,000 added tokens makes that
//! 40,000 passes over the text. Here one Aho-Corasick pass finds every
//! occurrence of every special, and the occurrences are then taken in the
//! same priority order: one is taken when it starts at or after the end of
//! the same special's previous one and overlaps nothing taken before (a
//! taken interval is what the literal passes would have cut out of the
//! text). The work grows with the text plus the occurrences found.

use std::collections::BTreeMap;

use aho_corasick::{AhoCorasick, MatchKind};

use crate::error::{Error, Result};

/// A piece of text, or a special token found in it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Fragment<'t> {
    Text(&'t str),
    Token(u32),
}

/// The special tokens of a vocabulary, in priority order.
#[derive(Clone, Debug)]
pub struct Specials {
    /// Every occurrence of every pattern; `None` without specials.
    matcher: Option<AhoCorasick>,
    /// The token of each pattern, highest priority first.
    ids: Vec<u32>,
}

impl Specials {
    /// `specials` are (token id, text) in priority order; texts are not
    /// empty.
    pub fn new<'a>(specials: impl Iterator<Item = (u32, &'a str)>) -> Result<Specials> {
        let (ids, texts): (Vec<u32>, Vec<&str>) = specials.unzip();
        let matcher = if texts.is_empty() {
            None
        } else {
            Some(
                AhoCorasick::builder()
                    .match_kind(MatchKind::Standard)
                    .build(&texts)
                    .map_err(|e| {
                        Error::InvalidArgument(format!("cannot index the special tokens: {e}"))
                    })?,
            )
        };
        Ok(Specials { matcher, ids })
    }

    /// `text` split around the specials `allowed` accepts.
    pub fn partition<'t>(&self, text: &'t str, allowed: impl Fn(u32) -> bool) -> Vec<Fragment<'t>> {
        if text.is_empty() {
            return Vec::new();
        }
        let Some(matcher) = &self.matcher else {
            return vec![Fragment::Text(text)];
        };
        // (priority, start, end) of every allowed occurrence.
        let mut found: Vec<(usize, usize, usize)> = matcher
            .find_overlapping_iter(text)
            .map(|m| (m.pattern().as_usize(), m.start(), m.end()))
            .filter(|&(p, _, _)| allowed(self.ids[p]))
            .collect();
        found.sort_unstable();
        // Taken intervals, by start: start -> (end, token).
        let mut taken: BTreeMap<usize, (usize, u32)> = BTreeMap::new();
        let mut current = usize::MAX;
        let mut resume = 0;
        for (p, start, end) in found {
            if p != current {
                current = p;
                resume = 0;
            }
            if start < resume {
                continue;
            }
            // Taken intervals do not overlap one another, so only the last
            // one starting before `end` can reach into [start, end).
            if taken
                .range(..end)
                .next_back()
                .is_some_and(|(_, &(e, _))| e > start)
            {
                continue;
            }
            taken.insert(start, (end, self.ids[p]));
            resume = end;
        }
        let mut fragments = Vec::with_capacity(2 * taken.len() + 1);
        let mut at = 0;
        for (start, (end, id)) in taken {
            if start > at {
                fragments.push(Fragment::Text(&text[at..start]));
            }
            fragments.push(Fragment::Token(id));
            at = end;
        }
        if at < text.len() {
            fragments.push(Fragment::Text(&text[at..]));
        }
        fragments
    }
}

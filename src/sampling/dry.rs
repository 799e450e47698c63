//! DRY ("don't repeat yourself"), as llama.cpp's sampler: a token that
//! would extend a sequence already seen in the recent history is penalised
//! by `multiplier * base^(length - allowed_length)`, where `length` is the
//! longest such repeat. Sequence breakers (by default newline, `:`, `"` and
//! `*`) bound how far back a repeat can reach, so that a template's
//! recurring structure ("Name: ...\nName: ...") is not punished.

use std::collections::{HashMap, VecDeque};

use super::Candidates;
use crate::tokenizer::Vocab;

/// A breaker string longer than this is cut, as llama.cpp cuts it.
const MAX_BREAKER_BYTES: usize = 40;
/// Tokens kept of a breaker's tail after the token it starts in.
const MAX_TAIL_TOKENS: usize = 20;

/// Sequence breakers as token sequences: for each token a breaker can
/// start in, the tokens that must follow it (none when the token holds a
/// whole breaker).
#[derive(Clone, Default)]
pub struct DryBreakers {
    tails: HashMap<u32, Vec<Vec<u32>>>,
}

impl DryBreakers {
    /// Breakers given as token sequences, each its first token then the rest.
    pub fn from_token_sequences(sequences: &[Vec<u32>]) -> DryBreakers {
        let mut b = DryBreakers::default();
        for seq in sequences.iter().filter(|s| !s.is_empty()) {
            b.tails.entry(seq[0]).or_default().push(seq[1..].to_vec());
        }
        b
    }

    /// Breaker strings over a vocabulary: every token whose text holds a
    /// breaker breaks alone; every token whose text ends in the start of a
    /// breaker breaks when the rest of it (tokenized) follows.
    pub fn from_strings(vocab: &Vocab, breakers: &[String]) -> DryBreakers {
        let mut b = DryBreakers::default();
        let breakers: Vec<&String> = breakers.iter().filter(|s| !s.is_empty()).collect();
        if breakers.is_empty() {
            return b;
        }
        let words: Vec<Vec<u8>> = (0..vocab.len() as u32)
            .map(|id| vocab.detokenize(&[id], true))
            .collect();
        for breaker in breakers {
            let s = &breaker.as_bytes()[..breaker.len().min(MAX_BREAKER_BYTES)];
            for (id, word) in words.iter().enumerate() {
                let id = id as u32;
                if word.windows(s.len()).any(|w| w == s) {
                    b.tails.entry(id).or_default().push(Vec::new());
                    continue;
                }
                for pos in (0..word.len()).filter(|&p| word[p] == s[0]) {
                    // The word's end from `pos` must be the breaker's start.
                    let overlap = (word.len() - pos).min(s.len());
                    if word[pos..pos + overlap] != s[..overlap] {
                        continue;
                    }
                    let rest = String::from_utf8_lossy(&s[overlap..]);
                    let Ok(mut tail) = vocab.tokenize(&rest, false, false) else {
                        continue;
                    };
                    tail.truncate(MAX_TAIL_TOKENS);
                    let tails = b.tails.entry(id).or_default();
                    if !tails.contains(&tail) {
                        tails.push(tail);
                    }
                }
            }
        }
        b
    }

    /// Whether `token` is a whole breaker by itself.
    fn breaks_alone(&self, token: u32) -> bool {
        self.tails
            .get(&token)
            .is_some_and(|t| t.iter().any(Vec::is_empty))
    }
}

/// DRY's settings and the history it looks at.
pub(super) struct Dry {
    multiplier: f32,
    base: f32,
    allowed_length: usize,
    last_n: usize,
    pub breakers: DryBreakers,
    history: VecDeque<u32>,
}

impl Dry {
    /// `None` when the settings turn DRY off (no multiplier, a base below 1
    /// or no history to look at).
    pub fn new(multiplier: f32, base: f32, allowed_length: usize, last_n: usize) -> Option<Dry> {
        (multiplier != 0.0 && base >= 1.0 && last_n > 0).then(|| Dry {
            multiplier,
            base,
            allowed_length,
            last_n,
            breakers: DryBreakers::default(),
            history: VecDeque::with_capacity(last_n),
        })
    }

    pub fn accept(&mut self, token: u32) {
        if self.history.len() == self.last_n {
            self.history.pop_front();
        }
        self.history.push_back(token);
    }

    /// The `i`-th token back from the newest (0: the newest).
    fn back(&self, i: usize) -> u32 {
        self.history[self.history.len() - 1 - i]
    }

    /// How many tokens back a repeat may reach: up to the newest breaker.
    fn repeat_limit(&self, n: usize) -> usize {
        for i in 0..n {
            let Some(tails) = self.breakers.tails.get(&self.back(i)) else {
                continue;
            };
            // The breaker ending nearest the end of the history; its tail
            // follows its head, so it ends `len` tokens after it.
            let longest = tails
                .iter()
                .filter(|tail| {
                    tail.len() <= i
                        && tail
                            .iter()
                            .enumerate()
                            .all(|(k, &t)| t == self.back(i - k - 1))
                })
                .map(Vec::len)
                .max();
            if let Some(len) = longest {
                return i - len;
            }
        }
        n
    }

    pub fn apply(&self, c: &mut Candidates) {
        let n = self.history.len().min(self.last_n);
        if n <= self.allowed_length {
            return;
        }
        let limit = self.repeat_limit(n);
        if limit < self.allowed_length {
            return;
        }
        // repeat[last - k]: how many of the newest tokens also end `k`
        // tokens earlier (the Z-algorithm run backwards), capped at `limit`.
        let last = n - 1;
        let mut repeat = vec![0usize; n];
        let (mut lt, mut rt) = (0usize, 0usize);
        for k in 1..n {
            if k > rt {
                let mut len = 0;
                while len + k < n && self.back(len) == self.back(len + k) {
                    len += 1;
                }
                repeat[last - k] = len.min(limit);
                if len > 0 {
                    lt = k;
                    rt = k + len - 1;
                }
            } else {
                let pair = k - lt;
                let right_part = rt - k + 1;
                if repeat[last - pair] < right_part {
                    repeat[last - k] = repeat[last - pair].min(limit);
                } else {
                    let mut i = rt + 1;
                    while i < n && self.back(i) == self.back(i - k) {
                        i += 1;
                    }
                    repeat[last - k] = (i - k).min(limit);
                    lt = k;
                    rt = i - 1;
                }
            }
        }
        // The token after each repeat would extend it: keep the longest
        // repeat each token would extend.
        let mut longest: HashMap<u32, usize> = HashMap::new();
        for (i, &len) in repeat.iter().enumerate().take(n - 1) {
            if len >= self.allowed_length {
                let next = self.back(n - 2 - i);
                let e = longest.entry(next).or_insert(len);
                *e = (*e).max(len);
            }
        }
        if longest.is_empty() {
            return;
        }
        // The exponent is capped so the penalty stays a finite f32.
        const F32_MAX_LN: f32 = 88.722_84;
        let max_exponent = if self.base > 1.000_001 {
            (F32_MAX_LN / self.base.ln()) as usize
        } else {
            0
        };
        for cand in &mut c.data {
            let Some(&len) = longest.get(&cand.id) else {
                continue;
            };
            if self.breakers.breaks_alone(cand.id) {
                continue;
            }
            let mut exponent = len - self.allowed_length;
            if max_exponent > 0 {
                exponent = exponent.min(max_exponent);
            }
            // In double, as the reference's std::pow, then rounded to f32.
            let penalty =
                (self.multiplier as f64 * (self.base as f64).powf(exponent as f64)) as f32;
            cand.logit -= penalty;
        }
        c.sorted = false;
    }
}

//! Grammar-constrained sampling with llama.cpp's GBNF grammars: parsing
//! (`parse`), the pushdown automaton (`stacks`), token text as code points
//! (`utf8`), and here the state one generation carries — which tokens the
//! grammar allows next, accepting a token, and lazy grammars that wait for a
//! trigger word or token before they constrain anything.

mod parse;
mod stacks;
mod utf8;

use std::sync::Arc;

use crate::error::{Error, Result};
use crate::tokenizer::Vocab;

use parse::Elem;
use stacks::{Automaton, Pos, Stack, StackSet, TooAmbiguous};
use utf8::Partial;

/// A parsed grammar, ready to start generations from its root rule.
#[derive(Clone)]
pub struct Grammar {
    automaton: Arc<Automaton>,
    /// The stacks before any text, found (and bounded) at parse.
    initial: Vec<Stack>,
}

impl Grammar {
    /// Parses GBNF text whose start rule is `root` (llama.cpp's is "root").
    /// `vocab` resolves `<token>` terminals; without it only `<[id]>` ones
    /// parse.
    pub fn parse(src: &str, root: &str, vocab: Option<&Vocab>) -> Result<Grammar> {
        let token = |text: &str| -> Option<u32> {
            let ids = vocab?.tokenize(text, false, true).ok()?;
            (ids.len() == 1).then(|| ids[0])
        };
        let rules = parse::parse(src, &token)?;
        let Some(root_id) = rules.id(root) else {
            return Err(Error::InvalidArgument(format!(
                "the grammar has no '{root}' rule to start from"
            )));
        };
        if let Some(r) = stacks::left_recursive(&rules) {
            return Err(Error::InvalidArgument(format!(
                "the grammar's rule '{}' is left-recursive (it can reach itself before matching anything), which grammars cannot run",
                rules.names[r as usize]
            )));
        }
        if let Some(n_vocab) = vocab.map(|v| v.len() as u32) {
            let out_of_range = rules.rules.iter().flatten().find_map(|e| match e {
                Elem::Token(t) | Elem::TokenNot(t) if *t >= n_vocab => Some(*t),
                _ => None,
            });
            if let Some(t) = out_of_range {
                return Err(Error::InvalidArgument(format!(
                    "the grammar names token {t}, outside the vocabulary of {n_vocab}"
                )));
            }
        }
        let automaton = Automaton { rules };
        let initial = automaton.initial(root_id).map_err(ambiguous)?;
        Ok(Grammar {
            automaton: Arc::new(automaton),
            initial,
        })
    }

    /// Whether the whole of `text` matches, code point by code point (as
    /// llama.cpp's grammar tests match strings); an error when the grammar
    /// is too ambiguous to follow the text.
    pub fn matches(&self, text: &str) -> Result<bool> {
        let a = &self.automaton;
        let mut stacks = self.initial.clone();
        for c in text.chars() {
            let mut next = StackSet::default();
            for s in &stacks {
                a.accept_char(s, c as u32, &mut next).map_err(ambiguous)?;
            }
            if next.is_empty() {
                return Ok(false);
            }
            stacks = next.into_vec();
        }
        Ok(stacks.iter().any(|s| s.is_empty()))
    }
}

fn ambiguous(e: TooAmbiguous) -> Error {
    Error::InvalidArgument(e.to_string())
}

/// Each token's text (llama.cpp's piece with special tokens written out)
/// decoded once per vocabulary, and which tokens end generation.
pub struct TokenTable {
    pieces: Vec<Vec<u8>>,
    decoded: Vec<(Vec<u32>, Partial)>,
    eog: Vec<bool>,
}

impl TokenTable {
    pub fn new(vocab: &Vocab) -> TokenTable {
        let n = vocab.len() as u32;
        let pieces: Vec<Vec<u8>> = (0..n).map(|id| vocab.token_bytes(id, true)).collect();
        let decoded = pieces
            .iter()
            .map(|p| utf8::decode(p, Partial::default()))
            .collect();
        TokenTable {
            pieces,
            decoded,
            eog: (0..n).map(|id| vocab.is_eog(id)).collect(),
        }
    }

    pub fn len(&self) -> usize {
        self.pieces.len()
    }

    pub fn is_empty(&self) -> bool {
        self.pieces.is_empty()
    }
}

/// What turns a lazy grammar on: a token, or a regular expression found in
/// the text generated so far (`^...$` makes it match the whole text). The
/// grammar then starts from the first non-empty capture group, else from
/// the match.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Triggers {
    pub tokens: Vec<u32>,
    pub patterns: Vec<String>,
}

struct Lazy {
    tokens: Vec<u32>,
    patterns: Vec<regex::Regex>,
    /// The text generated while waiting, and each token's span in it.
    text: Vec<u8>,
    spans: Vec<(u32, usize, usize)>,
}

/// One candidate during rejection: the token's code points from `from`.
#[derive(Clone, Copy)]
struct Cand<'a> {
    index: usize,
    id: u32,
    cps: &'a [u32],
    from: usize,
    partial: Partial,
}

/// A grammar's state in one generation.
pub struct GrammarState {
    automaton: Arc<Automaton>,
    table: Arc<TokenTable>,
    stacks: Vec<Stack>,
    partial: Partial,
    /// Waiting for a trigger (lazy grammars), with what came so far.
    waiting: Option<Lazy>,
}

impl GrammarState {
    /// A generation's state at the grammar's start; `lazy` waits for one
    /// of the triggers before constraining.
    pub fn new(grammar: &Grammar, table: Arc<TokenTable>, lazy: Option<&Triggers>) -> Result<Self> {
        let waiting = match lazy {
            None => None,
            Some(t) => {
                let mut patterns = Vec::new();
                for p in &t.patterns {
                    let re = regex::Regex::new(p).map_err(|e| {
                        Error::InvalidArgument(format!("grammar trigger pattern {p:?}: {e}"))
                    })?;
                    patterns.push(re);
                }
                if let Some(&bad) = t.tokens.iter().find(|&&id| id as usize >= table.len()) {
                    return Err(Error::InvalidArgument(format!(
                        "grammar trigger token {bad} is outside the vocabulary of {}",
                        table.len()
                    )));
                }
                Some(Lazy {
                    tokens: t.tokens.clone(),
                    patterns,
                    text: Vec::new(),
                    spans: Vec::new(),
                })
            }
        };
        Ok(GrammarState {
            stacks: grammar.initial.clone(),
            automaton: grammar.automaton.clone(),
            table,
            partial: Partial::default(),
            waiting,
        })
    }

    /// Whether the grammar constrains the next token (a lazy one only once
    /// triggered).
    pub fn is_active(&self) -> bool {
        self.waiting.is_none()
    }

    /// Whether the text so far is a complete match (ending generation is
    /// allowed).
    pub fn is_complete(&self) -> bool {
        self.stacks.iter().any(|s| s.is_empty())
    }

    /// Whether token `id` may come next.
    pub fn allows(&self, id: u32) -> bool {
        let mut keep = [true];
        self.filter(&[id], &mut keep);
        keep[0]
    }

    /// Clears `keep[i]` for each `ids[i]` the grammar does not allow next
    /// (nothing while a lazy grammar waits).
    pub fn filter(&self, ids: &[u32], keep: &mut [bool]) {
        if !self.is_active() {
            return;
        }
        let t = &self.table;
        let complete = self.is_complete();
        let mut fresh: Vec<(Vec<u32>, Partial)> = Vec::new();
        let mut cands = Vec::with_capacity(ids.len());
        let mut slots = Vec::with_capacity(ids.len());
        for (i, &id) in ids.iter().enumerate() {
            let Some(piece) = t.pieces.get(id as usize) else {
                keep[i] = false;
                continue;
            };
            if t.eog[id as usize] {
                keep[i] &= complete;
            } else if piece.first().is_none_or(|&b| b == 0) {
                keep[i] = false;
            } else if self.partial.remain == 0 {
                slots.push((i, None));
            } else {
                // Within a character a previous token began: decode anew.
                fresh.push(utf8::decode(piece, self.partial));
                slots.push((i, Some(fresh.len() - 1)));
            }
        }
        for &(i, f) in &slots {
            let id = ids[i];
            let (cps, partial) = match f {
                None => &t.decoded[id as usize],
                Some(k) => &fresh[k],
            };
            cands.push(Cand {
                index: i,
                id,
                cps,
                from: 0,
                partial: *partial,
            });
        }
        for c in self.reject(&self.stacks, &cands) {
            keep[c.index] = false;
        }
    }

    /// The candidates none of `stacks` accepts.
    fn reject<'a>(&self, stacks: &[Stack], cands: &[Cand<'a>]) -> Vec<Cand<'a>> {
        let Some((first, rest)) = stacks.split_first() else {
            return cands.to_vec();
        };
        let mut rejected = self.reject_for_stack(first, cands);
        for s in rest {
            if rejected.is_empty() {
                break;
            }
            rejected = self.reject_for_stack(s, &rejected);
        }
        rejected
    }

    fn reject_for_stack<'a>(&self, stack: &Stack, cands: &[Cand<'a>]) -> Vec<Cand<'a>> {
        let a = &self.automaton;
        let done = |c: &Cand| c.from == c.cps.len();
        let Some(&top) = stack.last() else {
            // A complete match takes no more text.
            return cands
                .iter()
                .filter(|c| !done(c) || c.partial.remain != 0)
                .copied()
                .collect();
        };
        match a.elem(top) {
            Elem::Token(t) | Elem::TokenNot(t) => {
                let want = matches!(a.elem(top), Elem::Token(_));
                return cands
                    .iter()
                    .filter(|c| {
                        if done(c) {
                            c.partial.remain != 0
                        } else {
                            (c.id == t) != want
                        }
                    })
                    .copied()
                    .collect();
            }
            _ => {}
        }
        let mut rejected = Vec::new();
        let mut next = Vec::new();
        for c in cands {
            if done(c) {
                if c.partial.remain != 0 && !a.match_partial(top, c.partial) {
                    rejected.push(*c);
                }
            } else if a.match_char(top, c.cps[c.from]).0 {
                next.push(Cand {
                    from: c.from + 1,
                    ..*c
                });
            } else {
                rejected.push(*c);
            }
        }
        if !next.is_empty() {
            match a.after_class(stack) {
                Ok(after) => {
                    for c in self.reject(&after, &next) {
                        rejected.push(Cand {
                            from: c.from - 1,
                            ..c
                        });
                    }
                }
                // Accepting these would fail the same way: refuse them.
                Err(TooAmbiguous) => rejected.extend(next.iter().map(|c| Cand {
                    from: c.from - 1,
                    ..*c
                })),
            }
        }
        rejected
    }

    /// Moves the grammar past a generated token. A lazy grammar still
    /// waiting records it, and starts once a trigger appears.
    pub fn accept(&mut self, id: u32) -> Result<()> {
        let Some(piece) = self.table.pieces.get(id as usize) else {
            return Err(Error::InvalidArgument(format!(
                "token {id} is outside the grammar's vocabulary"
            )));
        };
        let piece = piece.clone();
        if let Some(lazy) = &mut self.waiting {
            if lazy.tokens.contains(&id) {
                self.waiting = None;
                return self.accept_piece(id, &piece);
            }
            let start = lazy.text.len();
            lazy.text.extend_from_slice(&piece);
            lazy.spans.push((id, start, lazy.text.len()));
            let text = String::from_utf8_lossy(&lazy.text).into_owned();
            let Some(at) = lazy.patterns.iter().find_map(|re| trigger_start(re, &text)) else {
                return Ok(());
            };
            // Offsets in the lossy text are the bytes' up to the first
            // invalid or unfinished sequence (usually a character split at
            // the end, after any match); past one they can differ, and are
            // kept within the text.
            let at = at.min(lazy.text.len());
            let lazy = self.waiting.take().expect("waiting");
            for &(tok, s, e) in &lazy.spans {
                if e <= at {
                    continue;
                }
                let from = s.max(at);
                self.accept_piece(tok, &lazy.text[from..e])?;
            }
            return Ok(());
        }
        if self.table.eog[id as usize] {
            return if self.is_complete() {
                Ok(())
            } else {
                Err(Error::InvalidArgument(format!(
                    "token {id} ends generation where the grammar is not complete"
                )))
            };
        }
        self.accept_piece(id, &piece)
    }

    fn accept_piece(&mut self, id: u32, piece: &[u8]) -> Result<()> {
        let a = &self.automaton;
        let (cps, partial) = utf8::decode(piece, self.partial);
        let mut next_stacks = StackSet::default();
        // Stacks at a character class move through the piece's code points
        // together, as `matches` moves them, so each step expands a stack
        // once whichever stack it came from.
        let mut current = Vec::new();
        for stack in &self.stacks {
            let Some(&top) = stack.last() else { continue };
            match a.elem(top) {
                e @ (Elem::Token(t) | Elem::TokenNot(t)) => {
                    if (id == t) == matches!(e, Elem::Token(_)) {
                        let after = Pos {
                            rule: top.rule,
                            at: top.at + 1,
                        };
                        let mut next = stack[..stack.len() - 1].to_vec();
                        if !a.elem(after).ends_alternative() {
                            next.push(after);
                        }
                        a.advance(next, &mut next_stacks).map_err(ambiguous)?;
                    }
                }
                _ => current.push(stack.clone()),
            }
        }
        if !current.is_empty() {
            for &c in &cps {
                let mut moved = StackSet::default();
                for s in &current {
                    a.accept_char(s, c, &mut moved).map_err(ambiguous)?;
                }
                current = moved.into_vec();
                if current.is_empty() {
                    break;
                }
            }
            for s in current {
                next_stacks.insert(s).map_err(ambiguous)?;
            }
        }
        if next_stacks.is_empty() {
            return Err(Error::InvalidArgument(format!(
                "token {id} ({:?}) does not continue the grammar",
                String::from_utf8_lossy(piece)
            )));
        }
        self.stacks = next_stacks.into_vec();
        self.partial = partial;
        Ok(())
    }
}

/// Where a trigger pattern's match starts the constrained text, if it
/// matches `text`.
fn trigger_start(re: &regex::Regex, text: &str) -> Option<usize> {
    let caps = re.captures(text)?;
    let group = caps
        .iter()
        .skip(1)
        .flatten()
        .find(|m| !m.is_empty())
        .map(|m| m.start());
    Some(group.unwrap_or_else(|| caps.get(0).map_or(0, |m| m.start())))
}

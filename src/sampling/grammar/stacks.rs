//! The grammar's pushdown automaton, as llama.cpp runs it: a set of stacks
//! of positions in the rules, each stack's top at a terminal (a character
//! class or a token). Accepting a code point moves every stack whose top
//! matches; a stack that empties has matched the whole root rule.

use std::collections::HashSet;

use super::parse::{Elem, Rules};
use super::utf8::Partial;

/// A position in the rules: element `at` of rule `rule`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Pos {
    pub rule: u32,
    pub at: u32,
}

pub type Stack = Vec<Pos>;

/// The most stacks the automaton follows at once. Each stack is one way the
/// text so far parses; an ambiguous grammar (nested repetitions such as
/// `(x+)+`) has exponentially many, which llama.cpp follows until it hangs.
/// Grammars from JSON schemas and tool formats stay in the tens; each
/// character costs work in proportion to the stacks (the grammar fuzz
/// target found `.++` grammars following a thousand stacks at 30 s for a
/// few hundred characters, before each step expanded a stack only once).
pub const MAX_STACKS: usize = 1_000;

/// The most stacks one step (the start, a character or a token) expands on
/// the way to its terminals, over all the stacks it moves.
pub const MAX_EXPANDED: usize = 4 * MAX_STACKS;

/// Following the grammar would take more than `MAX_STACKS` stacks (or
/// `MAX_EXPANDED` expansions in one step).
#[derive(Debug)]
pub struct TooAmbiguous;

impl std::fmt::Display for TooAmbiguous {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "the grammar is too ambiguous: following it takes more than {MAX_STACKS} parses at once (nested repetitions such as (x+)+ do this; write x+)"
        )
    }
}

/// Distinct stacks in the order found, at most `MAX_STACKS` of them.
#[derive(Default)]
pub struct StackSet {
    list: Vec<Stack>,
    seen: HashSet<Stack>,
    /// Every stack `advance` has expanded into this set: one reached again
    /// (from another stack of the step) has already added all it leads to.
    expanded: HashSet<Stack>,
}

impl StackSet {
    /// Adds `stack` unless it is already here.
    pub fn insert(&mut self, stack: Stack) -> Result<(), TooAmbiguous> {
        if self.seen.contains(&stack) {
            return Ok(());
        }
        if self.list.len() == MAX_STACKS {
            return Err(TooAmbiguous);
        }
        self.seen.insert(stack.clone());
        self.list.push(stack);
        Ok(())
    }

    pub fn is_empty(&self) -> bool {
        self.list.is_empty()
    }

    pub fn into_vec(self) -> Vec<Stack> {
        self.list
    }
}

pub struct Automaton {
    pub rules: Rules,
}

impl Automaton {
    pub fn elem(&self, p: Pos) -> Elem {
        self.rules.rules[p.rule as usize][p.at as usize]
    }

    fn next(p: Pos) -> Pos {
        Pos {
            rule: p.rule,
            at: p.at + 1,
        }
    }

    /// The start of each alternative of `rule`.
    fn alternatives(&self, rule: u32) -> impl Iterator<Item = Pos> + '_ {
        let elems = &self.rules.rules[rule as usize];
        std::iter::once(0)
            .chain(
                elems
                    .iter()
                    .enumerate()
                    .filter(|(_, e)| **e == Elem::Alt)
                    .map(|(i, _)| i + 1),
            )
            .map(move |at| Pos {
                rule,
                at: at as u32,
            })
    }

    /// The stacks of the root's alternatives, each at a terminal.
    pub fn initial(&self, root: u32) -> Result<Vec<Stack>, TooAmbiguous> {
        let mut out = StackSet::default();
        for start in self.alternatives(root) {
            let stack = if self.elem(start).ends_alternative() {
                Vec::new()
            } else {
                vec![start]
            };
            self.advance(stack, &mut out)?;
        }
        Ok(out.into_vec())
    }

    /// Expands rule references at the top of `stack` until every resulting
    /// stack's top is a terminal (or the stack is empty), adding each new
    /// one to `out`.
    pub fn advance(&self, stack: Stack, out: &mut StackSet) -> Result<(), TooAmbiguous> {
        let mut todo = vec![stack];
        while let Some(stack) = todo.pop() {
            if out.expanded.contains(&stack) {
                continue;
            }
            if out.expanded.len() == MAX_EXPANDED {
                return Err(TooAmbiguous);
            }
            out.expanded.insert(stack.clone());
            let Some(&top) = stack.last() else {
                out.insert(stack)?;
                continue;
            };
            match self.elem(top) {
                Elem::Rule(r) => {
                    let after = Self::next(top);
                    for start in self.alternatives(r) {
                        let mut next = stack[..stack.len() - 1].to_vec();
                        if !self.elem(after).ends_alternative() {
                            next.push(after);
                        }
                        if !self.elem(start).ends_alternative() {
                            next.push(start);
                        }
                        todo.push(next);
                    }
                }
                Elem::Char(_)
                | Elem::CharNot(_)
                | Elem::Any
                | Elem::Token(_)
                | Elem::TokenNot(_) => out.insert(stack)?,
                // The parser never leaves a position on these.
                Elem::End | Elem::Alt | Elem::RangeUpper(_) | Elem::CharAlt(_) => {
                    unreachable!("a grammar stack at {top:?}")
                }
            }
        }
        Ok(())
    }

    /// Whether the class starting at `p` matches `c`, and the position
    /// after the class.
    pub fn match_char(&self, p: Pos, c: u32) -> (bool, Pos) {
        let elems = &self.rules.rules[p.rule as usize];
        let mut at = p.at as usize;
        let positive = !matches!(elems[at], Elem::CharNot(_));
        let mut found = false;
        loop {
            match (elems[at], elems[at + 1]) {
                (Elem::Any, _) => {
                    found = true;
                    at += 1;
                }
                (Elem::Char(lo) | Elem::CharNot(lo) | Elem::CharAlt(lo), Elem::RangeUpper(hi)) => {
                    found |= lo <= c && c <= hi;
                    at += 2;
                }
                (Elem::Char(v) | Elem::CharNot(v) | Elem::CharAlt(v), _) => {
                    found |= v == c;
                    at += 1;
                }
                (e, _) => unreachable!("a character class with {e:?}"),
            }
            if !matches!(elems[at], Elem::CharAlt(_)) {
                break;
            }
        }
        (
            found == positive,
            Pos {
                rule: p.rule,
                at: at as u32,
            },
        )
    }

    /// Whether some completion of the unfinished sequence `partial` could
    /// match the class at `p`.
    pub fn match_partial(&self, p: Pos, partial: Partial) -> bool {
        let elems = &self.rules.rules[p.rule as usize];
        let mut at = p.at as usize;
        let positive = !matches!(elems[at], Elem::CharNot(_));
        let (value, remain) = (partial.value, partial.remain);
        // Invalid, or an overlong two-byte form of a 7-bit character.
        if remain < 0 || (remain == 1 && value < 2) {
            return false;
        }
        let shift = 6 * remain as u32;
        let mut low = value << shift;
        let high = low | ((1u32 << shift) - 1);
        if low == 0 {
            // The smallest code point a sequence of this length encodes.
            low = match remain {
                2 => 1 << 11,
                3 => 1 << 16,
                _ => low,
            };
        }
        loop {
            match (elems[at], elems[at + 1]) {
                (Elem::Any, _) => return true,
                (Elem::Char(lo) | Elem::CharNot(lo) | Elem::CharAlt(lo), Elem::RangeUpper(hi)) => {
                    if lo <= high && low <= hi {
                        return positive;
                    }
                    at += 2;
                }
                (Elem::Char(v) | Elem::CharNot(v) | Elem::CharAlt(v), _) => {
                    if low <= v && v <= high {
                        return positive;
                    }
                    at += 1;
                }
                (e, _) => unreachable!("a character class with {e:?}"),
            }
            if !matches!(elems[at], Elem::CharAlt(_)) {
                return !positive;
            }
        }
    }

    /// The stacks after `stack` accepts code point `c` (none if its top
    /// does not match), added to `out`.
    pub fn accept_char(
        &self,
        stack: &Stack,
        c: u32,
        out: &mut StackSet,
    ) -> Result<(), TooAmbiguous> {
        let Some(&top) = stack.last() else {
            return Ok(());
        };
        if matches!(self.elem(top), Elem::Token(_) | Elem::TokenNot(_)) {
            return Ok(());
        }
        let (ok, after) = self.match_char(top, c);
        if !ok {
            return Ok(());
        }
        let mut next = stack[..stack.len() - 1].to_vec();
        if !self.elem(after).ends_alternative() {
            next.push(after);
        }
        self.advance(next, out)
    }

    /// The stack after its top (a class) has matched, expanded.
    pub fn after_class(&self, stack: &Stack) -> Result<Vec<Stack>, TooAmbiguous> {
        let top = *stack.last().expect("a stack at a class");
        let (_, after) = self.match_char(top, 0);
        let mut next = stack[..stack.len() - 1].to_vec();
        if !self.elem(after).ends_alternative() {
            next.push(after);
        }
        let mut out = StackSet::default();
        self.advance(next, &mut out)?;
        Ok(out.into_vec())
    }
}

/// The first rule that can reach itself without consuming input (left
/// recursion, which the automaton cannot run), if any.
pub fn left_recursive(rules: &Rules) -> Option<u32> {
    let n = rules.rules.len();
    let mut visited = vec![false; n];
    let mut in_progress = vec![false; n];
    let mut may_be_empty = vec![false; n];
    fn visit(
        rules: &Rules,
        i: usize,
        visited: &mut [bool],
        in_progress: &mut [bool],
        may_be_empty: &mut [bool],
    ) -> bool {
        if in_progress[i] {
            return true;
        }
        in_progress[i] = true;
        let rule = &rules.rules[i];
        let mut at_start = true;
        for e in rule {
            if e.ends_alternative() {
                if at_start {
                    may_be_empty[i] = true;
                    break;
                }
                at_start = true;
            } else {
                at_start = false;
            }
        }
        let mut leftmost = true;
        for e in rule {
            match e {
                Elem::Rule(r) if leftmost => {
                    let r = *r as usize;
                    if visit(rules, r, visited, in_progress, may_be_empty) {
                        return true;
                    }
                    if !may_be_empty[r] {
                        leftmost = false;
                    }
                }
                e if e.ends_alternative() => leftmost = true,
                _ => leftmost = false,
            }
        }
        in_progress[i] = false;
        visited[i] = true;
        false
    }
    (0..n)
        .find(|&i| {
            !visited[i] && visit(rules, i, &mut visited, &mut in_progress, &mut may_be_empty)
        })
        .map(|i| i as u32)
}

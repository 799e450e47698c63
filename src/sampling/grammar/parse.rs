//! GBNF, llama.cpp's grammar language, parsed into rules of elements.
//!
//! The language and its rewriting follow llama.cpp: names of letters,
//! digits and `-`; string literals, character classes (`[a-z]`, `[^"\\]`),
//! `.`, grouping, `*` `+` `?` `{m}` `{m,}` `{m,n}` (rewritten into helper
//! rules as llama.cpp does), tokens (`<[42]>`, `<|im_end|>`, `!<...>` for any
//! other token), `#` comments. Newlines end a rule's alternatives except
//! inside parentheses. An error names the line and column where parsing
//! stopped.

use std::collections::HashMap;

use crate::error::{Error, Result};

/// One element of a rule, as llama.cpp's grammar elements.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Elem {
    /// The end of a rule.
    End,
    /// The start of another alternative of the rule.
    Alt,
    /// A reference to rule `n`.
    Rule(u32),
    /// A code point (or the first of a character class).
    Char(u32),
    /// The first of a negated class: any code point but these.
    CharNot(u32),
    /// Makes the element before it an inclusive range ending here.
    RangeUpper(u32),
    /// Another code point of the class the element before it started.
    CharAlt(u32),
    /// Any code point.
    Any,
    /// Exactly this token.
    Token(u32),
    /// Any token but this one.
    TokenNot(u32),
}

impl Elem {
    /// The end of an alternative.
    pub(super) fn ends_alternative(self) -> bool {
        matches!(self, Elem::End | Elem::Alt)
    }
}

/// Repetitions above this are refused or left unbounded, as llama.cpp's
/// `MAX_REPETITION_THRESHOLD` (a bound on the rules a repetition writes).
const MAX_REPETITIONS: u64 = 2000;

/// Parsed rules: `rules[id]` ends with `Elem::End`; `names[id]` is the
/// rule's name (helper rules are named `<rule>_<id>`).
#[derive(Clone, Debug)]
pub struct Rules {
    pub rules: Vec<Vec<Elem>>,
    pub names: Vec<String>,
}

impl Rules {
    /// The id of the rule `name` defines. A name that was only referenced
    /// by a definition later replaced has an id but no rule: `None`.
    pub fn id(&self, name: &str) -> Option<u32> {
        let i = self.names.iter().position(|n| n == name)?;
        self.rules
            .get(i)
            .is_some_and(|r| !r.is_empty())
            .then_some(i as u32)
    }
}

/// Parses `src`. `token` turns the text of a `<...>` token (with its angle
/// brackets) into the one token id it stands for, if it is one.
pub fn parse(src: &str, token: &dyn Fn(&str) -> Option<u32>) -> Result<Rules> {
    let mut p = Parser {
        src: src.as_bytes(),
        text: src,
        at: 0,
        ids: HashMap::new(),
        names: Vec::new(),
        rules: Vec::new(),
        token,
    };
    p.grammar().map_err(|e| {
        let (line, column) = line_column(src, e.at);
        Error::InvalidArgument(format!(
            "grammar line {line}, column {column}: {}",
            e.message
        ))
    })?;
    let rules = p.rules;
    // Every referenced rule must be defined.
    for (id, rule) in rules.iter().enumerate() {
        if rule.is_empty() {
            return Err(undefined(&p.names[id]));
        }
        for e in rule {
            if let Elem::Rule(r) = e {
                if rules.get(*r as usize).is_none_or(|r| r.is_empty()) {
                    return Err(undefined(&p.names[*r as usize]));
                }
            }
        }
    }
    Ok(Rules {
        rules,
        names: p.names,
    })
}

fn undefined(name: &str) -> Error {
    Error::InvalidArgument(format!("grammar: rule '{name}' is used but not defined"))
}

/// 1-based line and column (in characters) of byte `at`.
fn line_column(src: &str, at: usize) -> (usize, usize) {
    let mut at = at.min(src.len());
    while !src.is_char_boundary(at) {
        at -= 1;
    }
    let before = &src[..at];
    let line = before.matches('\n').count() + 1;
    let start = before.rfind('\n').map_or(0, |i| i + 1);
    (line, before[start..].chars().count() + 1)
}

struct ParseError {
    at: usize,
    message: String,
}

type Parsed<T> = std::result::Result<T, ParseError>;

struct Parser<'a> {
    src: &'a [u8],
    text: &'a str,
    at: usize,
    ids: HashMap<String, u32>,
    names: Vec<String>,
    rules: Vec<Vec<Elem>>,
    token: &'a dyn Fn(&str) -> Option<u32>,
}

fn is_name_byte(b: u8) -> bool {
    b.is_ascii_alphanumeric() || b == b'-'
}

impl Parser<'_> {
    fn fail<T>(&self, message: impl Into<String>) -> Parsed<T> {
        Err(ParseError {
            at: self.at,
            message: message.into(),
        })
    }

    /// The byte at `at + k`, 0 past the end (the C string's terminator).
    fn peek(&self, k: usize) -> u8 {
        self.src.get(self.at + k).copied().unwrap_or(0)
    }

    fn symbol(&mut self, name: &str) -> u32 {
        if let Some(&id) = self.ids.get(name) {
            return id;
        }
        let id = self.names.len() as u32;
        self.ids.insert(name.to_string(), id);
        self.names.push(name.to_string());
        id
    }

    /// A fresh helper rule named after `base`.
    fn helper(&mut self, base: &str) -> u32 {
        let id = self.names.len() as u32;
        let name = format!("{base}_{id}");
        self.ids.insert(name.clone(), id);
        self.names.push(name);
        id
    }

    fn define(&mut self, id: u32, rule: Vec<Elem>) {
        let id = id as usize;
        if self.rules.len() <= id {
            self.rules.resize(id + 1, Vec::new());
        }
        self.rules[id] = rule;
    }

    /// Skips blanks and `#` comments, and line breaks where `newlines`.
    fn space(&mut self, newlines: bool) {
        loop {
            match self.peek(0) {
                b' ' | b'\t' => self.at += 1,
                b'\r' | b'\n' if newlines => self.at += 1,
                b'#' => {
                    while !matches!(self.peek(0), 0 | b'\r' | b'\n') {
                        self.at += 1;
                    }
                }
                _ => return,
            }
        }
    }

    fn name(&mut self) -> Parsed<String> {
        let start = self.at;
        while is_name_byte(self.peek(0)) {
            self.at += 1;
        }
        if self.at == start {
            return self.fail("expecting a rule name");
        }
        Ok(self.text[start..self.at].to_string())
    }

    fn int(&mut self) -> Parsed<u64> {
        let start = self.at;
        while self.peek(0).is_ascii_digit() {
            self.at += 1;
        }
        if self.at == start {
            return self.fail("expecting an integer");
        }
        match self.text[start..self.at].parse() {
            Ok(n) => Ok(n),
            Err(_) => Err(ParseError {
                at: start,
                message: "the integer is too large".into(),
            }),
        }
    }

    fn hex(&mut self, digits: usize) -> Parsed<u32> {
        let mut value = 0u32;
        for _ in 0..digits {
            let Some(d) = (self.peek(0) as char).to_digit(16) else {
                return self.fail(format!("expecting {digits} hex digits"));
            };
            value = (value << 4) | d;
            self.at += 1;
        }
        Ok(value)
    }

    /// One character of a literal or class: an escape or a UTF-8 character.
    fn char(&mut self) -> Parsed<u32> {
        match self.peek(0) {
            0 => self.fail("unexpected end of input"),
            b'\\' => {
                let escape = self.peek(1);
                self.at += 2;
                match escape {
                    b'x' => self.hex(2),
                    b'u' => self.hex(4),
                    b'U' => self.hex(8),
                    b't' => Ok('\t' as u32),
                    b'r' => Ok('\r' as u32),
                    b'n' => Ok('\n' as u32),
                    b'\\' | b'"' | b'[' | b']' | b'-' => Ok(escape as u32),
                    _ => {
                        self.at -= 2;
                        self.fail("unknown escape")
                    }
                }
            }
            _ => {
                let c = self.text[self.at..].chars().next().expect("not at the end");
                self.at += c.len_utf8();
                Ok(c as u32)
            }
        }
    }

    /// `<[id]>` or `<text>` (one token of the vocabulary).
    fn token(&mut self) -> Parsed<u32> {
        let start = self.at;
        self.at += 1; // '<'
        if self.peek(0) == b'[' {
            self.at += 1;
            let id = self.int()?;
            let Ok(id) = u32::try_from(id) else {
                return self.fail("the token id is too large");
            };
            for close in [b']', b'>'] {
                if self.peek(0) != close {
                    return self.fail(format!("expecting '{}'", close as char));
                }
                self.at += 1;
            }
            return Ok(id);
        }
        while !matches!(self.peek(0), 0 | b'>') {
            self.at += 1;
        }
        if self.peek(0) != b'>' {
            return self.fail("expecting '>'");
        }
        self.at += 1;
        let text = &self.text[start..self.at];
        match (self.token)(text) {
            Some(id) => Ok(id),
            None => Err(ParseError {
                at: start,
                message: format!("'{text}' is not one token of this model's vocabulary"),
            }),
        }
    }

    fn grammar(&mut self) -> Parsed<()> {
        self.space(true);
        while self.peek(0) != 0 {
            self.rule()?;
        }
        Ok(())
    }

    fn rule(&mut self) -> Parsed<()> {
        let name = self.name()?;
        let id = self.symbol(&name);
        self.space(false);
        if !self.src[self.at..].starts_with(b"::=") {
            return self.fail("expecting ::=");
        }
        self.at += 3;
        self.space(true);
        self.alternatives(&name, id, false)?;
        match self.peek(0) {
            b'\r' => self.at += if self.peek(1) == b'\n' { 2 } else { 1 },
            b'\n' => self.at += 1,
            0 => {}
            _ => return self.fail("expecting a newline or the end"),
        }
        self.space(true);
        Ok(())
    }

    fn alternatives(&mut self, name: &str, id: u32, nested: bool) -> Parsed<()> {
        let mut rule = Vec::new();
        self.sequence(name, &mut rule, nested)?;
        while self.peek(0) == b'|' {
            rule.push(Elem::Alt);
            self.at += 1;
            self.space(true);
            self.sequence(name, &mut rule, nested)?;
        }
        rule.push(Elem::End);
        self.define(id, rule);
        Ok(())
    }

    fn sequence(&mut self, name: &str, rule: &mut Vec<Elem>, nested: bool) -> Parsed<()> {
        // Where the last item starts in `rule`, and how many rules it stands
        // for (a group's helper rules, a repetition's copies): bounds the
        // rules a repetition of it may write.
        let mut last = rule.len();
        let mut weight = 1u64;
        loop {
            match self.peek(0) {
                b'"' => {
                    self.at += 1;
                    (last, weight) = (rule.len(), 1);
                    while self.peek(0) != b'"' {
                        let c = self.char()?;
                        rule.push(Elem::Char(c));
                    }
                    self.at += 1;
                    self.space(nested);
                }
                b'[' => {
                    self.at += 1;
                    let negated = self.peek(0) == b'^';
                    if negated {
                        self.at += 1;
                    }
                    (last, weight) = (rule.len(), 1);
                    while self.peek(0) != b']' {
                        let c = self.char()?;
                        rule.push(if rule.len() > last {
                            Elem::CharAlt(c)
                        } else if negated {
                            Elem::CharNot(c)
                        } else {
                            Elem::Char(c)
                        });
                        if self.peek(0) == b'-' && self.peek(1) != b']' {
                            self.at += 1;
                            let upper = self.char()?;
                            rule.push(Elem::RangeUpper(upper));
                        }
                    }
                    self.at += 1;
                    self.space(nested);
                }
                b'<' | b'!' => {
                    let not = self.peek(0) == b'!';
                    if not {
                        self.at += 1;
                        if self.peek(0) != b'<' {
                            return self.fail("expecting '<'");
                        }
                    }
                    let id = self.token()?;
                    (last, weight) = (rule.len(), 1);
                    rule.push(if not {
                        Elem::TokenNot(id)
                    } else {
                        Elem::Token(id)
                    });
                    self.space(nested);
                }
                b if is_name_byte(b) => {
                    let referenced = self.name()?;
                    let id = self.symbol(&referenced);
                    self.space(nested);
                    (last, weight) = (rule.len(), 1);
                    rule.push(Elem::Rule(id));
                }
                b'(' => {
                    self.at += 1;
                    self.space(true);
                    let before = self.names.len();
                    let sub = self.helper(name);
                    self.alternatives(name, sub, true)?;
                    weight = ((self.names.len() - before) as u64).max(1);
                    last = rule.len();
                    rule.push(Elem::Rule(sub));
                    if self.peek(0) != b')' {
                        return self.fail("expecting ')'");
                    }
                    self.at += 1;
                    self.space(nested);
                }
                b'.' => {
                    (last, weight) = (rule.len(), 1);
                    rule.push(Elem::Any);
                    self.at += 1;
                    self.space(nested);
                }
                b'*' | b'+' | b'?' => {
                    let op = self.at;
                    let (min, max) = match self.peek(0) {
                        b'*' => (0, None),
                        b'+' => (1, None),
                        _ => (0, Some(1)),
                    };
                    self.at += 1;
                    self.space(nested);
                    self.repeat(name, rule, last, &mut weight, min, max, op)?;
                }
                b'{' => {
                    let op = self.at;
                    self.at += 1;
                    self.space(nested);
                    if !self.peek(0).is_ascii_digit() {
                        return self.fail("expecting an integer");
                    }
                    let min = self.int()?;
                    self.space(nested);
                    let mut max = Some(min);
                    match self.peek(0) {
                        b'}' => {}
                        b',' => {
                            self.at += 1;
                            self.space(nested);
                            max = if self.peek(0).is_ascii_digit() {
                                let m = self.int()?;
                                self.space(nested);
                                Some(m)
                            } else {
                                None
                            };
                            if self.peek(0) != b'}' {
                                return self.fail("expecting '}'");
                            }
                        }
                        _ => return self.fail("expecting ',' or '}'"),
                    }
                    self.at += 1;
                    self.space(nested);
                    if min > MAX_REPETITIONS {
                        return self.fail(format!(
                            "{min} repetitions are more than the {MAX_REPETITIONS} a grammar may ask for"
                        ));
                    }
                    // As llama.cpp: a larger bound counts as none.
                    let max = max.filter(|&m| m <= MAX_REPETITIONS);
                    self.repeat(name, rule, last, &mut weight, min, max, op)?;
                }
                _ => return Ok(()),
            }
        }
    }

    /// Rewrites the item at `rule[last..]` repeated `min` to `max` times
    /// (None: no bound), as llama.cpp does:
    /// `S{m,n}` → S written m times, then `S'(n-m)` with
    /// `S'(k) ::= S S'(k-1) |` and `S'(1) ::= S |`; `S{m,}` → S m times then
    /// `S' ::= S S' |`. Errors point at the operator, at byte `op`.
    #[allow(clippy::too_many_arguments)] // the item, its bounds, and where
    fn repeat(
        &mut self,
        name: &str,
        rule: &mut Vec<Elem>,
        last: usize,
        weight: &mut u64,
        min: u64,
        max: Option<u64>,
        op: usize,
    ) -> Parsed<()> {
        let fail = |message: String| Err(ParseError { at: op, message });
        if last == rule.len() {
            return fail("expecting an item before */+/?/{".into());
        }
        let item: Vec<Elem> = rule[last..].to_vec();
        let total = match max {
            Some(m) if m > 0 => m,
            _ => min.max(1),
        };
        if weight.saturating_mul(total) > MAX_REPETITIONS {
            return fail(format!(
                "this repetition would write more than {MAX_REPETITIONS} rules: reduce the repetitions or the repeated item"
            ));
        }
        if min == 0 {
            rule.truncate(last);
        } else {
            for _ in 1..min {
                rule.extend_from_slice(&item);
            }
        }
        let optional = match max {
            None => 1,
            Some(m) => m.saturating_sub(min),
        };
        let mut previous = 0;
        for i in 0..optional {
            let id = self.helper(name);
            let mut helper = item.clone();
            if max.is_none() {
                helper.push(Elem::Rule(id));
            } else if i > 0 {
                helper.push(Elem::Rule(previous));
            }
            helper.extend([Elem::Alt, Elem::End]);
            self.define(id, helper);
            previous = id;
        }
        if optional > 0 {
            rule.push(Elem::Rule(previous));
        }
        *weight *= total;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn no_tokens(_: &str) -> Option<u32> {
        None
    }

    fn error(src: &str) -> String {
        parse(src, &no_tokens).unwrap_err().to_string()
    }

    #[test]
    fn errors_name_the_line_and_column() {
        assert!(error("root ::= \"a\"\nitem ::= [a-z").contains("line 2, column 14"));
        assert!(error("root ::= (\"a\"").contains("expecting ')'"));
        assert!(error("root ::= \"a\" | *").contains("line 1, column 16"));
        assert!(error("root = \"a\"").contains("line 1, column 6: expecting ::="));
        assert!(error("root ::= \"\\q\"").contains("unknown escape"));
        assert!(error("root ::= x\n").contains("rule 'x' is used but not defined"));
        // `root` referenced only by a definition that a second one replaces
        // (found by the grammar fuzz target): no root rule, not a panic.
        assert!(crate::sampling::grammar::Grammar::parse(
            "ot ::= [ab] root\not ::= \"a\"\n",
            "root",
            None
        )
        .is_err());
        assert!(error("root ::= \"a\"{2001}").contains("2001 repetitions"));
        assert!(error("root ::= <think>").contains("'<think>' is not one token"));
    }

    #[test]
    fn repetitions_are_rewritten_into_helper_rules() {
        let r = parse("root ::= \"a\"{2,3}", &no_tokens).unwrap();
        // root ::= a a root_1 ; root_1 ::= a |
        assert_eq!(
            r.rules[0],
            vec![Elem::Char(97), Elem::Char(97), Elem::Rule(1), Elem::End]
        );
        assert_eq!(r.rules[1], vec![Elem::Char(97), Elem::Alt, Elem::End]);
        assert_eq!(r.names[1], "root_1");
        let r = parse("root ::= [a-c^]*", &no_tokens).unwrap();
        assert_eq!(r.rules[0], vec![Elem::Rule(1), Elem::End]);
        assert_eq!(
            r.rules[1],
            vec![
                Elem::Char(97),
                Elem::RangeUpper(99),
                Elem::CharAlt(94),
                Elem::Rule(1),
                Elem::Alt,
                Elem::End
            ]
        );
    }
}

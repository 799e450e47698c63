//! A string schema's `pattern` (a regular expression anchored with `^...$`)
//! as grammar text, for the part of the regex language grammars can say as
//! llama.cpp says it: literals, `.`, classes, groups, alternation and the
//! repetition operators. Anything else (lookarounds, inner anchors, class
//! escapes like `\d`) is `Unsupported`, which the converter answers with any
//! string; a pattern that is not a valid regex is `Invalid`, an error.

use super::rules::{repetition, Rules};

pub(super) enum PatternError {
    Unsupported(String),
    Invalid(String),
}

use PatternError::{Invalid, Unsupported};

/// The deepest group nesting a pattern may have.
const MAX_DEPTH: usize = 100;

/// Characters that end a run of literal text.
fn is_operator(c: char) -> bool {
    matches!(
        c,
        '|' | '.' | '(' | ')' | '[' | ']' | '{' | '}' | '*' | '+' | '?' | '^' | '$'
    )
}

/// Characters a regex escapes that a grammar literal writes as they are.
fn is_regex_escape_only(c: char) -> bool {
    matches!(
        c,
        '^' | '$' | '.' | '[' | ']' | '(' | ')' | '|' | '{' | '}' | '*' | '+' | '?'
    )
}

/// The length of the escape at `p[pos]` if the grammar language reads it the
/// same way (`\x41`, `\u00e9`, `\U0001F600`, `\t`, `\"`, ...), else 0.
pub(super) fn gbnf_escape_len(p: &[char], pos: usize) -> usize {
    if pos + 1 >= p.len() || p[pos] != '\\' {
        return 0;
    }
    let n_hex = match p[pos + 1] {
        'x' => 2,
        'u' => 4,
        'U' => 8,
        // The escapes the grammar parser reads in literals and classes.
        't' | 'r' | 'n' | '\\' | '"' | '[' | ']' | '-' => return 2,
        _ => return 0,
    };
    if pos + 2 + n_hex > p.len()
        || !p[pos + 2..pos + 2 + n_hex]
            .iter()
            .all(char::is_ascii_hexdigit)
    {
        return 0;
    }
    2 + n_hex
}

/// A piece of a sequence: literal text (merged with its neighbours) or a
/// grammar expression.
type Piece = (String, bool);

fn as_rule((s, is_literal): &Piece) -> String {
    if *is_literal {
        format!("\"{s}\"")
    } else {
        s.clone()
    }
}

struct Translator<'a> {
    rules: &'a mut Rules,
    name: &'a str,
    dotall: bool,
    p: Vec<char>,
    i: usize,
    depth: usize,
    /// Repeated sub-expressions get a rule each, numbered in order of first use.
    sub_rules: Vec<(String, String)>,
}

/// Adds the rule for a string matching `pattern` (quotes included) under
/// `name` and returns the rule's name.
pub(super) fn pattern_rule(
    rules: &mut Rules,
    pattern: &str,
    name: &str,
    dotall: bool,
) -> Result<String, PatternError> {
    let chars: Vec<char> = pattern.chars().collect();
    if chars.len() < 2 || chars[0] != '^' || chars[chars.len() - 1] != '$' {
        return Err(Unsupported("not anchored with '^' and '$'".into()));
    }
    let mut t = Translator {
        rules,
        name,
        dotall,
        p: chars[1..chars.len() - 1].to_vec(),
        i: 0,
        depth: 0,
        sub_rules: Vec::new(),
    };
    let body = as_rule(&t.sequence()?);
    if t.depth != 0 {
        return Err(Invalid("unbalanced parentheses".into()));
    }
    Ok(t.rules.add(name, &format!("\"\\\"\" ({body}) \"\\\"\"")))
}

impl Translator<'_> {
    fn dot(&mut self) -> String {
        let rule = if self.dotall {
            "[\\U00000000-\\U0010FFFF]"
        } else {
            "[^\\x0A\\x0D]"
        };
        self.rules.add("dot", rule)
    }

    /// Joins a sequence into one expression, merging adjacent literals.
    fn join(seq: Vec<Piece>) -> Piece {
        let mut parts = Vec::new();
        let mut literal = String::new();
        for (s, is_literal) in seq {
            if is_literal {
                literal.push_str(&s);
            } else {
                if !literal.is_empty() {
                    parts.push(as_rule(&(std::mem::take(&mut literal), true)));
                }
                parts.push(s);
            }
        }
        if !literal.is_empty() {
            parts.push(as_rule(&(literal, true)));
        }
        (parts.join(" "), false)
    }

    /// Reads up to the end of the pattern or the `)` closing the group
    /// being read.
    fn sequence(&mut self) -> Result<Piece, PatternError> {
        let mut seq: Vec<Piece> = Vec::new();
        while self.i < self.p.len() {
            let c = self.p[self.i];
            match c {
                '.' => {
                    let dot = self.dot();
                    seq.push((dot, false));
                    self.i += 1;
                }
                '(' => {
                    self.i += 1;
                    if self.p.get(self.i) == Some(&'?') {
                        if self.p.get(self.i + 1) == Some(&':') {
                            self.i += 2; // a non-capturing group is a group
                        } else {
                            return Err(Unsupported("unsupported group syntax".into()));
                        }
                    }
                    self.depth += 1;
                    if self.depth > MAX_DEPTH {
                        return Err(Unsupported("pattern nesting too deep".into()));
                    }
                    let inner = self.sequence()?;
                    seq.push((format!("({})", as_rule(&inner)), false));
                }
                ')' => {
                    self.i += 1;
                    if self.depth == 0 {
                        return Err(Invalid("unbalanced parentheses".into()));
                    }
                    self.depth -= 1;
                    return Ok(Self::join(seq));
                }
                '^' | '$' => return Err(Unsupported("anchor inside the pattern".into())),
                '[' => seq.push((self.class()?, false)),
                '|' => {
                    seq.push(("|".into(), false));
                    self.i += 1;
                }
                '*' | '+' | '?' => {
                    let Some(last) = seq.last_mut() else {
                        return Err(Invalid("nothing to repeat".into()));
                    };
                    *last = (format!("{}{c}", as_rule(last)), false);
                    self.i += 1;
                }
                '{' => {
                    let (min, max) = self.braces()?;
                    let Some(last) = seq.pop() else {
                        return Err(Invalid("nothing to repeat".into()));
                    };
                    let item = if last.1 {
                        format!("\"{}\"", last.0)
                    } else {
                        self.sub_rule(last.0)
                    };
                    seq.push((repetition(&item, min, max, ""), false));
                }
                _ => seq.push((self.literal(c)?, true)),
            }
        }
        Ok(Self::join(seq))
    }

    /// The rule standing for a repeated sub-expression.
    fn sub_rule(&mut self, expr: String) -> String {
        if let Some((_, id)) = self.sub_rules.iter().find(|(e, _)| *e == expr) {
            return id.clone();
        }
        let n = self.sub_rules.len() + 1;
        let id = self.rules.add(&format!("{}-{n}", self.name), &expr);
        self.sub_rules.push((expr, id.clone()));
        id
    }

    /// `[...]`, copied with the escapes both languages read alike.
    fn class(&mut self) -> Result<String, PatternError> {
        let mut out = String::from("[");
        self.i += 1;
        while self.i < self.p.len() && self.p[self.i] != ']' {
            if self.p[self.i] == '\\' {
                let n = gbnf_escape_len(&self.p, self.i);
                if n == 0 {
                    let esc: String = self.p[self.i..(self.i + 2).min(self.p.len())]
                        .iter()
                        .collect();
                    return Err(Unsupported(format!(
                        "unsupported escape in character class: {esc}"
                    )));
                }
                out.extend(&self.p[self.i..self.i + n]);
                self.i += n;
            } else {
                out.push(self.p[self.i]);
                self.i += 1;
            }
        }
        if self.i >= self.p.len() {
            return Err(Invalid("unterminated character class".into()));
        }
        self.i += 1;
        out.push(']');
        Ok(out)
    }

    /// `{m}`, `{m,}`, `{,n}` or `{m,n}`; `None` for no upper bound.
    fn braces(&mut self) -> Result<(u32, Option<u32>), PatternError> {
        self.i += 1;
        let start = self.i;
        while self.i < self.p.len() && self.p[self.i] != '}' {
            self.i += 1;
        }
        if self.i >= self.p.len() {
            return Err(Unsupported("unterminated curly brackets".into()));
        }
        let inner: String = self.p[start..self.i].iter().collect();
        self.i += 1;
        let number = |s: &str| -> Result<u32, PatternError> {
            // Leading digits, as C's stoi reads them.
            let digits: String = s
                .trim_start()
                .chars()
                .take_while(char::is_ascii_digit)
                .collect();
            digits
                .parse()
                .map_err(|_| Unsupported("invalid number in curly brackets".into()))
        };
        let nums: Vec<&str> = inner.split(',').collect();
        match nums.as_slice() {
            [n] => {
                let n = number(n)?;
                Ok((n, Some(n)))
            }
            [min, max] => {
                let min = if min.is_empty() { 0 } else { number(min)? };
                let max = if max.is_empty() {
                    None
                } else {
                    Some(number(max)?)
                };
                Ok((min, max))
            }
            _ => Err(Unsupported(
                "wrong number of values in curly brackets".into(),
            )),
        }
    }

    /// A run of literal text starting at `first`. A character followed by a
    /// repetition operator is left for its own piece, so the operator
    /// applies to it alone.
    fn literal(&mut self, first: char) -> Result<String, PatternError> {
        let mut literal = String::new();
        let n = self.p.len();
        while self.i < n {
            let c = self.p[self.i];
            if c == '\\' {
                if self.i == n - 1 {
                    return Err(Invalid("trailing backslash".into()));
                }
                let next = self.p[self.i + 1];
                if is_regex_escape_only(next) {
                    literal.push(next);
                    self.i += 2;
                } else {
                    let len = gbnf_escape_len(&self.p, self.i);
                    if len == 0 {
                        return Err(Unsupported(format!("unsupported escape: \\{next}")));
                    }
                    literal.extend(&self.p[self.i..self.i + len]);
                    self.i += len;
                }
            } else if c == '"' {
                literal.push_str("\\\"");
                self.i += 1;
            } else if !is_operator(c)
                && (self.i == n - 1
                    || literal.is_empty()
                    || self.p[self.i + 1] == '.'
                    || !is_operator(self.p[self.i + 1]))
            {
                literal.push(c);
                self.i += 1;
            } else {
                break;
            }
        }
        if literal.is_empty() {
            // Nothing was read: a stray ']' or '}'.
            return Err(Unsupported(format!("unsupported character: {first}")));
        }
        Ok(literal)
    }
}

//! The grammar being built: named rules (kept sorted by name, the order they
//! are written in), the built-in rules for JSON's primitives, and the small
//! text builders every part of the converter shares.

use std::collections::BTreeMap;

/// Whitespace allowed between JSON tokens: none, a space, or one or two
/// newlines and an indent — bounded, so a model cannot pad forever.
const SPACE_RULE: &str = r#"| " " | "\n"{1,2} [ \t]{0,20}"#;

/// A built-in rule: its body and the built-in rules it uses.
pub(super) struct Builtin {
    pub body: &'static str,
    pub deps: &'static [&'static str],
}

const fn builtin(body: &'static str, deps: &'static [&'static str]) -> Builtin {
    Builtin { body, deps }
}

/// JSON's primitives, by rule name.
pub(super) fn primitive(name: &str) -> Option<Builtin> {
    Some(match name {
        "boolean" => builtin(r#"("true" | "false")"#, &[]),
        "decimal-part" => builtin("[0-9]{1,16}", &[]),
        "integral-part" => builtin("[0] | [1-9] [0-9]{0,15}", &[]),
        "number" => builtin(
            r#"("-"? integral-part) ("." decimal-part)? ([eE] [-+]? integral-part)?"#,
            &["integral-part", "decimal-part"],
        ),
        "integer" => builtin(r#"("-"? integral-part)"#, &["integral-part"]),
        "value" => builtin(
            "object | array | string | number | boolean | null",
            &["object", "array", "string", "number", "boolean", "null"],
        ),
        "object" => builtin(
            r#""{" space ( string ":" space value ("," space string ":" space value)* )? space "}""#,
            &["string", "value"],
        ),
        "array" => builtin(
            r#""[" space ( value ("," space value)* )? space "]""#,
            &["value"],
        ),
        "uuid" => builtin(
            r#""\"" [0-9a-fA-F]{8} "-" [0-9a-fA-F]{4} "-" [0-9a-fA-F]{4} "-" [0-9a-fA-F]{4} "-" [0-9a-fA-F]{12} "\"""#,
            &[],
        ),
        "char" => builtin(
            r#"[^"\\\x7F\x00-\x1F] | [\\] (["\\bfnrt] | "u" [0-9a-fA-F]{4})"#,
            &[],
        ),
        "string" => builtin(r#""\"" char* "\"""#, &["char"]),
        "null" => builtin(r#""null""#, &[]),
        _ => return None,
    })
}

/// The string formats grammars check (`date`, `time`, `date-time`, and
/// each in quotes as `*-string`), by rule name.
pub(super) fn string_format(name: &str) -> Option<Builtin> {
    Some(match name {
        "date" => builtin(
            r#"[0-9]{4} "-" ( "0" [1-9] | "1" [0-2] ) "-" ( "0" [1-9] | [1-2] [0-9] | "3" [0-1] )"#,
            &[],
        ),
        "time" => builtin(
            r#"([01] [0-9] | "2" [0-3]) ":" [0-5] [0-9] ":" [0-5] [0-9] ( "." [0-9]{3} )? ( "Z" | ( "+" | "-" ) ( [01] [0-9] | "2" [0-3] ) ":" [0-5] [0-9] )"#,
            &[],
        ),
        "date-time" => builtin(r#"date "T" time"#, &["date", "time"]),
        "date-string" => builtin(r#""\"" date "\"""#, &["date"]),
        "time-string" => builtin(r#""\"" time "\"""#, &["time"]),
        "date-time-string" => builtin(r#""\"" date-time "\"""#, &["date-time"]),
        _ => return None,
    })
}

/// Names a schema's own rules may not take as they are.
pub(super) fn is_reserved(name: &str) -> bool {
    name == "root" || primitive(name).is_some() || string_format(name).is_some()
}

/// `name` with each run of characters a rule name cannot hold made one `-`.
pub(super) fn rule_name(name: &str) -> String {
    let mut out = String::with_capacity(name.len());
    let mut in_run = false;
    for c in name.chars() {
        if c.is_ascii_alphanumeric() || c == '-' {
            out.push(c);
            in_run = false;
        } else if !in_run {
            out.push('-');
            in_run = true;
        }
    }
    out
}

/// `text` as a grammar literal, quotes included.
pub(super) fn literal(text: &str) -> String {
    let mut out = String::with_capacity(text.len() + 2);
    out.push('"');
    for c in text.chars() {
        match c {
            '\r' => out.push_str("\\r"),
            '\n' => out.push_str("\\n"),
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

/// `item` repeated `min` to `max` times (`None`: no upper bound), with
/// `separator` between repetitions when it is not empty.
pub(super) fn repetition(item: &str, min: u32, max: Option<u32>, separator: &str) -> String {
    if max == Some(0) {
        return String::new();
    }
    if min == 0 && max == Some(1) {
        return format!("{item}?");
    }
    if separator.is_empty() {
        return match (min, max) {
            (1, None) => format!("{item}+"),
            (0, None) => format!("{item}*"),
            (min, None) => format!("{item}{{{min},}}"),
            (min, Some(max)) => format!("{item}{{{min},{max}}}"),
        };
    }
    let rest = repetition(
        &format!("({separator} {item})"),
        min.saturating_sub(1),
        max.map(|m| m - 1),
        "",
    );
    let result = format!("{item} {rest}");
    if min == 0 {
        format!("({result})?")
    } else {
        result
    }
}

/// The rules built so far, sorted by name.
pub(super) struct Rules {
    pub map: BTreeMap<String, String>,
}

impl Rules {
    pub fn new() -> Rules {
        Rules {
            map: BTreeMap::from([("space".to_string(), SPACE_RULE.to_string())]),
        }
    }

    /// Adds `body` under `name` made a valid rule name, or under that name
    /// with the first free number after it when the name holds a different
    /// body; returns the name used.
    pub fn add(&mut self, name: &str, body: &str) -> String {
        let name = rule_name(name);
        match self.map.get(&name) {
            None => {
                self.map.insert(name.clone(), body.to_string());
                return name;
            }
            Some(existing) if existing == body => return name,
            Some(_) => {}
        }
        let mut i = 0;
        loop {
            let key = format!("{name}{i}");
            match self.map.get(&key) {
                Some(existing) if existing != body => i += 1,
                _ => {
                    self.map.insert(key.clone(), body.to_string());
                    return key;
                }
            }
        }
    }

    /// Adds a built-in rule under `name` and the built-ins it uses, under
    /// their own names, where they are missing.
    pub fn add_builtin(&mut self, name: &str, rule: &Builtin) -> String {
        let added = self.add(name, rule.body);
        for dep in rule.deps {
            if !self.map.contains_key(*dep) {
                let dep_rule = primitive(dep)
                    .or_else(|| string_format(dep))
                    .expect("built-ins depend on built-ins");
                self.add_builtin(dep, &dep_rule);
            }
        }
        added
    }

    /// The grammar: one `name ::= body` line per rule, sorted by name.
    pub fn text(&self) -> String {
        self.map
            .iter()
            .map(|(name, body)| format!("{name} ::= {body}\n"))
            .collect()
    }
}

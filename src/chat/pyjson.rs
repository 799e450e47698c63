//! The `tojson` filter as Hugging Face transformers defines it for chat
//! templates: Python's `json.dumps(x, ensure_ascii=False, indent=None,
//! separators=None, sort_keys=False)`. minijinja's own `tojson` differs in
//! ways a prompt shows: it escapes `<`, `>`, `&` and `'` for HTML and formats
//! floats the Rust way.

use minijinja::value::{Kwargs, ValueKind};
use minijinja::{Error, ErrorKind, Value};

/// The filter: `value|tojson`, `tojson(indent=2)`, `tojson(4)`, plus the
/// keywords `ensure_ascii`, `separators` and `sort_keys` of `json.dumps`.
pub fn tojson(value: &Value, indent: Option<Value>, kwargs: Kwargs) -> Result<Value, Error> {
    let indent = match indent {
        Some(v) => Some(v),
        None => kwargs.get::<Option<Value>>("indent")?,
    };
    let indent = match indent {
        None => None,
        Some(v) if v.is_none() => None,
        Some(v) => match v.as_str() {
            // Python accepts a string as the indent unit.
            Some(s) => Some(s.to_string()),
            None => {
                let n = i64::try_from(v)?;
                if n > MAX_INDENT {
                    return Err(Error::new(
                        ErrorKind::InvalidOperation,
                        format!("tojson: indent {n} is more than {MAX_INDENT}"),
                    ));
                }
                Some(" ".repeat(n.max(0) as usize))
            }
        },
    };
    let ensure_ascii = kwargs.get::<Option<bool>>("ensure_ascii")?.unwrap_or(false);
    let sort_keys = kwargs.get::<Option<bool>>("sort_keys")?.unwrap_or(false);
    // Python's default separators depend on whether there is an indent.
    let (item_sep, key_sep) = match kwargs.get::<Option<Vec<String>>>("separators")? {
        Some(seps) if seps.len() == 2 => (seps[0].clone(), seps[1].clone()),
        Some(seps) => {
            return Err(Error::new(
                ErrorKind::InvalidOperation,
                format!("tojson: separators must be two strings, got {}", seps.len()),
            ))
        }
        None if indent.is_some() => (",".to_string(), ": ".to_string()),
        None => (", ".to_string(), ": ".to_string()),
    };
    kwargs.assert_all_used()?;
    let mut w = Writer {
        out: String::new(),
        indent,
        item_sep,
        key_sep,
        ensure_ascii,
        sort_keys,
    };
    w.value(value, 0)?;
    // Marked safe so that an auto-escaping caller does not escape it again.
    Ok(Value::from_safe_string(w.out))
}

struct Writer {
    out: String,
    indent: Option<String>,
    item_sep: String,
    key_sep: String,
    ensure_ascii: bool,
    sort_keys: bool,
}

/// Containers nested deeper than this are refused (Python raises
/// RecursionError well before a deep stack could overflow here).
const MAX_DEPTH: usize = 512;

/// Limits that keep a hostile template from making one huge string before the
/// engine's fuel accounting sees it.
const MAX_INDENT: i64 = 64;
const MAX_OUTPUT: usize = 64 << 20;

impl Writer {
    fn value(&mut self, v: &Value, depth: usize) -> Result<(), Error> {
        if depth > MAX_DEPTH {
            return Err(Error::new(
                ErrorKind::InvalidOperation,
                "tojson: value nested too deeply",
            ));
        }
        if self.out.len() > MAX_OUTPUT {
            return Err(Error::new(
                ErrorKind::InvalidOperation,
                format!("tojson: output longer than {MAX_OUTPUT} bytes"),
            ));
        }
        match v.kind() {
            ValueKind::None => self.out.push_str("null"),
            ValueKind::Bool => self
                .out
                .push_str(if v.is_true() { "true" } else { "false" }),
            ValueKind::Number => self.number(v)?,
            ValueKind::String => self.string(v.as_str().unwrap_or_default()),
            ValueKind::Seq | ValueKind::Iterable => {
                let items: Vec<Value> = v.try_iter()?.collect();
                self.container('[', ']', items.len(), depth, |w, i, depth| {
                    w.value(&items[i], depth)
                })?;
            }
            ValueKind::Map => {
                let mut keys: Vec<Value> = v.try_iter()?.collect();
                if self.sort_keys {
                    keys.sort();
                }
                self.container('{', '}', keys.len(), depth, |w, i, depth| {
                    let key = &keys[i];
                    match key.as_str() {
                        Some(s) => w.string(s),
                        None => w.string(&key_text(key)?),
                    }
                    let sep = w.key_sep.clone();
                    w.out.push_str(&sep);
                    w.value(&v.get_item(key)?, depth)
                })?;
            }
            ValueKind::Undefined => {
                return Err(Error::new(
                    ErrorKind::UndefinedError,
                    "tojson: Object of type Undefined is not JSON serializable",
                ))
            }
            other => {
                return Err(Error::new(
                    ErrorKind::InvalidOperation,
                    format!("tojson: a value of kind {other} is not JSON serializable"),
                ))
            }
        }
        Ok(())
    }

    fn container(
        &mut self,
        open: char,
        close: char,
        len: usize,
        depth: usize,
        mut item: impl FnMut(&mut Writer, usize, usize) -> Result<(), Error>,
    ) -> Result<(), Error> {
        self.out.push(open);
        if len == 0 {
            self.out.push(close);
            return Ok(());
        }
        for i in 0..len {
            if i > 0 {
                let sep = self.item_sep.clone();
                self.out.push_str(&sep);
            }
            self.newline(depth + 1);
            item(self, i, depth + 1)?;
        }
        self.newline(depth);
        self.out.push(close);
        Ok(())
    }

    fn newline(&mut self, depth: usize) {
        if let Some(unit) = &self.indent {
            self.out.push('\n');
            for _ in 0..depth {
                self.out.push_str(unit);
            }
        }
    }

    fn number(&mut self, v: &Value) -> Result<(), Error> {
        if v.is_integer() {
            // i128 covers every integer minijinja holds.
            let n = i128::try_from(v.clone())?;
            self.out.push_str(&n.to_string());
        } else {
            let f = f64::try_from(v.clone())?;
            self.out.push_str(&python_float(f));
        }
        Ok(())
    }

    fn string(&mut self, s: &str) {
        self.out.push('"');
        for c in s.chars() {
            match c {
                '"' => self.out.push_str("\\\""),
                '\\' => self.out.push_str("\\\\"),
                '\n' => self.out.push_str("\\n"),
                '\r' => self.out.push_str("\\r"),
                '\t' => self.out.push_str("\\t"),
                '\u{8}' => self.out.push_str("\\b"),
                '\u{c}' => self.out.push_str("\\f"),
                c if (c as u32) < 0x20 || (self.ensure_ascii && !c.is_ascii()) => {
                    let mut units = [0u16; 2];
                    for u in c.encode_utf16(&mut units) {
                        self.out.push_str(&format!("\\u{u:04x}"));
                    }
                }
                c => self.out.push(c),
            }
        }
        self.out.push('"');
    }
}

/// Python turns number, bool and None keys into strings as JSON writes them.
fn key_text(key: &Value) -> Result<String, Error> {
    Ok(match key.kind() {
        ValueKind::None => "null".to_string(),
        ValueKind::Bool => (if key.is_true() { "true" } else { "false" }).to_string(),
        ValueKind::Number if key.is_integer() => i128::try_from(key.clone())?.to_string(),
        ValueKind::Number => python_float(f64::try_from(key.clone())?),
        other => {
            return Err(Error::new(
                ErrorKind::InvalidOperation,
                format!("tojson: keys must be str, int, float, bool or None, not {other}"),
            ))
        }
    })
}

/// A float as Python's `repr` writes it: the shortest digits that read back
/// the same, fixed notation for exponents -4..16 (always with a decimal
/// point), otherwise `1e+16` / `1.5e-05` style; JSON's `NaN`/`Infinity` names.
pub fn python_float(f: f64) -> String {
    if f.is_nan() {
        return "NaN".to_string();
    }
    if f.is_infinite() {
        return if f > 0.0 { "Infinity" } else { "-Infinity" }.to_string();
    }
    // Rust's `{:e}` gives the shortest round-trip digits: "-1.5e-5", "1e16".
    let sci = format!("{f:e}");
    let (mantissa, exp) = sci.split_once('e').unwrap_or((&sci, "0"));
    let exp: i32 = exp.parse().unwrap_or(0);
    let (sign, mantissa) = match mantissa.strip_prefix('-') {
        Some(m) => ("-", m),
        None => ("", mantissa),
    };
    let digits: String = mantissa.chars().filter(|c| *c != '.').collect();
    if (-4..16).contains(&exp) {
        let point = exp + 1; // digits before the decimal point
        let body = if point <= 0 {
            format!("0.{}{}", "0".repeat((-point) as usize), digits)
        } else if point as usize >= digits.len() {
            format!("{}{}.0", digits, "0".repeat(point as usize - digits.len()))
        } else {
            format!(
                "{}.{}",
                &digits[..point as usize],
                &digits[point as usize..]
            )
        };
        format!("{sign}{body}")
    } else {
        let exp_sign = if exp < 0 { '-' } else { '+' };
        format!("{sign}{mantissa}e{exp_sign}{:02}", exp.abs())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    #[cfg(target_family = "wasm")]
    use wasm_bindgen_test::wasm_bindgen_test as test;

    #[test]
    fn floats_read_like_python_repr() {
        let cases = [
            (1.0, "1.0"),
            (1e16, "1e+16"),
            (1e15, "1000000000000000.0"),
            (1.5e-5, "1.5e-05"),
            (0.0001, "0.0001"),
            (123.456, "123.456"),
            (-0.0, "-0.0"),
            (1e22, "1e+22"),
            (2.5e-310, "2.5e-310"),
            (f64::INFINITY, "Infinity"),
        ];
        for (f, want) in cases {
            assert_eq!(python_float(f), want, "{f}");
        }
    }
}

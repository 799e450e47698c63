//! Reading the values inside a tool call: a JSON value at the front of a
//! text, and Gemma 4's dictionary syntax (bare keys, strings between `<|"|>`
//! marks) turned into JSON.

use serde_json::{Map, Value};

/// What is at the front of a text.
#[derive(Debug, PartialEq)]
pub enum Front<T> {
    /// A whole value, and the bytes it took.
    Value(T, usize),
    /// The text ends before the value does.
    Incomplete,
    /// Not a value.
    Invalid,
}

/// The JSON value at the front of `text` (after whitespace).
pub fn json_at(text: &str) -> Front<Value> {
    let mut stream = serde_json::Deserializer::from_str(text).into_iter::<Value>();
    match stream.next() {
        Some(Ok(v)) => Front::Value(v, stream.byte_offset()),
        Some(Err(e)) if e.is_eof() => Front::Incomplete,
        None => Front::Incomplete,
        Some(Err(_)) => Front::Invalid,
    }
}

const QUOTE: &str = "<|\"|>";

/// The Gemma 4 value at the front of `text`, as JSON.
pub fn gemma_at(text: &str) -> Front<Value> {
    let mut reader = GemmaReader { text, pos: 0 };
    match reader.value() {
        Ok(v) => Front::Value(v, reader.pos),
        Err(GemmaError::Eof) => Front::Incomplete,
        Err(GemmaError::Invalid) => Front::Invalid,
    }
}

enum GemmaError {
    Eof,
    Invalid,
}

struct GemmaReader<'a> {
    text: &'a str,
    pos: usize,
}

impl GemmaReader<'_> {
    fn rest(&self) -> &str {
        &self.text[self.pos..]
    }

    fn skip_space(&mut self) {
        let rest = self.rest();
        self.pos += rest.len() - rest.trim_start().len();
    }

    fn peek(&self) -> Result<char, GemmaError> {
        self.rest().chars().next().ok_or(GemmaError::Eof)
    }

    fn expect(&mut self, c: char) -> Result<(), GemmaError> {
        self.skip_space();
        if self.peek()? == c {
            self.pos += c.len_utf8();
            Ok(())
        } else {
            Err(GemmaError::Invalid)
        }
    }

    fn value(&mut self) -> Result<Value, GemmaError> {
        self.skip_space();
        if self.rest().starts_with(QUOTE) {
            return self.string().map(Value::String);
        }
        if QUOTE.starts_with(self.rest()) && !self.rest().is_empty() {
            return Err(GemmaError::Eof);
        }
        match self.peek()? {
            '{' => self.object(),
            '[' => self.array(),
            _ => self.scalar(),
        }
    }

    fn string(&mut self) -> Result<String, GemmaError> {
        self.pos += QUOTE.len();
        let end = self.rest().find(QUOTE).ok_or(GemmaError::Eof)?;
        let s = self.rest()[..end].to_string();
        self.pos += end + QUOTE.len();
        Ok(s)
    }

    fn object(&mut self) -> Result<Value, GemmaError> {
        self.pos += 1;
        let mut map = Map::new();
        loop {
            self.skip_space();
            if self.peek()? == '}' {
                self.pos += 1;
                return Ok(Value::Object(map));
            }
            if !map.is_empty() {
                self.expect(',')?;
                self.skip_space();
            }
            let key = if self.rest().starts_with(QUOTE) {
                self.string()?
            } else {
                let len = self
                    .rest()
                    .find(|c: char| !(c.is_alphanumeric() || c == '_' || c == '-' || c == '.'))
                    .ok_or(GemmaError::Eof)?;
                if len == 0 {
                    return Err(GemmaError::Invalid);
                }
                let key = self.rest()[..len].to_string();
                self.pos += len;
                key
            };
            self.expect(':')?;
            let value = self.value()?;
            map.insert(key, value);
        }
    }

    fn array(&mut self) -> Result<Value, GemmaError> {
        self.pos += 1;
        let mut items = Vec::new();
        loop {
            self.skip_space();
            if self.peek()? == ']' {
                self.pos += 1;
                return Ok(Value::Array(items));
            }
            if !items.is_empty() {
                self.expect(',')?;
            }
            items.push(self.value()?);
        }
    }

    /// A number, `true`, `false` or `null`: the text up to the next
    /// separator, read as JSON.
    fn scalar(&mut self) -> Result<Value, GemmaError> {
        let len = self.rest().find([',', '}', ']']).ok_or(GemmaError::Eof)?;
        let token = self.rest()[..len].trim();
        let value = serde_json::from_str::<Value>(token).map_err(|_| GemmaError::Invalid)?;
        if value.is_object() || value.is_array() || value.is_string() {
            return Err(GemmaError::Invalid);
        }
        self.pos += len;
        Ok(value)
    }
}

/// The longest end of `text` that is the start of one of `markers` (a marker
/// still being written), as a byte count.
pub fn held_back(text: &str, markers: &[&str]) -> usize {
    let mut best = 0;
    for m in markers {
        for len in (1..m.len().min(text.len() + 1)).rev() {
            if len <= best {
                break;
            }
            if text.is_char_boundary(text.len() - len)
                && m.as_bytes()
                    .starts_with(&text.as_bytes()[text.len() - len..])
            {
                best = len;
                break;
            }
        }
    }
    best
}

//! Logit biases as llama.rn and llama.cpp's server take them in JSON: pairs
//! `[[15043, 1.0], ["Hello", -2.5], [" world", false]]` or an object
//! `{"15043": 1.0, "Hello": false}`. A string biases every token it
//! tokenizes to; `false` bans (a bias of -inf). Unlike the server, which
//! skips what it cannot read, an entry that makes no sense is an error
//! naming it.

use serde_json::Value;

use crate::error::{Error, Result};
use crate::tokenizer::Vocab;

fn bias_of(v: &Value, at: &str) -> Result<f32> {
    match v {
        Value::Bool(false) => Ok(f32::NEG_INFINITY),
        Value::Number(n) => match n.as_f64() {
            Some(b) if b.is_finite() => Ok(b as f32),
            _ => Err(Error::InvalidArgument(format!(
                "logit_bias{at}: the bias {n} is not a finite number"
            ))),
        },
        other => Err(Error::InvalidArgument(format!(
            "logit_bias{at}: the bias must be a number or false (banned), got {other}"
        ))),
    }
}

/// The tokens one key names: an id, or the tokens of a text.
fn tokens_of(key: &Value, vocab: &Vocab, at: &str) -> Result<Vec<u32>> {
    match key {
        Value::Number(n) => match n.as_u64().and_then(|id| u32::try_from(id).ok()) {
            Some(id) if (id as usize) < vocab.len() => Ok(vec![id]),
            _ => Err(Error::InvalidArgument(format!(
                "logit_bias{at}: token {n} is outside the vocabulary of {}",
                vocab.len()
            ))),
        },
        Value::String(text) => vocab.tokenize(text, false, false),
        other => Err(Error::InvalidArgument(format!(
            "logit_bias{at}: a token id or a text, got {other}"
        ))),
    }
}

/// The `(token, bias)` list `value` describes over `vocab`.
pub fn logit_bias_from_json(value: &Value, vocab: &Vocab) -> Result<Vec<(u32, f32)>> {
    let mut out = Vec::new();
    match value {
        Value::Array(pairs) => {
            for (i, pair) in pairs.iter().enumerate() {
                let at = format!("[{i}]");
                let Some([key, bias]) = pair.as_array().map(Vec::as_slice) else {
                    return Err(Error::InvalidArgument(format!(
                        "logit_bias{at}: each entry is a [token or text, bias] pair, got {pair}"
                    )));
                };
                let bias = bias_of(bias, &at)?;
                out.extend(tokens_of(key, vocab, &at)?.into_iter().map(|t| (t, bias)));
            }
        }
        Value::Object(map) => {
            for (key, bias) in map {
                let at = format!("[{key:?}]");
                let bias = bias_of(bias, &at)?;
                // A key of digits is a token id, as the server reads it.
                let key = match key.parse::<u64>() {
                    Ok(id) => Value::from(id),
                    Err(_) => Value::String(key.clone()),
                };
                out.extend(tokens_of(&key, vocab, &at)?.into_iter().map(|t| (t, bias)));
            }
        }
        Value::Null => {}
        other => {
            return Err(Error::InvalidArgument(format!(
                "logit_bias must be a list of [token or text, bias] pairs or an object, got {other}"
            )))
        }
    }
    Ok(out)
}

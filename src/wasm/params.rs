//! Parameter objects from JS, read from JSON text with errors that name the
//! parameter and the values it takes ("completion parameters: mirostat must
//! be a whole number from 0 to 255, got floating point `0.5`"), not serde's
//! position in a string the caller never wrote.

use serde::de::DeserializeOwned;
use serde_json::{Map, Value};
use wasm_bindgen::JsError;

/// `json` read as `T`. When it does not fit, each of the object's keys is
/// tried alone, so the first one that fails is named.
pub(crate) fn parse<T: DeserializeOwned>(what: &str, json: &str) -> Result<T, JsError> {
    let whole = match serde_json::from_str::<T>(json) {
        Ok(value) => return Ok(value),
        Err(e) => e,
    };
    let culprit = serde_json::from_str::<Map<String, Value>>(json)
        .ok()
        .and_then(|map| {
            map.into_iter().find_map(|(key, value)| {
                let nested = value.is_array() || value.is_object();
                let alone = Value::Object(Map::from_iter([(key.clone(), value)]));
                serde_json::from_value::<T>(alone)
                    .err()
                    .map(|e| (key, nested, e))
            })
        });
    let message = match culprit {
        // Inside an array or object serde's words are about a part of it.
        Some((key, true, e)) => format!("{what}: {key} is invalid: {e}"),
        Some((key, false, e)) => format!("{what}: {key} {}", in_words(&e.to_string())),
        None => format!("{what}: {whole}"),
    };
    Err(JsError::new(&message))
}

/// serde's "invalid type: X, expected u8" as "must be <range>, got X".
fn in_words(serde_message: &str) -> String {
    let Some((got, expected)) = serde_message.rsplit_once(", expected ") else {
        return format!("is invalid: {serde_message}");
    };
    let got = got
        .trim_start_matches("invalid type: ")
        .trim_start_matches("invalid value: ");
    let range = match expected {
        "u8" => "a whole number from 0 to 255",
        "u32" | "usize" => "a whole number from 0 to 4294967295",
        "i32" => "a whole number from -2147483648 to 2147483647",
        "i64" => "a whole number from -2^63 to 2^63 - 1",
        "f32" | "f64" => "a number",
        "a boolean" => "true or false",
        "a sequence" => "an array",
        other => other,
    };
    format!("must be {range}, got {got}")
}

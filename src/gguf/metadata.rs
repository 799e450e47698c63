//! The metadata key-value store: file order kept, lookup by key, and typed
//! getters whose errors name the key and both types.

use std::collections::HashMap;

use super::value::{Array, Value};
use crate::error::{Error, Result};

#[derive(Clone, Debug, Default, PartialEq)]
pub struct Metadata {
    pub(crate) entries: Vec<(String, Value)>,
    pub(crate) index: HashMap<String, usize>,
}

macro_rules! scalar_getter {
    ($(#[$doc:meta])* $name:ident, $variant:ident, $ty:ty, $type_name:literal) => {
        $(#[$doc])*
        pub fn $name(&self, key: &str) -> Result<$ty> {
            match self.require(key)? {
                Value::$variant(v) => Ok(v.clone()),
                other => Err(wrong_type(key, other, $type_name)),
            }
        }
    };
}

fn wrong_type(key: &str, found: &Value, expected: &'static str) -> Error {
    Error::WrongType {
        key: key.to_string(),
        found: found.type_description(),
        expected,
    }
}

impl Metadata {
    /// Adds a key; a key already present is an error (as in llama.cpp).
    pub fn insert(&mut self, key: impl Into<String>, value: Value) -> Result<()> {
        let key = key.into();
        if self.index.contains_key(&key) {
            return Err(Error::DuplicateKey { key });
        }
        self.index.insert(key.clone(), self.entries.len());
        self.entries.push((key, value));
        Ok(())
    }

    pub fn len(&self) -> usize {
        self.entries.len()
    }

    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// Key-value pairs in file order.
    pub fn iter(&self) -> impl Iterator<Item = (&str, &Value)> {
        self.entries.iter().map(|(k, v)| (k.as_str(), v))
    }

    pub fn get(&self, key: &str) -> Option<&Value> {
        self.index.get(key).map(|&i| &self.entries[i].1)
    }

    pub fn contains(&self, key: &str) -> bool {
        self.index.contains_key(key)
    }

    /// The value, or `Error::MissingKey` naming the key.
    pub fn require(&self, key: &str) -> Result<&Value> {
        self.get(key).ok_or_else(|| Error::MissingKey {
            key: key.to_string(),
        })
    }

    scalar_getter!(get_u8, U8, u8, "u8");
    scalar_getter!(get_i8, I8, i8, "i8");
    scalar_getter!(get_u16, U16, u16, "u16");
    scalar_getter!(get_i16, I16, i16, "i16");
    scalar_getter!(
        /// e.g. `get_u32("llama.block_count")`.
        get_u32, U32, u32, "u32"
    );
    scalar_getter!(get_i32, I32, i32, "i32");
    scalar_getter!(get_u64, U64, u64, "u64");
    scalar_getter!(get_i64, I64, i64, "i64");
    scalar_getter!(get_f32, F32, f32, "f32");
    scalar_getter!(get_f64, F64, f64, "f64");
    scalar_getter!(get_bool, Bool, bool, "bool");

    pub fn get_str(&self, key: &str) -> Result<&str> {
        match self.require(key)? {
            Value::String(s) => Ok(s),
            other => Err(wrong_type(key, other, "string")),
        }
    }

    pub fn get_array(&self, key: &str) -> Result<&Array> {
        match self.require(key)? {
            Value::Array(a) => Ok(a),
            other => Err(wrong_type(key, other, "array")),
        }
    }

    /// An array of strings (e.g. `tokenizer.ggml.tokens`).
    pub fn get_str_array(&self, key: &str) -> Result<&[String]> {
        match self.require(key)? {
            Value::Array(Array::String(v)) => Ok(v),
            other => Err(wrong_type(key, other, "array of string")),
        }
    }
}

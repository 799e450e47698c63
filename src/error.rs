//! The crate's error type. Every public call returns `Result<T, Error>`; messages
//! name the problem and where it was found, so a user can act on them.

use std::fmt;

/// Bytes shown as space-separated hex, for "starts with 50 4b 03 04" style messages.
pub struct HexBytes<'a>(pub &'a [u8]);

impl fmt::Display for HexBytes<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (i, b) in self.0.iter().enumerate() {
            if i > 0 {
                f.write_str(" ")?;
            }
            write!(f, "{b:02x}")?;
        }
        Ok(())
    }
}

#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// The first four bytes are not `GGUF` (or there are fewer than four).
    #[error("not a GGUF file: {}", describe_magic(.found))]
    NotGguf { found: Vec<u8> },

    #[error("unsupported GGUF version {version}: {why}")]
    UnsupportedVersion { version: u32, why: &'static str },

    /// The file ends before a structure it declares.
    #[error("truncated GGUF file: {what} at offset {offset} needs {needed} bytes, the file has {available} left")]
    Truncated {
        what: String,
        offset: u64,
        needed: u64,
        available: u64,
    },

    /// A count or length that cannot fit in the bytes that remain.
    #[error("{what} is {count}, more than the {remaining} bytes left in the file can hold")]
    CountTooLarge {
        what: String,
        count: u64,
        remaining: u64,
    },

    #[error("metadata key '{key}': unknown value type {type_id}")]
    BadValueType { key: String, type_id: u32 },

    #[error("metadata key '{key}': array nested deeper than {max} levels")]
    NestingTooDeep { key: String, max: usize },

    #[error("{what}: {detail}")]
    InvalidValue { what: String, detail: String },

    #[error("{what} is not valid UTF-8")]
    InvalidUtf8 { what: String },

    #[error("metadata key '{key}' appears twice")]
    DuplicateKey { key: String },

    #[error("tensor '{name}' appears twice")]
    DuplicateTensor { name: String },

    #[error("tensor '{tensor}' has {n_dims} dimensions; at most {max} are allowed")]
    TooManyDims {
        tensor: String,
        n_dims: u32,
        max: u32,
    },

    #[error("tensor '{tensor}': shape {shape:?} {detail}")]
    BadShape {
        tensor: String,
        shape: Vec<u64>,
        detail: String,
    },

    #[error("tensor '{tensor}' has unknown ggml type id {type_id}")]
    UnknownTensorType { tensor: String, type_id: u32 },

    #[error("general.alignment {alignment} is invalid: {why}")]
    BadAlignment { alignment: u64, why: &'static str },

    #[error(
        "tensor '{tensor}': data offset {offset} is not a multiple of the alignment {alignment}"
    )]
    TensorMisaligned {
        tensor: String,
        offset: u64,
        alignment: u64,
    },

    #[error("tensor '{tensor}': data [{start}, {end}) lies outside the file ({file_len} bytes)")]
    TensorOutOfRange {
        tensor: String,
        start: u64,
        end: u64,
        file_len: u64,
    },

    #[error("tensors '{first}' and '{second}' overlap in the data section")]
    TensorOverlap { first: String, second: String },

    /// Parsing would allocate more than the input's size justifies.
    #[error("GGUF header needs more memory ({needed} bytes) than a file of {file_len} bytes can justify")]
    TooLarge { needed: u64, file_len: u64 },

    #[error("metadata key '{key}' is missing")]
    MissingKey { key: String },

    #[error("metadata key '{key}' has type {found}, expected {expected}")]
    WrongType {
        key: String,
        found: String,
        expected: &'static str,
    },

    #[error("unsupported tensor type {ggml_type} in tensor '{tensor}'")]
    UnsupportedTensorType {
        tensor: String,
        /// The type's ggml name ("IQ2_XXS").
        ggml_type: &'static str,
    },

    #[error("CPU variant '{variant}' cannot run here: {why}")]
    UnsupportedVariant { variant: String, why: String },

    #[error("tensor '{name}' is missing")]
    MissingTensor { name: String },

    #[error("the batch is full: it holds {capacity} tokens")]
    BatchFull { capacity: usize },

    /// Not enough free KV cells for a batch. Nothing was changed: the caller
    /// can clear the cache, remove positions or shift a sequence, and retry.
    #[error("the context is full: {needed} positions needed, {free} of {n_ctx} free")]
    ContextFull {
        n_ctx: usize,
        free: usize,
        needed: usize,
    },

    #[error("{0} was cancelled")]
    Cancelled(String),

    #[error("invalid argument: {0}")]
    InvalidArgument(String),

    /// A chat template that does not parse, or whose rendering failed (the
    /// template's own `raise_exception` message included).
    #[error("chat template: {0}")]
    ChatTemplate(String),

    /// A session file that cannot be loaded: not one, corrupt, or saved
    /// with another model.
    #[error("session: {0}")]
    Session(String),

    /// A model split across files whose parts do not make a whole: one
    /// missing, out of order, of another model, or a tensor in two parts.
    #[error("split model: {0}")]
    Split(String),

    #[error("{context}: {source}")]
    Io {
        context: String,
        #[source]
        source: std::io::Error,
    },
}

pub type Result<T, E = Error> = std::result::Result<T, E>;

fn describe_magic(found: &[u8]) -> String {
    if found.is_empty() {
        "the input is empty".to_string()
    } else if found.len() < 4 {
        format!("only {} bytes ({})", found.len(), HexBytes(found))
    } else {
        format!("starts with {}", HexBytes(found))
    }
}

impl Error {
    pub fn io(context: impl Into<String>, source: std::io::Error) -> Error {
        Error::Io {
            context: context.into(),
            source,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    #[cfg(target_family = "wasm")]
    use wasm_bindgen_test::wasm_bindgen_test as test;

    #[test]
    fn not_gguf_message_shows_the_bytes() {
        let e = Error::NotGguf {
            found: b"PK\x03\x04".to_vec(),
        };
        assert_eq!(e.to_string(), "not a GGUF file: starts with 50 4b 03 04");
        let e = Error::NotGguf { found: vec![] };
        assert_eq!(e.to_string(), "not a GGUF file: the input is empty");
    }
}

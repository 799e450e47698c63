//! Tokenizers from GGUF vocabularies, as llama.cpp runs them: byte-level BPE
//! (`tokenizer.ggml.model` = "gpt2") with every pre-tokenizer llama.cpp names,
//! SentencePiece-style BPE ("gemma4"), SentencePiece ("llama") and WordPiece
//! ("bert"), with special-token parsing.

mod bpe;
mod pretokenize;
pub mod specials;
mod spm;
mod stream;
mod wpm;

use std::collections::HashMap;

pub use pretokenize::PreTokenizer;
use specials::{Fragment, Specials};
pub use stream::TextStream;

use crate::error::{Error, Result};
use crate::gguf::{Array, Metadata, Value};

/// `tokenizer.ggml.token_type` values.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TokenType {
    Undefined,
    Normal,
    Unknown,
    Control,
    UserDefined,
    Unused,
    Byte,
}

impl TokenType {
    fn from_i32(v: i32) -> TokenType {
        match v {
            1 => TokenType::Normal,
            2 => TokenType::Unknown,
            3 => TokenType::Control,
            4 => TokenType::UserDefined,
            5 => TokenType::Unused,
            6 => TokenType::Byte,
            _ => TokenType::Undefined,
        }
    }
}

/// A vocabulary and the algorithm that tokenizes with it.
pub struct Vocab {
    model: String,
    tokens: Vec<String>,
    types: Vec<TokenType>,
    token_to_id: HashMap<String, u32>,
    scores: Vec<f32>,
    bpe: Option<bpe::Bpe>,
    /// SentencePiece: prefix the text with a space.
    add_space_prefix: bool,
    /// Tokens matched in text before tokenizing the rest: control, user-defined
    /// and unknown tokens, longest first.
    special_matcher: Specials,
    /// WordPiece's vocabulary index ("bert" vocabularies).
    word_pieces: Option<wpm::WordPieces>,
    pub bos: Option<u32>,
    pub eos: Option<u32>,
    pub unk: Option<u32>,
    /// The separator between the two texts of a pair (BERT's [SEP]).
    pub sep: Option<u32>,
    pub add_bos: bool,
    pub add_eos: bool,
    /// Whether a pair puts SEP after the first text's EOS.
    pub add_sep: bool,
}

fn optional_id(md: &Metadata, key: &str) -> Option<u32> {
    match md.get(key) {
        Some(Value::U32(v)) => Some(*v),
        Some(Value::I32(v)) if *v >= 0 => Some(*v as u32),
        _ => None,
    }
}

/// `tokenizer.ggml.token_type` from an array of any integer type (writers
/// use i32; llama.cpp's loader takes any integer array).
fn token_types(v: &Value) -> Result<Vec<TokenType>> {
    let bad = |detail: String| Error::InvalidValue {
        what: "tokenizer.ggml.token_type".into(),
        detail,
    };
    let wide: Vec<i64> = match v {
        Value::Array(Array::U8(t)) => t.iter().map(|&x| x as i64).collect(),
        Value::Array(Array::I8(t)) => t.iter().map(|&x| x as i64).collect(),
        Value::Array(Array::U16(t)) => t.iter().map(|&x| x as i64).collect(),
        Value::Array(Array::I16(t)) => t.iter().map(|&x| x as i64).collect(),
        Value::Array(Array::U32(t)) => t.iter().map(|&x| x as i64).collect(),
        Value::Array(Array::I32(t)) => t.iter().map(|&x| x as i64).collect(),
        Value::Array(Array::U64(t)) => t.iter().map(|&x| x.min(i64::MAX as u64) as i64).collect(),
        Value::Array(Array::I64(t)) => t.clone(),
        other => {
            return Err(bad(format!(
                "an array of integers is expected, not {:?}",
                other.value_type()
            )))
        }
    };
    wide.iter()
        .map(|&x| {
            i32::try_from(x)
                .map(TokenType::from_i32)
                .map_err(|_| bad(format!("token type {x} is out of range")))
        })
        .collect()
}

impl Vocab {
    /// Reads the vocabulary from a model's (or a vocab-only file's) metadata.
    pub fn from_metadata(md: &Metadata) -> Result<Vocab> {
        let model = md.get_str("tokenizer.ggml.model")?.to_string();
        let tokens = md.get_str_array("tokenizer.ggml.tokens")?.to_vec();
        let types = match md.get("tokenizer.ggml.token_type") {
            None => vec![TokenType::Normal; tokens.len()],
            Some(v) => token_types(v)?,
        };
        if types.len() != tokens.len() {
            return Err(Error::InvalidValue {
                what: "tokenizer.ggml.token_type".into(),
                detail: format!("{} types for {} tokens", types.len(), tokens.len()),
            });
        }
        let mut token_to_id = HashMap::with_capacity(tokens.len());
        for (i, t) in tokens.iter().enumerate() {
            token_to_id.entry(t.clone()).or_insert(i as u32);
        }
        let pre = md.get_str("tokenizer.ggml.pre").unwrap_or("default");
        let (bpe, default_add_bos) = match model.as_str() {
            "gpt2" => {
                let merges = md.get_str_array("tokenizer.ggml.merges")?;
                let pre = PreTokenizer::for_name(pre)?;
                let add_bos = pre.ignore_merges; // llama.cpp: llama3 and tekken add BOS
                (Some(bpe::Bpe::new(merges, pre)), add_bos)
            }
            // SentencePiece-style BPE; llama.cpp always adds BOS for it.
            "gemma4" => {
                let merges = md.get_str_array("tokenizer.ggml.merges")?;
                let pre = PreTokenizer::for_name("gemma4")?;
                (Some(bpe::Bpe::new(merges, pre)), true)
            }
            "llama" => (None, true),
            "bert" => (None, true),
            other => {
                return Err(Error::InvalidArgument(format!(
                    "tokenizer model '{other}' is not supported ('gpt2', 'gemma4', 'llama' and 'bert' are)"
                )))
            }
        };
        let scores = match md.get("tokenizer.ggml.scores") {
            Some(Value::Array(Array::F32(s))) => s.clone(),
            _ => vec![0.0; tokens.len()],
        };
        let mut specials: Vec<u32> = (0..tokens.len() as u32)
            .filter(|&i| {
                matches!(
                    types[i as usize],
                    TokenType::Control | TokenType::UserDefined | TokenType::Unknown
                ) && !tokens[i as usize].is_empty()
            })
            .collect();
        specials.sort_by_key(|&i| std::cmp::Reverse(tokens[i as usize].len()));
        let special_matcher =
            Specials::new(specials.iter().map(|&i| (i, tokens[i as usize].as_str())))?;
        let word_pieces = (model == "bert")
            .then(|| wpm::WordPieces::new(&tokens))
            .transpose()?;
        let flag = |key: &str, default: bool| match md.get(key) {
            Some(Value::Bool(b)) => *b,
            _ => default,
        };
        Ok(Vocab {
            bos: optional_id(md, "tokenizer.ggml.bos_token_id"),
            eos: optional_id(md, "tokenizer.ggml.eos_token_id"),
            unk: optional_id(md, "tokenizer.ggml.unknown_token_id"),
            // llama.cpp's key is spelt this way.
            sep: optional_id(md, "tokenizer.ggml.seperator_token_id"),
            add_sep: flag("tokenizer.ggml.add_sep_token", false),
            add_bos: flag("tokenizer.ggml.add_bos_token", default_add_bos) || model == "gemma4",
            add_eos: flag("tokenizer.ggml.add_eos_token", false),
            add_space_prefix: flag("tokenizer.ggml.add_space_prefix", model == "llama"),
            scores,
            model,
            tokens,
            types,
            token_to_id,
            bpe,
            special_matcher,
            word_pieces,
        })
    }

    /// Whether generation ends at this token: EOS, or a control token whose
    /// text llama.cpp treats as an end of turn or text.
    pub fn is_eog(&self, id: u32) -> bool {
        const EOG_TEXTS: &[&str] = &[
            "<|eot_id|>",
            "<|im_end|>",
            "<|end|>",
            "<end_of_turn>",
            "<|endoftext|>",
            "<EOS_TOKEN>",
            "<|end_of_text|>",
            "<end_of_utterance>",
        ];
        Some(id) == self.eos
            || (self.types.get(id as usize) == Some(&TokenType::Control)
                && EOG_TEXTS.contains(&self.tokens[id as usize].as_str()))
    }

    pub fn model(&self) -> &str {
        &self.model
    }

    pub fn len(&self) -> usize {
        self.tokens.len()
    }

    pub fn is_empty(&self) -> bool {
        self.tokens.is_empty()
    }

    pub fn token_text(&self, id: u32) -> Option<&str> {
        self.tokens.get(id as usize).map(|s| s.as_str())
    }

    pub fn token_type(&self, id: u32) -> Option<TokenType> {
        self.types.get(id as usize).copied()
    }

    /// Token ids for `text`. `add_special` adds BOS/EOS as the vocabulary asks;
    /// `parse_special` recognises control tokens written in the text
    /// (user-defined tokens are always recognised, as in llama.cpp).
    pub fn tokenize(&self, text: &str, add_special: bool, parse_special: bool) -> Result<Vec<u32>> {
        let mut out = Vec::new();
        if add_special && self.add_bos {
            if let Some(bos) = self.bos {
                out.push(bos);
            }
        }
        // SentencePiece prefixes a space to text that starts the input or
        // follows a special token. (BERT's [CLS]/[SEP] come from add_bos/add_eos.)
        let mut after_special = true;
        for fragment in self.partition_specials(text, parse_special) {
            match fragment {
                Fragment::Token(id) => {
                    out.push(id);
                    after_special = true;
                }
                Fragment::Text(t) => {
                    self.tokenize_text(t, after_special, &mut out)?;
                    after_special = false;
                }
            }
        }
        if add_special && self.add_eos {
            if let Some(eos) = self.eos {
                out.push(eos);
            }
        }
        Ok(out)
    }

    fn tokenize_text(&self, text: &str, after_special: bool, out: &mut Vec<u32>) -> Result<()> {
        match &self.bpe {
            Some(bpe) => bpe.tokenize(text, &self.token_to_id, out),
            None if self.model == "bert" => {
                if let Some(pieces) = &self.word_pieces {
                    pieces.tokenize(text, &self.token_to_id, self.unk, out);
                }
                Ok(())
            }
            None => {
                let mut escaped = String::with_capacity(text.len() + 3);
                if self.add_space_prefix && after_special {
                    escaped.push('\u{2581}');
                }
                for c in text.chars() {
                    escaped.push(if c == ' ' { '\u{2581}' } else { c });
                }
                let spm = spm::Spm {
                    token_to_id: &self.token_to_id,
                    scores: &self.scores,
                };
                spm.tokenize(&escaped, out)
            }
        }
    }

    /// Splits text around special tokens (longest first, left to right);
    /// without `parse_special`, only user-defined ones.
    fn partition_specials<'t>(&self, text: &'t str, parse_special: bool) -> Vec<Fragment<'t>> {
        self.special_matcher.partition(text, |id| {
            parse_special
                || !matches!(
                    self.types[id as usize],
                    TokenType::Control | TokenType::Unknown
                )
        })
    }

    /// The bytes a token stands for: byte-level BPE tokens are decoded back to
    /// bytes; control tokens give their text only when `special` is true.
    pub fn token_bytes(&self, id: u32, special: bool) -> Vec<u8> {
        let Some(text) = self.tokens.get(id as usize) else {
            return Vec::new();
        };
        match self.types[id as usize] {
            TokenType::Control if !special => Vec::new(),
            TokenType::Control | TokenType::UserDefined => text.as_bytes().to_vec(),
            TokenType::Byte => {
                match u8::from_str_radix(text.trim_start_matches("<0x").trim_end_matches('>'), 16) {
                    Ok(b) => vec![b],
                    Err(_) => text.as_bytes().to_vec(),
                }
            }
            _ => match &self.bpe {
                Some(bpe) if !bpe.spm_style() => bpe::decode_bytes(text),
                _ => text.replace('\u{2581}', " ").into_bytes(),
            },
        }
    }
}

impl Vocab {
    /// The bytes of a token sequence: pieces joined; with `special` false,
    /// control tokens are left out. SentencePiece's added leading space is
    /// removed, as llama.cpp's detokenizer does.
    pub fn detokenize(&self, ids: &[u32], special: bool) -> Vec<u8> {
        let mut out: Vec<u8> = ids
            .iter()
            .flat_map(|&id| self.token_bytes(id, special))
            .collect();
        if self.bpe.is_none() && self.add_space_prefix && out.first() == Some(&b' ') {
            out.remove(0);
        }
        out
    }
}

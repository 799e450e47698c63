//! Pre-tokenizers for byte-level BPE: the regex sequence each
//! `tokenizer.ggml.pre` value names (as llama.cpp selects them), applied the
//! way llama.cpp applies them: each regex splits every fragment left by the
//! previous one into its matches and the text between them.

use std::ops::Range;

use fancy_regex::Regex;

use crate::error::{Error, Result};

/// How a vocabulary pre-tokenizes, and the flags llama.cpp ties to it.
#[derive(Clone, Debug)]
pub struct PreTokenizer {
    pub name: String,
    regexes: Vec<Regex>,
    /// Whole words already in the vocabulary are taken as one token (llama3).
    pub ignore_merges: bool,
    /// SentencePiece-style BPE (Gemma 4): spaces become U+2581, words are
    /// merged over their UTF-8 characters (no GPT-2 byte mapping), bytes
    /// without a token fall back to `<0xXX>` tokens.
    pub spm_style: bool,
}

const GPT2: &str = r"'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)";
const LLAMA3: &str = r"(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+";
const QWEN2: &str = r"(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+";
/// Qwen3.5's: marks (\p{M}) join the letters they follow.
const QWEN35: &str = r"(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])|[^\r\n\p{L}\p{N}]?[\p{L}\p{M}]+|\p{N}| ?[^\s\p{L}\p{M}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+";
const BLOOM: &str = " ?[^(\\s|.,!?\u{2026}\u{3002}\u{ff0c}\u{3001}\u{964}\u{6d4}\u{60c})]+";
/// DeepSeek LLM's letter class, as its tokenizer.json spells it.
// (Escaped: several of these characters have canonical equivalents that an
// editor may normalise away.)
const DEEPSEEK_LETTERS: &str = "\\s?[A-Za-z\u{b5}\u{c0}-\u{d6}\u{d8}-\u{f6}\u{f8}-\u{1ba}\u{1bc}-\u{1bf}\u{1c4}-\u{293}\u{295}-\u{2af}\u{370}-\u{373}\u{376}\u{377}\u{37b}-\u{37d}\u{37f}\u{386}\u{388}-\u{38a}\u{38c}\u{38e}-\u{3a1}\u{3a3}-\u{3f5}\u{3f7}-\u{481}\u{48a}-\u{52f}\u{531}-\u{556}\u{10a0}-\u{10c5}\u{13a0}-\u{13f5}\u{13f8}-\u{13fd}\u{1c90}-\u{1cba}\u{1cbd}-\u{1cbf}\u{1d00}-\u{1d2b}\u{1d6b}-\u{1d77}\u{1d79}-\u{1d9a}\u{1e00}-\u{1f15}\u{1f18}-\u{1f1d}\u{1f20}-\u{1f45}\u{1f48}-\u{1f4d}\u{1f50}-\u{1f57}\u{1f59}\u{1f5b}\u{1f5d}\u{1f5f}-\u{1f7d}\u{1f80}-\u{1fb4}\u{1fb6}-\u{1fbc}\u{1fbe}\u{1fc2}-\u{1fc4}\u{1fc6}-\u{1fcc}\u{1fd0}-\u{1fd3}\u{1fd6}-\u{1fdb}\u{1fe0}-\u{1fec}\u{1ff2}-\u{1ff4}\u{1ff6}-\u{1ffc}\u{2102}\u{2107}\u{210a}-\u{2113}\u{2115}\u{2119}-\u{211d}\u{2124}\u{2126}\u{2128}\u{212a}-\u{212d}\u{212f}-\u{2134}\u{2139}\u{213c}-\u{213f}\u{2145}-\u{2149}\u{214e}\u{2183}\u{2184}\u{2c00}-\u{2c7b}\u{2c7e}-\u{2ce4}\u{2ceb}-\u{2cee}\u{2cf2}\u{2cf3}\u{a640}-\u{a66d}\u{a680}-\u{a69b}\u{a722}-\u{a76f}\u{a771}-\u{a787}\u{a78b}-\u{a78e}\u{ab70}-\u{abbf}\u{fb00}-\u{fb06}\u{fb13}-\u{fb17}\u{ff21}-\u{ff3a}\u{ff41}-\u{ff5a}\u{10400}-\u{1044f}\u{104b0}-\u{104d3}\u{104d8}-\u{104fb}\u{10c80}-\u{10cb2}\u{10cc0}-\u{10cf2}\u{118a0}-\u{118df}\u{1e900}-\u{1e943}]+";

impl PreTokenizer {
    /// The pre-tokenizer for a `tokenizer.ggml.pre` value ("" or absent means
    /// "default"); an unknown name is an error naming it.
    pub fn for_name(name: &str) -> Result<PreTokenizer> {
        let (exprs, ignore_merges): (Vec<&str>, bool) = match name {
            "" | "default" => (
                vec![r"[\p{P}\$\+<=>\^~\|]+", GPT2, r"\p{N}+", r"[0-9][0-9][0-9]"],
                false,
            ),
            "llama3" | "llama-v3" | "llama-bpe" | "falcon3" | "falcon-h1" | "pixtral" | "midm-2.0"
            | "lfm2" | "jina-v5-nano" => (vec![LLAMA3], true),
            "dbrx" | "smaug-bpe" => (vec![LLAMA3], false),
            "deepseek-llm" => (
                vec![
                    "[\r\n]",
                    DEEPSEEK_LETTERS,
                    "\\s?[!-/:-~\u{ff01}-\u{ff0f}\u{ff1a}-\u{ff5e}\u{2018}-\u{201f}\u{3000}-\u{3002}]+",
                    r"\s+$",
                    "[\u{4e00}-\u{9fa5}\u{800}-\u{4e00}\u{ac00}-\u{d7ff}]+",
                    r"\p{N}+",
                ],
                false,
            ),
            "deepseek-coder" => (
                vec!["[\r\n]", r"\s?\p{L}+", r"\s?\p{P}+", "[\u{4e00}-\u{9fa5}\u{800}-\u{4e00}\u{ac00}-\u{d7ff}]+", r"\p{N}"],
                false,
            ),
            "deepseek-v3" => (
                vec![
                    r"\p{N}{1,3}",
                    "[\u{4e00}-\u{9fa5}\u{3040}-\u{309f}\u{30a0}-\u{30ff}]+",
                    "[!\"#$%&'()*+,\\-./:;<=>?@\\[\\\\\\]^_`{|}~][A-Za-z]+|[^\r\n\\p{L}\\p{P}\\p{S}]?[\\p{L}\\p{M}]+| ?[\\p{P}\\p{S}]+[\r\n]*|\\s*[\r\n]+|\\s+(?!\\S)|\\s+",
                ],
                false,
            ),
            "falcon" => (vec![r"[\p{P}\$\+<=>\^~\|`]+", GPT2, r"[0-9][0-9][0-9]"], false),
            "starcoder" | "refact" | "command-r" | "smollm" | "codeshell" | "exaone" | "minerva-7b" => {
                (vec![r"\p{N}", GPT2], false)
            }
            "gpt-2" | "phi-2" | "jina-es" | "jina-de" | "gigachat" | "jina-v1-en" | "jina-v2-es"
            | "jina-v2-de" | "jina-v2-code" | "roberta-bpe" | "mpt" | "olmo" | "jais" => (vec![GPT2], false),
            "qwen2" | "deepseek-r1-qwen" | "kormo" | "f2llmv2" | "stablelm2" | "megrez" => {
                (vec![QWEN2], false)
            }
            "qwen35" => (vec![QWEN35], false),
            // Runs of newlines and runs of anything else; no word splitting.
            "gemma4" => (vec![r"[^\n]+|[\n]+"], false),
            "poro-chat" | "bloom" | "gpt3-finnish" => (vec![BLOOM], false),
            "chatglm-bpe" => (vec![LLAMA3], false),
            "viking" => (vec![BLOOM, r"\p{N}"], false),
            "tekken" => (
                vec![r"[^\r\n\p{L}\p{N}]?((?=[\p{L}])([^a-z]))*((?=[\p{L}])([^A-Z]))+|[^\r\n\p{L}\p{N}]?((?=[\p{L}])([^a-z]))+((?=[\p{L}])([^A-Z]))*|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n/]*|\s*[\r\n]+|\s+(?!\S)|\s+"],
                true,
            ),
            "chameleon" => (
                vec![
                    r"<sentinel:[0-9]+>",
                    r"(IMGIMG)((A|B|C|D|E|F|G|H|I){1,4})Z",
                    r"([\t\n]|    |  )",
                    r"\p{N}",
                    r"[\p{P}!-/:-@\[-`{-~]",
                    GPT2,
                ],
                false,
            ),
            other => {
                return Err(Error::InvalidArgument(format!(
                    "unknown pre-tokenizer type '{other}' (tokenizer.ggml.pre)"
                )))
            }
        };
        let regexes = exprs
            .iter()
            .map(|e| {
                Regex::new(e).map_err(|err| {
                    Error::InvalidArgument(format!(
                        "pre-tokenizer '{name}': bad regex {e:?}: {err}"
                    ))
                })
            })
            .collect::<Result<_>>()?;
        Ok(PreTokenizer {
            name: name.to_string(),
            regexes,
            ignore_merges,
            spm_style: name == "gemma4",
        })
    }

    /// Splits `text` into word ranges (byte offsets), in order, covering it all.
    pub fn split(&self, text: &str) -> Result<Vec<Range<usize>>> {
        let mut pieces = if text.is_empty() {
            vec![]
        } else {
            vec![0..text.len()]
        };
        for re in &self.regexes {
            let mut next = Vec::with_capacity(pieces.len() * 2);
            for r in pieces {
                let frag = &text[r.clone()];
                let mut last = 0;
                for m in re.find_iter(frag) {
                    let m = m.map_err(|e| {
                        Error::InvalidArgument(format!(
                            "pre-tokenizer '{}' failed on the input: {e}",
                            self.name
                        ))
                    })?;
                    if m.start() > last {
                        next.push(r.start + last..r.start + m.start());
                    }
                    if m.end() > m.start() {
                        next.push(r.start + m.start()..r.start + m.end());
                    }
                    last = last.max(m.end());
                }
                if last < frag.len() {
                    next.push(r.start + last..r.end);
                }
            }
            pieces = next;
        }
        Ok(pieces)
    }
}

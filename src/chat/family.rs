//! The built-in template families: the prompt formats llama.cpp can write
//! without a Jinja engine, and the names by which a user may ask for one.

use std::fmt;

/// A prompt format llama.cpp knows by heart (its `llm_chat_template`). Each has
/// a formatter in `builtin.rs` that writes what llama.cpp's
/// `llm_chat_apply_template` writes.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum ChatFamily {
    ChatMl,
    Llama2,
    Llama2Sys,
    Llama2SysBos,
    Llama2SysStrip,
    MistralV1,
    MistralV3,
    MistralV3Tekken,
    MistralV7,
    MistralV7Tekken,
    Phi3,
    Phi4,
    Falcon3,
    Zephyr,
    Monarch,
    Gemma,
    Orion,
    OpenChat,
    Vicuna,
    VicunaOrca,
    DeepSeek,
    DeepSeek2,
    DeepSeek3,
    CommandR,
    Llama3,
    ChatGlm3,
    ChatGlm4,
    GlmEdge,
    MiniCpm,
    Exaone3,
    Exaone4,
    RwkvWorld,
    Granite,
    GigaChat,
    Megrez,
    Yandex,
    Bailing,
    BailingThink,
    Bailing2,
    Llama4,
    SmolVlm,
    Dots1,
    HunyuanMoe,
    /// OpenAI's gpt-oss (the "harmony" format). Only chosen by name: see
    /// `detect.rs` for why the template text never selects it.
    GptOss,
    HunyuanDense,
    KimiK2,
    SeedOss,
    Grok2,
    PanguEmbedded,
}

/// The names llama.cpp accepts in place of a template (its
/// `LLM_CHAT_TEMPLATES` table). `Dots1` has no name there, so none here.
const NAMED: &[(&str, ChatFamily)] = &[
    ("chatml", ChatFamily::ChatMl),
    ("llama2", ChatFamily::Llama2),
    ("llama2-sys", ChatFamily::Llama2Sys),
    ("llama2-sys-bos", ChatFamily::Llama2SysBos),
    ("llama2-sys-strip", ChatFamily::Llama2SysStrip),
    ("mistral-v1", ChatFamily::MistralV1),
    ("mistral-v3", ChatFamily::MistralV3),
    ("mistral-v3-tekken", ChatFamily::MistralV3Tekken),
    ("mistral-v7", ChatFamily::MistralV7),
    ("mistral-v7-tekken", ChatFamily::MistralV7Tekken),
    ("phi3", ChatFamily::Phi3),
    ("phi4", ChatFamily::Phi4),
    ("falcon3", ChatFamily::Falcon3),
    ("zephyr", ChatFamily::Zephyr),
    ("monarch", ChatFamily::Monarch),
    ("gemma", ChatFamily::Gemma),
    ("orion", ChatFamily::Orion),
    ("openchat", ChatFamily::OpenChat),
    ("vicuna", ChatFamily::Vicuna),
    ("vicuna-orca", ChatFamily::VicunaOrca),
    ("deepseek", ChatFamily::DeepSeek),
    ("deepseek2", ChatFamily::DeepSeek2),
    ("deepseek3", ChatFamily::DeepSeek3),
    ("command-r", ChatFamily::CommandR),
    ("llama3", ChatFamily::Llama3),
    ("chatglm3", ChatFamily::ChatGlm3),
    ("chatglm4", ChatFamily::ChatGlm4),
    ("glmedge", ChatFamily::GlmEdge),
    ("minicpm", ChatFamily::MiniCpm),
    ("exaone3", ChatFamily::Exaone3),
    ("exaone4", ChatFamily::Exaone4),
    ("rwkv-world", ChatFamily::RwkvWorld),
    ("granite", ChatFamily::Granite),
    ("gigachat", ChatFamily::GigaChat),
    ("megrez", ChatFamily::Megrez),
    ("yandex", ChatFamily::Yandex),
    ("bailing", ChatFamily::Bailing),
    ("bailing-think", ChatFamily::BailingThink),
    ("bailing2", ChatFamily::Bailing2),
    ("llama4", ChatFamily::Llama4),
    ("smolvlm", ChatFamily::SmolVlm),
    ("hunyuan-moe", ChatFamily::HunyuanMoe),
    ("gpt-oss", ChatFamily::GptOss),
    ("hunyuan-dense", ChatFamily::HunyuanDense),
    ("kimi-k2", ChatFamily::KimiK2),
    ("seed_oss", ChatFamily::SeedOss),
    ("grok-2", ChatFamily::Grok2),
    ("pangu-embedded", ChatFamily::PanguEmbedded),
];

impl ChatFamily {
    /// The family llama.cpp gives this exact name (`"chatml"`, `"llama3"`,
    /// `"mistral-v7"`, ...), if any.
    pub fn from_name(name: &str) -> Option<ChatFamily> {
        NAMED.iter().find(|(n, _)| *n == name).map(|&(_, f)| f)
    }

    /// llama.cpp's name for the family (`"dots1"` for the one it leaves unnamed).
    pub fn name(self) -> &'static str {
        match NAMED.iter().find(|&&(_, f)| f == self) {
            Some((n, _)) => n,
            None => "dots1",
        }
    }

    /// Every family name `from_name` accepts, in the order llama.cpp lists them.
    pub fn names() -> impl Iterator<Item = &'static str> {
        NAMED.iter().map(|(n, _)| *n)
    }
}

impl fmt::Display for ChatFamily {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

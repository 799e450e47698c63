//! Which built-in family a template belongs to, decided the way llama.cpp's
//! `llm_chat_detect_template` decides it: a family name is taken as is,
//! otherwise substring tests on the Jinja text, first match wins. The order of
//! the tests matters (a ChatML template may also contain `[INST]`, a Phi-3 one
//! `<|user|>`), so it follows llama.cpp's.

use super::family::ChatFamily;

/// The family of `template` (a family name or a Jinja template text), or
/// `None` when no test matches and the template needs a Jinja engine.
///
/// One deliberate difference from llama.cpp: a gpt-oss ("harmony") template,
/// which llama.cpp recognises by `<|start|>` and `<|channel|>`, is left to
/// Jinja. The built-in harmony format drops the system preamble (knowledge
/// cutoff, date, reasoning effort, channels) that the real template writes and
/// the model was trained with, so the template's own text is the better
/// prompt. The name `"gpt-oss"` still selects the built-in format.
pub fn detect_family(template: &str) -> Option<ChatFamily> {
    use ChatFamily as F;
    if let Some(family) = ChatFamily::from_name(template) {
        return Some(family);
    }
    let has = |needle: &str| template.contains(needle);

    if has("<|im_start|>") {
        return Some(if has("<|im_sep|>") {
            F::Phi4
        } else if has("<end_of_utterance>") {
            // SmolVLM starts with <|im_start|> as its BOS but is not ChatML.
            F::SmolVlm
        } else {
            F::ChatMl
        });
    }
    if template.starts_with("mistral") || has("[INST]") {
        return Some(mistral_or_llama2(template));
    }
    TESTS
        .iter()
        .find(|(needles, _)| needles.iter().all(|n| has(n)))
        .map(|&(_, family)| family)
}

/// After ChatML and the `[INST]` formats: the first entry whose substrings all
/// occur in the template names its family.
const TESTS: &[(&[&str], ChatFamily)] = {
    use ChatFamily as F;
    &[
        (&["<|assistant|>", "<|end|>"], F::Phi3),
        (&["[gMASK]<sop>"], F::ChatGlm4),
        (&["<|assistant|>", "<|user|>", "</s>"], F::Falcon3),
        (&["<|assistant|>", "<|user|>"], F::GlmEdge),
        (&["<|{{ item['role'] }}|>", "<|begin_of_image|>"], F::GlmEdge),
        (&["<|user|>", "<|endoftext|>"], F::Zephyr),
        (&["bos_token + message['role']"], F::Monarch),
        (&["<start_of_turn>"], F::Gemma),
        (&["'\\n\\nAssistant: ' + eos_token"], F::Orion),
        (&["GPT4 Correct "], F::OpenChat),
        (&["USER: ", "ASSISTANT: ", "SYSTEM: "], F::VicunaOrca),
        (&["USER: ", "ASSISTANT: "], F::Vicuna),
        (&["### Instruction:", "<|EOT|>"], F::DeepSeek),
        (&["<|START_OF_TURN_TOKEN|>", "<|USER_TOKEN|>"], F::CommandR),
        (&["<|start_header_id|>", "<|end_header_id|>"], F::Llama3),
        (&["[gMASK]sop"], F::ChatGlm3),
        (&["<用户>"], F::MiniCpm),
        (&["'Assistant: ' + message['content'] + eos_token"], F::DeepSeek2),
        (&["<｜Assistant｜>", "<｜User｜>", "<｜end▁of▁sentence｜>"], F::DeepSeek3),
        (&["[|system|]", "[|assistant|]", "[|endofturn|]", "[|tool|]"], F::Exaone4),
        (&["[|system|]", "[|assistant|]", "[|endofturn|]"], F::Exaone3),
        (&["rwkv-world"], F::RwkvWorld),
        (&["{{- 'User: ' + message['content']|trim + '\\n\\n' -}}"], F::RwkvWorld),
        (&["<|start_of_role|>"], F::Granite),
        (
            &["message['role'] + additional_special_tokens[0] + message['content'] + additional_special_tokens[1]"],
            F::GigaChat,
        ),
        (&["<|role_start|>"], F::Megrez),
        (&[" Ассистент:"], F::Yandex),
        (&["<role>ASSISTANT</role>", "'HUMAN'"], F::Bailing),
        (&["<role>ASSISTANT</role>", "\"HUMAN\"", "<think>"], F::BailingThink),
        (&["<role>ASSISTANT</role>", "<role>HUMAN</role>", "<|role_end|>"], F::Bailing2),
        (&["<|header_start|>", "<|header_end|>"], F::Llama4),
        (&["<|endofuserprompt|>"], F::Dots1),
        (&["<|extra_0|>", "<|extra_4|>"], F::HunyuanMoe),
        // Here llama.cpp tests `<|start|>` and `<|channel|>` for gpt-oss: left
        // to Jinja, see `detect_family`.
        (&["<｜hy_Assistant｜>", "<｜hy_place▁holder▁no▁3｜>"], F::HunyuanDense),
        (&["<|im_assistant|>assistant<|im_middle|>"], F::KimiK2),
        (&["<seed:bos>"], F::SeedOss),
        (&["'Assistant: '  + message['content'] + '<|separator|>"], F::Grok2),
        (&["[unused9]系统：[unused10]"], F::PanguEmbedded),
    ]
};

/// The `[INST]` templates: Mistral's official v1/v3/v7 formats, or Llama 2 and
/// its variants (system block, BOS inside the history, stripped messages).
fn mistral_or_llama2(template: &str) -> ChatFamily {
    use ChatFamily as F;
    let has = |needle: &str| template.contains(needle);
    if has("[SYSTEM_PROMPT]") {
        F::MistralV7
    } else if has("' [INST] ' + system_message") || has("[AVAILABLE_TOOLS]") {
        // Mistral's own v1, v3 and v3-tekken templates: v1 puts a space before
        // [INST], tekken quotes it with double quotes.
        if has(" [INST]") {
            F::MistralV1
        } else if has("\"[INST]\"") {
            F::MistralV3Tekken
        } else {
            F::MistralV3
        }
    } else if has("content.strip()") {
        F::Llama2SysStrip
    } else if has("bos_token + '[INST]") {
        F::Llama2SysBos
    } else if has("<<SYS>>") {
        F::Llama2Sys
    } else {
        F::Llama2
    }
}

//! The built-in formatters: for each family, the exact text llama.cpp's
//! `llm_chat_apply_template` writes for a conversation, without a Jinja
//! engine. `add_assistant` is its `add_ass` (add_generation_prompt): whether
//! to open an assistant turn at the end. Several families ignore it, as they
//! do in llama.cpp.

use super::family::ChatFamily;
use super::ChatMessage;

/// The prompt text for `messages` in `family`'s format.
pub fn format(family: ChatFamily, messages: &[ChatMessage], add_assistant: bool) -> String {
    use ChatFamily as F;
    let mut out = String::new();
    let w = &mut out;
    match family {
        F::ChatMl => {
            for m in messages {
                push(
                    w,
                    &["<|im_start|>", &m.role, "\n", &m.content, "<|im_end|>\n"],
                );
            }
            if add_assistant {
                w.push_str("<|im_start|>assistant\n");
            }
        }
        F::MistralV7 | F::MistralV7Tekken => mistral_v7(w, messages, family == F::MistralV7),
        F::MistralV1 | F::MistralV3 | F::MistralV3Tekken => mistral_v1_v3(w, messages, family),
        F::Llama2 | F::Llama2Sys | F::Llama2SysBos | F::Llama2SysStrip => {
            llama2(w, messages, family)
        }
        F::Phi3 => {
            for m in messages {
                push(w, &["<|", &m.role, "|>\n", &m.content, "<|end|>\n"]);
            }
            if add_assistant {
                w.push_str("<|assistant|>\n");
            }
        }
        F::Phi4 => {
            for m in messages {
                push(
                    w,
                    &[
                        "<|im_start|>",
                        &m.role,
                        "<|im_sep|>",
                        &m.content,
                        "<|im_end|>",
                    ],
                );
            }
            if add_assistant {
                w.push_str("<|im_start|>assistant<|im_sep|>");
            }
        }
        F::Falcon3 => {
            for m in messages {
                push(w, &["<|", &m.role, "|>\n", &m.content, "\n"]);
            }
            if add_assistant {
                w.push_str("<|assistant|>\n");
            }
        }
        F::Zephyr => {
            for m in messages {
                push(w, &["<|", &m.role, "|>\n", &m.content, "<|endoftext|>\n"]);
            }
            if add_assistant {
                w.push_str("<|assistant|>\n");
            }
        }
        F::Monarch => {
            // The BOS token sits inside the history, except before the first
            // message (the tokenizer adds that one).
            for (i, m) in messages.iter().enumerate() {
                let bos = if i == 0 { "" } else { "<s>" };
                push(w, &[bos, &m.role, "\n", &m.content, "</s>\n"]);
            }
            if add_assistant {
                w.push_str("<s>assistant\n");
            }
        }
        F::Gemma => gemma(w, messages, add_assistant),
        F::Orion => orion(w, messages),
        F::OpenChat => {
            for m in messages {
                if m.role == "system" {
                    push(w, &[&m.content, "<|end_of_turn|>"]);
                } else {
                    // llama.cpp upper-cases the role's first byte.
                    let role = capitalize_first_ascii(&m.role);
                    push(
                        w,
                        &["GPT4 Correct ", &role, ": ", &m.content, "<|end_of_turn|>"],
                    );
                }
            }
            if add_assistant {
                w.push_str("GPT4 Correct Assistant:");
            }
        }
        F::Vicuna | F::VicunaOrca => {
            for m in messages {
                match m.role.as_str() {
                    "system" if family == F::VicunaOrca => push(w, &["SYSTEM: ", &m.content, "\n"]),
                    "system" => push(w, &[&m.content, "\n\n"]),
                    "user" => push(w, &["USER: ", &m.content, "\n"]),
                    "assistant" => push(w, &["ASSISTANT: ", &m.content, "</s>\n"]),
                    _ => {}
                }
            }
            if add_assistant {
                w.push_str("ASSISTANT:");
            }
        }
        F::DeepSeek => {
            for m in messages {
                match m.role.as_str() {
                    "system" => w.push_str(&m.content),
                    "user" => push(w, &["### Instruction:\n", &m.content, "\n"]),
                    "assistant" => push(w, &["### Response:\n", &m.content, "\n<|EOT|>\n"]),
                    _ => {}
                }
            }
            if add_assistant {
                w.push_str("### Response:\n");
            }
        }
        F::CommandR => {
            for m in messages {
                let token = match m.role.as_str() {
                    "system" => "<|SYSTEM_TOKEN|>",
                    "user" => "<|USER_TOKEN|>",
                    "assistant" => "<|CHATBOT_TOKEN|>",
                    _ => continue,
                };
                push(
                    w,
                    &[
                        "<|START_OF_TURN_TOKEN|>",
                        token,
                        trim(&m.content),
                        "<|END_OF_TURN_TOKEN|>",
                    ],
                );
            }
            if add_assistant {
                w.push_str("<|START_OF_TURN_TOKEN|><|CHATBOT_TOKEN|>");
            }
        }
        F::Llama3 => {
            for m in messages {
                push(
                    w,
                    &[
                        "<|start_header_id|>",
                        &m.role,
                        "<|end_header_id|>\n\n",
                        trim(&m.content),
                        "<|eot_id|>",
                    ],
                );
            }
            if add_assistant {
                w.push_str("<|start_header_id|>assistant<|end_header_id|>\n\n");
            }
        }
        F::ChatGlm3 => {
            w.push_str("[gMASK]sop");
            for m in messages {
                push(w, &["<|", &m.role, "|>\n ", &m.content]);
            }
            if add_assistant {
                w.push_str("<|assistant|>");
            }
        }
        F::ChatGlm4 => {
            w.push_str("[gMASK]<sop>");
            for m in messages {
                push(w, &["<|", &m.role, "|>\n", &m.content]);
            }
            if add_assistant {
                w.push_str("<|assistant|>\n");
            }
        }
        F::GlmEdge => {
            for m in messages {
                push(w, &["<|", &m.role, "|>\n", &m.content]);
            }
            if add_assistant {
                w.push_str("<|assistant|>");
            }
        }
        F::MiniCpm => {
            for m in messages {
                if m.role == "user" {
                    push(w, &["<用户>", trim(&m.content), "<AI>"]);
                } else {
                    w.push_str(trim(&m.content));
                }
            }
        }
        F::DeepSeek2 => {
            for m in messages {
                match m.role.as_str() {
                    "system" => push(w, &[&m.content, "\n\n"]),
                    "user" => push(w, &["User: ", &m.content, "\n\n"]),
                    "assistant" => push(w, &["Assistant: ", &m.content, "<｜end▁of▁sentence｜>"]),
                    _ => {}
                }
            }
            if add_assistant {
                w.push_str("Assistant:");
            }
        }
        F::DeepSeek3 => {
            for m in messages {
                match m.role.as_str() {
                    "system" => push(w, &[&m.content, "\n\n"]),
                    "user" => push(w, &["<｜User｜>", &m.content]),
                    "assistant" => {
                        push(w, &["<｜Assistant｜>", &m.content, "<｜end▁of▁sentence｜>"])
                    }
                    _ => {}
                }
            }
            if add_assistant {
                w.push_str("<｜Assistant｜>");
            }
        }
        F::Exaone3 | F::Exaone4 => {
            for m in messages {
                let content = trim(&m.content);
                match m.role.as_str() {
                    "system" => push(w, &["[|system|]", content, "[|endofturn|]\n"]),
                    "user" => push(w, &["[|user|]", content, "\n"]),
                    "assistant" => push(w, &["[|assistant|]", content, "[|endofturn|]\n"]),
                    "tool" if family == F::Exaone4 => {
                        push(w, &["[|tool|]", content, "[|endofturn|]\n"])
                    }
                    _ => {}
                }
            }
            if add_assistant {
                w.push_str("[|assistant|]");
            }
        }
        F::RwkvWorld => {
            // The model ends a turn with "\n\n"; the assistant prefix follows the
            // last user message whatever add_assistant says.
            for (i, m) in messages.iter().enumerate() {
                let content = trim(&m.content);
                match m.role.as_str() {
                    "system" => push(w, &["System: ", content, "\n\n"]),
                    "user" => {
                        push(w, &["User: ", content, "\n\n"]);
                        if i + 1 == messages.len() {
                            w.push_str("Assistant:");
                        }
                    }
                    "assistant" => push(w, &["Assistant: ", content, "\n\n"]),
                    _ => {}
                }
            }
        }
        F::Granite => {
            for m in messages {
                push(w, &["<|start_of_role|>", &m.role, "<|end_of_role|>"]);
                if m.role == "assistant_tool_call" {
                    w.push_str("<|tool_call|>");
                }
                push(w, &[&m.content, "<|end_of_text|>\n"]);
            }
            if add_assistant {
                w.push_str("<|start_of_role|>assistant<|end_of_role|>");
            }
        }
        F::GigaChat => gigachat(w, messages, add_assistant),
        F::Megrez => {
            for m in messages {
                push(
                    w,
                    &[
                        "<|role_start|>",
                        &m.role,
                        "<|role_end|>",
                        &m.content,
                        "<|turn_end|>",
                    ],
                );
            }
            if add_assistant {
                w.push_str("<|role_start|>assistant<|role_end|>");
            }
        }
        F::Yandex => {
            // "\n\n" is the model's end-of-turn.
            for m in messages {
                match m.role.as_str() {
                    "user" => push(w, &[" Пользователь: ", &m.content, "\n\n"]),
                    "assistant" => push(w, &[" Ассистент: ", &m.content, "\n\n"]),
                    _ => {}
                }
            }
            if add_assistant {
                w.push_str(" Ассистент:[SEP]");
            }
        }
        F::Bailing | F::BailingThink => {
            for m in messages {
                push(
                    w,
                    &["<role>", &bailing_role(&m.role), "</role>", &m.content],
                );
            }
            if add_assistant {
                w.push_str("<role>ASSISTANT</role>");
                if family == F::BailingThink {
                    w.push_str("<think>");
                }
            }
        }
        F::Bailing2 => {
            if messages.first().is_none_or(|m| m.role != "system") {
                w.push_str("<role>SYSTEM</role>detailed thinking off<|role_end|>");
            }
            for m in messages {
                push(
                    w,
                    &[
                        "<role>",
                        &bailing_role(&m.role),
                        "</role>",
                        &m.content,
                        "<|role_end|>",
                    ],
                );
            }
            if add_assistant {
                w.push_str("<role>ASSISTANT</role>");
            }
        }
        F::Llama4 => {
            for m in messages {
                push(
                    w,
                    &[
                        "<|header_start|>",
                        &m.role,
                        "<|header_end|>\n\n",
                        trim(&m.content),
                        "<|eot|>",
                    ],
                );
            }
            if add_assistant {
                w.push_str("<|header_start|>assistant<|header_end|>\n\n");
            }
        }
        F::SmolVlm => {
            // <|im_start|> is SmolVLM's BOS here, not a ChatML turn marker.
            w.push_str("<|im_start|>");
            for m in messages {
                match m.role.as_str() {
                    "system" => push(w, &[&m.content, "\n\n"]),
                    "user" => push(w, &["User: ", &m.content, "<end_of_utterance>\n"]),
                    _ => push(w, &["Assistant: ", &m.content, "<end_of_utterance>\n"]),
                }
            }
            if add_assistant {
                w.push_str("Assistant:");
            }
        }
        F::Dots1 => {
            for m in messages {
                match m.role.as_str() {
                    "system" => push(w, &["<|system|>", &m.content, "<|endofsystem|>"]),
                    "user" => push(w, &["<|userprompt|>", &m.content, "<|endofuserprompt|>"]),
                    _ => push(w, &["<|response|>", &m.content, "<|endofresponse|>"]),
                }
            }
            if add_assistant {
                w.push_str("<|response|>");
            }
        }
        F::HunyuanMoe => {
            for m in messages {
                match m.role.as_str() {
                    "system" => push(w, &["<|startoftext|>", &m.content, "<|extra_4|>"]),
                    "assistant" => push(w, &[&m.content, "<|eos|>"]),
                    _ => push(w, &["<|startoftext|>", &m.content, "<|extra_0|>"]),
                }
            }
        }
        F::GptOss => {
            for m in messages {
                let end = if m.role == "assistant" {
                    "<|return|>"
                } else {
                    "<|end|>"
                };
                push(w, &["<|start|>", &m.role, "<|message|>", &m.content, end]);
            }
            if add_assistant {
                w.push_str("<|start|>assistant");
            }
        }
        F::HunyuanDense => {
            for (i, m) in messages.iter().enumerate() {
                if i == 0 && m.role == "system" {
                    push(w, &[&m.content, "<｜hy_place▁holder▁no▁3｜>"]);
                }
                match m.role.as_str() {
                    "assistant" => push(
                        w,
                        &[
                            "<｜hy_Assistant｜>",
                            &m.content,
                            "<｜hy_place▁holder▁no▁2｜>",
                        ],
                    ),
                    "user" => push(w, &["<｜hy_User｜>", &m.content, "<｜hy_Assistant｜>"]),
                    _ => {}
                }
            }
        }
        F::KimiK2 => {
            for m in messages {
                let header = match m.role.as_str() {
                    "system" => "<|im_system|>system<|im_middle|>",
                    "user" => "<|im_user|>user<|im_middle|>",
                    "assistant" => "<|im_assistant|>assistant<|im_middle|>",
                    "tool" => "<|im_system|>tool<|im_middle|>",
                    _ => "",
                };
                push(w, &[header, &m.content, "<|im_end|>"]);
            }
            if add_assistant {
                w.push_str("<|im_assistant|>assistant<|im_middle|>");
            }
        }
        F::SeedOss => {
            for m in messages {
                let content = if m.role == "assistant" {
                    trim(&m.content)
                } else {
                    &m.content
                };
                push(w, &["<seed:bos>", &m.role, "\n", content, "<seed:eos>"]);
            }
            if add_assistant {
                w.push_str("<seed:bos>assistant\n");
            }
        }
        F::Grok2 => {
            for m in messages {
                match m.role.as_str() {
                    "system" => push(w, &["System: ", trim(&m.content), "<|separator|>\n\n"]),
                    "user" => push(w, &["Human: ", trim(&m.content), "<|separator|>\n\n"]),
                    "assistant" => push(w, &["Assistant: ", &m.content, "<|separator|>\n\n"]),
                    _ => {}
                }
            }
            if add_assistant {
                w.push_str("Assistant:");
            }
        }
        F::PanguEmbedded => {
            for (i, m) in messages.iter().enumerate() {
                if i == 0 && m.role != "system" {
                    w.push_str("[unused9]系统：[unused10]");
                }
                let speaker = match m.role.as_str() {
                    "system" => "系统",
                    "user" => "用户",
                    "assistant" => "助手",
                    "tool" => "工具",
                    "function" => "方法",
                    _ => continue,
                };
                push(w, &["[unused9]", speaker, "：", &m.content, "[unused10]"]);
            }
            if add_assistant {
                w.push_str("[unused9]助手：");
            }
        }
    }
    out
}

fn push(out: &mut String, parts: &[&str]) {
    for p in parts {
        out.push_str(p);
    }
}

/// Whitespace trimmed as C's `isspace` does in llama.cpp (ASCII space, \t, \n,
/// \v, \f, \r only: a no-break space or an ideographic space is kept).
fn trim(s: &str) -> &str {
    s.trim_matches([' ', '\t', '\n', '\x0b', '\x0c', '\r'])
}

fn capitalize_first_ascii(role: &str) -> String {
    let mut r = role.to_string();
    if let Some(first) = r.get_mut(0..1) {
        first.make_ascii_uppercase();
    }
    r
}

/// Bailing's role names: "HUMAN" for the user, the others upper-cased.
fn bailing_role(role: &str) -> String {
    if role == "user" {
        "HUMAN".to_string()
    } else {
        role.to_ascii_uppercase()
    }
}

/// Mistral v7: system prompts in their own block, no turn nesting. The tekken
/// variant drops the space after each opening tag.
fn mistral_v7(w: &mut String, messages: &[ChatMessage], space: bool) {
    let sp = if space { " " } else { "" };
    for m in messages {
        match m.role.as_str() {
            "system" => push(w, &["[SYSTEM_PROMPT]", sp, &m.content, "[/SYSTEM_PROMPT]"]),
            "user" => push(w, &["[INST]", sp, &m.content, "[/INST]"]),
            _ => push(w, &[sp, &m.content, "</s>"]),
        }
    }
}

/// Mistral v1/v3/v3-tekken: a system message joins the user turn it precedes;
/// v1 puts spaces around the tags, tekken none after them, v3 trims replies.
fn mistral_v1_v3(w: &mut String, messages: &[ChatMessage], family: ChatFamily) {
    let leading = if family == ChatFamily::MistralV1 {
        " "
    } else {
        ""
    };
    let trailing = if family == ChatFamily::MistralV3Tekken {
        ""
    } else {
        " "
    };
    let trim_reply = family == ChatFamily::MistralV3;
    let mut inside_turn = false;
    for m in messages {
        if !inside_turn {
            push(w, &[leading, "[INST]", trailing]);
            inside_turn = true;
        }
        match m.role.as_str() {
            "system" => push(w, &[&m.content, "\n\n"]),
            "user" => push(w, &[&m.content, leading, "[/INST]"]),
            _ => {
                let content = if trim_reply {
                    trim(&m.content)
                } else {
                    &m.content
                };
                push(w, &[trailing, content, "</s>"]);
                inside_turn = false;
            }
        }
    }
}

/// Llama 2: the first [INST] needs no BOS (the tokenizer adds it); a system
/// message goes in a <<SYS>> block, or bare when the template has none.
fn llama2(w: &mut String, messages: &[ChatMessage], family: ChatFamily) {
    let system_block = family != ChatFamily::Llama2;
    let bos_inside = family == ChatFamily::Llama2SysBos;
    let strip = family == ChatFamily::Llama2SysStrip;
    let mut inside_turn = true;
    w.push_str("[INST] ");
    for m in messages {
        let content = if strip { trim(&m.content) } else { &m.content };
        if !inside_turn {
            inside_turn = true;
            w.push_str(if bos_inside { "<s>[INST] " } else { "[INST] " });
        }
        match m.role.as_str() {
            "system" if system_block => push(w, &["<<SYS>>\n", content, "\n<</SYS>>\n\n"]),
            "system" => push(w, &[content, "\n"]),
            "user" => push(w, &[content, " [/INST]"]),
            _ => {
                push(w, &[content, "</s>"]);
                inside_turn = false;
            }
        }
    }
}

/// Gemma has no system role: system text joins the next user turn, and the
/// assistant is called "model".
fn gemma(w: &mut String, messages: &[ChatMessage], add_assistant: bool) {
    let mut system = String::new();
    for m in messages {
        if m.role == "system" {
            system.push_str(trim(&m.content));
            continue;
        }
        let role = if m.role == "assistant" {
            "model"
        } else {
            m.role.as_str()
        };
        push(w, &["<start_of_turn>", role, "\n"]);
        if !system.is_empty() && role != "model" {
            push(w, &[&system, "\n\n"]);
            system.clear();
        }
        push(w, &[trim(&m.content), "<end_of_turn>\n"]);
    }
    if add_assistant {
        w.push_str("<start_of_turn>model\n");
    }
}

/// Orion has no system role either: system text joins the next user turn.
fn orion(w: &mut String, messages: &[ChatMessage]) {
    let mut system = String::new();
    for m in messages {
        match m.role.as_str() {
            "system" => system.push_str(&m.content),
            "user" => {
                w.push_str("Human: ");
                if !system.is_empty() {
                    push(w, &[&system, "\n\n"]);
                    system.clear();
                }
                push(w, &[&m.content, "\n\nAssistant: </s>"]);
            }
            _ => push(w, &[&m.content, "</s>"]),
        }
    }
}

/// GigaChat: an optional leading system message, then user/assistant turns,
/// each user turn followed by an empty function list.
fn gigachat(w: &mut String, messages: &[ChatMessage], add_assistant: bool) {
    let has_system = messages.first().is_some_and(|m| m.role == "system");
    w.push_str("<s>");
    if has_system {
        push(w, &[&messages[0].content, "<|message_sep|>"]);
    }
    for m in &messages[usize::from(has_system)..] {
        match m.role.as_str() {
            "user" => push(
                w,
                &[
                    "user<|role_sep|>",
                    &m.content,
                    "<|message_sep|>",
                    "available functions<|role_sep|>[]<|message_sep|>",
                ],
            ),
            "assistant" => push(w, &["assistant<|role_sep|>", &m.content, "<|message_sep|>"]),
            _ => {}
        }
    }
    if add_assistant {
        w.push_str("assistant<|role_sep|>");
    }
}

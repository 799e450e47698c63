//! Chat templates: the Jinja renderer against Python's jinja2 set up as
//! transformers sets it up (golden/templates/rendered.json, written by
//! scripts/render-chat-golden.py), family detection on real models'
//! templates, the built-in formatters against the text llama.cpp's
//! `llm_chat_apply_template` writes, and the error cases.

mod common;

#[cfg(target_arch = "wasm32")]
use wasm_bindgen_test::wasm_bindgen_test as test;

use common::{golden_path, list_dir, read_file};
use lamina::chat::{detect_family, ChatFamily, ChatMessage, ChatTemplate};
use lamina::gguf::{Metadata, Value};
use lamina::Error;

fn golden() -> serde_json::Value {
    serde_json::from_slice(&read_file(&golden_path("templates/rendered.json")))
        .expect("rendered.json parses")
}

fn template_text(file: &str) -> String {
    String::from_utf8(read_file(&golden_path(&format!("templates/{file}")))).unwrap()
}

fn messages_of(conversation: &serde_json::Value) -> Vec<ChatMessage> {
    serde_json::from_value(conversation["messages"].clone()).expect("messages deserialize")
}

/// What a Python render gave: the text, or the error and whether the template
/// raised it itself (`raise_exception`).
enum Expected {
    Output(String),
    Error {
        message: String,
        raised_by_template: bool,
    },
}

fn expected_of(render: &serde_json::Value) -> Expected {
    match render.get("output") {
        Some(out) => Expected::Output(out.as_str().unwrap().to_string()),
        None => Expected::Error {
            message: render["error"].as_str().unwrap().to_string(),
            raised_by_template: render["raised_by_template"].as_bool().unwrap(),
        },
    }
}

/// Compares one render with Python's; a mismatch is returned as a description.
fn compare(what: &str, got: lamina::Result<String>, want: &Expected) -> Option<String> {
    match (got, want) {
        (Ok(got), Expected::Output(want)) if &got == want => None,
        (Ok(got), Expected::Output(want)) => Some(format!(
            "{what}: output differs from jinja2\n--- jinja2:\n{want:?}\n--- lamina:\n{got:?}"
        )),
        (Ok(got), Expected::Error { message, .. }) => Some(format!(
            "{what}: jinja2 raised {message:?} but lamina rendered {got:?}"
        )),
        (Err(e), Expected::Output(want)) => Some(format!(
            "{what}: lamina failed ({e}) where jinja2 rendered {want:?}"
        )),
        (
            Err(e),
            Expected::Error {
                message,
                raised_by_template: true,
            },
        ) => {
            let text = e.to_string();
            let expected = format!("the template raised an exception: {message}");
            (!text.contains(&expected))
                .then(|| format!("{what}: jinja2 raised {message:?}, lamina's error is {text:?}"))
        }
        // Jinja2's own errors (a TypeError, an UndefinedError) are worded the
        // Python way; both engines failing is what matters.
        (
            Err(_),
            Expected::Error {
                raised_by_template: false,
                ..
            },
        ) => None,
    }
}

#[test]
fn golden_has_every_template_file() {
    let golden = golden();
    let mut files: Vec<String> = list_dir(&golden_path("templates"))
        .into_iter()
        .filter(|f| f.ends_with(".jinja"))
        .collect();
    files.sort();
    let mut rendered: Vec<String> = golden["templates"]
        .as_object()
        .unwrap()
        .keys()
        .cloned()
        .collect();
    rendered.sort();
    assert_eq!(files, rendered, "run scripts/render-chat-golden.py");
    assert_eq!(files.len(), 15);
}

/// (a) Every model template parses and renders every conversation through
/// the Jinja path exactly as Python's jinja2 does, failures included.
#[test]
fn model_templates_render_like_jinja2() {
    let golden = golden();
    let fixed_time = golden["fixed_time"].as_i64().unwrap();
    let conversations = &golden["conversations"];
    let mut failures = Vec::new();
    let mut compared = 0;
    for (file, entry) in golden["templates"].as_object().unwrap() {
        let source = template_text(file);
        let bos = entry["bos_token"].as_str().unwrap();
        let eos = entry["eos_token"].as_str().unwrap();
        let template = match ChatTemplate::new(&source, bos, eos) {
            Ok(t) => t.with_fixed_time(fixed_time),
            Err(e) => {
                failures.push(format!("{file}: does not parse: {e}"));
                continue;
            }
        };
        for (conv_name, render) in entry["renders"].as_object().unwrap() {
            let conversation = &conversations[conv_name];
            let messages = messages_of(conversation);
            let add = conversation["add_generation_prompt"].as_bool().unwrap();
            let got = template.apply_jinja(&messages, add);
            compared += 1;
            if let Some(f) = compare(&format!("{file} / {conv_name}"), got, &expected_of(render)) {
                failures.push(f);
            }
        }
    }
    assert_eq!(compared, 45);
    assert!(failures.is_empty(), "{}", failures.join("\n\n"));
}

/// (a) The probes: one small template per Jinja feature the model templates
/// rely on (tojson, Python string/dict methods, loop variables, undefined
/// values, whitespace control...), against jinja2.
#[test]
fn jinja_features_match_jinja2() {
    let golden = golden();
    let fixed_time = golden["fixed_time"].as_i64().unwrap();
    let conversation = &golden["conversations"][golden["probe_conversation"].as_str().unwrap()];
    let messages = messages_of(conversation);
    let add = conversation["add_generation_prompt"].as_bool().unwrap();
    let mut failures = Vec::new();
    let probes = golden["probes"].as_object().unwrap();
    assert!(probes.len() >= 15);
    for (name, probe) in probes {
        let source = probe["template"].as_str().unwrap();
        let got = ChatTemplate::new(source, "<s>", "</s>")
            .and_then(|t| t.with_fixed_time(fixed_time).apply_jinja(&messages, add));
        if let Some(f) = compare(&format!("probe {name}"), got, &expected_of(probe)) {
            failures.push(f);
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n\n"));
}

/// (b) Detection on real models' templates names the family llama.cpp names.
#[test]
fn detection_on_model_templates() {
    use ChatFamily as F;
    let cases: &[(&str, Option<ChatFamily>)] = &[
        ("HuggingFaceTB-SmolLM3-3B.jinja", Some(F::ChatMl)),
        (
            "NousResearch-Hermes-3-Llama-3.1-8B-tool_use.jinja",
            Some(F::ChatMl),
        ),
        ("Qwen-Qwen2.5-7B-Instruct.jinja", Some(F::ChatMl)),
        ("Qwen-Qwen3-0.6B.jinja", Some(F::ChatMl)),
        (
            "deepseek-ai-DeepSeek-R1-Distill-Qwen-32B.jinja",
            Some(F::DeepSeek3),
        ),
        ("google-gemma-2-2b-it.jinja", Some(F::Gemma)),
        (
            "ibm-granite-granite-3.3-2B-Instruct.jinja",
            Some(F::Granite),
        ),
        ("meta-llama-Llama-3.1-8B-Instruct.jinja", Some(F::Llama3)),
        ("meta-llama-Llama-3.2-3B-Instruct.jinja", Some(F::Llama3)),
        ("microsoft-Phi-3.5-mini-instruct.jinja", Some(F::Phi3)),
        // [AVAILABLE_TOOLS] and "[INST]" in double quotes: Nemo uses Tekken.
        (
            "mistralai-Mistral-Nemo-Instruct-2407.jinja",
            Some(F::MistralV3Tekken),
        ),
        // Harmony is left to Jinja (see lamina::chat::detect_family).
        ("openai-gpt-oss-120b.jinja", None),
    ];
    for &(file, want) in cases {
        let source = template_text(file);
        assert_eq!(detect_family(&source), want, "{file}");
        let template = ChatTemplate::new(&source, "", "").unwrap();
        assert_eq!(template.family(), want, "{file}");
    }
    assert_eq!(cases.len(), 12);
}

/// (b) Each substring test, and the order between overlapping ones.
#[test]
fn detection_follows_llama_cpp_order() {
    use ChatFamily as F;
    let cases: &[(&str, Option<ChatFamily>)] = &[
        ("{{ '<|im_start|>' + role }}", Some(F::ChatMl)),
        // ChatML wins over anything later, [INST] included.
        ("<|im_start|>[INST]<start_of_turn>", Some(F::ChatMl)),
        ("<|im_start|><|im_sep|>", Some(F::Phi4)),
        ("<|im_start|>User:<end_of_utterance>", Some(F::SmolVlm)),
        ("[SYSTEM_PROMPT] [INST]", Some(F::MistralV7)),
        ("{{ ' [INST] ' + system_message }}", Some(F::MistralV1)),
        ("[AVAILABLE_TOOLS]{{ \"[INST]\" }}", Some(F::MistralV3Tekken)),
        ("[AVAILABLE_TOOLS]{{ '[INST]' }}", Some(F::MistralV3)),
        ("{{ '[INST] ' + content.strip() }}<<SYS>>", Some(F::Llama2SysStrip)),
        ("{{ bos_token + '[INST] ' }}<<SYS>>", Some(F::Llama2SysBos)),
        ("[INST] <<SYS>>", Some(F::Llama2Sys)),
        ("[INST]", Some(F::Llama2)),
        // A template starting with "mistral" is an [INST] template.
        ("mistral-ish", Some(F::Llama2)),
        ("<|user|><|assistant|><|end|>", Some(F::Phi3)),
        ("[gMASK]<sop><|user|>", Some(F::ChatGlm4)),
        ("<|user|><|assistant|></s>", Some(F::Falcon3)),
        ("<|user|><|assistant|>", Some(F::GlmEdge)),
        ("<|{{ item['role'] }}|><|begin_of_image|>", Some(F::GlmEdge)),
        ("<|user|><|endoftext|>", Some(F::Zephyr)),
        ("{{ bos_token + message['role'] }}", Some(F::Monarch)),
        ("<start_of_turn>", Some(F::Gemma)),
        ("{{ '\\n\\nAssistant: ' + eos_token }}", Some(F::Orion)),
        ("GPT4 Correct User", Some(F::OpenChat)),
        ("SYSTEM: USER: ASSISTANT: ", Some(F::VicunaOrca)),
        ("USER: ASSISTANT: ", Some(F::Vicuna)),
        ("### Instruction:<|EOT|>", Some(F::DeepSeek)),
        ("<|START_OF_TURN_TOKEN|><|USER_TOKEN|>", Some(F::CommandR)),
        ("<|start_header_id|><|end_header_id|>", Some(F::Llama3)),
        ("[gMASK]sop", Some(F::ChatGlm3)),
        ("<用户>", Some(F::MiniCpm)),
        ("{{ 'Assistant: ' + message['content'] + eos_token }}", Some(F::DeepSeek2)),
        ("<｜User｜><｜Assistant｜><｜end▁of▁sentence｜>", Some(F::DeepSeek3)),
        ("[|system|][|assistant|][|endofturn|][|tool|]", Some(F::Exaone4)),
        ("[|system|][|assistant|][|endofturn|]", Some(F::Exaone3)),
        ("rwkv-world", Some(F::RwkvWorld)),
        ("{{- 'User: ' + message['content']|trim + '\\n\\n' -}}", Some(F::RwkvWorld)),
        ("<|start_of_role|>", Some(F::Granite)),
        (
            "{{ message['role'] + additional_special_tokens[0] + message['content'] + additional_special_tokens[1] }}",
            Some(F::GigaChat),
        ),
        ("<|role_start|>", Some(F::Megrez)),
        ("{{ ' Ассистент:' }}", Some(F::Yandex)),
        ("<role>ASSISTANT</role>{% set r = 'HUMAN' %}", Some(F::Bailing)),
        ("<role>ASSISTANT</role>{% set r = \"HUMAN\" %}<think>", Some(F::BailingThink)),
        ("<role>ASSISTANT</role><role>HUMAN</role><|role_end|>", Some(F::Bailing2)),
        ("<|header_start|><|header_end|>", Some(F::Llama4)),
        ("<|endofuserprompt|>", Some(F::Dots1)),
        ("<|extra_0|><|extra_4|>", Some(F::HunyuanMoe)),
        ("<|start|>user<|channel|>final", None),
        ("<｜hy_Assistant｜><｜hy_place▁holder▁no▁3｜>", Some(F::HunyuanDense)),
        ("<|im_assistant|>assistant<|im_middle|>", Some(F::KimiK2)),
        ("<seed:bos>", Some(F::SeedOss)),
        ("{{ 'Assistant: '  + message['content'] + '<|separator|>' }}", Some(F::Grok2)),
        ("[unused9]系统：[unused10]", Some(F::PanguEmbedded)),
        ("{{ messages }}", None),
        ("", None),
    ];
    for &(template, want) in cases {
        assert_eq!(detect_family(template), want, "{template:?}");
    }
}

/// Family names are accepted as templates (llama.cpp's
/// `llm_chat_template_from_str`), and name and family map both ways.
#[test]
fn family_names() {
    let names: Vec<&str> = ChatFamily::names().collect();
    assert_eq!(names.len(), 48);
    for name in names {
        let family = ChatFamily::from_name(name).unwrap();
        assert_eq!(family.name(), name);
        assert_eq!(family.to_string(), name);
        assert_eq!(detect_family(name), Some(family));
        let template = ChatTemplate::new(name, "<s>", "</s>").unwrap();
        assert_eq!(template.family(), Some(family));
    }
    assert_eq!(ChatFamily::from_name("gemma"), Some(ChatFamily::Gemma));
    assert_eq!(
        ChatFamily::from_name("mistral-v7"),
        Some(ChatFamily::MistralV7)
    );
    assert_eq!(ChatFamily::from_name("gpt-oss"), Some(ChatFamily::GptOss));
    assert_eq!(ChatFamily::from_name("dots1"), None);
    assert_eq!(ChatFamily::Dots1.name(), "dots1");
    assert_eq!(ChatFamily::from_name("ChatML"), None);
}

/// The conversation of llama.cpp's tests/test-chat-template.cpp: a system
/// prompt, three user turns, and an assistant reply padded with spaces (to
/// show which formats trim).
fn conversation() -> Vec<ChatMessage> {
    vec![
        ChatMessage::new("system", "You are a helpful assistant"),
        ChatMessage::new("user", "Hello"),
        ChatMessage::new("assistant", "Hi there"),
        ChatMessage::new("user", "Who are you"),
        ChatMessage::new("assistant", "   I am an assistant   "),
        ChatMessage::new("user", "Another question"),
    ]
}

/// (c) Each built-in formatter writes what llama.cpp's
/// `llm_chat_apply_template` writes for the conversation, with the generation
/// prompt.
#[test]
fn builtin_formatters_match_llama_cpp() {
    let cases: &[(&str, &str)] = &[
        ("chatml", "<|im_start|>system\nYou are a helpful assistant<|im_end|>\n<|im_start|>user\nHello<|im_end|>\n<|im_start|>assistant\nHi there<|im_end|>\n<|im_start|>user\nWho are you<|im_end|>\n<|im_start|>assistant\n   I am an assistant   <|im_end|>\n<|im_start|>user\nAnother question<|im_end|>\n<|im_start|>assistant\n"),
        ("llama2", "[INST] You are a helpful assistant\nHello [/INST]Hi there</s>[INST] Who are you [/INST]   I am an assistant   </s>[INST] Another question [/INST]"),
        ("llama2-sys", "[INST] <<SYS>>\nYou are a helpful assistant\n<</SYS>>\n\nHello [/INST]Hi there</s>[INST] Who are you [/INST]   I am an assistant   </s>[INST] Another question [/INST]"),
        ("llama2-sys-bos", "[INST] <<SYS>>\nYou are a helpful assistant\n<</SYS>>\n\nHello [/INST]Hi there</s><s>[INST] Who are you [/INST]   I am an assistant   </s><s>[INST] Another question [/INST]"),
        ("llama2-sys-strip", "[INST] <<SYS>>\nYou are a helpful assistant\n<</SYS>>\n\nHello [/INST]Hi there</s>[INST] Who are you [/INST]I am an assistant</s>[INST] Another question [/INST]"),
        ("mistral-v1", " [INST] You are a helpful assistant\n\nHello [/INST] Hi there</s> [INST] Who are you [/INST]    I am an assistant   </s> [INST] Another question [/INST]"),
        ("mistral-v3", "[INST] You are a helpful assistant\n\nHello[/INST] Hi there</s>[INST] Who are you[/INST] I am an assistant</s>[INST] Another question[/INST]"),
        ("mistral-v3-tekken", "[INST]You are a helpful assistant\n\nHello[/INST]Hi there</s>[INST]Who are you[/INST]   I am an assistant   </s>[INST]Another question[/INST]"),
        ("mistral-v7", "[SYSTEM_PROMPT] You are a helpful assistant[/SYSTEM_PROMPT][INST] Hello[/INST] Hi there</s>[INST] Who are you[/INST]    I am an assistant   </s>[INST] Another question[/INST]"),
        ("mistral-v7-tekken", "[SYSTEM_PROMPT]You are a helpful assistant[/SYSTEM_PROMPT][INST]Hello[/INST]Hi there</s>[INST]Who are you[/INST]   I am an assistant   </s>[INST]Another question[/INST]"),
        ("phi3", "<|system|>\nYou are a helpful assistant<|end|>\n<|user|>\nHello<|end|>\n<|assistant|>\nHi there<|end|>\n<|user|>\nWho are you<|end|>\n<|assistant|>\n   I am an assistant   <|end|>\n<|user|>\nAnother question<|end|>\n<|assistant|>\n"),
        ("phi4", "<|im_start|>system<|im_sep|>You are a helpful assistant<|im_end|><|im_start|>user<|im_sep|>Hello<|im_end|><|im_start|>assistant<|im_sep|>Hi there<|im_end|><|im_start|>user<|im_sep|>Who are you<|im_end|><|im_start|>assistant<|im_sep|>   I am an assistant   <|im_end|><|im_start|>user<|im_sep|>Another question<|im_end|><|im_start|>assistant<|im_sep|>"),
        ("falcon3", "<|system|>\nYou are a helpful assistant\n<|user|>\nHello\n<|assistant|>\nHi there\n<|user|>\nWho are you\n<|assistant|>\n   I am an assistant   \n<|user|>\nAnother question\n<|assistant|>\n"),
        ("zephyr", "<|system|>\nYou are a helpful assistant<|endoftext|>\n<|user|>\nHello<|endoftext|>\n<|assistant|>\nHi there<|endoftext|>\n<|user|>\nWho are you<|endoftext|>\n<|assistant|>\n   I am an assistant   <|endoftext|>\n<|user|>\nAnother question<|endoftext|>\n<|assistant|>\n"),
        ("monarch", "system\nYou are a helpful assistant</s>\n<s>user\nHello</s>\n<s>assistant\nHi there</s>\n<s>user\nWho are you</s>\n<s>assistant\n   I am an assistant   </s>\n<s>user\nAnother question</s>\n<s>assistant\n"),
        ("gemma", "<start_of_turn>user\nYou are a helpful assistant\n\nHello<end_of_turn>\n<start_of_turn>model\nHi there<end_of_turn>\n<start_of_turn>user\nWho are you<end_of_turn>\n<start_of_turn>model\nI am an assistant<end_of_turn>\n<start_of_turn>user\nAnother question<end_of_turn>\n<start_of_turn>model\n"),
        ("orion", "Human: You are a helpful assistant\n\nHello\n\nAssistant: </s>Hi there</s>Human: Who are you\n\nAssistant: </s>   I am an assistant   </s>Human: Another question\n\nAssistant: </s>"),
        ("openchat", "You are a helpful assistant<|end_of_turn|>GPT4 Correct User: Hello<|end_of_turn|>GPT4 Correct Assistant: Hi there<|end_of_turn|>GPT4 Correct User: Who are you<|end_of_turn|>GPT4 Correct Assistant:    I am an assistant   <|end_of_turn|>GPT4 Correct User: Another question<|end_of_turn|>GPT4 Correct Assistant:"),
        ("vicuna", "You are a helpful assistant\n\nUSER: Hello\nASSISTANT: Hi there</s>\nUSER: Who are you\nASSISTANT:    I am an assistant   </s>\nUSER: Another question\nASSISTANT:"),
        ("vicuna-orca", "SYSTEM: You are a helpful assistant\nUSER: Hello\nASSISTANT: Hi there</s>\nUSER: Who are you\nASSISTANT:    I am an assistant   </s>\nUSER: Another question\nASSISTANT:"),
        ("deepseek", "You are a helpful assistant### Instruction:\nHello\n### Response:\nHi there\n<|EOT|>\n### Instruction:\nWho are you\n### Response:\n   I am an assistant   \n<|EOT|>\n### Instruction:\nAnother question\n### Response:\n"),
        ("deepseek2", "You are a helpful assistant\n\nUser: Hello\n\nAssistant: Hi there<｜end▁of▁sentence｜>User: Who are you\n\nAssistant:    I am an assistant   <｜end▁of▁sentence｜>User: Another question\n\nAssistant:"),
        ("deepseek3", "You are a helpful assistant\n\n<｜User｜>Hello<｜Assistant｜>Hi there<｜end▁of▁sentence｜><｜User｜>Who are you<｜Assistant｜>   I am an assistant   <｜end▁of▁sentence｜><｜User｜>Another question<｜Assistant｜>"),
        ("command-r", "<|START_OF_TURN_TOKEN|><|SYSTEM_TOKEN|>You are a helpful assistant<|END_OF_TURN_TOKEN|><|START_OF_TURN_TOKEN|><|USER_TOKEN|>Hello<|END_OF_TURN_TOKEN|><|START_OF_TURN_TOKEN|><|CHATBOT_TOKEN|>Hi there<|END_OF_TURN_TOKEN|><|START_OF_TURN_TOKEN|><|USER_TOKEN|>Who are you<|END_OF_TURN_TOKEN|><|START_OF_TURN_TOKEN|><|CHATBOT_TOKEN|>I am an assistant<|END_OF_TURN_TOKEN|><|START_OF_TURN_TOKEN|><|USER_TOKEN|>Another question<|END_OF_TURN_TOKEN|><|START_OF_TURN_TOKEN|><|CHATBOT_TOKEN|>"),
        ("llama3", "<|start_header_id|>system<|end_header_id|>\n\nYou are a helpful assistant<|eot_id|><|start_header_id|>user<|end_header_id|>\n\nHello<|eot_id|><|start_header_id|>assistant<|end_header_id|>\n\nHi there<|eot_id|><|start_header_id|>user<|end_header_id|>\n\nWho are you<|eot_id|><|start_header_id|>assistant<|end_header_id|>\n\nI am an assistant<|eot_id|><|start_header_id|>user<|end_header_id|>\n\nAnother question<|eot_id|><|start_header_id|>assistant<|end_header_id|>\n\n"),
        ("chatglm3", "[gMASK]sop<|system|>\n You are a helpful assistant<|user|>\n Hello<|assistant|>\n Hi there<|user|>\n Who are you<|assistant|>\n    I am an assistant   <|user|>\n Another question<|assistant|>"),
        ("chatglm4", "[gMASK]<sop><|system|>\nYou are a helpful assistant<|user|>\nHello<|assistant|>\nHi there<|user|>\nWho are you<|assistant|>\n   I am an assistant   <|user|>\nAnother question<|assistant|>\n"),
        ("glmedge", "<|system|>\nYou are a helpful assistant<|user|>\nHello<|assistant|>\nHi there<|user|>\nWho are you<|assistant|>\n   I am an assistant   <|user|>\nAnother question<|assistant|>"),
        ("minicpm", "You are a helpful assistant<用户>Hello<AI>Hi there<用户>Who are you<AI>I am an assistant<用户>Another question<AI>"),
        ("exaone3", "[|system|]You are a helpful assistant[|endofturn|]\n[|user|]Hello\n[|assistant|]Hi there[|endofturn|]\n[|user|]Who are you\n[|assistant|]I am an assistant[|endofturn|]\n[|user|]Another question\n[|assistant|]"),
        ("exaone4", "[|system|]You are a helpful assistant[|endofturn|]\n[|user|]Hello\n[|assistant|]Hi there[|endofturn|]\n[|user|]Who are you\n[|assistant|]I am an assistant[|endofturn|]\n[|user|]Another question\n[|assistant|]"),
        ("rwkv-world", "System: You are a helpful assistant\n\nUser: Hello\n\nAssistant: Hi there\n\nUser: Who are you\n\nAssistant: I am an assistant\n\nUser: Another question\n\nAssistant:"),
        ("granite", "<|start_of_role|>system<|end_of_role|>You are a helpful assistant<|end_of_text|>\n<|start_of_role|>user<|end_of_role|>Hello<|end_of_text|>\n<|start_of_role|>assistant<|end_of_role|>Hi there<|end_of_text|>\n<|start_of_role|>user<|end_of_role|>Who are you<|end_of_text|>\n<|start_of_role|>assistant<|end_of_role|>   I am an assistant   <|end_of_text|>\n<|start_of_role|>user<|end_of_role|>Another question<|end_of_text|>\n<|start_of_role|>assistant<|end_of_role|>"),
        ("gigachat", "<s>You are a helpful assistant<|message_sep|>user<|role_sep|>Hello<|message_sep|>available functions<|role_sep|>[]<|message_sep|>assistant<|role_sep|>Hi there<|message_sep|>user<|role_sep|>Who are you<|message_sep|>available functions<|role_sep|>[]<|message_sep|>assistant<|role_sep|>   I am an assistant   <|message_sep|>user<|role_sep|>Another question<|message_sep|>available functions<|role_sep|>[]<|message_sep|>assistant<|role_sep|>"),
        ("megrez", "<|role_start|>system<|role_end|>You are a helpful assistant<|turn_end|><|role_start|>user<|role_end|>Hello<|turn_end|><|role_start|>assistant<|role_end|>Hi there<|turn_end|><|role_start|>user<|role_end|>Who are you<|turn_end|><|role_start|>assistant<|role_end|>   I am an assistant   <|turn_end|><|role_start|>user<|role_end|>Another question<|turn_end|><|role_start|>assistant<|role_end|>"),
        ("yandex", " Пользователь: Hello\n\n Ассистент: Hi there\n\n Пользователь: Who are you\n\n Ассистент:    I am an assistant   \n\n Пользователь: Another question\n\n Ассистент:[SEP]"),
        ("bailing", "<role>SYSTEM</role>You are a helpful assistant<role>HUMAN</role>Hello<role>ASSISTANT</role>Hi there<role>HUMAN</role>Who are you<role>ASSISTANT</role>   I am an assistant   <role>HUMAN</role>Another question<role>ASSISTANT</role>"),
        ("bailing-think", "<role>SYSTEM</role>You are a helpful assistant<role>HUMAN</role>Hello<role>ASSISTANT</role>Hi there<role>HUMAN</role>Who are you<role>ASSISTANT</role>   I am an assistant   <role>HUMAN</role>Another question<role>ASSISTANT</role><think>"),
        ("bailing2", "<role>SYSTEM</role>You are a helpful assistant<|role_end|><role>HUMAN</role>Hello<|role_end|><role>ASSISTANT</role>Hi there<|role_end|><role>HUMAN</role>Who are you<|role_end|><role>ASSISTANT</role>   I am an assistant   <|role_end|><role>HUMAN</role>Another question<|role_end|><role>ASSISTANT</role>"),
        ("llama4", "<|header_start|>system<|header_end|>\n\nYou are a helpful assistant<|eot|><|header_start|>user<|header_end|>\n\nHello<|eot|><|header_start|>assistant<|header_end|>\n\nHi there<|eot|><|header_start|>user<|header_end|>\n\nWho are you<|eot|><|header_start|>assistant<|header_end|>\n\nI am an assistant<|eot|><|header_start|>user<|header_end|>\n\nAnother question<|eot|><|header_start|>assistant<|header_end|>\n\n"),
        ("smolvlm", "<|im_start|>You are a helpful assistant\n\nUser: Hello<end_of_utterance>\nAssistant: Hi there<end_of_utterance>\nUser: Who are you<end_of_utterance>\nAssistant:    I am an assistant   <end_of_utterance>\nUser: Another question<end_of_utterance>\nAssistant:"),
        ("hunyuan-moe", "<|startoftext|>You are a helpful assistant<|extra_4|><|startoftext|>Hello<|extra_0|>Hi there<|eos|><|startoftext|>Who are you<|extra_0|>   I am an assistant   <|eos|><|startoftext|>Another question<|extra_0|>"),
        ("gpt-oss", "<|start|>system<|message|>You are a helpful assistant<|end|><|start|>user<|message|>Hello<|end|><|start|>assistant<|message|>Hi there<|return|><|start|>user<|message|>Who are you<|end|><|start|>assistant<|message|>   I am an assistant   <|return|><|start|>user<|message|>Another question<|end|><|start|>assistant"),
        ("hunyuan-dense", "You are a helpful assistant<｜hy_place▁holder▁no▁3｜><｜hy_User｜>Hello<｜hy_Assistant｜><｜hy_Assistant｜>Hi there<｜hy_place▁holder▁no▁2｜><｜hy_User｜>Who are you<｜hy_Assistant｜><｜hy_Assistant｜>   I am an assistant   <｜hy_place▁holder▁no▁2｜><｜hy_User｜>Another question<｜hy_Assistant｜>"),
        ("kimi-k2", "<|im_system|>system<|im_middle|>You are a helpful assistant<|im_end|><|im_user|>user<|im_middle|>Hello<|im_end|><|im_assistant|>assistant<|im_middle|>Hi there<|im_end|><|im_user|>user<|im_middle|>Who are you<|im_end|><|im_assistant|>assistant<|im_middle|>   I am an assistant   <|im_end|><|im_user|>user<|im_middle|>Another question<|im_end|><|im_assistant|>assistant<|im_middle|>"),
        ("seed_oss", "<seed:bos>system\nYou are a helpful assistant<seed:eos><seed:bos>user\nHello<seed:eos><seed:bos>assistant\nHi there<seed:eos><seed:bos>user\nWho are you<seed:eos><seed:bos>assistant\nI am an assistant<seed:eos><seed:bos>user\nAnother question<seed:eos><seed:bos>assistant\n"),
        ("grok-2", "System: You are a helpful assistant<|separator|>\n\nHuman: Hello<|separator|>\n\nAssistant: Hi there<|separator|>\n\nHuman: Who are you<|separator|>\n\nAssistant:    I am an assistant   <|separator|>\n\nHuman: Another question<|separator|>\n\nAssistant:"),
        ("pangu-embedded", "[unused9]系统：You are a helpful assistant[unused10][unused9]用户：Hello[unused10][unused9]助手：Hi there[unused10][unused9]用户：Who are you[unused10][unused9]助手：   I am an assistant   [unused10][unused9]用户：Another question[unused10][unused9]助手："),
    ];
    let messages = conversation();
    let mut failures = Vec::new();
    for &(name, want) in cases {
        let template = ChatTemplate::new(name, "<s>", "</s>").unwrap();
        let got = template.apply(&messages, true).unwrap();
        if got != want {
            failures.push(format!("{name}:\n  want {want:?}\n  got  {got:?}"));
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
    // Every named family is covered.
    assert_eq!(cases.len(), ChatFamily::names().count());
}

/// (c) The branches the main conversation does not reach: no generation
/// prompt, no system message, a tool turn.
#[test]
fn builtin_formatter_variants() {
    let user_only = [ChatMessage::new("user", "Hi")];
    let no_system = &conversation()[1..3];
    let format = |name: &str, messages: &[ChatMessage], add: bool| {
        ChatTemplate::new(name, "", "")
            .unwrap()
            .apply(messages, add)
            .unwrap()
    };
    assert_eq!(
        format("chatml", &user_only, false),
        "<|im_start|>user\nHi<|im_end|>\n"
    );
    assert_eq!(
        format("llama3", &user_only, false),
        "<|start_header_id|>user<|end_header_id|>\n\nHi<|eot_id|>"
    );
    assert_eq!(
        format("gemma", &user_only, false),
        "<start_of_turn>user\nHi<end_of_turn>\n"
    );
    assert_eq!(format("phi3", &user_only, false), "<|user|>\nHi<|end|>\n");
    assert_eq!(
        format("granite", &user_only, false),
        "<|start_of_role|>user<|end_of_role|>Hi<|end_of_text|>\n"
    );
    // Families whose format has no generation prompt ignore the flag.
    assert_eq!(format("mistral-v7", &user_only, false), "[INST] Hi[/INST]");
    assert_eq!(format("llama2", &user_only, true), "[INST] Hi [/INST]");
    assert_eq!(format("minicpm", &user_only, true), "<用户>Hi<AI>");
    assert_eq!(
        format("hunyuan-moe", &user_only, true),
        "<|startoftext|>Hi<|extra_0|>"
    );
    // RWKV opens the assistant turn after a final user message regardless.
    assert_eq!(
        format("rwkv-world", &user_only, false),
        "User: Hi\n\nAssistant:"
    );
    // Without a system message: Bailing 2 and Pangu add a default one, GigaChat
    // starts with its BOS alone.
    assert_eq!(
        format("bailing2", no_system, false),
        "<role>SYSTEM</role>detailed thinking off<|role_end|><role>HUMAN</role>Hello<|role_end|><role>ASSISTANT</role>Hi there<|role_end|>"
    );
    assert_eq!(
        format("pangu-embedded", no_system, false),
        "[unused9]系统：[unused10][unused9]用户：Hello[unused10][unused9]助手：Hi there[unused10]"
    );
    assert_eq!(
        format("gigachat", no_system, true),
        "<s>user<|role_sep|>Hello<|message_sep|>available functions<|role_sep|>[]<|message_sep|>assistant<|role_sep|>Hi there<|message_sep|>assistant<|role_sep|>"
    );
    assert_eq!(
        format("hunyuan-dense", no_system, false),
        "<｜hy_User｜>Hello<｜hy_Assistant｜><｜hy_Assistant｜>Hi there<｜hy_place▁holder▁no▁2｜>"
    );
    // Gemma joins system text to the next user turn, trimmed.
    let sys_then_user = [
        ChatMessage::new("system", " Be brief. "),
        ChatMessage::new("user", " Hi "),
    ];
    assert_eq!(
        format("gemma", &sys_then_user, true),
        "<start_of_turn>user\nBe brief.\n\nHi<end_of_turn>\n<start_of_turn>model\n"
    );
    // A tool turn: EXAONE 4 writes it, EXAONE 3 drops it.
    let tool = [ChatMessage::new("tool", "42")];
    assert_eq!(format("exaone4", &tool, false), "[|tool|]42[|endofturn|]\n");
    assert_eq!(format("exaone3", &tool, false), "");
    // llama.cpp trims with C's isspace: a no-break space stays.
    let nbsp = [ChatMessage::new("user", "\u{a0}x\t\n")];
    assert_eq!(
        format("llama3", &nbsp, false),
        "<|start_header_id|>user<|end_header_id|>\n\n\u{a0}x<|eot_id|>"
    );
    assert_eq!(format("chatml", &[], true), "<|im_start|>assistant\n");
}

/// SmolLM2's template: the plain ChatML Jinja.
const SMOLLM2_TEMPLATE: &str = "{% for message in messages %}{{'<|im_start|>' + message['role'] + '\n' + message['content'] + '<|im_end|>' + '\n'}}{% endfor %}{% if add_generation_prompt %}{{ '<|im_start|>assistant\n' }}{% endif %}";

/// (d) For ChatML the built-in formatter and the Jinja rendering of a plain
/// ChatML template agree.
#[test]
fn chatml_builtin_equals_jinja() {
    let template = ChatTemplate::new(SMOLLM2_TEMPLATE, "<|im_start|>", "<|im_end|>").unwrap();
    assert_eq!(template.family(), Some(ChatFamily::ChatMl));
    let golden = golden();
    let mut conversations: Vec<Vec<ChatMessage>> = golden["conversations"]
        .as_object()
        .unwrap()
        .values()
        .map(messages_of)
        .collect();
    conversations.push(conversation());
    conversations.push(Vec::new());
    for messages in &conversations {
        for add in [false, true] {
            let builtin = template.apply(messages, add).unwrap();
            let jinja = template.apply_jinja(messages, add).unwrap();
            assert_eq!(builtin, jinja, "{messages:?} add_generation_prompt={add}");
        }
    }
}

/// A template of no known family goes through Jinja in `apply`.
#[test]
fn unknown_family_uses_jinja() {
    let template = ChatTemplate::new(
        "{{ bos_token }}{% for m in messages %}<{{ m.role }}>{{ m.content }}{{ eos_token }}{% endfor %}{% if add_generation_prompt %}<assistant>{% endif %}",
        "<BOS>",
        "<EOS>",
    )
    .unwrap();
    assert_eq!(template.family(), None);
    let out = template.apply(&conversation()[..2], true).unwrap();
    assert_eq!(
        out,
        "<BOS><system>You are a helpful assistant<EOS><user>Hello<EOS><assistant>"
    );
}

/// (e) A template that does not parse is an error naming the problem and
/// line; a known family still formats with the built-in formatter.
#[test]
fn syntax_errors_are_reported() {
    let broken = "{% for m in messages %}\n{{ m.content }\n{% endfor %}";
    let err = ChatTemplate::new(broken, "", "").unwrap_err();
    assert!(matches!(err, Error::ChatTemplate(_)), "{err:?}");
    let text = err.to_string();
    assert!(text.contains("does not parse"), "{text}");
    assert!(text.contains("syntax error"), "{text}");
    assert!(text.contains("line 2"), "{text}");

    let unclosed = ChatTemplate::new("{% if add_generation_prompt %}x", "", "").unwrap_err();
    assert!(unclosed.to_string().contains("syntax error"), "{unclosed}");

    // ChatML recognised by its markers: llama.cpp never parses it, nor do we
    // unless asked for the Jinja rendering.
    let chatml_broken = "{{ '<|im_start|>' + }}";
    let template = ChatTemplate::new(chatml_broken, "", "").unwrap();
    assert_eq!(template.family(), Some(ChatFamily::ChatMl));
    let messages = [ChatMessage::new("user", "Hi")];
    assert_eq!(
        template.apply(&messages, false).unwrap(),
        "<|im_start|>user\nHi<|im_end|>\n"
    );
    let err = template.apply_jinja(&messages, false).unwrap_err();
    assert!(err.to_string().contains("does not parse"), "{err}");
}

/// (e) `raise_exception` fails the render with the template's own message.
#[test]
fn raise_exception_message_is_passed_on() {
    let template = ChatTemplate::new(
        "{% for m in messages %}{% if m.role == 'system' %}{{ raise_exception('No system role, please: ' ~ m.content) }}{% endif %}{% endfor %}ok",
        "",
        "",
    )
    .unwrap();
    let err = template.apply(&conversation(), true).unwrap_err();
    assert!(matches!(err, Error::ChatTemplate(_)), "{err:?}");
    assert_eq!(
        err.to_string(),
        "chat template: the template raised an exception: No system role, please: You are a helpful assistant (line 1)"
    );
    assert_eq!(template.apply(&conversation()[1..], true).unwrap(), "ok");

    // Gemma 2's real template, with a system message.
    let gemma = ChatTemplate::new(
        &template_text("google-gemma-2-2b-it.jinja"),
        "<bos>",
        "<eos>",
    )
    .unwrap();
    let err = gemma.apply_jinja(&conversation(), true).unwrap_err();
    assert!(
        err.to_string().contains("System role not supported"),
        "{err}"
    );
    // ... while the built-in Gemma format folds the system text into the user turn.
    assert!(gemma
        .apply(&conversation(), true)
        .unwrap()
        .starts_with("<start_of_turn>user\nYou are a helpful assistant\n\nHello"));
}

/// Other render failures name the problem too.
#[test]
fn render_errors_are_reported() {
    let undefined_attr = ChatTemplate::new("{{ nothing.attr }}", "", "").unwrap();
    let err = undefined_attr.apply(&[], false).unwrap_err();
    assert!(err.to_string().contains("undefined"), "{err}");

    let name = ChatTemplate::new("llama3", "", "").unwrap();
    let err = name.apply_jinja(&[], false).unwrap_err();
    assert!(err.to_string().contains("built-in family name"), "{err}");

    let bad_json = ChatTemplate::new("{{ nothing|tojson }}", "", "").unwrap();
    assert!(bad_json.apply(&[], false).is_err());
}

/// A template that would loop or allocate without end runs out of fuel
/// instead of hanging (templates come from untrusted GGUF files).
#[test]
fn runaway_templates_are_stopped() {
    let loops = ChatTemplate::new(
        "{% for i in range(100000) %}{% for j in range(100000) %}{% endfor %}{% endfor %}",
        "",
        "",
    )
    .unwrap();
    let err = loops.apply(&[], false).unwrap_err();
    assert!(err.to_string().contains("fuel"), "{err}");

    let grows = ChatTemplate::new(
        "{% set ns = namespace(s='x') %}{% for i in range(64) %}{% set ns.s = ns.s ~ ns.s %}{% endfor %}{{ ns.s|length }}",
        "",
        "",
    )
    .unwrap();
    let err = grows.apply(&[], false).unwrap_err();
    assert!(err.to_string().contains("fuel"), "{err}");

    // The fuel pays for data too (about one unit per 64 bytes), so memory is
    // capped with time: values whose size is known ahead are refused before
    // they are made, not after gigabytes are allocated.
    for (huge, why) in [
        ("{{ 'x' * 4000000000 }}", "fuel"),
        (
            "{{ (['x'] * 500000000)|length }}",
            "repeated sequence is too large",
        ),
    ] {
        let err = ChatTemplate::new(huge, "", "")
            .unwrap()
            .apply(&[], false)
            .unwrap_err();
        assert!(err.to_string().contains(why), "{huge}: {err}");
    }
}

/// `strftime_now` reads the clock unless a time is fixed.
#[test]
fn strftime_now_uses_the_clock() {
    let template = ChatTemplate::new("{{ strftime_now('%Y') }}", "", "").unwrap();
    let year: i64 = template.apply(&[], false).unwrap().parse().unwrap();
    assert!((2024..3000).contains(&year), "{year}");
    let fixed = template.with_fixed_time(0);
    assert_eq!(fixed.apply(&[], false).unwrap(), "1970");
    assert_eq!(
        lamina::chat::strftime("%d %b %Y", 1_753_537_507),
        "26 Jul 2025"
    );
}

/// The model's template from GGUF metadata; without one, ChatML.
#[test]
fn from_metadata() {
    let mut md = Metadata::default();
    let template = ChatTemplate::from_metadata(&md, "<s>", "</s>").unwrap();
    assert_eq!(template.family(), Some(ChatFamily::ChatMl));
    assert_eq!(template.source(), "chatml");

    md.insert(
        "tokenizer.chat_template",
        Value::String(SMOLLM2_TEMPLATE.to_string()),
    )
    .unwrap();
    let template = ChatTemplate::from_metadata(&md, "<s>", "</s>").unwrap();
    assert_eq!(template.family(), Some(ChatFamily::ChatMl));
    assert_eq!(template.source(), SMOLLM2_TEMPLATE);

    let mut wrong = Metadata::default();
    wrong
        .insert("tokenizer.chat_template", Value::U32(7))
        .unwrap();
    let err = ChatTemplate::from_metadata(&wrong, "", "").unwrap_err();
    assert!(err.to_string().contains("tokenizer.chat_template"), "{err}");
}

#[test]
fn chat_message_serde() {
    let m: ChatMessage = serde_json::from_str(r#"{"role":"user","content":"Hi"}"#).unwrap();
    assert_eq!(m, ChatMessage::new("user", "Hi"));
    assert_eq!(
        serde_json::to_string(&m).unwrap(),
        r#"{"role":"user","content":"Hi"}"#
    );
}

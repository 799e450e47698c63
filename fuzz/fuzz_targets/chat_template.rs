//! Fuzzes chat templates: the input is a Jinja template (before the first
//! 0xFF) and the messages' text. Compiling may fail and rendering may fail,
//! with errors; neither may panic, and a render's time and output are
//! bounded by the engine's budget. The text is also read as a model's
//! output, whole and as every stream prefix, by the parser of the
//! template's tool-call format (picked from the template text, so the
//! seeds' templates reach each format).
#![no_main]

use lamina::chat::tools::ChatOptions;
use lamina::chat::{ChatMessage, ChatTemplate};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let (source, content) = match data.iter().position(|&b| b == 0xFF) {
        Some(i) => (&data[..i], &data[i + 1..]),
        None => (data, &b""[..]),
    };
    let source = String::from_utf8_lossy(source);
    let content = String::from_utf8_lossy(content);
    let Ok(template) = ChatTemplate::new(&source, "<s>", "</s>") else {
        return;
    };
    let template = template.with_fixed_time(1_700_000_000);
    let messages = [
        ChatMessage::new("system", "Be brief."),
        ChatMessage::new("user", content.as_ref()),
        ChatMessage::new("assistant", "Yes."),
        ChatMessage::new("user", "And?"),
    ];
    for add_generation_prompt in [false, true] {
        let _ = template.apply(&messages, add_generation_prompt);
    }
    let tool = serde_json::json!({"type": "function", "function": {"name": "f",
        "parameters": {"type": "object", "properties": {"a": {"type": "integer"}, "s": {"type": "string"}}}}});
    let options = ChatOptions { tools: vec![tool], ..ChatOptions::default() };
    if let Ok(chat) = template.apply_chat(&messages, &options) {
        let _ = chat.parser.parse(&content, false);
        for end in (0..content.len()).filter(|&i| content.is_char_boundary(i)).step_by(7) {
            let _ = chat.parser.parse(&content[..end], true);
        }
    }
});

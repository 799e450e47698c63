//! Tools and reasoning against the 2026 llama.cpp reference: the parser
//! cases of its tests/test-chat.cpp for the Qwen/Hermes, Qwen3-Coder XML,
//! Llama 3.x, Mistral, Granite and Gemma templates
//! (golden/chat/cases.json, written by scripts/reference/chat-goldens.sh
//! with the prompts and messages the reference produced). For each case:
//! the rendered prompt and generation prompt equal the reference's, the
//! output parses to the message the reference test expects, and parsing
//! every prefix of the output as a stream only ever appends to each field.

mod common;

#[cfg(target_arch = "wasm32")]
use wasm_bindgen_test::wasm_bindgen_test as test;

use common::{golden_path, read_file};
use lamina::chat::tools::{ChatOptions, ReasoningFormat, ToolChoice};
use lamina::chat::{ChatMessage, ChatTemplate, ToolCall};
use serde_json::Value;

fn cases() -> Vec<Value> {
    serde_json::from_slice(&read_file(&golden_path("chat/cases.json"))).expect("cases.json parses")
}

fn template(name: &str) -> ChatTemplate {
    let text =
        String::from_utf8(read_file(&golden_path(&format!("chat/templates/{name}")))).unwrap();
    ChatTemplate::new(&text, "", "").expect("template parses")
}

fn options(case: &Value) -> ChatOptions {
    ChatOptions {
        tools: case["tools"].as_array().cloned().unwrap_or_default(),
        tool_choice: ToolChoice::from_name(case["tool_choice"].as_str().unwrap()).unwrap(),
        parallel_tool_calls: case["parallel_tool_calls"].as_bool().unwrap(),
        enable_thinking: case["enable_thinking"].as_bool().unwrap(),
        reasoning_format: ReasoningFormat::from_name(case["reasoning_format"].as_str().unwrap())
            .unwrap(),
        add_generation_prompt: case["add_generation_prompt"].as_bool().unwrap(),
        chat_template_kwargs: case["chat_template_kwargs"]
            .as_object()
            .cloned()
            .unwrap_or_default(),
        json_response: !case["json_schema"].as_str().unwrap().is_empty(),
        now: case["now"].as_i64(),
    }
}

/// Cases that continue a final assistant message (llama.cpp's
/// `continue_final_message`, which lamina does not offer): counted, so
/// that a change in the goldens shows.
fn continues(case: &Value) -> bool {
    case["continue_final_message"] != "none"
}

fn label(case: &Value) -> String {
    format!(
        "{} {:?}",
        case["template"].as_str().unwrap(),
        case["input"].as_str().unwrap()
    )
}

fn normalized_args(args: &str) -> Value {
    serde_json::from_str(args).unwrap_or_else(|_| Value::from(args))
}

/// The reference test's comparison: content and reasoning without the
/// whitespace at their ends, arguments as JSON values.
fn assert_message(expect: &ChatMessage, got: &ChatMessage, what: &str) {
    assert_eq!(expect.content.trim(), got.content.trim(), "content, {what}");
    assert_eq!(
        expect.reasoning_content.trim(),
        got.reasoning_content.trim(),
        "reasoning, {what}"
    );
    assert_eq!(
        expect.tool_calls.len(),
        got.tool_calls.len(),
        "tool calls {:?}, {what}",
        got.tool_calls
    );
    for (e, g) in expect.tool_calls.iter().zip(&got.tool_calls) {
        assert_eq!(e.name, g.name, "call name, {what}");
        assert_eq!(
            normalized_args(&e.arguments),
            normalized_args(&g.arguments),
            "arguments, {what}"
        );
        assert_eq!(e.id, g.id, "call id, {what}");
    }
}

#[test]
fn prompts_equal_the_reference() {
    let cases = cases();
    let mut checked = 0;
    for case in cases.iter().filter(|c| !continues(c)) {
        let messages: Vec<ChatMessage> = serde_json::from_value(case["messages"].clone()).unwrap();
        let prompt = template(case["template"].as_str().unwrap())
            .apply_chat(&messages, &options(case))
            .unwrap_or_else(|e| panic!("{}: {e}", label(case)));
        assert_eq!(
            prompt.prompt,
            case["prompt"].as_str().unwrap(),
            "prompt, {}",
            label(case)
        );
        assert_eq!(
            prompt.generation_prompt,
            case["generation_prompt"].as_str().unwrap(),
            "generation prompt, {}",
            label(case)
        );
        checked += 1;
    }
    assert_eq!(checked, 101, "cases checked");
    assert_eq!(cases.len() - checked, 19, "continuation cases left out");
}

#[test]
fn outputs_parse_as_the_reference_expects() {
    for case in cases().iter().filter(|c| !continues(c)) {
        let messages: Vec<ChatMessage> = serde_json::from_value(case["messages"].clone()).unwrap();
        let prompt = template(case["template"].as_str().unwrap())
            .apply_chat(&messages, &options(case))
            .unwrap();
        let expect: ChatMessage = serde_json::from_value(case["expect"].clone()).unwrap();
        let input = case["input"].as_str().unwrap();
        assert_message(&expect, &prompt.parser.parse(input, false), &label(case));
    }
}

/// Streaming: the message parsed from each prefix of the output extends the
/// previous one (content and reasoning only grow at the end, reported calls
/// never change), and the last equals the whole output's message.
#[test]
fn streamed_outputs_only_grow() {
    for case in cases().iter().filter(|c| !continues(c)) {
        let messages: Vec<ChatMessage> = serde_json::from_value(case["messages"].clone()).unwrap();
        let parser = template(case["template"].as_str().unwrap())
            .apply_chat(&messages, &options(case))
            .unwrap()
            .parser;
        let input = case["input"].as_str().unwrap();
        let mut prev = ChatMessage::new("assistant", "");
        for end in (1..=input.len()).filter(|&i| input.is_char_boundary(i)) {
            let cur = parser.parse(&input[..end], end < input.len());
            let what = format!("{} at byte {end}", label(case));
            assert!(
                cur.content.starts_with(&prev.content),
                "content {:?} then {:?}, {what}",
                prev.content,
                cur.content
            );
            assert!(
                cur.reasoning_content.starts_with(&prev.reasoning_content),
                "reasoning {:?} then {:?}, {what}",
                prev.reasoning_content,
                cur.reasoning_content
            );
            assert!(
                cur.tool_calls.starts_with(&prev.tool_calls),
                "calls changed, {what}"
            );
            prev = cur;
        }
        assert_eq!(prev, parser.parse(input, false), "{}", label(case));
    }
}

#[test]
fn tool_calls_serialize_as_openai_writes_them() {
    let call = ToolCall {
        name: "get_time".into(),
        arguments: r#"{"city":"Paris"}"#.into(),
        id: "call_1".into(),
    };
    let json = serde_json::to_value(&call).unwrap();
    assert_eq!(
        json,
        serde_json::json!({"type": "function", "function": {"name": "get_time", "arguments": "{\"city\":\"Paris\"}"}, "id": "call_1"})
    );
    let back: ToolCall = serde_json::from_value(json).unwrap();
    assert_eq!(back, call);
    // Arguments given as an object, flat shape, no id.
    let flat: ToolCall =
        serde_json::from_value(serde_json::json!({"name": "f", "arguments": {"a": 1}})).unwrap();
    assert_eq!(
        (
            flat.name.as_str(),
            flat.arguments.as_str(),
            flat.id.as_str()
        ),
        ("f", r#"{"a":1}"#, "")
    );
    assert!(serde_json::from_value::<ToolCall>(serde_json::json!({"arguments": {}})).is_err());
    // A message with null content and tool calls.
    let msg: ChatMessage = serde_json::from_value(serde_json::json!({
        "role": "assistant", "content": null,
        "tool_calls": [{"type": "function", "function": {"name": "f", "arguments": "{}"}}]
    }))
    .unwrap();
    assert_eq!((msg.content.as_str(), msg.tool_calls.len()), ("", 1));
}

fn special_function_tool() -> Value {
    serde_json::json!({"type": "function", "function": {
        "name": "special_function", "description": "I'm special",
        "parameters": {"type": "object", "properties": {"arg1": {"type": "integer"}}, "required": ["arg1"]}}})
}

fn parse_with(template_file: &str, output: &str) -> ChatMessage {
    let options = ChatOptions {
        tools: vec![special_function_tool()],
        ..ChatOptions::default()
    };
    template(template_file)
        .apply_chat(&[ChatMessage::new("user", "Hey there!")], &options)
        .unwrap()
        .parser
        .parse(output, false)
}

fn one_call(msg: &ChatMessage) -> (&str, Value) {
    assert_eq!(msg.tool_calls.len(), 1, "{msg:?}");
    (
        msg.tool_calls[0].name.as_str(),
        normalized_args(&msg.tool_calls[0].arguments),
    )
}

/// Formats the reference's test has no parser cases for, read as their
/// model cards document them: Llama 3.x's bare JSON object (with
/// `parameters`) and `<|python_tag|>`, Granite 3.x's `<|tool_call|>` list.
#[test]
fn llama3_and_granite_calls_parse() {
    let llama = "meta-llama-Llama-3.1-8B-Instruct.jinja";
    let msg = parse_with(
        llama,
        r#"{"name": "special_function", "parameters": {"arg1": 1}}"#,
    );
    assert_eq!(
        one_call(&msg),
        ("special_function", serde_json::json!({"arg1": 1}))
    );
    assert_eq!(msg.content, "");
    let msg = parse_with(
        llama,
        r#"<|python_tag|>{"name": "special_function", "parameters": {"arg1": 2}}"#,
    );
    assert_eq!(
        one_call(&msg),
        ("special_function", serde_json::json!({"arg1": 2}))
    );
    let msg = parse_with(llama, "<|python_tag|>print(1 + 1)");
    assert_eq!(
        one_call(&msg),
        ("python", serde_json::json!({"code": "print(1 + 1)"}))
    );
    // JSON that is not a call stays content.
    let msg = parse_with(llama, r#"{"answer": 42}"#);
    assert_eq!(
        (msg.content.as_str(), msg.tool_calls.len()),
        (r#"{"answer": 42}"#, 0)
    );

    let granite = "ibm-granite-granite-3.3-2B-Instruct.jinja";
    let msg = parse_with(
        granite,
        r#"<|tool_call|>[{"name": "special_function", "arguments": {"arg1": 3}}]"#,
    );
    assert_eq!(
        one_call(&msg),
        ("special_function", serde_json::json!({"arg1": 3}))
    );
    let msg = parse_with(granite, "<think>Let me see.</think>No call needed.");
    assert_eq!(
        (msg.content.as_str(), msg.reasoning_content.as_str()),
        ("No call needed.", "Let me see.")
    );
}

/// Without tools nothing is read as a call; `tool_choice: "none"` likewise.
#[test]
fn calls_are_read_only_when_tools_are_offered() {
    let t = template("Qwen-Qwen2.5-7B-Instruct.jinja");
    let output =
        "<tool_call>\n{\"name\": \"special_function\", \"arguments\": {\"arg1\": 1}}\n</tool_call>";
    let user = [ChatMessage::new("user", "Hey")];
    let plain = t.apply_chat(&user, &ChatOptions::default()).unwrap();
    assert_eq!(plain.parser.parse(output, false).content, output);
    let refused = ChatOptions {
        tools: vec![special_function_tool()],
        tool_choice: ToolChoice::None,
        ..ChatOptions::default()
    };
    let none = t.apply_chat(&user, &refused).unwrap();
    assert!(none.parser.parse(output, false).tool_calls.is_empty());
}

/// A conversation that carries a call and its result renders them where the
/// template puts them, and a bad tool definition is an error naming it.
#[test]
fn tool_results_render_and_bad_tools_are_errors() {
    let t = template("Qwen-Qwen2.5-7B-Instruct.jinja");
    let messages: Vec<ChatMessage> = serde_json::from_value(serde_json::json!([
        {"role": "user", "content": "What time is it in Paris?"},
        {"role": "assistant", "content": null, "tool_calls": [
            {"type": "function", "id": "c1", "function": {"name": "special_function", "arguments": "{\"arg1\": 1}"}}]},
        {"role": "tool", "tool_call_id": "c1", "content": "12:00"},
    ]))
    .unwrap();
    let options = ChatOptions {
        tools: vec![special_function_tool()],
        ..ChatOptions::default()
    };
    let prompt = t.apply_chat(&messages, &options).unwrap().prompt;
    assert!(prompt.contains("<tool_call>\n{\"name\": \"special_function\", \"arguments\": {\"arg1\": 1}}\n</tool_call>"), "{prompt}");
    assert!(
        prompt.contains("<tool_response>\n12:00\n</tool_response>"),
        "{prompt}"
    );
    assert!(prompt.ends_with("<|im_start|>assistant\n"));
    let bad = ChatOptions {
        tools: vec![serde_json::json!({"type": "function"})],
        ..ChatOptions::default()
    };
    let err = t.apply_chat(&messages, &bad).unwrap_err().to_string();
    assert!(err.contains("a tool needs"), "{err}");
}

/// The tools' grammar accepts the calls the reference's cases write in each
/// JSON format (for the offered tools) and refuses a call to another tool or
/// with arguments of the wrong type; it waits for the opener unless a call
/// is required.
#[test]
fn tool_grammars_hold_calls_to_the_tools() {
    use lamina::sampling::grammar::Grammar;
    let mut checked = 0;
    for case in cases()
        .iter()
        .filter(|c| !continues(c) && c["tools"].is_array())
    {
        let messages: Vec<ChatMessage> = serde_json::from_value(case["messages"].clone()).unwrap();
        let mut opts = options(case);
        opts.parallel_tool_calls = true;
        let prompt = template(case["template"].as_str().unwrap())
            .apply_chat(&messages, &opts)
            .unwrap();
        let Some(g) = prompt.grammar else { continue };
        assert_eq!(
            g.lazy,
            opts.tool_choice == ToolChoice::Auto || prompt.thinking_forced_open,
            "{}",
            label(case)
        );
        let grammar = Grammar::parse(&g.grammar, "root", None)
            .unwrap_or_else(|e| panic!("{e}\n{}", g.grammar));
        let input = case["input"].as_str().unwrap();
        let expect: ChatMessage = serde_json::from_value(case["expect"].clone()).unwrap();
        if expect.tool_calls.is_empty() {
            continue;
        }
        // The grammar starts at the earliest trigger's match.
        let at = g
            .triggers
            .iter()
            .filter_map(|t| regex::Regex::new(t).unwrap().find(input).map(|m| m.start()))
            .min()
            .expect("the output has an opener");
        assert!(
            grammar.matches(&input[at..]).unwrap(),
            "{} does not match\n{}",
            label(case),
            g.grammar
        );
        checked += 1;
    }
    assert_eq!(checked, 52, "calls checked");

    let user = [ChatMessage::new("user", "Hey")];
    let required = ChatOptions {
        tools: vec![special_function_tool()],
        tool_choice: ToolChoice::Required,
        ..ChatOptions::default()
    };
    let g = template("Qwen-Qwen2.5-7B-Instruct.jinja")
        .apply_chat(&user, &required)
        .unwrap()
        .grammar
        .unwrap();
    assert!(!g.lazy);
    let grammar = Grammar::parse(&g.grammar, "root", None).unwrap();
    assert!(grammar.matches(
        "<tool_call>\n{\"name\": \"special_function\", \"arguments\": {\"arg1\": 7}}\n</tool_call>"
    )
    .unwrap());
    assert!(!grammar
        .matches("<tool_call>\n{\"name\": \"other\", \"arguments\": {\"arg1\": 7}}\n</tool_call>")
        .unwrap());
    assert!(!grammar.matches("<tool_call>\n{\"name\": \"special_function\", \"arguments\": {\"arg1\": \"x\"}}\n</tool_call>").unwrap());
    assert!(!grammar.matches("Sure!").unwrap());
    // Qwen3-Coder's XML: the value of an integer parameter is held to JSON
    // integers, a string's to text without the closing tag.
    let xml = template("Qwen3-Coder.jinja")
        .apply_chat(&user, &required)
        .unwrap()
        .grammar
        .unwrap();
    let grammar = Grammar::parse(&xml.grammar, "root", None).unwrap();
    let call = |value: &str| {
        format!("<tool_call>\n<function=special_function>\n<parameter=arg1>\n{value}\n</parameter>\n</function>\n</tool_call>")
    };
    assert!(grammar.matches(&call("12")).unwrap());
    assert!(!grammar.matches(&call("twelve")).unwrap());
    assert!(!grammar
        .matches(&call("12").replace("special_function", "other"))
        .unwrap());
    // No grammar where no call may be made.
    let none = ChatOptions {
        tool_choice: ToolChoice::None,
        ..required
    };
    assert!(template("Qwen-Qwen2.5-7B-Instruct.jinja")
        .apply_chat(&user, &none)
        .unwrap()
        .grammar
        .is_none());
}

//! The grammar that holds a model's tool calls to the offered tools: each
//! call names one of them and its arguments follow that tool's parameter
//! schema, written in the template's format. Lazy (llama.cpp's way) when
//! the model may also answer in prose: free text until the format's opener,
//! then the grammar from the opener on. Eager when a call is required.
//!
//! Covered: Hermes/Qwen `<tool_call>`, Mistral's list and named calls,
//! Granite/Phi-4 `<|tool_call|>`, Llama 3.x objects, and Qwen3-Coder/
//! Qwen3.5's XML parameters. Gemma 4's dictionaries are parsed but not yet
//! constrained.

use serde_json::{json, Value};

use super::format::{CallSyntax, OutputFormat};
use super::{types_of, ToolChoice};
use crate::error::{Error, Result};
use crate::sampling::json_schema::{json_schema_to_grammar, property_rules};

/// A grammar for the calls, and when it applies.
#[derive(Clone, Debug, PartialEq)]
pub struct ToolGrammar {
    /// GBNF text with a `root` rule.
    pub grammar: String,
    /// Wait for one of `triggers` (regular expressions; the grammar starts
    /// at the first group's start) before constraining.
    pub lazy: bool,
    pub triggers: Vec<String>,
}

/// The grammar for `tools` in `format`, or `None` when the format's calls
/// are not constrained (or no call may be made).
pub fn tool_grammar(
    format: &OutputFormat,
    tools: &[Value],
    choice: ToolChoice,
    parallel: bool,
    thinking_open: bool,
) -> Result<Option<ToolGrammar>> {
    if tools.is_empty() || choice == ToolChoice::None {
        return Ok(None);
    }
    let (opener, args_key, with_id) = match format.calls {
        CallSyntax::JsonTagged => ("<tool_call>", "arguments", false),
        CallSyntax::MistralList => ("[TOOL_CALLS]", "arguments", true),
        CallSyntax::MistralNamed => ("[TOOL_CALLS]", "arguments", false),
        CallSyntax::ToolCallList => ("<|tool_call|>", "arguments", false),
        CallSyntax::Llama3Json => ("", "parameters", false),
        CallSyntax::XmlFunction => {
            return xml_grammar(tools, choice, parallel, thinking_open).map(Some)
        }
        CallSyntax::Gemma4 | CallSyntax::None => return Ok(None),
    };
    let named = format.calls == CallSyntax::MistralNamed;
    // One schema whose alternatives are the tools: a whole call object, or
    // for Mistral's named calls the arguments alone (the name is outside).
    let alternatives: Vec<Value> = tools
        .iter()
        .map(|t| {
            let f = &t["function"];
            let params = match &f["parameters"] {
                Value::Object(p) if !p.is_empty() => Value::Object(p.clone()),
                _ => json!({"type": "object", "properties": {}}),
            };
            if named {
                return params;
            }
            let mut properties = serde_json::Map::new();
            properties.insert("name".into(), json!({"const": f["name"]}));
            properties.insert(args_key.into(), params);
            let mut required = vec!["name", args_key];
            if with_id {
                properties.insert(
                    "id".into(),
                    json!({"type": "string", "pattern": "^[a-zA-Z0-9]{9}$"}),
                );
                required.push("id");
            }
            json!({"type": "object", "properties": properties, "required": required})
        })
        .collect();
    let schema = json!({ "anyOf": alternatives });
    let converted = json_schema_to_grammar(&schema)
        .map_err(|e| Error::InvalidArgument(format!("a tool's parameters: {e}")))?;
    // The schema's grammar becomes the `tool-call` rule under a root that
    // writes the format around it.
    let body = rename_root(&converted.grammar, "tool-call");
    let repeat = |one: &str, sep: &str| {
        if parallel {
            format!("{one} ({sep} {one})*")
        } else {
            one.to_string()
        }
    };
    let root = match format.calls {
        CallSyntax::JsonTagged => repeat(
            "\"<tool_call>\" tool-ws tool-call tool-ws \"</tool_call>\"",
            "tool-ws",
        ),
        CallSyntax::MistralList => format!(
            "\"[TOOL_CALLS]\" \"[\" {} \"]\"",
            repeat("tool-call", "\",\" tool-ws")
        ),
        CallSyntax::ToolCallList => format!(
            "\"<|tool_call|>\" \"[\" {} \"]\"",
            repeat("tool-call", "\",\" tool-ws")
        ),
        CallSyntax::Llama3Json => "tool-call".to_string(),
        CallSyntax::MistralNamed => {
            let names: Vec<String> = tools
                .iter()
                .enumerate()
                .map(|(i, t)| {
                    let name =
                        serde_json::to_string(t["function"]["name"].as_str().unwrap_or_default())
                            .unwrap_or_default();
                    format!("{name} (\"[CALL_ID]\" [a-zA-Z0-9]{{9}})? \"[ARGS]\" alternative-{i}")
                })
                .collect();
            repeat(&format!("\"[TOOL_CALLS]\" ({})", names.join(" | ")), "")
        }
        _ => return Ok(None),
    };
    let grammar = format!("root ::= {root}\ntool-ws ::= [ \\t\\n]{{0,4}}\n{body}");
    let lazy = choice == ToolChoice::Auto || thinking_open;
    let triggers = if opener.is_empty() {
        vec![r#"(\{\s*"name"\s*:)"#.to_string()]
    } else {
        vec![format!("({})", regex::escape(opener))]
    };
    Ok(Some(ToolGrammar {
        grammar,
        lazy,
        triggers,
    }))
}

/// `grammar` with its `root` rule renamed to `name` (the schema grammar's
/// other rules never refer to its root: tool schemas cannot `$ref` "#"
/// into the call object around them).
fn rename_root(grammar: &str, name: &str) -> String {
    grammar
        .lines()
        .map(|line| match line.strip_prefix("root ::=") {
            Some(rest) => format!("{name} ::={rest}"),
            None => line.to_string(),
        })
        .collect::<Vec<_>>()
        .join("\n")
}

/// Qwen3-Coder's XML calls: `<function=NAME>` then parameters of that tool
/// in any order as `<parameter=KEY>\nVALUE\n</parameter>`, where a string
/// VALUE is any text without the closing tag and any other VALUE is JSON of
/// its schema. (Required parameters are not enforced: the order is free.)
fn xml_grammar(
    tools: &[Value],
    choice: ToolChoice,
    parallel: bool,
    thinking_open: bool,
) -> Result<ToolGrammar> {
    let mut rules: Vec<String> = vec![text_without("xml-text", "</parameter>")];
    let mut calls = Vec::new();
    for (i, tool) in tools.iter().enumerate() {
        let f = &tool["function"];
        let name = f["name"].as_str().unwrap_or_default();
        let params = match &f["parameters"] {
            Value::Object(p) if !p.is_empty() => Value::Object(p.clone()),
            _ => json!({"type": "object", "properties": {}}),
        };
        let (values, props) = property_rules(&params, &format!("xml-{i}"))
            .map_err(|e| Error::InvalidArgument(format!("tool {name:?}: {e}")))?;
        rules.extend(values.lines().map(String::from));
        // Parameters in any order (models do not keep the schema's), each
        // value held to its own schema.
        let mut params_alts = Vec::new();
        for (key, _required, rule) in props {
            // A value that may be a string is free text (the parser reads
            // `null` as null where the schema allows it).
            let may_be_text = types_of(&params["properties"][&key])
                .iter()
                .any(|t| t == "string");
            let value = if may_be_text {
                "xml-text"
            } else {
                rule.as_str()
            };
            let param = format!(
                "{} {value} {}",
                literal(&format!("\n<parameter={key}>\n")),
                literal("\n</parameter>")
            );
            params_alts.push(param);
        }
        let params = if params_alts.is_empty() {
            String::new()
        } else {
            format!(" ({})*", params_alts.join(" | "))
        };
        rules.push(format!(
            "xml-call-{i} ::= {}{params}",
            literal(&format!("{name}>"))
        ));
        calls.push(format!("xml-call-{i}"));
    }
    rules.push(format!(
        "xml-function ::= {} ({}) {}",
        literal("<function="),
        calls.join(" | "),
        literal("\n</function>")
    ));
    // A call opened at a bare `<function=` may still be closed by the
    // wrapper's tag.
    let close = literal("\n</tool_call>");
    let one = format!(
        "({} xml-function {close} | xml-function ({close})?)",
        literal("<tool_call>\n")
    );
    let root = if parallel {
        format!("{one} (tool-ws {one})*")
    } else {
        one
    };
    // The built-ins come once per tool with the same bodies: keep one.
    let mut seen = std::collections::HashSet::new();
    rules.retain(|r| seen.insert(r.clone()));
    let grammar = format!(
        "root ::= {root}\ntool-ws ::= [ \\t\\n]{{0,4}}\n{}\n",
        rules.join("\n")
    );
    Ok(ToolGrammar {
        grammar,
        lazy: choice == ToolChoice::Auto || thinking_open,
        triggers: vec![
            format!("({})", regex::escape("<tool_call>")),
            format!("({})", regex::escape("<function=")),
        ],
    })
}

/// `text` as a GBNF string literal.
fn literal(text: &str) -> String {
    let mut out = String::from("\"");
    for c in text.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\t' => out.push_str("\\t"),
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

/// Rules `NAME`, `NAME-1`, ... matching any text without `delimiter` in it:
/// the states of a matcher of the delimiter, state K having matched its
/// first K characters (`NAME` is state 0). The delimiter's first character
/// occurs in it only there (true of the closing tags used), so that
/// character always leads to state 1 and any other mismatch to state 0.
fn text_without(name: &str, delimiter: &str) -> String {
    let chars: Vec<char> = delimiter.chars().collect();
    let class = |c: char| match c {
        '\n' => "\\n".to_string(),
        '\\' | ']' | '^' | '-' => format!("\\{c}"),
        c => c.to_string(),
    };
    let first = chars[0];
    let state = |k: usize| {
        if k == 0 {
            name.to_string()
        } else {
            format!("{name}-{k}")
        }
    };
    let mut rules = Vec::new();
    for (k, &c) in chars.iter().enumerate() {
        let mut alts = vec![
            "\"\"".to_string(),
            format!("{} {}", literal(&first.to_string()), state(1)),
        ];
        if k == 0 {
            alts.push(format!("[^{}] {}", class(first), state(0)));
        } else {
            alts.push(format!("[^{}{}] {}", class(first), class(c), state(0)));
            if k + 1 < chars.len() {
                alts.push(format!("{} {}", literal(&c.to_string()), state(k + 1)));
            }
        }
        rules.push(format!("{} ::= {}", state(k), alts.join(" | ")));
    }
    rules.join("\n")
}

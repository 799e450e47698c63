//! The grammar that holds a model's tool calls to the offered tools: each
//! call names one of them and its arguments follow that tool's parameter
//! schema, written in the template's format. Lazy (llama.cpp's way) when
//! the model may also answer in prose: free text until the format's opener,
//! then the grammar from the opener on. Eager when a call is required.
//!
//! The JSON formats are covered: Hermes/Qwen `<tool_call>`, Mistral's list
//! and named calls, Granite/Phi-4 `<|tool_call|>` and Llama 3.x objects.
//! Qwen3-Coder's XML and Gemma 4's dictionaries are parsed but not yet
//! constrained.

use serde_json::{json, Value};

use super::format::{CallSyntax, OutputFormat};
use super::ToolChoice;
use crate::error::{Error, Result};
use crate::sampling::json_schema::json_schema_to_grammar;

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
        CallSyntax::XmlFunction | CallSyntax::Gemma4 | CallSyntax::None => return Ok(None),
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

//! Tools and reasoning: a conversation with tool definitions, tool calls and
//! tool results rendered through the model's Jinja template (with `tools`,
//! `enable_thinking` and template kwargs, as llama.cpp renders them), and
//! the model's output parsed back into content, `reasoning_content` and
//! `tool_calls` in the format that template trains (Hermes/Qwen
//! `<tool_call>`, Qwen3-Coder XML, Llama 3.x JSON, Mistral `[TOOL_CALLS]`,
//! Granite and Phi-4 `<|tool_call|>`, Gemma 4).
//!
//! - `format.rs`: which output format a template's model writes
//! - `parse.rs`: output text (whole or streamed so far) to a message
//! - `grammar.rs`: the grammar that holds calls to the offered tools
//! - `values.rs`: JSON and Gemma 4 values inside calls

mod format;
mod grammar;
mod parse;
mod values;

use std::collections::HashMap;

use serde_json::{Map, Value};

pub use format::{detect_format, CallSyntax, OutputFormat};
pub use grammar::{tool_grammar, ToolGrammar};
pub use parse::ChatParser;

use super::{clock, jinja, ChatMessage, ChatTemplate};
use crate::error::{Error, Result};

/// Whether the model may, must or must not call a tool (OpenAI's
/// `tool_choice`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum ToolChoice {
    #[default]
    Auto,
    Required,
    None,
}

impl ToolChoice {
    /// `"auto"`, `"required"` or `"none"`.
    pub fn from_name(name: &str) -> Result<ToolChoice> {
        match name {
            "auto" => Ok(ToolChoice::Auto),
            "required" => Ok(ToolChoice::Required),
            "none" => Ok(ToolChoice::None),
            other => Err(Error::InvalidArgument(format!(
                "tool_choice {other:?}: expected \"auto\", \"required\" or \"none\""
            ))),
        }
    }
}

/// Where a model's reasoning goes (llama.cpp's `--reasoning-format`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum ReasoningFormat {
    /// Left in the content, tags and all.
    None,
    /// Moved to `reasoning_content` (the default).
    #[default]
    Auto,
    /// The same as `Auto` (llama.cpp's older name).
    Deepseek,
}

impl ReasoningFormat {
    /// `"none"`, `"auto"` or `"deepseek"`.
    pub fn from_name(name: &str) -> Result<ReasoningFormat> {
        match name {
            "none" => Ok(ReasoningFormat::None),
            "auto" => Ok(ReasoningFormat::Auto),
            "deepseek" | "deepseek-legacy" => Ok(ReasoningFormat::Deepseek),
            other => Err(Error::InvalidArgument(format!(
                "reasoning_format {other:?}: expected \"none\", \"auto\" or \"deepseek\""
            ))),
        }
    }
}

/// How to render a conversation and read the answer.
#[derive(Clone, Debug)]
pub struct ChatOptions {
    /// OpenAI tool definitions: `[{"type": "function", "function": {"name",
    /// "description", "parameters"}}]`.
    pub tools: Vec<Value>,
    pub tool_choice: ToolChoice,
    pub parallel_tool_calls: bool,
    /// Passed to the template; templates that can reason without thinking
    /// (Qwen3) close the thinking block when false.
    pub enable_thinking: bool,
    pub reasoning_format: ReasoningFormat,
    pub add_generation_prompt: bool,
    /// More template variables (llama.cpp's `chat_template_kwargs`).
    pub chat_template_kwargs: Map<String, Value>,
    /// A response format (JSON schema) applies to the answer.
    pub json_response: bool,
    /// The time templates see (`strftime_now`, `date_string`), Unix seconds;
    /// `None` reads the clock.
    pub now: Option<i64>,
}

impl Default for ChatOptions {
    fn default() -> ChatOptions {
        ChatOptions {
            tools: Vec::new(),
            tool_choice: ToolChoice::Auto,
            parallel_tool_calls: false,
            enable_thinking: true,
            reasoning_format: ReasoningFormat::Auto,
            add_generation_prompt: true,
            chat_template_kwargs: Map::new(),
            json_response: false,
            now: None,
        }
    }
}

/// A rendered conversation and how to read what the model writes next.
#[derive(Clone, Debug)]
pub struct ChatPrompt {
    pub prompt: String,
    /// What the generation prompt added at the end (the assistant's header,
    /// and an opened or closed thinking block).
    pub generation_prompt: String,
    /// The prompt ended inside an open reasoning block.
    pub thinking_forced_open: bool,
    pub parser: ChatParser,
    /// Holds the calls to the offered tools (formats with JSON calls).
    pub grammar: Option<ToolGrammar>,
}

impl ChatPrompt {
    /// The format's special tokens (llama.cpp's `preserved_tokens`).
    pub fn preserved_tokens(&self) -> Vec<&'static str> {
        self.parser.format().markers()
    }
}

impl ChatTemplate {
    /// Renders `messages` with `options` through the template's Jinja text
    /// and returns the prompt with the parser for the answer.
    pub fn apply_chat(
        &self,
        messages: &[ChatMessage],
        options: &ChatOptions,
    ) -> Result<ChatPrompt> {
        let template = self.compiled()?;
        for tool in &options.tools {
            let name = tool
                .get("function")
                .and_then(|f| f.get("name"))
                .and_then(Value::as_str);
            if name.is_none() {
                return Err(Error::InvalidArgument(format!(
                    "a tool needs {{\"type\": \"function\", \"function\": {{\"name\": ...}}}}, got {tool}"
                )));
            }
        }
        let mut msgs: Vec<Value> = messages
            .iter()
            .map(ChatMessage::to_template_value)
            .collect();
        if !self.source.contains("<|channel|>") {
            for m in &mut msgs {
                if m["role"] == "developer" {
                    m["role"] = Value::from("system");
                }
            }
        }
        if msgs.first().is_some_and(|m| m["role"] == "system")
            && !self.supports_system_role(template)
        {
            let system = msgs.remove(0);
            if let Some(next) = msgs.first_mut() {
                let merged = format!(
                    "{}\n{}",
                    system["content"].as_str().unwrap_or(""),
                    next["content"].as_str().unwrap_or("")
                );
                next["content"] = Value::from(merged);
            }
        }

        let now = options
            .now
            .or(self.fixed_time)
            .unwrap_or_else(clock::unix_now);
        let mut ctx = Map::new();
        ctx.insert("messages".into(), Value::Array(msgs));
        ctx.insert("bos_token".into(), Value::from(self.bos.as_str()));
        ctx.insert("eos_token".into(), Value::from(self.eos.as_str()));
        ctx.insert(
            "enable_thinking".into(),
            Value::from(options.enable_thinking),
        );
        if !options.tools.is_empty() {
            ctx.insert("tools".into(), Value::Array(options.tools.clone()));
        }
        ctx.insert(jinja::NOW_VARIABLE.into(), Value::from(now));
        ctx.insert(
            "datetime".into(),
            Value::from(clock::strftime("%b %d %Y", now)),
        );
        ctx.insert(
            "date_string".into(),
            Value::from(clock::strftime("%d %b %Y", now)),
        );
        for (k, v) in &options.chat_template_kwargs {
            ctx.insert(k.clone(), v.clone());
        }
        let render = |ctx: &Map<String, Value>| {
            template
                .render_json(&Value::Object(ctx.clone()))
                .map_err(|e| Error::ChatTemplate(jinja::describe_error(&e)))
        };
        let without = render(&ctx)?;
        let (prompt, generation_prompt) = if options.add_generation_prompt {
            ctx.insert("add_generation_prompt".into(), Value::from(true));
            let with = render(&ctx)?;
            let common = with
                .bytes()
                .zip(without.bytes())
                .take_while(|(a, b)| a == b)
                .count();
            let mut cut = common;
            while !with.is_char_boundary(cut) {
                cut -= 1;
            }
            let generation = with[cut..].to_string();
            (with, generation)
        } else {
            (without, String::new())
        };

        let format = detect_format(&self.source);
        let open_at = format.reasoning.and_then(|(start, end)| {
            let at = generation_prompt.rfind(start)?;
            (!generation_prompt[at..].contains(end)).then_some(at)
        });
        let extract = options.reasoning_format != ReasoningFormat::None;
        let parser = ChatParser {
            format,
            extract_reasoning: extract,
            thinking_open: open_at.is_some(),
            content_prefix: match open_at {
                Some(at) if !extract => generation_prompt[at..].to_string(),
                _ => String::new(),
            },
            parse_calls: !options.tools.is_empty() && options.tool_choice != ToolChoice::None,
            param_types: param_types(&options.tools),
            unwrap_json_fence: options.json_response,
        };
        let grammar = tool_grammar(
            &format,
            &options.tools,
            options.tool_choice,
            options.parallel_tool_calls,
            open_at.is_some(),
        )?;
        Ok(ChatPrompt {
            prompt,
            generation_prompt,
            thinking_forced_open: open_at.is_some(),
            parser,
            grammar,
        })
    }

    /// Whether the template shows a system message (Gemma 2 raises an
    /// error, others drop it); when not, a leading system message is merged
    /// into the next one, as llama.cpp does.
    fn supports_system_role(&self, template: &jinja::JinjaTemplate) -> bool {
        const PROBE: &str = "<<system probe>>";
        let ctx = serde_json::json!({
            "messages": [
                {"role": "system", "content": PROBE},
                {"role": "user", "content": "hi"},
            ],
            "bos_token": self.bos, "eos_token": self.eos,
        });
        template
            .render_json(&ctx)
            .is_ok_and(|text| text.contains(PROBE))
    }
}

/// For each tool, the JSON types its schema allows for each parameter.
fn param_types(tools: &[Value]) -> HashMap<String, HashMap<String, Vec<String>>> {
    let mut out = HashMap::new();
    for tool in tools {
        let f = &tool["function"];
        let Some(name) = f["name"].as_str() else {
            continue;
        };
        let mut params = HashMap::new();
        if let Some(props) = f["parameters"]["properties"].as_object() {
            for (key, schema) in props {
                params.insert(key.clone(), types_of(schema));
            }
        }
        out.insert(name.to_string(), params);
    }
    out
}

/// The JSON types a schema allows: `type` (a name or a list), else the
/// types of its `enum` values or of its `anyOf`/`oneOf` branches.
pub(super) fn types_of(schema: &Value) -> Vec<String> {
    match &schema["type"] {
        Value::String(t) => return vec![t.clone()],
        Value::Array(ts) => {
            return ts
                .iter()
                .filter_map(|t| t.as_str().map(String::from))
                .collect()
        }
        _ => {}
    }
    if let Some(values) = schema["enum"].as_array() {
        let mut out: Vec<String> = Vec::new();
        for v in values {
            let t = match v {
                Value::String(_) => "string",
                Value::Null => "null",
                Value::Bool(_) => "boolean",
                Value::Number(_) => "number",
                _ => "object",
            };
            if !out.iter().any(|x| x == t) {
                out.push(t.to_string());
            }
        }
        return out;
    }
    let branches = schema["anyOf"]
        .as_array()
        .or_else(|| schema["oneOf"].as_array());
    branches
        .map(|b| b.iter().flat_map(types_of).collect())
        .unwrap_or_default()
}

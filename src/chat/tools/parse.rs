//! Turning a model's output into a message: reasoning into
//! `reasoning_content`, tool calls into `tool_calls`, the rest into
//! `content`. Works on a whole output or on the part generated so far
//! (`partial`): then a marker still being written is held back and a tool
//! call is only reported once complete, so that each field of successive
//! partial parses only grows at its end (the streaming deltas).

use std::collections::HashMap;

use serde_json::{Map, Value};

use super::format::{CallSyntax, OutputFormat, BARE_FUNCTION};
use super::values::{gemma_at, held_back, json_at, Front};
use crate::chat::{ChatMessage, ToolCall};

/// Parses one output of a model prompted by `apply_chat`.
#[derive(Clone, Debug)]
pub struct ChatParser {
    pub(super) format: OutputFormat,
    /// Move reasoning to `reasoning_content` (reasoning format auto or
    /// deepseek); otherwise it stays in the content as written.
    pub(super) extract_reasoning: bool,
    /// The prompt ended inside an open reasoning block (`<think>\n`).
    pub(super) thinking_open: bool,
    /// Text of the prompt's open reasoning block put back in front of the
    /// content when reasoning is not extracted.
    pub(super) content_prefix: String,
    /// Tools were offered (and not refused with `tool_choice: "none"`).
    pub(super) parse_calls: bool,
    /// For each tool, the JSON types its schema allows for each parameter:
    /// a tagged parameter's text is read by them (`1` is a number unless
    /// the parameter is a string).
    pub(super) param_types: HashMap<String, HashMap<String, Vec<String>>>,
    /// A response format was asked for: a Markdown code fence around the
    /// JSON is not part of it.
    pub(super) unwrap_json_fence: bool,
}

/// The result of reading one construct.
enum Read<T> {
    Done(T, usize),
    Incomplete,
    Invalid,
}

impl ChatParser {
    /// The output format this parser reads.
    pub fn format(&self) -> &OutputFormat {
        &self.format
    }

    /// The message in `output`; `partial` while the model is still writing.
    pub fn parse(&self, output: &str, partial: bool) -> ChatMessage {
        let mut msg = ChatMessage::new("assistant", "");
        let text = if self.extract_reasoning {
            output.to_string()
        } else {
            format!("{}{output}", self.content_prefix)
        };
        let mut pos = 0;
        if let (true, Some((start, end))) = (self.extract_reasoning, self.format.reasoning) {
            let mut open = self.thinking_open;
            if !open {
                let lead = text.len() - text.trim_start().len();
                let mut p = lead;
                // Gemma 4 may repeat the channel token before `thought`.
                if let Some(close) = start.find('>') {
                    let token = &start[..=close];
                    while text[p..].starts_with(token) && text[p + token.len()..].starts_with(token)
                    {
                        p += token.len();
                    }
                }
                if text[p..].starts_with(start) {
                    open = true;
                    pos = p + start.len();
                } else if partial && p < text.len() && start.starts_with(&text[p..]) {
                    return msg; // the reasoning tag is still being written
                }
            }
            if open {
                let rest = &text[pos..];
                let mut enders = vec![end];
                if let (true, Some(opener)) = (self.parse_calls, self.format.call_openers().first())
                {
                    enders.push(opener); // a tool call ends the thinking too
                }
                let found = enders
                    .iter()
                    .filter_map(|e| rest.find(e).map(|i| (i, *e)))
                    .min_by_key(|&(i, _)| i);
                match found {
                    Some((i, ender)) => {
                        msg.reasoning_content = rest[..i].to_string();
                        pos += i + if ender == end { end.len() } else { 0 };
                    }
                    None => {
                        let keep = if partial {
                            rest.len() - held_back(rest, &enders)
                        } else {
                            rest.len()
                        };
                        msg.reasoning_content = rest[..keep].to_string();
                        pos = text.len();
                    }
                }
            }
        }
        let body = &text[pos..];
        let mut content = if self.parse_calls {
            self.split_calls(body, partial, &mut msg.tool_calls)
        } else {
            body.to_string()
        };
        if self.format.calls == CallSyntax::Gemma4 && self.extract_reasoning {
            content = self.drop_gemma_channels(&content, partial, &mut msg.reasoning_content);
        }
        if self.unwrap_json_fence {
            content = unwrap_fence(&content, partial);
        }
        msg.content = content.trim().to_string();
        msg.reasoning_content = msg.reasoning_content.trim().to_string();
        msg
    }

    /// The content of `body`, with the tool calls it holds pushed to `calls`.
    fn split_calls(&self, body: &str, partial: bool, calls: &mut Vec<ToolCall>) -> String {
        let mut content = String::new();
        if self.format.calls == CallSyntax::Llama3Json {
            let lead = body.len() - body.trim_start().len();
            if body[lead..].starts_with('{') {
                match json_at(&body[lead..]) {
                    Front::Value(v, used) => {
                        if let Some(call) = call_from_json(&v) {
                            calls.push(call);
                            return self.split_calls(&body[lead + used..], partial, calls);
                        }
                    }
                    Front::Incomplete if partial => return content,
                    _ => {}
                }
            }
        }
        let openers = self.format.call_openers();
        if openers.is_empty() {
            return body.to_string();
        }
        let mut cur = 0;
        loop {
            let rest = &body[cur..];
            let found = openers
                .iter()
                .filter_map(|o| rest.find(o).map(|i| (i, *o)))
                .min_by_key(|&(i, _)| i);
            let Some((i, opener)) = found else {
                let keep = if partial {
                    rest.len() - held_back(rest, openers)
                } else {
                    rest.len()
                };
                content.push_str(&rest[..keep]);
                return content;
            };
            content.push_str(&rest[..i]);
            // A bare `<function=` (no `<tool_call>` before it) is read from
            // the tag itself.
            let after = cur
                + i
                + if opener == BARE_FUNCTION {
                    0
                } else {
                    opener.len()
                };
            match self.read_calls(&body[after..], partial) {
                Read::Done(found, used) => {
                    calls.extend(found);
                    cur = after + used;
                }
                Read::Incomplete if partial => return content,
                Read::Incomplete => {
                    content.push_str(&body[cur + i..]);
                    return content;
                }
                Read::Invalid => {
                    content.push_str(opener);
                    cur = cur + i + opener.len();
                }
            }
        }
    }

    /// The call or calls after an opener, and the bytes they took.
    fn read_calls(&self, text: &str, partial: bool) -> Read<Vec<ToolCall>> {
        match self.format.calls {
            CallSyntax::JsonTagged => {
                let (v, used) = match json_read(text) {
                    Read::Done(v, used) => (v, used),
                    other => return other.map_none(),
                };
                let Some(call) = call_from_json(&v) else {
                    return Read::Invalid;
                };
                match literal_after(text, used, "</tool_call>", partial) {
                    Read::Done(_, end) => Read::Done(vec![call], end),
                    Read::Incomplete => Read::Incomplete,
                    Read::Invalid => Read::Done(vec![call], used),
                }
            }
            CallSyntax::XmlFunction => self.read_xml_call(text, partial),
            CallSyntax::MistralList | CallSyntax::ToolCallList => {
                let (v, mut used) = match json_read(text) {
                    Read::Done(v, used) => (v, used),
                    other => return other.map_none(),
                };
                let items = match v {
                    Value::Array(items) => items,
                    one @ Value::Object(_) => vec![one],
                    _ => return Read::Invalid,
                };
                let Some(found) = items.iter().map(call_from_json).collect::<Option<Vec<_>>>()
                else {
                    return Read::Invalid;
                };
                if self.format.calls == CallSyntax::ToolCallList {
                    match literal_after(text, used, "<|/tool_call|>", partial) {
                        Read::Done(_, end) => used = end,
                        Read::Incomplete => return Read::Incomplete,
                        Read::Invalid => {}
                    }
                }
                Read::Done(found, used)
            }
            CallSyntax::MistralNamed => read_mistral_named(text),
            CallSyntax::Gemma4 => read_gemma_call(text, partial),
            CallSyntax::Llama3Json => match json_read(text) {
                Read::Done(v, used) => match call_from_json(&v) {
                    Some(call) => Read::Done(vec![call], used),
                    None => Read::Invalid,
                },
                _ if partial => Read::Incomplete,
                // Not JSON after `<|python_tag|>`: Llama 3.1's built-in code
                // interpreter, the rest is Python.
                _ => {
                    let code = serde_json::json!({"code": text.trim()});
                    let call = ToolCall {
                        name: "python".into(),
                        arguments: code.to_string(),
                        id: String::new(),
                    };
                    Read::Done(vec![call], text.len())
                }
            },
            CallSyntax::None => Read::Invalid,
        }
    }

    /// `<function=NAME>` then `<parameter=KEY>\nVALUE\n</parameter>` pairs,
    /// `</function>` and `</tool_call>`.
    fn read_xml_call(&self, text: &str, partial: bool) -> Read<Vec<ToolCall>> {
        let mut p = skip_space(text, 0);
        match literal(text, p, "<function=") {
            Read::Done(_, end) => p = end,
            other => return other.map_none(),
        }
        let Some(close) = text[p..].find('>') else {
            return Read::Incomplete;
        };
        let name = text[p..p + close].trim().to_string();
        p += close + 1;
        let params = self.param_types.get(&name);
        let mut args = Map::new();
        loop {
            p = skip_space(text, p);
            match literal(text, p, "</function>") {
                Read::Done(_, end) => {
                    p = end;
                    break;
                }
                Read::Incomplete => return Read::Incomplete,
                Read::Invalid => {}
            }
            match literal(text, p, "<parameter=") {
                Read::Done(_, end) => p = end,
                other => return other.map_none(),
            }
            let Some(close) = text[p..].find('>') else {
                return Read::Incomplete;
            };
            let key = text[p..p + close].trim().to_string();
            p += close + 1;
            let Some(len) = text[p..].find("</parameter>") else {
                return Read::Incomplete;
            };
            let raw = &text[p..p + len];
            let raw = raw.strip_prefix('\n').unwrap_or(raw);
            let raw = raw.strip_suffix('\n').unwrap_or(raw);
            let types = params
                .and_then(|p| p.get(&key))
                .map(Vec::as_slice)
                .unwrap_or(&[]);
            let value = typed_value(raw, types);
            args.insert(key, value);
            p += len + "</parameter>".len();
        }
        let call = ToolCall {
            name,
            arguments: Value::Object(args).to_string(),
            id: String::new(),
        };
        match literal_after(text, p, "</tool_call>", partial) {
            Read::Done(_, end) => Read::Done(vec![call], end),
            Read::Incomplete => Read::Incomplete,
            Read::Invalid => Read::Done(vec![call], p),
        }
    }

    /// Gemma 4 may write empty thought channels or stray channel tokens after
    /// its answer; they are not content. A thought's text joins the
    /// reasoning.
    fn drop_gemma_channels(&self, content: &str, partial: bool, reasoning: &mut String) -> String {
        let (open, close) = ("<|channel>", "<channel|>");
        let mut out = String::new();
        let mut rest = content;
        loop {
            let next = [rest.find(open), rest.find(close)]
                .into_iter()
                .flatten()
                .min();
            let Some(i) = next else {
                let keep = if partial {
                    rest.len() - held_back(rest, &[open, close])
                } else {
                    rest.len()
                };
                out.push_str(&rest[..keep]);
                return out;
            };
            out.push_str(&rest[..i]);
            rest = &rest[i..];
            if let Some(after) = rest.strip_prefix(close) {
                rest = after;
                continue;
            }
            let after = &rest[open.len()..];
            match after.find(close) {
                Some(j) => {
                    let thought = after[..j].trim_start_matches(open);
                    let thought = thought.strip_prefix("thought").unwrap_or(thought).trim();
                    if !thought.is_empty() {
                        reasoning.push('\n');
                        reasoning.push_str(thought);
                    }
                    rest = &after[j + close.len()..];
                }
                None if partial => return out,
                None => {
                    rest = after;
                }
            }
        }
    }
}

impl<T> Read<T> {
    fn map_none<U>(self) -> Read<U> {
        match self {
            Read::Done(..) | Read::Invalid => Read::Invalid,
            Read::Incomplete => Read::Incomplete,
        }
    }
}

fn json_read(text: &str) -> Read<Value> {
    match json_at(text) {
        Front::Value(v, used) => Read::Done(v, used),
        Front::Incomplete => Read::Incomplete,
        Front::Invalid => Read::Invalid,
    }
}

fn skip_space(text: &str, p: usize) -> usize {
    p + (text[p..].len() - text[p..].trim_start().len())
}

/// `marker` at byte `p` of `text`: its end, or whether the text stops inside it.
fn literal(text: &str, p: usize, marker: &str) -> Read<()> {
    let rest = &text[p..];
    if rest.starts_with(marker) {
        Read::Done((), p + marker.len())
    } else if marker.starts_with(rest) {
        Read::Incomplete
    } else {
        Read::Invalid
    }
}

/// `marker` after optional whitespace from `p`; incomplete only while partial.
fn literal_after(text: &str, p: usize, marker: &str, partial: bool) -> Read<()> {
    match literal(text, skip_space(text, p), marker) {
        Read::Incomplete if !partial => Read::Invalid,
        other => other,
    }
}

/// A call written as a JSON object: `name` and `arguments` (or
/// `parameters`), with an optional `id`.
fn call_from_json(v: &Value) -> Option<ToolCall> {
    let name = v.get("name")?.as_str()?.to_string();
    let arguments = match v.get("arguments").or_else(|| v.get("parameters")) {
        None | Some(Value::Null) => "{}".to_string(),
        Some(Value::String(s)) => s.clone(),
        Some(other) => other.to_string(),
    };
    let id = match v.get("id") {
        Some(Value::String(s)) => s.clone(),
        _ => String::new(),
    };
    Some(ToolCall {
        name,
        arguments,
        id,
    })
}

/// `NAME[CALL_ID]ID[ARGS]{...}` or `NAME[ARGS]{...}`.
fn read_mistral_named(text: &str) -> Read<Vec<ToolCall>> {
    let Some(args_at) = text.find("[ARGS]") else {
        return if text.contains('{') {
            Read::Invalid
        } else {
            Read::Incomplete
        };
    };
    let head = &text[..args_at];
    let (name, id) = match head.find("[CALL_ID]") {
        Some(i) => (&head[..i], &head[i + "[CALL_ID]".len()..]),
        None => (head, ""),
    };
    let start = args_at + "[ARGS]".len();
    match json_read(&text[start..]) {
        Read::Done(v, used) => Read::Done(
            vec![ToolCall {
                name: name.trim().to_string(),
                arguments: v.to_string(),
                id: id.trim().to_string(),
            }],
            start + used,
        ),
        other => other.map_none(),
    }
}

/// `call:NAME{...}<tool_call|>`.
fn read_gemma_call(text: &str, partial: bool) -> Read<Vec<ToolCall>> {
    let p = match literal(text, 0, "call:") {
        Read::Done(_, end) => end,
        other => return other.map_none(),
    };
    let Some(brace) = text[p..].find('{') else {
        return Read::Incomplete;
    };
    let name = text[p..p + brace].trim().to_string();
    let start = p + brace;
    let (args, used) = match gemma_at(&text[start..]) {
        Front::Value(v, used) => (v, used),
        Front::Incomplete => return Read::Incomplete,
        Front::Invalid => return Read::Invalid,
    };
    let call = ToolCall {
        name,
        arguments: args.to_string(),
        id: String::new(),
    };
    match literal_after(text, start + used, "<tool_call|>", partial) {
        Read::Done(_, end) => Read::Done(vec![call], end),
        Read::Incomplete => Read::Incomplete,
        Read::Invalid => Read::Done(vec![call], start + used),
    }
}

/// A tagged parameter's text as the value its schema's `types` allow: text
/// for a string, `null` where null is allowed, otherwise the JSON it reads
/// as when that is of an allowed type (any type when the schema names
/// none), else the text.
fn typed_value(raw: &str, types: &[String]) -> Value {
    let allows = |t: &str| types.iter().any(|x| x == t);
    let trimmed = raw.trim();
    if trimmed == "null" && allows("null") {
        return Value::Null;
    }
    if allows("string") && types.iter().all(|t| t == "string" || t == "null") {
        return Value::String(raw.to_string());
    }
    match serde_json::from_str::<Value>(trimmed) {
        Ok(v) if types.is_empty() || allows(json_type(&v)) || (allows("number") && v.is_i64()) => v,
        _ => Value::String(raw.to_string()),
    }
}

fn json_type(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "boolean",
        Value::Number(n) if n.is_i64() || n.is_u64() => "integer",
        Value::Number(_) => "number",
        Value::String(_) => "string",
        Value::Array(_) => "array",
        Value::Object(_) => "object",
    }
}

/// JSON asked for by a response format, without the Markdown fence a model
/// may put around it.
fn unwrap_fence(content: &str, partial: bool) -> String {
    let lead = content.len() - content.trim_start().len();
    let text = &content[lead..];
    let fence = "```json";
    let inner = if partial && !text.is_empty() && fence.starts_with(text) {
        return String::new();
    } else if let Some(after) = text.strip_prefix(fence) {
        after
    } else if let Some(after) = text.strip_prefix("```") {
        after
    } else {
        return content.to_string();
    };
    let inner = inner.trim_start();
    match inner.rfind("```") {
        Some(end) => inner[..end].to_string(),
        None if partial => inner[..inner.len() - held_back(inner, &["```"])].to_string(),
        None => inner.to_string(),
    }
}

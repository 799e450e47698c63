//! A conversation's messages as OpenAI's chat API (and llama.rn) writes them:
//! a role, text content, and for assistants the reasoning and the tool calls
//! they made; tool results carry the id of the call they answer.

use serde::{Deserialize, Deserializer, Serialize, Serializer};
use serde_json::{json, Value};

/// One turn of a conversation: `role` is usually "system", "user",
/// "assistant" or "tool"; templates decide what other roles mean.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ChatMessage {
    pub role: String,
    /// The text; `null` in a request reads as empty (an assistant turn made
    /// only of tool calls).
    #[serde(default, deserialize_with = "null_as_empty")]
    pub content: String,
    /// What a reasoning model thought before answering (`<think>` blocks).
    #[serde(
        default,
        skip_serializing_if = "String::is_empty",
        deserialize_with = "null_as_empty"
    )]
    pub reasoning_content: String,
    #[serde(
        default,
        skip_serializing_if = "Vec::is_empty",
        deserialize_with = "null_as_default"
    )]
    pub tool_calls: Vec<ToolCall>,
    /// For a tool result: the id of the call it answers.
    #[serde(
        default,
        skip_serializing_if = "String::is_empty",
        deserialize_with = "null_as_empty"
    )]
    pub tool_call_id: String,
    /// For a tool result: the tool's name.
    #[serde(
        default,
        skip_serializing_if = "String::is_empty",
        deserialize_with = "null_as_empty"
    )]
    pub name: String,
}

impl ChatMessage {
    pub fn new(role: impl Into<String>, content: impl Into<String>) -> ChatMessage {
        ChatMessage {
            role: role.into(),
            content: content.into(),
            ..ChatMessage::default()
        }
    }

    /// The message as a template sees it: OpenAI's shape, with each call's
    /// arguments as a JSON object (what templates iterate or `tojson`; a
    /// string that is not JSON stays a string).
    pub fn to_template_value(&self) -> Value {
        // The serialized message, with each call's arguments parsed.
        let mut v = serde_json::to_value(self).unwrap_or(Value::Null);
        if let Some(calls) = v.get_mut("tool_calls").and_then(Value::as_array_mut) {
            for call in calls {
                let args = &mut call["function"]["arguments"];
                if let Some(parsed) = args
                    .as_str()
                    .and_then(|s| serde_json::from_str::<Value>(s).ok())
                {
                    *args = parsed;
                }
            }
        }
        v
    }
}

/// A function call made by the model: the function's name, its arguments as
/// JSON text, and an id (when the format carries one).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ToolCall {
    pub name: String,
    pub arguments: String,
    pub id: String,
}

/// OpenAI's shape: `{"type": "function", "function": {"name", "arguments"},
/// "id"}`, the id left out when empty.
impl Serialize for ToolCall {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let mut v = json!({
            "type": "function",
            "function": {"name": self.name, "arguments": self.arguments},
        });
        if !self.id.is_empty() {
            v["id"] = Value::from(self.id.as_str());
        }
        v.serialize(s)
    }
}

/// Reads OpenAI's shape, or the flat `{"name", "arguments", "id"}`;
/// arguments may be JSON text or a JSON object.
impl<'de> Deserialize<'de> for ToolCall {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<ToolCall, D::Error> {
        use serde::de::Error;
        let v = Value::deserialize(d)?;
        let f = v.get("function").unwrap_or(&v);
        let name = match f.get("name") {
            Some(Value::String(s)) => s.clone(),
            _ => return Err(D::Error::custom("a tool call needs a function name")),
        };
        let arguments = match f.get("arguments") {
            None | Some(Value::Null) => "{}".to_string(),
            Some(Value::String(s)) => s.clone(),
            Some(other) => other.to_string(),
        };
        let id = match v.get("id") {
            Some(Value::String(s)) => s.clone(),
            Some(Value::Null) | None => String::new(),
            Some(other) => other.to_string(),
        };
        Ok(ToolCall {
            name,
            arguments,
            id,
        })
    }
}

fn null_as_empty<'de, D: Deserializer<'de>>(d: D) -> Result<String, D::Error> {
    Ok(Option::<String>::deserialize(d)?.unwrap_or_default())
}

fn null_as_default<'de, D: Deserializer<'de>, T: Deserialize<'de> + Default>(
    d: D,
) -> Result<T, D::Error> {
    Ok(Option::<T>::deserialize(d)?.unwrap_or_default())
}

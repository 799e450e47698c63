//! Which output format a chat template trains its model to write: where the
//! model's reasoning goes and how it writes a tool call. Read from the
//! template's text, as llama.cpp picks its parser: the markers a template
//! prints for tool calls are the markers its model writes.

/// How a model writes its tool calls.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CallSyntax {
    /// No tool calls: everything after the reasoning is content.
    None,
    /// `<tool_call>{"name": ..., "arguments": {...}}</tool_call>` (Hermes,
    /// Qwen 2.5/3, Granite 4, SmolLM3).
    JsonTagged,
    /// `<tool_call>\n<function=NAME>\n<parameter=KEY>\nVALUE\n</parameter>\n
    /// </function>\n</tool_call>` (Qwen3-Coder, Qwen3.5, Nemotron 3).
    XmlFunction,
    /// `[TOOL_CALLS][{"name": ..., "arguments": {...}, "id": ...}]` (Mistral
    /// Nemo and the v3 templates).
    MistralList,
    /// `[TOOL_CALLS]NAME[CALL_ID]ID[ARGS]{...}` with `[CALL_ID]` or
    /// `[TOOL_CALLS]NAME[ARGS]{...}` without (Mistral Small 3.2, Devstral).
    MistralNamed,
    /// `<|tool_call>call:NAME{key:<|"|>text<|"|>,n:1}<tool_call|>` (Gemma 4).
    Gemma4,
    /// A bare `{"name": ..., "parameters": {...}}` object, or
    /// `<|python_tag|>` before one (Llama 3.x).
    Llama3Json,
    /// `<|tool_call|>[{"name": ..., "arguments": {...}}]`, closed by
    /// `<|/tool_call|>` or the end (Granite 3.x, Phi-4-mini).
    ToolCallList,
}

/// A template's output format.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct OutputFormat {
    /// A short name, reported to callers (`chat_format`).
    pub name: &'static str,
    /// The tags around reasoning, when the model reasons.
    pub reasoning: Option<(&'static str, &'static str)>,
    pub calls: CallSyntax,
}

impl OutputFormat {
    /// The texts that open a tool call. Qwen3-Coder models sometimes leave
    /// out the `<tool_call>` and start at `<function=`.
    pub fn call_openers(&self) -> &'static [&'static str] {
        match self.calls {
            CallSyntax::XmlFunction => &["<tool_call>", BARE_FUNCTION],
            CallSyntax::JsonTagged => &["<tool_call>"],
            CallSyntax::MistralList | CallSyntax::MistralNamed => &["[TOOL_CALLS]"],
            CallSyntax::Gemma4 => &["<|tool_call>"],
            CallSyntax::ToolCallList => &["<|tool_call|>"],
            CallSyntax::Llama3Json => &["<|python_tag|>"],
            CallSyntax::None => &[],
        }
    }

    /// The special tokens the format writes (llama.cpp's `preserved_tokens`).
    pub fn markers(&self) -> Vec<&'static str> {
        let mut out = Vec::new();
        if let Some((start, end)) = self.reasoning {
            out.push(start);
            out.push(end);
        }
        out.extend(match self.calls {
            CallSyntax::JsonTagged | CallSyntax::XmlFunction => {
                &["<tool_call>", "</tool_call>"][..]
            }
            CallSyntax::MistralList => &["[TOOL_CALLS]"][..],
            CallSyntax::MistralNamed => &["[TOOL_CALLS]", "[CALL_ID]", "[ARGS]"][..],
            CallSyntax::Gemma4 => &["<|tool_call>", "<tool_call|>"][..],
            CallSyntax::ToolCallList => &["<|tool_call|>", "<|/tool_call|>"][..],
            CallSyntax::Llama3Json => &["<|python_tag|>"][..],
            CallSyntax::None => &[][..],
        });
        out
    }
}

/// A Qwen3-Coder call written without its `<tool_call>` wrapper.
pub const BARE_FUNCTION: &str = "<function=";

const THINK: (&str, &str) = ("<think>", "</think>");

/// The format of the model trained on `source` (a template's Jinja text).
pub fn detect_format(source: &str) -> OutputFormat {
    let has = |s: &str| source.contains(s);
    let thinks = has("<think>");
    let think = if thinks { Some(THINK) } else { None };
    let format = |name, reasoning, calls| OutputFormat {
        name,
        reasoning,
        calls,
    };
    if has("'<|tool_call>call:'") {
        return format(
            "gemma4",
            Some(("<|channel>thought", "<channel|>")),
            CallSyntax::Gemma4,
        );
    }
    if has("<tool_call>") && has("<function=") && has("<parameter=") {
        return format("qwen3-coder", think, CallSyntax::XmlFunction);
    }
    if has("[TOOL_CALLS]") {
        let reasoning = Some(("[THINK]", "[/THINK]"));
        return if has("[ARGS]") {
            format("mistral", reasoning, CallSyntax::MistralNamed)
        } else {
            format("mistral-nemo", reasoning, CallSyntax::MistralList)
        };
    }
    if has("<tool_call>") {
        return format("hermes", think, CallSyntax::JsonTagged);
    }
    if has("<|tool_call|>") {
        let name = if has("<|start_of_role|>") {
            "granite"
        } else {
            "phi-4"
        };
        return format(name, think, CallSyntax::ToolCallList);
    }
    if has("<|start_header_id|>") && has("<|python_tag|>")
        || has("\"parameters\": dictionary of argument name")
    {
        return format("llama3", think, CallSyntax::Llama3Json);
    }
    format("content", think, CallSyntax::None)
}

//! Rendering a chat template with minijinja, set up the way Hugging Face
//! transformers sets up Jinja2 for `apply_chat_template`: `trim_blocks` and
//! `lstrip_blocks` on, no auto-escaping, `raise_exception`, `strftime_now`,
//! its own `tojson`, Python's string and dict methods, Jinja2's default
//! undefined (prints as nothing, `is defined` works, an attribute of an
//! undefined value is an error). minijinja already prints `True`, `False`
//! and `None` the Python way.

use std::fmt;

use minijinja::syntax::SyntaxConfig;
use minijinja::value::Value;
use minijinja::{AutoEscape, Environment, Error, ErrorKind, UndefinedBehavior};

use super::{clock, pyjson, ChatMessage};

/// The name the template is registered under; it appears in error locations.
const NAME: &str = "chat_template";

/// The work one render may do (about one unit per instruction or per 64
/// bytes of data made). A real conversation through the largest model
/// templates needs well under 1% of it; a template from an untrusted GGUF file
/// that loops or allocates without end fails instead of hanging.
const RENDER_FUEL: u64 = 10_000_000;

/// A parsed template with its environment.
pub struct JinjaTemplate {
    env: Environment<'static>,
}

/// The variables a render sees: those transformers passes, less `tools` and
/// `documents` (see `render`).
pub struct RenderInput<'a> {
    pub messages: &'a [ChatMessage],
    pub add_generation_prompt: bool,
    pub bos_token: &'a str,
    pub eos_token: &'a str,
}

/// Marks an error as the template's own `raise_exception(...)`, so callers can
/// report the template's message as the reason.
#[derive(Debug)]
pub struct Raised;

impl fmt::Display for Raised {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("raised by the template")
    }
}

impl std::error::Error for Raised {}

/// A render variable that, when set (Unix seconds), is the time
/// `strftime_now` gives: a render's own date (`ChatOptions::now`) wins over
/// the template's fixed time and the clock.
pub const NOW_VARIABLE: &str = "__lamina_now";

impl JinjaTemplate {
    /// Parses `source`; a syntax error comes back with its line.
    /// `fixed_time` (Unix seconds) freezes `strftime_now`; `None` reads the clock.
    pub fn compile(source: &str, fixed_time: Option<i64>) -> Result<JinjaTemplate, Error> {
        let mut env = Environment::new();
        let syntax = SyntaxConfig::builder()
            .trim_blocks(true)
            .lstrip_blocks(true)
            .build()?;
        env.set_syntax(syntax);
        env.set_undefined_behavior(UndefinedBehavior::Lenient);
        env.set_fuel(Some(RENDER_FUEL));
        env.set_auto_escape_callback(|_| AutoEscape::None);
        env.set_unknown_method_callback(minijinja_contrib::pycompat::unknown_method_callback);
        env.add_filter("tojson", pyjson::tojson);
        env.add_function("raise_exception", raise_exception);
        env.add_function(
            "strftime_now",
            move |state: &minijinja::State, format: String| -> String {
                let now = state
                    .lookup(NOW_VARIABLE)
                    .and_then(|v| v.as_i64())
                    .or(fixed_time)
                    .unwrap_or_else(clock::unix_now);
                clock::strftime(&format, now)
            },
        );
        env.add_template_owned(NAME, without_generation_tags(source))?;
        Ok(JinjaTemplate { env })
    }

    pub fn render(&self, input: &RenderInput) -> Result<String, Error> {
        let messages: Vec<Value> = input
            .messages
            .iter()
            .map(|m| {
                Value::from_pairs([
                    ("role", Value::from(m.role.as_str())),
                    ("content", Value::from(m.content.as_str())),
                ])
            })
            .collect();
        let ctx = Value::from_pairs([
            ("messages", Value::from(messages)),
            (
                "add_generation_prompt",
                Value::from(input.add_generation_prompt),
            ),
            ("bos_token", Value::from(input.bos_token)),
            ("eos_token", Value::from(input.eos_token)),
            // `tools` and `documents` stay undefined, as in llama.cpp for a
            // request without tools. (transformers passes None, which Jinja2
            // cannot iterate but minijinja iterates as empty: undefined is
            // the value both engines treat alike.)
        ]);
        self.env.get_template(NAME)?.render(ctx)
    }
}

impl JinjaTemplate {
    /// Renders with `context` (a JSON object) as the template's variables:
    /// the path that passes tools, `enable_thinking` and template kwargs.
    pub fn render_json(&self, context: &serde_json::Value) -> Result<String, Error> {
        use serde::Deserialize;
        let context = Value::deserialize(context).map_err(|e| {
            Error::new(ErrorKind::BadSerialization, "template variables").with_source(e)
        })?;
        self.env.get_template(NAME)?.render(context)
    }
}

/// transformers' `{% generation %}...{% endgeneration %}` marks the assistant's
/// text for training masks and renders its body unchanged; minijinja has no
/// such tag, so it becomes `{% if true %}...{% endif %}`, which renders the
/// same, whitespace control markers included.
fn without_generation_tags(source: &str) -> String {
    if !source.contains("generation") {
        return source.to_string();
    }
    let Ok(tag) = regex::Regex::new(r"\{%([-+]?)\s*(end)?generation\s*([-+]?)%\}") else {
        return source.to_string(); // unreachable: the pattern is a constant
    };
    tag.replace_all(source, |c: &regex::Captures| {
        let body = if c.get(2).is_some() {
            "endif"
        } else {
            "if true"
        };
        format!("{{%{} {body} {}%}}", &c[1], &c[3])
    })
    .into_owned()
}

fn raise_exception(message: String) -> Result<Value, Error> {
    Err(Error::new(ErrorKind::InvalidOperation, message).with_source(Raised))
}

/// A message naming what went wrong and where: the template's own message for
/// `raise_exception`, otherwise minijinja's kind, detail and line.
pub fn describe_error(err: &Error) -> String {
    let raised = std::iter::successors(Some(err as &dyn std::error::Error), |e| e.source())
        .any(|e| e.is::<Raised>());
    let line = match err.line() {
        Some(line) if line > 0 => format!(" (line {line})"),
        _ => String::new(),
    };
    if raised {
        format!(
            "the template raised an exception: {}{line}",
            err.detail().unwrap_or_default()
        )
    } else {
        match err.detail() {
            Some(detail) => format!("{}: {detail}{line}", err.kind()),
            None => format!("{}{line}", err.kind()),
        }
    }
}

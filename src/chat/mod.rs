//! Chat templates: turning a conversation into the prompt text a model was
//! trained on, as llama.cpp (and llama.rn on top of it) does.
//!
//! A template is a model's Jinja text (`tokenizer.chat_template`) or a family
//! name such as `"chatml"` or `"llama3"`. A template whose family llama.cpp
//! knows is formatted by a built-in formatter that writes exactly what
//! llama.cpp's `llm_chat_apply_template` writes; any other template is
//! rendered as Jinja, set up as Hugging Face transformers renders it.
//!
//! - `family.rs`: the families and their names
//! - `detect.rs`: which family a template text belongs to
//! - `builtin.rs`: the built-in formatters
//! - `message.rs`: messages, with reasoning and tool calls
//! - `tools/`: tools, reasoning and their output formats (`apply_chat`)
//! - `jinja.rs`: the Jinja renderer (with `pyjson.rs` for `tojson` and
//!   `clock.rs` for `strftime_now`)

mod builtin;
mod clock;
mod detect;
mod family;
mod jinja;
mod message;
mod pyjson;
pub mod tools;

use crate::error::{Error, Result};
use crate::gguf::Metadata;

pub use clock::strftime;
pub use detect::detect_family;
pub use family::ChatFamily;
pub use message::{ChatMessage, ToolCall};

use jinja::{JinjaTemplate, RenderInput};

/// The metadata key holding a model's Jinja chat template.
pub const CHAT_TEMPLATE_KEY: &str = "tokenizer.chat_template";

/// A chat template ready to format conversations.
pub struct ChatTemplate {
    source: String,
    family: Option<ChatFamily>,
    /// The parsed Jinja text, or why it would not parse. `None` when the
    /// source is a family name (there is no Jinja to parse).
    jinja: Option<std::result::Result<JinjaTemplate, String>>,
    bos: String,
    eos: String,
    fixed_time: Option<i64>,
}

impl ChatTemplate {
    /// The model's chat template (ChatML when it has none, as llama.cpp),
    /// with its BOS and EOS token texts.
    pub fn of_model(model: &crate::model::Model) -> Result<ChatTemplate> {
        ChatTemplate::for_model(model, None)
    }

    /// `template` (Jinja text or a family name) in place of the model's
    /// when given (llama.cpp's `--chat-template`), with the model's BOS and
    /// EOS token texts.
    pub fn for_model(model: &crate::model::Model, template: Option<&str>) -> Result<ChatTemplate> {
        let text = |id: Option<u32>| {
            id.and_then(|t| model.vocab.token_text(t))
                .unwrap_or("")
                .to_string()
        };
        let (bos, eos) = (text(model.vocab.bos), text(model.vocab.eos));
        match template {
            Some(t) => ChatTemplate::new(t, &bos, &eos),
            None => ChatTemplate::from_metadata(model.file().metadata(), &bos, &eos),
        }
    }

    /// The prompt for `messages` with the assistant's turn opened: rendered
    /// as Jinja when `jinja` (llama.cpp's `--jinja`), else by `apply`.
    pub fn format(&self, messages: &[ChatMessage], jinja: bool) -> Result<String> {
        if jinja {
            self.apply_jinja(messages, true)
        } else {
            self.apply(messages, true)
        }
    }

    /// A template from its Jinja text or a family name, with the model's BOS
    /// and EOS token texts (the template variables `bos_token`, `eos_token`).
    ///
    /// A template that does not parse as Jinja is an error unless its family
    /// is recognised: then the built-in formatter serves it, as in llama.cpp,
    /// which never parses such templates, and only `apply_jinja` reports
    /// the syntax error.
    pub fn new(template: &str, bos: &str, eos: &str) -> Result<ChatTemplate> {
        let family = detect_family(template);
        let jinja = if ChatFamily::from_name(template).is_some() {
            None
        } else {
            Some(JinjaTemplate::compile(template, None).map_err(|e| jinja::describe_error(&e)))
        };
        if let (None, Some(Err(why))) = (family, &jinja) {
            return Err(Error::ChatTemplate(format!(
                "the template does not parse: {why}"
            )));
        }
        Ok(ChatTemplate {
            source: template.to_string(),
            family,
            jinja,
            bos: bos.to_string(),
            eos: eos.to_string(),
            fixed_time: None,
        })
    }

    /// The model's own template (`tokenizer.chat_template`). A model without
    /// one gets ChatML, as llama.cpp gives it (`llama_chat_apply_template`
    /// falls back to "chatml" when the model has no template).
    pub fn from_metadata(md: &Metadata, bos: &str, eos: &str) -> Result<ChatTemplate> {
        if !md.contains(CHAT_TEMPLATE_KEY) {
            return ChatTemplate::new("chatml", bos, eos);
        }
        ChatTemplate::new(md.get_str(CHAT_TEMPLATE_KEY)?, bos, eos)
    }

    /// Freezes the date that `strftime_now` gives a Jinja template (Unix
    /// seconds, formatted as UTC), so that renders can be reproduced.
    pub fn with_fixed_time(mut self, unix_seconds: i64) -> ChatTemplate {
        self.fixed_time = Some(unix_seconds);
        if let Some(Ok(_)) = self.jinja {
            // Compiled before; the same text compiles again.
            self.jinja = Some(
                JinjaTemplate::compile(&self.source, Some(unix_seconds))
                    .map_err(|e| jinja::describe_error(&e)),
            );
        }
        self
    }

    /// The built-in family `apply` formats with, or `None` when it renders the
    /// template as Jinja.
    pub fn family(&self) -> Option<ChatFamily> {
        self.family
    }

    /// The template text (or family name) this was made from.
    pub fn source(&self) -> &str {
        &self.source
    }

    /// The prompt for `messages`; `add_generation_prompt` opens the
    /// assistant's turn at the end. Built-in formatter when the family is
    /// known, Jinja otherwise.
    pub fn apply(&self, messages: &[ChatMessage], add_generation_prompt: bool) -> Result<String> {
        match self.family {
            Some(family) => Ok(builtin::format(family, messages, add_generation_prompt)),
            None => self.apply_jinja(messages, add_generation_prompt),
        }
    }

    /// The prompt rendered from the Jinja text even when a built-in family
    /// matches (what llama.cpp's `--jinja` mode does). An error when the
    /// template is a family name or does not parse, or when rendering fails
    /// (the template's own `raise_exception` message is passed on).
    pub fn apply_jinja(
        &self,
        messages: &[ChatMessage],
        add_generation_prompt: bool,
    ) -> Result<String> {
        let template = self.compiled()?;
        let input = RenderInput {
            messages,
            add_generation_prompt,
            bos_token: &self.bos,
            eos_token: &self.eos,
        };
        template
            .render(&input)
            .map_err(|e| Error::ChatTemplate(jinja::describe_error(&e)))
    }
}

impl ChatTemplate {
    /// The parsed Jinja text: an error when the template is a family name or
    /// does not parse.
    fn compiled(&self) -> Result<&JinjaTemplate> {
        match &self.jinja {
            None => Err(Error::ChatTemplate(format!(
                "'{}' is a built-in family name, not a Jinja template",
                self.source
            ))),
            Some(Err(why)) => Err(Error::ChatTemplate(format!(
                "the template does not parse: {why}"
            ))),
            Some(Ok(t)) => Ok(t),
        }
    }
}

impl std::fmt::Debug for ChatTemplate {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ChatTemplate")
            .field("family", &self.family)
            .field("source_len", &self.source.len())
            .field("jinja_parses", &matches!(self.jinja, Some(Ok(_))))
            .field("fixed_time", &self.fixed_time)
            .finish()
    }
}

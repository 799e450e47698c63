//! JSON schemas as GBNF grammars, so a generation can be held to a schema
//! (llama.cpp's `--json-schema`, llama.rn's and OpenAI's `response_format`).
//! The schema is read into nodes (`document`), and the nodes into rules
//! (`convert`) — integer ranges (`integers`) and regex patterns (`pattern`)
//! each have their own part — giving the same grammar text as llama.cpp's
//! `json_schema_to_grammar` for the same schema.

mod convert;
mod document;
mod integers;
mod pattern;
mod rules;

use serde_json::Value;

use crate::error::{Error, Result};

/// A schema's grammar, and what it could not express.
pub struct SchemaGrammar {
    /// GBNF text with a `root` rule.
    pub grammar: String,
    /// Parts the grammar could not express and lets through instead (a
    /// `pattern` outside the regex subset grammars can say accepts any
    /// string), one sentence each.
    pub warnings: Vec<String>,
}

/// The grammar of JSON text that `schema` accepts. Keywords outside the
/// supported subset are ignored as llama.cpp ignores them; a schema that
/// cannot be read (an unknown `type`, a `$ref` outside the document, an
/// invalid pattern, ...) is an error naming where.
pub fn json_schema_to_grammar(schema: &Value) -> Result<SchemaGrammar> {
    let fail =
        |msg: String| Error::InvalidArgument(format!("JSON schema conversion failed: {msg}"));
    let doc = document::Document::read(schema).map_err(fail)?;
    let mut converter = convert::Converter::new(&doc);
    converter.visit(&doc.root, "");
    if !converter.errors.is_empty() {
        return Err(fail(converter.errors.join("; ")));
    }
    Ok(SchemaGrammar {
        grammar: converter.rules.text(),
        warnings: converter.warnings,
    })
}

/// The grammar for `schema` given as JSON text.
pub fn json_schema_text_to_grammar(schema: &str) -> Result<SchemaGrammar> {
    let value: Value = serde_json::from_str(schema)
        .map_err(|e| Error::InvalidArgument(format!("the JSON schema is not valid JSON: {e}")))?;
    json_schema_to_grammar(&value)
}

/// The rules of each property's value in an object `schema` (a tool's
/// parameters), for grammars that write the properties themselves (tagged
/// tool-call formats): the grammar text without a `root`, and per property
/// its name, whether it is required, and the rule of its value. Rule names
/// start with `prefix`; the built-in rules (`space`, `string`, ...) keep
/// theirs, with the same bodies in every such grammar.
pub(crate) fn property_rules(
    schema: &Value,
    prefix: &str,
) -> Result<(String, Vec<(String, bool, String)>)> {
    let fail =
        |msg: String| Error::InvalidArgument(format!("JSON schema conversion failed: {msg}"));
    let doc = document::Document::read(schema).map_err(fail)?;
    let mut converter = convert::Converter::new(&doc);
    let mut out = Vec::new();
    if let document::Node::Object { properties, .. } = &doc.root {
        for p in properties {
            let rule = converter.visit(&p.schema, &format!("{prefix}-{}", p.name));
            out.push((p.name.clone(), p.required, rule));
        }
    }
    if !converter.errors.is_empty() {
        return Err(fail(converter.errors.join("; ")));
    }
    Ok((converter.rules.text(), out))
}

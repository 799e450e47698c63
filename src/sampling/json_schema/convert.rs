//! Schema nodes to grammar rules, as llama.cpp's `json_schema_to_grammar`
//! builds them: one rule per named part of the schema (`root`, `root-name`,
//! `ref-defs-item`, ...), built-in rules for the primitives, objects as
//! their properties in schema order with the optional ones nested so any
//! subset can appear, and shared `$ref` targets written once.

use std::collections::{BTreeMap, HashMap, HashSet};

use serde_json::Value;

use super::document::{Document, Format, Node, StringNode};
use super::integers::min_max_int;
use super::pattern::{pattern_rule, PatternError};
use super::rules::{is_reserved, literal, primitive, repetition, string_format, Builtin, Rules};

pub(super) struct Converter<'a> {
    doc: &'a Document,
    pub rules: Rules,
    /// `$ref`s whose rule is being built, so a cycle names the rule instead.
    resolving: HashSet<String>,
    pub errors: Vec<String>,
    /// Parts of the schema the grammar could not express and accepts any
    /// value for instead.
    pub warnings: Vec<String>,
}

fn prim(name: &str) -> Builtin {
    primitive(name).expect("a built-in primitive")
}

/// A JSON value written compactly, as the model must write it.
fn constant(value: &Value) -> String {
    literal(&value.to_string())
}

/// `name-suffix`, or `suffix` alone at the root.
fn child(name: &str, suffix: &str) -> String {
    if name.is_empty() {
        suffix.to_string()
    } else {
        format!("{name}-{suffix}")
    }
}

impl<'a> Converter<'a> {
    pub fn new(doc: &'a Document) -> Converter<'a> {
        Converter {
            doc,
            rules: Rules::new(),
            resolving: HashSet::new(),
            errors: Vec::new(),
            warnings: Vec::new(),
        }
    }

    fn builtin(&mut self, name: &str, rule: &Builtin) -> String {
        self.rules.add_builtin(name, rule)
    }

    /// A primitive as the rule `rule_name` at the root, else under its own name.
    fn visit_primitive(&mut self, rule_name: &str, ty: &str) -> String {
        self.builtin(if rule_name == "root" { "root" } else { ty }, &prim(ty))
    }

    /// Adds the rules for `node` named after `name` ("" at the root) and
    /// returns the name of its rule.
    pub fn visit(&mut self, node: &Node, name: &str) -> String {
        let rule_name = if is_reserved(name) {
            format!("{name}-")
        } else if name.is_empty() {
            "root".to_string()
        } else {
            name.to_string()
        };
        let sub_name = if name.is_empty() {
            String::new()
        } else {
            format!("{name}-")
        };
        match node {
            Node::Ref(reference) => {
                let target = self.resolve_ref(reference);
                self.rules.add(&rule_name, &target)
            }
            Node::AnyOf(alts) => {
                let rule = alts
                    .iter()
                    .enumerate()
                    .map(|(i, alt)| {
                        let alt_name = if name.is_empty() {
                            format!("alternative-{i}")
                        } else {
                            format!("{name}-{i}")
                        };
                        self.visit(alt, &alt_name)
                    })
                    .collect::<Vec<_>>()
                    .join(" | ");
                self.rules.add(&rule_name, &rule)
            }
            Node::AllOf(parts) => self.visit_all_of(parts, name, &rule_name),
            Node::Const(value) => self.rules.add(&rule_name, &constant(value)),
            Node::Enum(values) => {
                let alts: Vec<String> = values.iter().map(constant).collect();
                self.rules
                    .add(&rule_name, &format!("({})", alts.join(" | ")))
            }
            Node::Object {
                properties,
                additional,
            } => {
                if properties.is_empty() && matches!(additional.as_deref(), Some(Node::Any)) {
                    let object = self.builtin("object", &prim("object"));
                    return self.rules.add(&rule_name, &object);
                }
                let props: Vec<(&str, &Node)> = properties
                    .iter()
                    .map(|p| (p.name.as_str(), &p.schema))
                    .collect();
                let required = properties
                    .iter()
                    .filter(|p| p.required)
                    .map(|p| p.name.as_str())
                    .collect();
                let rule = self.object_rule(&props, &required, name, additional.as_deref());
                self.rules.add(&rule_name, &rule)
            }
            Node::Tuple(items) => {
                let parts: Vec<String> = items
                    .iter()
                    .enumerate()
                    .map(|(i, it)| self.visit(it, &format!("{sub_name}tuple-{i}")))
                    .collect();
                let rule = format!("\"[\" space {} space \"]\"", parts.join(" \",\" space "));
                self.rules.add(&rule_name, &rule)
            }
            Node::Array {
                items,
                min_items,
                max_items,
            } => {
                if matches!(**items, Node::Any) && *min_items == 0 && max_items.is_none() {
                    return self.visit_primitive(&rule_name, "array");
                }
                let item = self.visit(items, &format!("{sub_name}item"));
                let rule = format!(
                    "\"[\" space {} space \"]\"",
                    repetition(&item, *min_items, *max_items, "\",\" space")
                );
                self.rules.add(&rule_name, &rule)
            }
            Node::String(s) => self.visit_string(s, &rule_name),
            Node::Integer {
                minimum: i64::MIN,
                maximum: i64::MAX,
            } => self.visit_primitive(&rule_name, "integer"),
            Node::Integer { minimum, maximum } => {
                let mut rule = String::from("(");
                min_max_int(*minimum, *maximum, &mut rule);
                rule.push(')');
                self.rules.add(&rule_name, &rule)
            }
            Node::Number => self.visit_primitive(&rule_name, "number"),
            Node::Boolean => self.visit_primitive(&rule_name, "boolean"),
            Node::Null => self.visit_primitive(&rule_name, "null"),
            Node::Any => {
                let value = self.builtin("value", &prim("value"));
                self.rules.add(&rule_name, &value)
            }
        }
    }

    fn visit_string(&mut self, s: &StringNode, rule_name: &str) -> String {
        if let Some(pattern) = &s.pattern {
            return self.visit_pattern(pattern, rule_name);
        }
        let format_rule = match s.format {
            Format::None => None,
            Format::Uuid => return self.visit_primitive(rule_name, "uuid"),
            Format::Date => Some("date-string"),
            Format::Time => Some("time-string"),
            Format::DateTime => Some("date-time-string"),
        };
        if let Some(format_rule) = format_rule {
            let added = self.builtin(
                format_rule,
                &string_format(format_rule).expect("a built-in format"),
            );
            return self.rules.add(rule_name, &added);
        }
        if s.min_length > 0 || s.max_length.is_some() {
            let char_rule = self.builtin("char", &prim("char"));
            let rule = format!(
                "\"\\\"\" {} \"\\\"\"",
                repetition(&char_rule, s.min_length, s.max_length, "")
            );
            return self.rules.add(rule_name, &rule);
        }
        self.visit_primitive(rule_name, "string")
    }

    fn visit_pattern(&mut self, pattern: &str, rule_name: &str) -> String {
        let snapshot = self.rules.map.clone();
        match pattern_rule(&mut self.rules, pattern, rule_name, false) {
            Ok(rule) => rule,
            Err(PatternError::Unsupported(why)) => {
                self.rules.map = snapshot;
                self.warnings.push(format!(
                    "pattern {pattern} is not supported ({why}), accepting any string"
                ));
                let string = self.builtin("string", &prim("string"));
                self.rules.add(rule_name, &string)
            }
            Err(PatternError::Invalid(why)) => {
                self.rules.map = snapshot;
                self.errors
                    .push(format!("Invalid pattern {pattern}: {why}"));
                String::new()
            }
        }
    }

    /// The rule a `$ref` names (`ref-defs-item` for `#/$defs/item`), built
    /// the first time it is met.
    fn resolve_ref(&mut self, reference: &str) -> String {
        let fragment = reference.split_once('#').map_or(reference, |(_, f)| f);
        let mut name = format!("ref{}", super::rules::rule_name(fragment));
        if !self.rules.map.contains_key(&name) && !self.resolving.contains(reference) {
            let Some(target) = self.doc.refs.get(reference) else {
                self.errors.push(format!("Unresolved $ref {reference}"));
                return String::new();
            };
            self.resolving.insert(reference.to_string());
            name = self.visit(target, &name);
            self.resolving.remove(reference);
        }
        name
    }

    /// `allOf`: the properties of every part (those of `anyOf` parts
    /// optional), or the enum values every part allows.
    fn visit_all_of(&mut self, parts: &[Node], name: &str, rule_name: &str) -> String {
        let doc = self.doc;
        let mut properties: Vec<(&str, &Node)> = Vec::new();
        let mut required: HashSet<&str> = HashSet::new();
        let mut enum_counts: BTreeMap<String, usize> = BTreeMap::new();
        fn add<'n>(
            doc: &'n Document,
            part: &'n Node,
            is_required: bool,
            properties: &mut Vec<(&'n str, &'n Node)>,
            required: &mut HashSet<&'n str>,
            enum_counts: &mut BTreeMap<String, usize>,
        ) {
            match part {
                Node::Ref(r) => {
                    // Follow a chain of `$ref`s to what it names; a chain
                    // back to itself names nothing and adds nothing.
                    let mut target = doc.refs.get(r);
                    for _ in 0..doc.refs.len() {
                        match target {
                            Some(Node::Ref(next)) => target = doc.refs.get(next),
                            _ => break,
                        }
                    }
                    if let Some(target @ (Node::Object { .. } | Node::Enum(_))) = target {
                        add(doc, target, is_required, properties, required, enum_counts);
                    }
                }
                Node::Object {
                    properties: props, ..
                } => {
                    for p in props {
                        properties.push((&p.name, &p.schema));
                        if is_required {
                            required.insert(&p.name);
                        }
                    }
                }
                Node::Enum(values) => {
                    for v in values {
                        *enum_counts.entry(constant(v)).or_default() += 1;
                    }
                }
                _ => {}
            }
        }
        for part in parts {
            match part {
                Node::AnyOf(alts) => {
                    for alt in alts {
                        add(
                            doc,
                            alt,
                            false,
                            &mut properties,
                            &mut required,
                            &mut enum_counts,
                        );
                    }
                }
                part => add(
                    doc,
                    part,
                    true,
                    &mut properties,
                    &mut required,
                    &mut enum_counts,
                ),
            }
        }
        let common: Vec<String> = enum_counts
            .into_iter()
            .filter(|(_, n)| *n == parts.len())
            .map(|(v, _)| v)
            .collect();
        if !common.is_empty() {
            return self
                .rules
                .add(rule_name, &format!("({})", common.join(" | ")));
        }
        let rule = self.object_rule(&properties, &required, name, None);
        self.rules.add(rule_name, &rule)
    }

    /// An object's rule: the required properties in order, then any subset
    /// of the optional ones in order (each `k-rest` rule holds what may
    /// follow property `k`), then other properties if allowed.
    fn object_rule(
        &mut self,
        properties: &[(&str, &Node)],
        required: &HashSet<&str>,
        name: &str,
        additional: Option<&Node>,
    ) -> String {
        let mut required_props: Vec<String> = Vec::new();
        let mut optional_props: Vec<String> = Vec::new();
        let mut kv_rules: HashMap<String, String> = HashMap::new();
        let mut prop_names: Vec<String> = Vec::new();
        for (prop_name, schema) in properties {
            let value_rule = self.visit(schema, &child(name, prop_name));
            let key = literal(&Value::String(prop_name.to_string()).to_string());
            let kv = self.rules.add(
                &child(name, &format!("{prop_name}-kv")),
                &format!("{key} space \":\" space {value_rule}"),
            );
            kv_rules.insert(prop_name.to_string(), kv);
            if required.contains(prop_name) {
                required_props.push(prop_name.to_string());
            } else {
                optional_props.push(prop_name.to_string());
            }
            prop_names.push(prop_name.to_string());
        }
        if let Some(additional) = additional {
            let sub_name = child(name, "additional");
            let value_rule = match additional {
                Node::Any => self.builtin("value", &prim("value")),
                schema => self.visit(schema, &format!("{sub_name}-value")),
            };
            let key_rule = if prop_names.is_empty() {
                self.builtin("string", &prim("string"))
            } else {
                let not_listed = self.not_strings(&prop_names);
                self.rules.add(&format!("{sub_name}-k"), &not_listed)
            };
            let kv = self.rules.add(
                &format!("{sub_name}-kv"),
                &format!("{key_rule} \":\" space {value_rule}"),
            );
            kv_rules.insert("*".into(), kv);
            optional_props.push("*".into());
        }
        if required_props.is_empty() && optional_props.is_empty() {
            return "\"{\" space \"}\"".into();
        }

        let mut rule = String::from("\"{\" space ");
        let required_kvs: Vec<&str> = required_props
            .iter()
            .map(|k| kv_rules[k].as_str())
            .collect();
        rule.push_str(&required_kvs.join(" \",\" space "));
        if !optional_props.is_empty() {
            rule.push_str(" (");
            if !required_props.is_empty() {
                rule.push_str(" \",\" space ( ");
            }
            let alts: Vec<String> = (0..optional_props.len())
                .map(|i| self.optional_run(&optional_props[i..], false, &kv_rules, name))
                .collect();
            rule.push_str(&alts.join(" | "));
            if !required_props.is_empty() {
                rule.push_str(" )");
            }
            rule.push_str(" )?");
        }
        rule.push_str(" space \"}\"");
        rule
    }

    /// The optional properties `keys` in order, any of them left out; the
    /// first is present unless `first_is_optional`. `*` stands for any
    /// number of other properties.
    fn optional_run(
        &mut self,
        keys: &[String],
        first_is_optional: bool,
        kv_rules: &HashMap<String, String>,
        name: &str,
    ) -> String {
        let Some(k) = keys.first() else {
            return String::new();
        };
        let kv = &kv_rules[k];
        let comma_kv = format!("( \",\" space {kv} )");
        let mut res = match (first_is_optional, k == "*") {
            (true, true) => format!("{comma_kv}*"),
            (true, false) => format!("{comma_kv}?"),
            (false, true) => format!("{kv} {comma_kv}*"),
            (false, false) => kv.clone(),
        };
        if keys.len() > 1 {
            let rest = self.optional_run(&keys[1..], true, kv_rules, name);
            let rest_rule = self.rules.add(&child(name, &format!("{k}-rest")), &rest);
            res.push(' ');
            res.push_str(&rest_rule);
        }
        res
    }

    /// A JSON string that is none of `strings`: a trie of them where each
    /// branch either goes on to a longer string or leaves the trie.
    fn not_strings(&mut self, strings: &[String]) -> String {
        #[derive(Default)]
        struct TrieNode {
            children: BTreeMap<char, usize>,
            is_end: bool,
        }
        let mut trie = vec![TrieNode::default()];
        for s in strings {
            let mut at = 0;
            for c in s.chars() {
                at = match trie[at].children.get(&c) {
                    Some(&next) => next,
                    None => {
                        trie.push(TrieNode::default());
                        let next = trie.len() - 1;
                        trie[at].children.insert(c, next);
                        next
                    }
                };
            }
            trie[at].is_end = true;
        }
        let char_rule = self.builtin("char", &prim("char"));
        fn walk(trie: &[TrieNode], at: usize, char_rule: &str, out: &mut String) {
            let node = &trie[at];
            let mut rejects = String::new();
            for (i, (&c, &next)) in node.children.iter().enumerate() {
                rejects.push(c);
                if i > 0 {
                    out.push_str(" | ");
                }
                out.push('[');
                out.push(c);
                out.push(']');
                if trie[next].children.is_empty() {
                    out.push_str(&format!(" {char_rule}+"));
                } else {
                    out.push_str(" (");
                    walk(trie, next, char_rule, out);
                    out.push(')');
                }
            }
            if !node.children.is_empty() {
                out.push_str(&format!(" | [^\"{rejects}] {char_rule}*"));
            }
        }
        let mut out = String::from("[\"] ( ");
        walk(&trie, 0, &char_rule, &mut out);
        out.push_str(" )");
        if !trie[0].is_end {
            out.push('?');
        }
        out.push_str(" [\"]");
        out
    }
}

//! A JSON schema read into the nodes the converter knows, as llama.cpp reads
//! one before converting it: `type` arrays become alternatives, exclusive
//! integer bounds are folded into inclusive ones, `$ref`s point into one
//! table, and anything outside the supported subset is refused with the path
//! of the schema where it sits (`#/properties/a/items`).

use std::collections::BTreeMap;

use serde_json::Value;

/// One schema node.
pub(super) enum Node {
    /// No constraint: any JSON value.
    Any,
    /// `{"$ref": "#/..."}`: the target is `Document::refs[key]`.
    Ref(String),
    /// `anyOf`, `oneOf`, or a `type` array, one alternative each.
    AnyOf(Vec<Node>),
    AllOf(Vec<Node>),
    Const(Value),
    Enum(Vec<Value>),
    Null,
    Boolean,
    Number,
    /// Inclusive bounds; `i64::MIN` / `i64::MAX` for none.
    Integer {
        minimum: i64,
        maximum: i64,
    },
    String(StringNode),
    /// Items of one schema; `max_items` `None` for no bound.
    Array {
        items: Box<Node>,
        min_items: u32,
        max_items: Option<u32>,
    },
    /// `items` (or `prefixItems`) given as an array: one schema per position.
    Tuple(Vec<Node>),
    /// Properties in schema order; `additional` `None` when no other
    /// property is allowed.
    Object {
        properties: Vec<Property>,
        additional: Option<Box<Node>>,
    },
}

pub(super) struct StringNode {
    pub pattern: Option<String>,
    pub format: Format,
    pub min_length: u32,
    pub max_length: Option<u32>,
}

#[derive(Clone, Copy, PartialEq, Eq)]
pub(super) enum Format {
    None,
    /// `uuid` and `uuid1` to `uuid5`.
    Uuid,
    Date,
    Time,
    DateTime,
}

pub(super) struct Property {
    pub name: String,
    pub schema: Node,
    pub required: bool,
}

/// A whole schema: its root and every `$ref` target, keyed by the `$ref`.
pub(super) struct Document {
    pub root: Node,
    pub refs: BTreeMap<String, Node>,
}

impl Document {
    /// Reads `schema`; the error names the path and the problem.
    pub fn read(schema: &Value) -> Result<Document, String> {
        let mut reader = Reader {
            root: schema,
            refs: BTreeMap::new(),
        };
        let root = reader.node(schema, "#")?;
        let refs = reader
            .refs
            .into_iter()
            .map(|(k, v)| (k, v.expect("a $ref target is set once it is read")))
            .collect();
        Ok(Document { root, refs })
    }
}

struct Reader<'a> {
    root: &'a Value,
    /// `None` while the target is being read, so a cycle back to it stops.
    refs: BTreeMap<String, Option<Node>>,
}

fn fail<T>(path: &str, msg: impl std::fmt::Display) -> Result<T, String> {
    Err(format!("JSON schema error at {path}: {msg}"))
}

/// `minItems`-like keywords: absent, or a non-negative integer.
fn count(schema: &Value, key: &str, path: &str) -> Result<Option<u32>, String> {
    match schema.get(key) {
        None => Ok(None),
        Some(v) => match v
            .as_u64()
            .and_then(|n| u32::try_from(n).ok())
            .filter(|&n| n <= i32::MAX as u32)
        {
            Some(n) => Ok(Some(n)),
            None => fail(path, format!("{key} must be a non-negative integer")),
        },
    }
}

/// An integer bound; a fractional one is rounded inwards, towards the
/// integers it still admits.
fn bound(value: &Value, key: &str, path: &str, round_up: bool) -> Result<i64, String> {
    if let Some(i) = value.as_i64() {
        return Ok(i);
    }
    if let Some(u) = value.as_u64() {
        return Ok(u.min(i64::MAX as u64) as i64);
    }
    match value.as_f64() {
        // `as` saturates, where the reference's conversion is undefined.
        Some(d) => Ok(if round_up { d.ceil() } else { d.floor() } as i64),
        None => fail(path, format!("{key} must be a number")),
    }
}

fn format_of(schema: &Value, path: &str) -> Result<Format, String> {
    let Some(value) = schema.get("format") else {
        return Ok(Format::None);
    };
    let Some(format) = value.as_str() else {
        return fail(path, "format must be a string");
    };
    Ok(match format {
        "date" => Format::Date,
        "time" => Format::Time,
        "date-time" => Format::DateTime,
        "uuid" | "uuid1" | "uuid2" | "uuid3" | "uuid4" | "uuid5" => Format::Uuid,
        _ => Format::None,
    })
}

impl<'a> Reader<'a> {
    /// The value a `#/a/b/0` reference points at in the document.
    fn resolve(&self, reference: &str, path: &str) -> Result<&'a Value, String> {
        let mut target = self.root;
        for sel in reference[1..].split('/').skip(1) {
            target = match target {
                Value::Object(map) if map.contains_key(sel) => &map[sel],
                Value::Array(items) => match sel.parse::<usize>().ok().and_then(|i| items.get(i)) {
                    Some(item) => item,
                    None => {
                        return fail(
                            path,
                            format!("cannot resolve $ref {reference}, {sel} is out of range"),
                        )
                    }
                },
                _ => {
                    return fail(
                        path,
                        format!("cannot resolve $ref {reference}, {sel} not found"),
                    )
                }
            };
        }
        Ok(target)
    }

    fn reference(&mut self, value: &Value, path: &str) -> Result<Node, String> {
        let Some(reference) = value.as_str() else {
            return fail(path, "$ref must be a string");
        };
        if !reference.starts_with("#/") {
            return fail(
                path,
                format!("unsupported $ref {reference}, only references into the same document are supported"),
            );
        }
        if !self.refs.contains_key(reference) {
            self.refs.insert(reference.to_string(), None);
            let target = self.resolve(reference, path)?;
            let node = self.node(target, reference)?;
            self.refs.insert(reference.to_string(), Some(node));
        }
        Ok(Node::Ref(reference.to_string()))
    }

    fn alternatives(&mut self, alts: &Value, path: &str) -> Result<Vec<Node>, String> {
        let Some(alts) = alts.as_array() else {
            return fail(path, "must be an array of schemas");
        };
        if alts.is_empty() {
            return fail(path, "must not be empty");
        }
        alts.iter()
            .enumerate()
            .map(|(i, alt)| self.node(alt, &format!("{path}/{i}")))
            .collect()
    }

    fn object(&mut self, schema: &Value, path: &str) -> Result<Node, String> {
        let required: Vec<&str> = match schema.get("required") {
            Some(Value::Array(names)) => names.iter().filter_map(Value::as_str).collect(),
            _ => Vec::new(),
        };
        let mut properties = Vec::new();
        if let Some(props) = schema.get("properties") {
            let Some(props) = props.as_object() else {
                return fail(path, "properties must be an object");
            };
            for (name, prop) in props {
                let schema = self.node(prop, &format!("{path}/properties/{name}"))?;
                properties.push(Property {
                    name: name.clone(),
                    schema,
                    required: required.contains(&name.as_str()),
                });
            }
        }
        let additional = match schema.get("additionalProperties") {
            Some(Value::Bool(true)) => Some(Box::new(Node::Any)),
            Some(Value::Bool(false)) => None,
            Some(v @ Value::Object(_)) => Some(Box::new(
                self.node(v, &format!("{path}/additionalProperties"))?,
            )),
            Some(_) => return fail(path, "additionalProperties must be a boolean or a schema"),
            // {"type": "object"} on its own accepts any object.
            None if schema.get("properties").is_none() => Some(Box::new(Node::Any)),
            None => None,
        };
        Ok(Node::Object {
            properties,
            additional,
        })
    }

    fn array(&mut self, schema: &Value, path: &str) -> Result<Node, String> {
        // "items" wins over "prefixItems"; either as an array is a tuple.
        let key = if schema.get("items").is_some() {
            "items"
        } else {
            "prefixItems"
        };
        let items = match schema.get(key) {
            Some(Value::Array(items)) => {
                let items = items.iter().enumerate();
                return Ok(Node::Tuple(
                    items
                        .map(|(i, it)| self.node(it, &format!("{path}/{key}/{i}")))
                        .collect::<Result<_, _>>()?,
                ));
            }
            Some(items) => self.node(items, &format!("{path}/{key}"))?,
            None => Node::Any,
        };
        Ok(Node::Array {
            items: Box::new(items),
            min_items: count(schema, "minItems", path)?.unwrap_or(0),
            max_items: count(schema, "maxItems", path)?,
        })
    }

    fn string(&mut self, schema: &Value, path: &str) -> Result<Node, String> {
        let pattern = match schema.get("pattern") {
            None => None,
            Some(Value::String(p)) => Some(p.clone()),
            Some(_) => return fail(path, "pattern must be a string"),
        };
        Ok(Node::String(StringNode {
            pattern: pattern.filter(|p| !p.is_empty()),
            format: format_of(schema, path)?,
            min_length: count(schema, "minLength", path)?.unwrap_or(0),
            max_length: count(schema, "maxLength", path)?,
        }))
    }

    fn integer(&mut self, schema: &Value, path: &str) -> Result<Node, String> {
        let minimum = match (schema.get("minimum"), schema.get("exclusiveMinimum")) {
            (Some(v), _) => bound(v, "minimum", path, true)?,
            (None, Some(v)) => bound(v, "exclusiveMinimum", path, false)?.saturating_add(1),
            (None, None) => i64::MIN,
        };
        let maximum = match (schema.get("maximum"), schema.get("exclusiveMaximum")) {
            (Some(v), _) => bound(v, "maximum", path, false)?,
            (None, Some(v)) => bound(v, "exclusiveMaximum", path, true)?.saturating_sub(1),
            (None, None) => i64::MAX,
        };
        Ok(Node::Integer { minimum, maximum })
    }

    fn node(&mut self, schema: &Value, path: &str) -> Result<Node, String> {
        let Some(obj) = schema.as_object() else {
            return fail(path, "schema must be an object");
        };
        if let Some(r) = obj.get("$ref") {
            return self.reference(r, path);
        }
        if let Some((key, alts)) = obj
            .get_key_value("oneOf")
            .or_else(|| obj.get_key_value("anyOf"))
        {
            return Ok(Node::AnyOf(
                self.alternatives(alts, &format!("{path}/{key}"))?,
            ));
        }
        let ty = obj.get("type");
        if let Some(Value::Array(types)) = ty {
            // {"type": ["a", "b"], ...} is {"anyOf": [{"type": "a", ...}, {"type": "b", ...}]}.
            if types.is_empty() {
                return fail(path, "type must not be empty");
            }
            let mut alts = Vec::with_capacity(types.len());
            for (i, t) in types.iter().enumerate() {
                let mut alt = obj.clone();
                alt.insert("type".into(), t.clone());
                alts.push(self.node(&Value::Object(alt), &format!("{path}/type/{i}"))?);
            }
            return Ok(Node::AnyOf(alts));
        }
        if let Some(value) = obj.get("const") {
            return Ok(Node::Const(value.clone()));
        }
        if let Some(values) = obj.get("enum") {
            return match values.as_array() {
                Some(values) if !values.is_empty() => Ok(Node::Enum(values.clone())),
                _ => fail(path, "enum must be a non-empty array"),
            };
        }
        let type_name = match ty {
            None | Some(Value::Null) => "",
            Some(Value::String(t)) => t.as_str(),
            Some(_) => return fail(path, "type must be a string or an array of strings"),
        };
        let has_properties = obj.contains_key("properties")
            || obj
                .get("additionalProperties")
                .is_some_and(|a| *a != Value::Bool(true));
        let all_of = |reader: &mut Self, alts: &Value| -> Result<Node, String> {
            Ok(Node::AllOf(
                reader.alternatives(alts, &format!("{path}/allOf"))?,
            ))
        };
        match type_name {
            // Without a type the structural keywords decide, in the converter's order.
            "" => {
                if has_properties {
                    self.object(schema, path)
                } else if let Some(alts) = obj.get("allOf") {
                    all_of(self, alts)
                } else if obj.contains_key("items") || obj.contains_key("prefixItems") {
                    self.array(schema, path)
                } else if ["pattern", "minLength", "maxLength"]
                    .iter()
                    .any(|k| obj.contains_key(*k))
                    || format_of(schema, path)? != Format::None
                {
                    self.string(schema, path)
                } else {
                    Ok(Node::Any)
                }
            }
            "object" => match obj.get("allOf") {
                Some(alts) if !has_properties => all_of(self, alts),
                _ => self.object(schema, path),
            },
            "string" => match obj.get("allOf") {
                Some(alts) => all_of(self, alts),
                None => self.string(schema, path),
            },
            "array" => self.array(schema, path),
            "integer" => self.integer(schema, path),
            "number" => Ok(Node::Number),
            "boolean" => Ok(Node::Boolean),
            "null" => Ok(Node::Null),
            other => fail(path, format!("unrecognized type {other}")),
        }
    }
}

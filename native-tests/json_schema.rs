//! JSON schemas as grammars, against llama.cpp's own cases
//! (`scripts/reference/json-schema-goldens.sh`): every schema of its
//! conversion test gives the reference's grammar text (or fails where the
//! reference fails), and every schema and grammar of its integration test
//! accepts and rejects the strings that test lists. Part of the `grammar`
//! test binary (one binary less to build and link on every target).

#[cfg(target_arch = "wasm32")]
use wasm_bindgen_test::wasm_bindgen_test as test;

use crate::common::{golden_path, read_file};
use lamina::sampling::grammar::Grammar;
use lamina::sampling::json_schema::{json_schema_text_to_grammar, json_schema_to_grammar};
use serde_json::Value;

fn golden(name: &str) -> Vec<Value> {
    let bytes = read_file(&golden_path(&format!("json_schema/{name}")));
    serde_json::from_slice::<Value>(&bytes)
        .unwrap()
        .as_array()
        .unwrap()
        .clone()
}

fn text<'a>(case: &'a Value, key: &str) -> &'a str {
    case[key]
        .as_str()
        .unwrap_or_else(|| panic!("{key} in {case}"))
}

/// Grammar text compared as the reference's test compares it: surrounding
/// blank space and each line's indent dropped.
fn trimmed(grammar: &str) -> String {
    grammar
        .trim()
        .lines()
        .map(str::trim_start)
        .collect::<Vec<_>>()
        .join("\n")
}

#[test]
fn schemas_give_the_reference_grammars() {
    let cases = golden("conversion.json");
    assert!(cases.len() >= 80, "{} cases", cases.len());
    let mut checked = 0;
    for case in &cases {
        let name = text(case, "name");
        let result = json_schema_text_to_grammar(text(case, "schema"));
        match (case.get("grammar"), result) {
            (Some(expected), Ok(got)) => {
                let expected = expected.as_str().unwrap();
                assert_eq!(trimmed(&got.grammar), trimmed(expected), "case {name:?}");
                // What lamina writes, lamina's grammar parser reads.
                Grammar::parse(&got.grammar, "root", None)
                    .unwrap_or_else(|e| panic!("case {name:?}: {e}"));
                checked += 1;
            }
            (None, Err(e)) => {
                assert!(e.to_string().contains("JSON schema"), "case {name:?}: {e}");
                checked += 1;
            }
            (Some(_), Err(e)) => {
                panic!("case {name:?}: the reference converts it, lamina says {e}")
            }
            (None, Ok(got)) => panic!(
                "case {name:?}: the reference fails, lamina gives\n{}",
                got.grammar
            ),
        }
    }
    assert_eq!(checked, cases.len());
}

#[test]
fn grammars_accept_and_reject_the_reference_strings() {
    let cases = golden("integration.json");
    assert!(cases.len() >= 40, "{} cases", cases.len());
    for case in &cases {
        let name = text(case, "name");
        let src = match text(case, "kind") {
            "schema" => {
                json_schema_text_to_grammar(text(case, "schema"))
                    .unwrap_or_else(|e| panic!("{name}: {e}"))
                    .grammar
            }
            _ => text(case, "grammar").to_string(),
        };
        let grammar =
            Grammar::parse(&src, "root", None).unwrap_or_else(|e| panic!("{name}: {e}\n{src}"));
        for s in case["passing"].as_array().unwrap() {
            let s = s.as_str().unwrap();
            assert!(
                grammar.matches(s).unwrap(),
                "{name}: should accept {s:?}\n{src}"
            );
        }
        for s in case["failing"].as_array().unwrap() {
            let s = s.as_str().unwrap();
            assert!(
                !grammar.matches(s).unwrap(),
                "{name}: should reject {s:?}\n{src}"
            );
        }
    }
}

#[test]
fn schema_errors_name_the_place() {
    let err = |schema: Value| json_schema_to_grammar(&schema).err().unwrap().to_string();
    let e = err(serde_json::json!({"properties": {"a": {"type": "strin"}}}));
    assert!(
        e.contains("#/properties/a") && e.contains("unrecognized type strin"),
        "{e}"
    );
    let e = err(serde_json::json!({"$ref": "https://example.com/a.json"}));
    assert!(e.contains("only references into the same document"), "{e}");
    let e = err(serde_json::json!({"type": "array", "items": {"type": "string"}, "minItems": -1}));
    assert!(e.contains("minItems must be a non-negative integer"), "{e}");
    let e = err(serde_json::json!({"type": "string", "pattern": "^(ab$"}));
    assert!(
        e.contains("Invalid pattern ^(ab$: unbalanced parentheses"),
        "{e}"
    );
    let e = json_schema_text_to_grammar("{\"type\": ")
        .err()
        .unwrap()
        .to_string();
    assert!(e.contains("not valid JSON"), "{e}");
}

#[test]
fn unsupported_patterns_accept_any_string_and_say_so() {
    let got = json_schema_to_grammar(&serde_json::json!({"type": "string", "pattern": "^\\d+$"}))
        .unwrap();
    assert_eq!(got.warnings.len(), 1, "{:?}", got.warnings);
    assert!(
        got.warnings[0].contains("unsupported escape"),
        "{:?}",
        got.warnings
    );
    let grammar = Grammar::parse(&got.grammar, "root", None).unwrap();
    assert!(grammar.matches("\"anything\"").unwrap());
}

/// Just enough of JSON-schema validation for the schema below: types,
/// properties, required, no other properties, enums, bounds and lengths.
fn validate(value: &Value, schema: &Value) -> Result<(), String> {
    if let Some(values) = schema.get("enum") {
        return values
            .as_array()
            .unwrap()
            .contains(value)
            .then_some(())
            .ok_or(format!("{value} not in the enum"));
    }
    let count = |key: &str| schema.get(key).and_then(Value::as_u64);
    match schema["type"].as_str().unwrap() {
        "object" => {
            let obj = value
                .as_object()
                .ok_or(format!("{value} is not an object"))?;
            let props = schema["properties"].as_object().unwrap();
            for name in schema["required"].as_array().unwrap() {
                obj.get(name.as_str().unwrap())
                    .ok_or(format!("{name} missing"))?;
            }
            for (k, v) in obj {
                validate(v, props.get(k).ok_or(format!("property {k} not allowed"))?)?;
            }
        }
        "array" => {
            let items = value.as_array().ok_or(format!("{value} is not an array"))?;
            if items.len() as u64 > count("maxItems").unwrap_or(u64::MAX) {
                return Err(format!("{value} has too many items"));
            }
            items
                .iter()
                .try_for_each(|it| validate(it, &schema["items"]))?;
        }
        "string" => {
            let s = value.as_str().ok_or(format!("{value} is not a string"))?;
            if s.chars().count() as u64 > count("maxLength").unwrap_or(u64::MAX) {
                return Err(format!("{value} is too long"));
            }
        }
        "integer" => {
            let n = value.as_i64().ok_or(format!("{value} is not an integer"))?;
            if n < schema["minimum"].as_i64().unwrap() || n > schema["maximum"].as_i64().unwrap() {
                return Err(format!("{value} out of range"));
            }
        }
        "boolean" => {
            value.as_bool().ok_or(format!("{value} is not a boolean"))?;
        }
        t => panic!("type {t} is not in the test's subset"),
    }
    Ok(())
}

/// Greedy and seeded completions held to a schema always end (with end of
/// generation) on JSON that parses and follows the schema. The schema
/// bounds every string and list, so 128 tokens always reach its end.
#[test]
fn schema_constrained_completions_parse_and_validate() {
    use lamina::completion::CompletionParams;
    use lamina::context::{Context, ContextParams};
    use lamina::sampling::SamplingParams;

    let schema = serde_json::json!({
        "type": "object",
        "properties": {
            "name": {"type": "string", "maxLength": 10},
            "age": {"type": "integer", "minimum": 0, "maximum": 120},
            "pet": {"enum": ["cat", "dog", null]},
            "employed": {"type": "boolean"},
            "hobbies": {"type": "array", "items": {"type": "string", "maxLength": 10}, "maxItems": 2}
        },
        "required": ["name", "age"],
        "additionalProperties": false
    });
    let grammar = json_schema_to_grammar(&schema).unwrap().grammar;
    let mut ctx = Context::new(
        crate::common::smollm2_q4_1(),
        ContextParams {
            n_ctx: 512,
            n_threads: if cfg!(target_arch = "wasm32") { 1 } else { 2 },
            ..ContextParams::default()
        },
    )
    .unwrap();
    let runs: &[(f32, u32)] = if cfg!(target_arch = "x86_64") {
        &[(0.0, 0), (1.0, 3), (1.0, 5), (1.5, 9)]
    } else {
        &[(1.0, 3)]
    };
    for &(temperature, seed) in runs {
        let params = CompletionParams {
            prompt: "Describe a person named Tom who is 32 years old, as JSON:".into(),
            n_predict: 128,
            sampling: SamplingParams {
                temperature,
                seed: Some(seed),
                grammar: Some(grammar.clone()),
                ..SamplingParams::default()
            },
            cache_prompt: false,
            ..CompletionParams::default()
        };
        let r = ctx.completion(&params, |_| {}).unwrap();
        assert!(r.stopped_eos, "T={temperature} seed {seed}: {:?}", r.text);
        let value: Value = serde_json::from_str(&r.text)
            .unwrap_or_else(|e| panic!("T={temperature} seed {seed}: {e}: {:?}", r.text));
        validate(&value, &schema)
            .unwrap_or_else(|e| panic!("T={temperature} seed {seed}: {e}: {:?}", r.text));
        if temperature == 0.0 {
            assert_eq!(value["name"], "Tom", "{:?}", r.text);
            assert_eq!(value["age"], 32, "{:?}", r.text);
        }
    }
}

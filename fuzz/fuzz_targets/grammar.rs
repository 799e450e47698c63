//! GBNF grammars and JSON schemas from arbitrary bytes: parsing (or
//! converting a schema, when the text before the first NUL is JSON) is an
//! `Ok` or an `Err`, never a panic, and a grammar that parses matches
//! arbitrary text (the bytes after the first NUL) without one.
#![no_main]

use lamina::sampling::grammar::Grammar;
use lamina::sampling::json_schema::json_schema_to_grammar;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let (src, text) = match data.iter().position(|&b| b == 0) {
        Some(i) => (&data[..i], &data[i + 1..]),
        None => (data, &[][..]),
    };
    let (Ok(src), Ok(text)) = (std::str::from_utf8(src), std::str::from_utf8(text)) else {
        return;
    };
    let converted;
    let src = match serde_json::from_str::<serde_json::Value>(src) {
        Ok(schema) => match json_schema_to_grammar(&schema) {
            Ok(c) => {
                converted = c.grammar;
                converted.as_str()
            }
            Err(_) => return,
        },
        Err(_) => src,
    };
    if let Ok(g) = Grammar::parse(src, "root", None) {
        let _ = g.matches(text);
    }
});

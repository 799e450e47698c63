//! GBNF grammars from arbitrary bytes: parsing is an `Ok` or an `Err`,
//! never a panic, and a grammar that parses matches arbitrary text (the
//! bytes after the first NUL) without one.
#![no_main]

use lamina::sampling::grammar::Grammar;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let (src, text) = match data.iter().position(|&b| b == 0) {
        Some(i) => (&data[..i], &data[i + 1..]),
        None => (data, &[][..]),
    };
    let (Ok(src), Ok(text)) = (std::str::from_utf8(src), std::str::from_utf8(text)) else {
        return;
    };
    if let Ok(g) = Grammar::parse(src, "root", None) {
        let _ = g.matches(text);
    }
});

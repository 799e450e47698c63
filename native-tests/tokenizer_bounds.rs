//! Tokenizing stays bounded whatever the vocabulary: special-token splitting
//! equals llama.cpp's literal longest-first passes on random inputs (with
//! overlapping, nested and duplicated specials), and the inputs that were
//! super-linear (40,000 added tokens over a long text; a 1 MiB token in a
//! WordPiece vocabulary and a 20,000-character word) complete with the
//! expected ids. No timing is asserted: before, these took hours.

mod common;

#[cfg(target_arch = "wasm32")]
use wasm_bindgen_test::wasm_bindgen_test as test;

use common::Rng;
use lamina::gguf::{Array, Metadata, Value};
use lamina::tokenizer::specials::{Fragment, Specials};
use lamina::tokenizer::Vocab;

/// llama.cpp's partition, literally: each special in priority order cuts
/// every occurrence out of the text fragments left.
fn literal<'t>(text: &'t str, specials: &[(u32, &str)]) -> Vec<Fragment<'t>> {
    let mut fragments = if text.is_empty() {
        vec![]
    } else {
        vec![Fragment::Text(text)]
    };
    for &(id, special) in specials {
        let mut next = Vec::new();
        for f in fragments {
            match f {
                Fragment::Text(t) => {
                    let mut rest = t;
                    while let Some(pos) = rest.find(special) {
                        if pos > 0 {
                            next.push(Fragment::Text(&rest[..pos]));
                        }
                        next.push(Fragment::Token(id));
                        rest = &rest[pos + special.len()..];
                    }
                    if !rest.is_empty() {
                        next.push(Fragment::Text(rest));
                    }
                }
                token => next.push(token),
            }
        }
        fragments = next;
    }
    fragments
}

#[test]
fn special_splitting_equals_the_literal_passes() {
    let mut rng = Rng::new(21);
    let alphabet = ["a", "b", "<", ">", "é", "|"];
    let word = |rng: &mut Rng, max: u64| -> String {
        let n = 1 + rng.next_u64() % max;
        (0..n)
            .map(|_| alphabet[rng.next_u64() as usize % alphabet.len()])
            .collect()
    };
    for case in 0..3000 {
        let n_specials = 1 + rng.next_u64() % 6;
        let mut texts: Vec<String> = (0..n_specials).map(|_| word(&mut rng, 4)).collect();
        if case % 7 == 0 {
            // A duplicated special: the first (lower id) wins.
            texts.push(texts[0].clone());
        }
        // Priority: longest first, ties by id (the order Vocab builds).
        let mut order: Vec<usize> = (0..texts.len()).collect();
        order.sort_by_key(|&i| std::cmp::Reverse(texts[i].len()));
        let specials: Vec<(u32, &str)> = order
            .iter()
            .map(|&i| (100 + i as u32, texts[i].as_str()))
            .collect();
        let text = word(&mut rng, 40);
        let allowed = |id: u32| case % 5 != 0 || id % 2 == 0;
        let filtered: Vec<(u32, &str)> = specials
            .iter()
            .copied()
            .filter(|&(id, _)| allowed(id))
            .collect();
        let fast = Specials::new(specials.iter().copied()).unwrap();
        assert_eq!(
            fast.partition(&text, allowed),
            literal(&text, &filtered),
            "text {text:?}, specials {specials:?}"
        );
    }
}

fn metadata(model: &str, tokens: Vec<String>, types: Vec<i32>) -> Metadata {
    let mut md = Metadata::default();
    md.insert("tokenizer.ggml.model", Value::String(model.into()))
        .unwrap();
    md.insert("tokenizer.ggml.tokens", Value::Array(Array::String(tokens)))
        .unwrap();
    md.insert("tokenizer.ggml.token_type", Value::Array(Array::I32(types)))
        .unwrap();
    md
}

#[test]
fn forty_thousand_added_tokens_over_a_long_text() {
    // A WordPiece vocabulary with 40,000 user-defined tokens <t0>..<t39999>
    // and a text of 200,000 bytes naming some of them.
    let mut tokens: Vec<String> = ["[UNK]", "\u{2581}x", "\u{2581}y"]
        .iter()
        .map(|s| s.to_string())
        .collect();
    let mut types = vec![2, 1, 1];
    for i in 0..40_000 {
        tokens.push(format!("<t{i}>"));
        types.push(4);
    }
    let mut md = metadata("bert", tokens, types);
    md.insert("tokenizer.ggml.unknown_token_id", Value::U32(0))
        .unwrap();
    let vocab = Vocab::from_metadata(&md).unwrap();
    let mut text = String::new();
    let mut want = Vec::new();
    let mut rng = Rng::new(5);
    while text.len() < 200_000 {
        let t = rng.next_u64() % 40_000;
        text.push_str(&format!("x <t{t}> y "));
        want.extend([1, 3 + t as u32, 2]);
    }
    assert_eq!(vocab.tokenize(&text, false, false).unwrap(), want);
}

#[test]
fn a_huge_wordpiece_token_and_a_long_word() {
    // A 1 MiB token, a word of 20,000 characters: "▁" then 'a's. The
    // longest piece at the start is "▁a", then "aa" pieces.
    let huge = format!("\u{2581}{}", "a".repeat(1 << 20));
    let tokens: Vec<String> = ["[UNK]", "\u{2581}a", "aa", "a"]
        .iter()
        .map(|s| s.to_string())
        .chain([huge])
        .collect();
    let types = vec![2, 1, 1, 1, 1];
    let mut md = metadata("bert", tokens, types);
    md.insert("tokenizer.ggml.unknown_token_id", Value::U32(0))
        .unwrap();
    let vocab = Vocab::from_metadata(&md).unwrap();
    let word = "a".repeat(20_001);
    let ids = vocab.tokenize(&word, false, false).unwrap();
    assert_eq!(ids.len(), 1 + 10_000);
    assert_eq!(ids[0], 1);
    assert!(ids[1..].iter().all(|&id| id == 2));
    // A letter no token has makes the word unknown.
    let ids = vocab.tokenize(&format!("{word}b"), false, false).unwrap();
    assert_eq!(ids, [0]);
}

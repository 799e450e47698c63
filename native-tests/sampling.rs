//! The sampler chain: each stage's effect, seeded reproducibility, the
//! random draws themselves against libstdc++ (what llama.cpp is built with),
//! and llama.cpp's stages, DRY and seeded draws on the same inputs
//! (`scripts/reference/sampler-goldens.sh`).

mod common;

#[cfg(target_arch = "wasm32")]
use wasm_bindgen_test::wasm_bindgen_test as test;

use lamina::sampling::{
    greedy, logit_bias_from_json, DryBreakers, Mt19937, Sampler, SamplingParams,
};

/// Indices drawn by `std::discrete_distribution<int>({0.1, 0.2, 0.3, 0.05,
/// 0.35})` from `std::mt19937(seed)` with GCC 12's libstdc++, 24 draws per
/// seed (a fresh distribution each draw, as llama.cpp makes one per token).
const LIBSTDCXX_DRAWS: [(u32, [usize; 24]); 5] = [
    (
        0,
        [
            2, 4, 4, 4, 3, 2, 1, 0, 1, 2, 4, 2, 2, 4, 2, 3, 2, 4, 1, 4, 2, 4, 2, 4,
        ],
    ),
    (
        1,
        [
            4, 4, 1, 4, 1, 2, 2, 4, 4, 4, 2, 2, 2, 1, 2, 4, 2, 2, 4, 4, 4, 4, 0, 2,
        ],
    ),
    (
        42,
        [
            4, 1, 4, 2, 2, 0, 2, 2, 1, 4, 0, 4, 4, 0, 4, 3, 3, 0, 0, 2, 2, 0, 4, 1,
        ],
    ),
    (
        1234,
        [
            2, 4, 3, 4, 4, 1, 1, 4, 1, 1, 0, 2, 2, 4, 0, 0, 2, 0, 1, 1, 4, 4, 4, 1,
        ],
    ),
    (
        4294967294,
        [
            1, 4, 4, 2, 2, 1, 4, 4, 2, 1, 4, 4, 0, 4, 4, 2, 0, 2, 4, 1, 4, 1, 2, 4,
        ],
    ),
];

#[test]
fn draws_match_libstdcxx() {
    let w = [0.1f32, 0.2, 0.3, 0.05, 0.35];
    for (seed, want) in LIBSTDCXX_DRAWS {
        let mut rng = Mt19937::new(seed);
        let got: Vec<usize> = (0..24).map(|_| rng.discrete(w.iter().copied())).collect();
        assert_eq!(got, want, "seed {seed}");
    }
}

fn params() -> SamplingParams {
    SamplingParams {
        seed: Some(7),
        ..SamplingParams::default()
    }
}

/// Draw frequencies over `n` samples.
fn frequencies(p: SamplingParams, logits: &[f32], n: usize) -> Vec<f64> {
    let mut s = Sampler::new(p, logits.len()).unwrap();
    let mut counts = vec![0usize; logits.len()];
    for _ in 0..n {
        counts[s.sample(logits).unwrap() as usize] += 1;
    }
    counts.iter().map(|&c| c as f64 / n as f64).collect()
}

fn plain() -> SamplingParams {
    SamplingParams {
        temperature: 1.0,
        top_k: 0,
        top_p: 1.0,
        min_p: 0.0,
        ..params()
    }
}

#[test]
fn greedy_and_zero_temperature() {
    assert_eq!(
        greedy(&[1.0, 3.0, 3.0, 2.0]),
        Some(1),
        "ties go to the lowest id"
    );
    assert_eq!(greedy(&[]), None);
    let logits = [0.5, 2.0, -1.0, 1.9];
    let mut s = Sampler::new(
        SamplingParams {
            temperature: 0.0,
            ..params()
        },
        4,
    )
    .unwrap();
    for _ in 0..20 {
        assert_eq!(s.sample(&logits).unwrap(), 1);
    }
    let mut s = Sampler::new(
        SamplingParams {
            top_k: 1,
            temperature: 5.0,
            ..params()
        },
        4,
    )
    .unwrap();
    for _ in 0..20 {
        assert_eq!(s.sample(&logits).unwrap(), 1);
    }
}

#[test]
fn seeded_chains_repeat_and_seeds_differ() {
    let logits: Vec<f32> = (0..50).map(|i| (i as f32 * 0.37).sin()).collect();
    let run = |seed| {
        let mut s = Sampler::new(
            SamplingParams {
                seed: Some(seed),
                ..plain()
            },
            50,
        )
        .unwrap();
        (0..40)
            .map(|_| s.sample(&logits).unwrap())
            .collect::<Vec<_>>()
    };
    assert_eq!(run(3), run(3));
    assert_ne!(run(3), run(4));
}

#[test]
fn softmax_draws_follow_the_probabilities() {
    // p = 1/4 and 3/4.
    let f = frequencies(plain(), &[0.0, 3f32.ln()], 20000);
    assert!((f[1] - 0.75).abs() < 0.015, "{f:?}");
    // Temperature 2 flattens: p ∝ sqrt(1), sqrt(3).
    let f = frequencies(
        SamplingParams {
            temperature: 2.0,
            ..plain()
        },
        &[0.0, 3f32.ln()],
        20000,
    );
    let want = 3f64.sqrt() / (1.0 + 3f64.sqrt());
    assert!((f[1] - want).abs() < 0.015, "{f:?}");
}

#[test]
fn truncations() {
    // p = 0.5, 0.3, 0.15, 0.05
    let logits = [0.5f32.ln(), 0.3f32.ln(), 0.15f32.ln(), 0.05f32.ln()];
    let never = |f: &[f64], ids: &[usize]| ids.iter().all(|&i| f[i] == 0.0);
    let f = frequencies(
        SamplingParams {
            top_p: 0.75,
            ..plain()
        },
        &logits,
        4000,
    );
    assert!(never(&f, &[2, 3]) && f[1] > 0.3, "top-p {f:?}");
    let f = frequencies(
        SamplingParams {
            top_k: 2,
            ..plain()
        },
        &logits,
        4000,
    );
    assert!(never(&f, &[2, 3]), "top-k {f:?}");
    let f = frequencies(
        SamplingParams {
            min_p: 0.4,
            ..plain()
        },
        &logits,
        4000,
    );
    assert!(never(&f, &[2, 3]) && f[1] > 0.3, "min-p {f:?}");
    let f = frequencies(
        SamplingParams {
            min_p: 0.2,
            ..plain()
        },
        &logits,
        4000,
    );
    assert!(never(&f, &[3]) && f[2] > 0.05, "min-p {f:?}");
    // Typical-p keeps the tokens whose surprise is closest to the entropy
    // (H = 1.142 nats): token 1 (1.204), then token 0 (0.693) reaches 0.8 > 0.5.
    let f = frequencies(
        SamplingParams {
            typical_p: 0.5,
            ..plain()
        },
        &logits,
        4000,
    );
    assert!(
        never(&f, &[2, 3]) && f[0] > 0.5 && f[1] > 0.3,
        "typical {f:?}"
    );
    // The strictest min-p keeps the most likely token, also after typical-p
    // (which leaves the candidates unsorted; min-p above 1 there once left
    // none and the draw panicked; it is now out of range, an error).
    for typical_p in [1.0, 0.9] {
        let f = frequencies(
            SamplingParams {
                typical_p,
                min_p: 1.0,
                ..plain()
            },
            &logits,
            100,
        );
        assert_eq!(f[0], 1.0, "typical {typical_p}, min-p 1: {f:?}");
    }
}

#[test]
fn penalties_and_bias() {
    let logits = [2.0f32, 1.9, -1.0];
    let greedy_params = SamplingParams {
        temperature: 0.0,
        ..params()
    };
    // Repeat penalty 2 halves token 0's positive logit: token 1 wins.
    let mut s = Sampler::new(
        SamplingParams {
            penalty_repeat: 2.0,
            ..greedy_params.clone()
        },
        3,
    )
    .unwrap();
    assert_eq!(s.sample(&logits).unwrap(), 0);
    s.accept(0);
    assert_eq!(s.sample(&logits).unwrap(), 1);
    // Frequency penalty 0.06 per occurrence: twice is enough.
    let mut s = Sampler::new(
        SamplingParams {
            penalty_freq: 0.06,
            ..greedy_params.clone()
        },
        3,
    )
    .unwrap();
    s.accept(0);
    assert_eq!(s.sample(&logits).unwrap(), 0);
    s.accept(0);
    assert_eq!(s.sample(&logits).unwrap(), 1);
    // Only the last n tokens count.
    let mut s = Sampler::new(
        SamplingParams {
            penalty_present: 1.0,
            penalty_last_n: 2,
            ..greedy_params.clone()
        },
        3,
    )
    .unwrap();
    s.accept(0);
    assert_eq!(s.sample(&logits).unwrap(), 1);
    s.accept(2);
    s.accept(2);
    assert_eq!(s.sample(&logits).unwrap(), 0, "token 0 left the window");
    // Logit bias.
    let mut s = Sampler::new(
        SamplingParams {
            logit_bias: vec![(0, f32::NEG_INFINITY), (2, 3.5)],
            ..greedy_params
        },
        3,
    )
    .unwrap();
    assert_eq!(s.sample(&logits).unwrap(), 2);
}

#[test]
fn mirostat() {
    let logits: Vec<f32> = (0..200).map(|i| -(i as f32) * 0.05).collect();
    for version in [1u8, 2] {
        // A tiny target surprise keeps only the most likely tokens.
        let f = frequencies(
            SamplingParams {
                mirostat: version,
                mirostat_tau: 0.1,
                ..plain()
            },
            &logits,
            500,
        );
        assert!(f[0] > 0.5, "mirostat {version}: {f:?}");
        // A large one lets the tail in.
        let f = frequencies(
            SamplingParams {
                mirostat: version,
                mirostat_tau: 10.0,
                ..plain()
            },
            &logits,
            500,
        );
        assert!(
            f[30..].iter().sum::<f64>() > 0.1,
            "mirostat {version}: {f:?}"
        );
    }
}

#[test]
fn bad_parameters_are_errors() {
    assert!(Sampler::new(
        SamplingParams {
            mirostat: 3,
            ..params()
        },
        10
    )
    .is_err());
    assert!(Sampler::new(params(), 0).is_err());
    let e = Sampler::new(
        SamplingParams {
            logit_bias: vec![(10, 1.0)],
            ..params()
        },
        10,
    )
    .err()
    .unwrap();
    assert!(e.to_string().contains("token 10"), "{e}");
    let mut s = Sampler::new(params(), 10).unwrap();
    assert!(s.sample(&[0.0; 9]).is_err());
    // No seed: a fresh one, and sampling works.
    let mut s = Sampler::new(
        SamplingParams {
            seed: None,
            ..params()
        },
        3,
    )
    .unwrap();
    assert!(s.sample(&[0.0, 1.0, 2.0]).unwrap() < 3);
}

#[test]
fn llama_rn_defaults() {
    let p = SamplingParams::default();
    assert_eq!(
        (p.temperature, p.top_k, p.top_p, p.min_p),
        (0.8, 40, 0.95, 0.05)
    );
    assert_eq!(
        (p.penalty_last_n, p.penalty_repeat, p.typical_p, p.mirostat),
        (64, 1.0, 1.0, 0)
    );
}

#[test]
fn out_of_range_parameters_are_errors_naming_them() {
    let nan = f32::NAN;
    let inf = f32::INFINITY;
    let cases = [
        (
            "temperature",
            SamplingParams {
                temperature: nan,
                ..params()
            },
        ),
        (
            "temperature",
            SamplingParams {
                temperature: -inf,
                ..params()
            },
        ),
        (
            "top_p",
            SamplingParams {
                top_p: 1.5,
                ..params()
            },
        ),
        (
            "top_p",
            SamplingParams {
                top_p: nan,
                ..params()
            },
        ),
        (
            "min_p",
            SamplingParams {
                min_p: 2.0,
                ..params()
            },
        ),
        (
            "typical_p",
            SamplingParams {
                typical_p: -0.1,
                ..params()
            },
        ),
        (
            "penalty_last_n",
            SamplingParams {
                penalty_last_n: -2,
                ..params()
            },
        ),
        (
            "penalty_repeat",
            SamplingParams {
                penalty_repeat: nan,
                ..params()
            },
        ),
        (
            "penalty_repeat",
            SamplingParams {
                penalty_repeat: 0.0,
                ..params()
            },
        ),
        (
            "penalty_freq",
            SamplingParams {
                penalty_freq: inf,
                ..params()
            },
        ),
        (
            "penalty_present",
            SamplingParams {
                penalty_present: nan,
                ..params()
            },
        ),
        (
            "mirostat_tau",
            SamplingParams {
                mirostat: 2,
                mirostat_tau: nan,
                ..params()
            },
        ),
        (
            "mirostat_eta",
            SamplingParams {
                mirostat: 1,
                mirostat_eta: inf,
                ..params()
            },
        ),
        (
            "logit bias",
            SamplingParams {
                logit_bias: vec![(1, nan)],
                ..params()
            },
        ),
        (
            "logit bias",
            SamplingParams {
                logit_bias: vec![(1, inf)],
                ..params()
            },
        ),
    ];
    for (name, p) in cases {
        let e = Sampler::new(p.clone(), 10)
            .err()
            .unwrap_or_else(|| panic!("{p:?} accepted"));
        assert!(e.to_string().contains(name), "{name}: {e}");
    }
    // -inf is a ban (llama.rn's `false`), not an error.
    let banned = SamplingParams {
        logit_bias: vec![(1, -inf)],
        ..params()
    };
    let mut s = Sampler::new(banned, 3).unwrap();
    assert_eq!(s.sample(&[0.0, 9.0, 1.0]).unwrap(), 2);
}

/// Random parameter sets (edge values included) and random logits (with
/// -inf, all -inf, NaN): every set is either refused by `Sampler::new` or
/// samples a token of the vocabulary at every step. Never a panic.
#[test]
fn random_parameter_sets_never_panic() {
    let mut rng = common::Rng::new(13);
    let mut pick = |values: &[f32]| values[rng.next_u64() as usize % values.len()];
    let probs = [0.0, 0.05, 0.5, 0.9, 0.95, 1.0, 1.5, -0.5, f32::NAN];
    let anything = [
        0.0,
        0.5,
        1.0,
        1.1,
        2.0,
        -1.0,
        100.0,
        f32::NAN,
        f32::INFINITY,
    ];
    let ints = [-5.0, -2.0, -1.0, 0.0, 1.0, 3.0, 64.0, 1000.0];
    let (mut refused, mut sampled) = (0, 0);
    for case in 0..3000u64 {
        let p = SamplingParams {
            temperature: pick(&anything),
            top_k: pick(&ints) as i32,
            top_p: pick(&probs),
            min_p: pick(&probs),
            typical_p: pick(&probs),
            penalty_last_n: pick(&ints) as i32,
            penalty_repeat: pick(&anything),
            penalty_freq: pick(&anything),
            penalty_present: pick(&anything),
            mirostat: (case % 4) as u8,
            mirostat_tau: pick(&anything),
            mirostat_eta: pick(&anything),
            seed: Some(case as u32),
            min_keep: pick(&ints).max(0.0) as usize,
            logit_bias: vec![(0, pick(&[1.0, f32::NEG_INFINITY, 0.0]))],
            ..SamplingParams::default()
        };
        let n_vocab = 1 + (case as usize % 37);
        let mut sampler = match Sampler::new(p.clone(), n_vocab) {
            Ok(s) => s,
            Err(_) => {
                refused += 1;
                continue;
            }
        };
        for step in 0..4 {
            let logits: Vec<f32> = (0..n_vocab)
                .map(|i| match (case + step + i as u64) % 11 {
                    0 => f32::NEG_INFINITY,
                    1 if case % 5 == 0 => f32::NAN,
                    k => k as f32 * 0.7 - 3.0,
                })
                .map(|l| if case % 17 == 0 { f32::NEG_INFINITY } else { l })
                .collect();
            let id = sampler
                .sample(&logits)
                .unwrap_or_else(|e| panic!("{p:?}: {e}"));
            assert!((id as usize) < n_vocab, "{p:?}: token {id}");
            sampler.accept(id);
            sampled += 1;
        }
    }
    // Both outcomes happen (the test is not vacuous either way).
    assert!(
        refused > 300 && sampled > 300,
        "{refused} refused, {sampled} sampled"
    );
}

/// The chain's stages with XTC and top-n-sigma (and penalties, top-k,
/// typical, top-p, min-p, temperature) leave the tokens llama.cpp's chain
/// leaves for its draw, step after step, XTC's own seeded generator
/// included (`scripts/reference/sampler-goldens.sh`; the lowest id left is
/// accepted each step, for the penalties).
#[test]
fn chain_stages_leave_what_llama_cpp_leaves() {
    let g: serde_json::Value = serde_json::from_slice(&common::read_file(&common::golden_path(
        "sampling/chain.json",
    )))
    .unwrap();
    for case in g["cases"].as_array().unwrap() {
        let name = case["name"].as_str().unwrap();
        let p = &case["params"];
        let f = |k: &str| p[k].as_f64().unwrap() as f32;
        let i = |k: &str| p[k].as_i64().unwrap();
        let params = SamplingParams {
            seed: Some(i("seed") as u32),
            top_n_sigma: f("top_n_sigma"),
            top_k: i("top_k") as i32,
            typical_p: f("typical_p"),
            top_p: f("top_p"),
            min_p: f("min_p"),
            xtc_probability: f("xtc_probability"),
            xtc_threshold: f("xtc_threshold"),
            temperature: f("temperature"),
            penalty_last_n: i("penalty_last_n") as i32,
            penalty_repeat: f("penalty_repeat"),
            penalty_freq: f("penalty_freq"),
            penalty_present: f("penalty_present"),
            min_keep: i("min_keep") as usize,
            ..SamplingParams::default()
        };
        let mut s = Sampler::new(params, i("n_vocab") as usize).unwrap();
        for (step, st) in case["steps"].as_array().unwrap().iter().enumerate() {
            let logits: Vec<f32> = st["logits"]
                .as_array()
                .unwrap()
                .iter()
                .map(|v| v.as_f64().unwrap() as f32)
                .collect();
            let want: Vec<u32> = st["left"]
                .as_array()
                .unwrap()
                .iter()
                .map(|v| v.as_u64().unwrap() as u32)
                .collect();
            let mut left: Vec<u32> = s
                .candidates_left(&logits)
                .unwrap()
                .data
                .iter()
                .filter(|c| c.logit != f32::NEG_INFINITY)
                .map(|c| c.id)
                .collect();
            left.sort_unstable();
            assert_eq!(left, want, "{name}: step {step}");
            s.accept(want[0]);
        }
    }
}

/// DRY alone (every other stage off) over logits of 0: what it subtracts
/// after `history`, by token id.
fn dry_penalties(
    case: &serde_json::Value,
    n_vocab: usize,
    history: &[u32],
    breakers: DryBreakers,
) -> Vec<(u32, f32)> {
    let f = |k: &str| case[k].as_f64().unwrap() as f32;
    let params = SamplingParams {
        seed: Some(1),
        temperature: 1.0,
        top_k: 0,
        top_p: 1.0,
        min_p: 0.0,
        penalty_last_n: 0,
        dry_multiplier: f("multiplier"),
        dry_base: f("base"),
        dry_allowed_length: case["allowed_length"].as_i64().unwrap() as i32,
        dry_penalty_last_n: case["penalty_last_n"].as_i64().unwrap() as i32,
        ..SamplingParams::default()
    };
    let mut s = Sampler::new(params, n_vocab).unwrap();
    s.set_dry_breakers(breakers);
    for &t in history {
        s.accept(t);
    }
    let mut moved: Vec<(u32, f32)> = s
        .candidates_left(&vec![0.0; n_vocab])
        .unwrap()
        .data
        .iter()
        .filter(|c| c.logit != 0.0)
        .map(|c| (c.id, c.logit))
        .collect();
    moved.sort_by_key(|m| m.0);
    moved
}

/// DRY gives llama.cpp's penalties (within 1e-6 relative: the same f64
/// power rounded to f32) for the same history and breakers: breakers as
/// token sequences on random repetitive histories, and as strings processed
/// over SmolLM2's vocabulary (tokens holding a breaker, tokens ending in its
/// start with the rest as their tail).
#[test]
fn dry_penalties_are_llama_cpp_s() {
    let g: serde_json::Value = serde_json::from_slice(&common::read_file(&common::golden_path(
        "sampling/dry.json",
    )))
    .unwrap();
    let model = common::smollm2_q4_1();
    let vocab = &model.vocab;
    let ids = |v: &serde_json::Value| -> Vec<u32> {
        v.as_array()
            .unwrap()
            .iter()
            .map(|x| x.as_u64().unwrap() as u32)
            .collect()
    };
    let mut penalised = 0;
    for case in g["cases"].as_array().unwrap() {
        let name = case["name"].as_str().unwrap();
        let got = if let Some(text) = case["text"].as_str() {
            let history = vocab.tokenize(text, false, false).unwrap();
            let strings: Vec<String> = case["breaker_strings"]
                .as_array()
                .unwrap()
                .iter()
                .map(|s| s.as_str().unwrap().to_string())
                .collect();
            dry_penalties(
                case,
                vocab.len(),
                &history,
                DryBreakers::from_strings(vocab, &strings),
            )
        } else {
            let seqs: Vec<Vec<u32>> = case["breaker_tokens"]
                .as_array()
                .unwrap()
                .iter()
                .map(ids)
                .collect();
            let n_vocab = case["n_vocab"].as_u64().unwrap() as usize;
            dry_penalties(
                case,
                n_vocab,
                &ids(&case["history"]),
                DryBreakers::from_token_sequences(&seqs),
            )
        };
        let mut want: Vec<(u32, f32)> = case["penalties"]
            .as_object()
            .unwrap()
            .iter()
            .map(|(k, v)| (k.parse().unwrap(), v.as_f64().unwrap() as f32))
            .collect();
        want.sort_by_key(|m| m.0);
        assert_eq!(
            got.iter().map(|m| m.0).collect::<Vec<_>>(),
            want.iter().map(|m| m.0).collect::<Vec<_>>(),
            "{name}"
        );
        for ((id, a), (_, b)) in got.iter().zip(&want) {
            assert!(
                (a - b).abs() <= 1e-6 * b.abs(),
                "{name}: token {id}: {a} vs {b}"
            );
        }
        penalised += want.len();
    }
    assert!(penalised >= 20, "only {penalised} penalties compared");
}

/// llama.rn's logit bias forms: `[token or text, bias or false]` pairs and
/// objects keyed by id or text; a text biases each of its tokens; anything
/// else is an error naming the entry.
#[test]
fn logit_bias_takes_ids_texts_and_false() {
    use serde_json::json;
    let model = common::smollm2_q4_1();
    let vocab = &model.vocab;
    let paris = vocab.tokenize(" Paris", false, false).unwrap();
    let hello_world = vocab.tokenize("Hello world", false, false).unwrap();
    assert_eq!(paris.len(), 1);
    assert_eq!(hello_world.len(), 2);
    let got =
        logit_bias_from_json(&json!([[paris[0], 1.5], ["Hello world", false]]), vocab).unwrap();
    assert_eq!(
        got,
        vec![
            (paris[0], 1.5),
            (hello_world[0], f32::NEG_INFINITY),
            (hello_world[1], f32::NEG_INFINITY)
        ]
    );
    let got = logit_bias_from_json(
        &json!({ paris[0].to_string(): -2, "Hello world": 0.5 }),
        vocab,
    )
    .unwrap();
    assert_eq!(
        got,
        vec![
            (paris[0], -2.0),
            (hello_world[0], 0.5),
            (hello_world[1], 0.5)
        ]
    );
    assert_eq!(
        logit_bias_from_json(&serde_json::Value::Null, vocab).unwrap(),
        vec![]
    );
    for (bad, says) in [
        (
            json!([[100_000_000, 1]]),
            "logit_bias[0]: token 100000000 is outside the vocabulary",
        ),
        (
            json!([[1, true]]),
            "logit_bias[0]: the bias must be a number or false",
        ),
        (
            json!([[1, 2, 3]]),
            "logit_bias[0]: each entry is a [token or text, bias] pair",
        ),
        (
            json!({"12": "x"}),
            "logit_bias[\"12\"]: the bias must be a number or false",
        ),
        (json!("Paris"), "logit_bias must be a list"),
    ] {
        let e = logit_bias_from_json(&bad, vocab).err().unwrap().to_string();
        assert!(e.contains(says), "{bad}: {e}");
    }
}

/// The logits `scripts/reference/sampler-chain.cpp` makes for a seed: a
/// 64-bit LCG, values -8..8 in steps of 0.01 (so ties occur), one in 17 at -30.
struct ChainLogits(u64);

impl ChainLogits {
    fn new(seed: u32) -> ChainLogits {
        ChainLogits(0x9e37_79b9_7f4a_7c15 ^ seed as u64)
    }

    fn row(&mut self, n_vocab: usize) -> Vec<f32> {
        (0..n_vocab)
            .map(|_| {
                self.0 = self
                    .0
                    .wrapping_mul(6364136223846793005)
                    .wrapping_add(1442695040888963407);
                let r = (self.0 >> 33) as u32;
                if r.is_multiple_of(17) {
                    -30.0
                } else {
                    ((r % 1601) as i32 - 800) as f32 / 100.0
                }
            })
            .collect()
    }
}

/// Seeded runs choose what llama.cpp's chain and `dist` sampler choose,
/// draw for draw, the chosen token accepted each step
/// (`scripts/reference/sampler-goldens.sh`): sorted and unsorted candidate
/// orders (top-k off, typical's own order), a single candidate (a draw
/// still taken), greedy, penalties, and 3000-token rows.
#[test]
fn seeded_draws_are_llama_cpp_s() {
    let g: serde_json::Value = serde_json::from_slice(&common::read_file(&common::golden_path(
        "sampling/draws.json",
    )))
    .unwrap();
    let mut drawn = 0;
    for case in g["cases"].as_array().unwrap() {
        let name = case["name"].as_str().unwrap();
        let p = &case["params"];
        let f = |k: &str| p[k].as_f64().unwrap() as f32;
        let i = |k: &str| p[k].as_i64().unwrap();
        let params = SamplingParams {
            seed: Some(i("seed") as u32),
            top_n_sigma: f("top_n_sigma"),
            top_k: i("top_k") as i32,
            typical_p: f("typical_p"),
            top_p: f("top_p"),
            min_p: f("min_p"),
            xtc_probability: f("xtc_probability"),
            xtc_threshold: f("xtc_threshold"),
            temperature: f("temperature"),
            penalty_last_n: i("penalty_last_n") as i32,
            penalty_repeat: f("penalty_repeat"),
            penalty_freq: f("penalty_freq"),
            penalty_present: f("penalty_present"),
            min_keep: i("min_keep") as usize,
            ..SamplingParams::default()
        };
        let n_vocab = i("n_vocab") as usize;
        let mut s = Sampler::new(params, n_vocab).unwrap();
        let mut logits = ChainLogits::new(i("seed") as u32);
        let mut got = Vec::new();
        let mut want = Vec::new();
        for st in case["steps"].as_array().unwrap() {
            let id = s.sample(&logits.row(n_vocab)).unwrap();
            s.accept(id);
            got.push(id);
            want.push(st["selected"].as_u64().unwrap() as u32);
        }
        assert_eq!(got, want, "{name}");
        drawn += got.len();
    }
    assert!(drawn >= 250, "{drawn} draws");
}

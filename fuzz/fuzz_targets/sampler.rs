//! Fuzzes the sampler chain: every parameter and every logit from the input
//! (any f32 bit pattern: NaN, infinities, subnormals). A parameter set is
//! either refused by `Sampler::new` with an error, or every draw gives a
//! token of the vocabulary. DRY runs over a repetitive history with token
//! breakers.
#![no_main]

use lamina::sampling::{DryBreakers, Sampler, SamplingParams};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    // The first 16 words are the parameters, the rest the logits.
    let word = |i: usize| match data.get(4 * i..4 * i + 4) {
        Some(c) => u32::from_le_bytes([c[0], c[1], c[2], c[3]]),
        None => 0,
    };
    let float = |i: usize| f32::from_bits(word(i));
    let p = SamplingParams {
        temperature: float(0),
        top_k: word(1) as i32,
        top_p: float(2),
        min_p: float(3),
        typical_p: float(4),
        penalty_last_n: word(5) as i32,
        penalty_repeat: float(6),
        penalty_freq: float(7),
        penalty_present: float(8),
        mirostat: (word(9) % 4) as u8,
        mirostat_tau: float(10),
        mirostat_eta: float(11),
        seed: Some(word(12)),
        min_keep: (word(13) % 64) as usize,
        logit_bias: vec![(0, float(14))],
        // XTC and top-n-sigma take word 15 and reuse top-p's and min-p's.
        xtc_probability: float(15),
        xtc_threshold: float(2),
        top_n_sigma: float(3),
        // DRY reuses mirostat's and the penalties' words.
        dry_multiplier: float(11).abs(),
        dry_base: float(10),
        dry_allowed_length: (word(13) % 5) as i32,
        dry_penalty_last_n: (word(5) % 128) as i32,
        ..SamplingParams::default()
    };
    let logits: Vec<f32> = data
        .chunks_exact(4)
        .skip(16)
        .map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]]))
        .collect();
    if logits.is_empty() {
        return;
    }
    let Ok(mut sampler) = Sampler::new(p, logits.len()) else {
        return;
    };
    let n = logits.len() as u32;
    sampler.set_dry_breakers(DryBreakers::from_token_sequences(&[
        vec![word(14) % n],
        vec![word(15) % n, word(12) % n],
    ]));
    // A repetitive history, so DRY finds repeats.
    for i in 0..16 {
        sampler.accept([word(12), word(13), word(14)][i % 3] % n);
    }
    for _ in 0..3 {
        let id = sampler
            .sample(&logits)
            .expect("a valid chain always draws a token");
        assert!((id as usize) < logits.len());
        sampler.accept(id);
    }
});

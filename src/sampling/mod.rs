//! The sampler chain: logit bias, repetition/frequency/presence penalties,
//! DRY (`dry`), top-n-sigma, top-k, typical-p, top-p, min-p, XTC, temperature, then a
//! seeded draw — or mirostat v1/v2 — with llama.cpp's algorithms and
//! llama.rn's defaults and order, and llama.cpp's random numbers (MT19937,
//! libstdc++'s distributions); a grammar (`grammar`) checks the chain's
//! choice and, where it breaks the grammar, filters before a second run.

mod dry;
pub mod grammar;
pub mod json_schema;
mod logit_bias;
mod rng;
mod stl_sort;

use std::collections::{HashMap, VecDeque};

pub use dry::DryBreakers;
pub use logit_bias::logit_bias_from_json;
pub use rng::Mt19937;

use dry::Dry;
use grammar::GrammarState;

use crate::error::{Error, Result};

/// One candidate token.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Candidate {
    pub id: u32,
    pub logit: f32,
    pub p: f32,
}

/// The candidates a chain narrows down.
#[derive(Clone, Debug)]
pub struct Candidates {
    pub data: Vec<Candidate>,
    /// Sorted by logit, highest first.
    pub sorted: bool,
}

impl Candidates {
    pub fn from_logits(logits: &[f32]) -> Candidates {
        Candidates {
            data: logits
                .iter()
                .enumerate()
                .map(|(i, &logit)| Candidate {
                    id: i as u32,
                    logit,
                    p: 0.0,
                })
                .collect(),
            sorted: false,
        }
    }

    /// Highest logit first, equal logits in the order llama.cpp's sorts
    /// leave them (a seeded draw walks this order).
    fn sort(&mut self) {
        if !self.sorted {
            self.keep_best(self.data.len());
        }
    }

    /// Keeps the best `n` (n >= 1), sorted, as llama.cpp's in-place partial
    /// sort: libstdc++'s `partial_sort` up to 128, else logit buckets.
    fn keep_best(&mut self, n: usize) {
        let n = n.min(self.data.len());
        if n <= 128 {
            stl_sort::partial_sort(&mut self.data, n, higher_logit);
            self.data.truncate(n);
        } else {
            let mut best = best_by_buckets(&self.data, n);
            best.truncate(n);
            self.data = best;
        }
        self.sorted = true;
    }

    /// Sets p to the softmax of the logits (sums in the candidates' order),
    /// sorting first.
    pub fn softmax(&mut self) {
        self.sort();
        self.probabilities();
    }

    /// Sets p to the softmax of the logits, in the order they are.
    fn probabilities(&mut self) {
        let Some(first) = self.data.first().map(|c| c.logit) else {
            return;
        };
        let max = if self.sorted {
            first
        } else {
            self.data.iter().fold(first, |m, c| m.max(c.logit))
        };
        let mut sum = 0.0f32;
        for c in &mut self.data {
            c.p = (c.logit - max).exp();
            sum += c.p;
        }
        for c in &mut self.data {
            c.p /= sum;
        }
    }

    /// Top-n-sigma, as llama.cpp's: candidates below the best logit by more
    /// than `n` standard deviations of the (finite) logits become -inf. The
    /// sums keep llama.cpp's precision (f32, squares in f64).
    fn top_n_sigma(&mut self, n: f32) {
        if n <= 0.0 || self.data.len() <= 1 {
            return;
        }
        let mut max = self.data[0].logit;
        let (mut sum, mut count) = (0.0f32, 0usize);
        for c in self.data.iter().filter(|c| c.logit != f32::NEG_INFINITY) {
            max = max.max(c.logit);
            sum += c.logit;
            count += 1;
        }
        let mean = if count > 0 { sum / count as f32 } else { 0.0 };
        let mut acc = 0.0f32;
        for c in self.data.iter().filter(|c| c.logit != f32::NEG_INFINITY) {
            acc = (acc as f64 + ((c.logit - mean) as f64).powi(2)) as f32;
        }
        let std = if count > 0 {
            (acc / count as f32).sqrt()
        } else {
            0.0
        };
        let floor = max - n * std;
        for c in &mut self.data {
            if c.logit < floor {
                c.logit = f32::NEG_INFINITY;
            }
        }
        self.sorted = false;
    }

    /// The best `k` (0 or less: off, leaving the order as it is).
    fn top_k(&mut self, k: i32) {
        if k <= 0 || self.data.is_empty() {
            return;
        }
        let k = (k as usize).min(self.data.len());
        if self.sorted {
            self.data.truncate(k);
        } else {
            self.keep_best(k);
        }
    }

    fn temperature(&mut self, t: f32) {
        if t <= 0.0 {
            // Keep only the (first) highest logit.
            let mut best = 0;
            for i in 1..self.data.len() {
                if self.data[i].logit > self.data[best].logit {
                    self.data[best].logit = f32::NEG_INFINITY;
                    best = i;
                } else {
                    self.data[i].logit = f32::NEG_INFINITY;
                }
            }
            return;
        }
        for c in &mut self.data {
            c.logit /= t;
        }
    }

    /// The most likely candidates up to a total of `p`. Unsorted rows over
    /// 1024 are sorted as llama.cpp sorts them: the best 256 first, all of
    /// them only if those do not reach `p`.
    fn top_p(&mut self, p: f32, min_keep: usize) {
        if p >= 1.0 || self.data.is_empty() {
            return;
        }
        self.probabilities();
        if !self.sorted && self.data.len() <= 1024 {
            self.sort();
        }
        let n = self.data.len();
        let mut k = n;
        let mut best = None;
        if !self.sorted {
            k = n.min(256);
            best = Some(best_by_buckets(&self.data, k));
        }
        let mut cum = 0.0f32;
        let mut last = n;
        for i in 0..n {
            let c = best.as_ref().map_or(&self.data[i], |b| &b[i]);
            cum += c.p;
            if cum >= p && i + 1 >= min_keep {
                last = i + 1;
                break;
            }
            if best.is_some() && i == k - 1 {
                k = n;
                best = Some(best_by_buckets(&self.data, k));
            }
        }
        if let Some(mut b) = best {
            b.truncate(last);
            self.data = b;
            self.sorted = true;
        }
        self.data.truncate(last);
    }

    fn min_p(&mut self, p: f32, min_keep: usize) {
        if p <= 0.0 || self.data.is_empty() {
            return;
        }
        if !self.sorted {
            let max = self.data.iter().fold(f32::MIN, |m, c| m.max(c.logit));
            let min_logit = max + p.ln();
            let kept: Vec<Candidate> = self
                .data
                .iter()
                .copied()
                .filter(|c| c.logit >= min_logit)
                .collect();
            // A min-p above 1 keeps nothing here: fall through to the
            // sorted path, which always keeps the top token (llama.cpp's
            // unsorted path has the same guard).
            if !kept.is_empty() && kept.len() >= min_keep {
                self.data = kept;
                return;
            }
        }
        self.sort();
        let min_logit = self.data[0].logit + p.ln();
        let mut i = 1;
        while i < self.data.len() {
            if self.data[i].logit < min_logit && i >= min_keep {
                break;
            }
            i += 1;
        }
        self.data.truncate(i);
    }

    fn typical(&mut self, p: f32, min_keep: usize) {
        if p >= 1.0 {
            return;
        }
        self.softmax();
        let entropy: f32 = self.data.iter().map(|c| -c.p * c.p.ln()).sum();
        let shifted: Vec<f32> = self
            .data
            .iter()
            .map(|c| (-c.p.ln() - entropy).abs())
            .collect();
        let mut order: Vec<usize> = (0..self.data.len()).collect();
        stl_sort::sort(&mut order, |&a, &b| shifted[a] < shifted[b]);
        let mut cum = 0.0f32;
        let mut last = order.len();
        for (i, &idx) in order.iter().enumerate() {
            cum += self.data[idx].p;
            if cum > p && i + 1 >= min_keep {
                last = i + 1;
                break;
            }
        }
        self.data = order[..last].iter().map(|&i| self.data[i]).collect();
        self.sorted = false;
    }
}

/// llama.cpp's order for candidates: the higher logit first.
fn higher_logit(a: &Candidate, b: &Candidate) -> bool {
    a.logit > b.logit
}

/// The best `n` of `data` first, sorted, as llama.cpp finds them in long
/// rows: candidates are dealt in order into 128 logit buckets over
/// [-10, 10]; the buckets from the top down that hold `n` are kept, each
/// sorted (libstdc++'s `sort`), the last only as far as `n` needs
/// (`partial_sort`). Returns those buckets' candidates (at least `n`).
fn best_by_buckets(data: &[Candidate], n: usize) -> Vec<Candidate> {
    const BUCKETS: usize = 128;
    const LOW: f32 = -10.0;
    const HIGH: f32 = 10.0;
    const SCALE: f32 = BUCKETS as f32 / (HIGH - LOW);
    const OFFSET: f32 = -LOW * SCALE;
    let bucket_of: Vec<usize> = data
        .iter()
        .map(|c| ((SCALE * c.logit + OFFSET) as i32).clamp(0, BUCKETS as i32 - 1) as usize)
        .collect();
    let mut counts = [0usize; BUCKETS];
    for &b in &bucket_of {
        counts[b] += 1;
    }
    // The lowest bucket needed to hold n.
    let mut have = 0;
    let mut lowest = BUCKETS - 1;
    loop {
        have += counts[lowest];
        if have >= n || lowest == 0 {
            break;
        }
        lowest -= 1;
    }
    // Deal the candidates into their buckets, the top bucket first.
    let mut starts = [0usize; BUCKETS];
    let mut at = 0;
    for b in (lowest..BUCKETS).rev() {
        starts[b] = at;
        at += counts[b];
    }
    let mut out = vec![
        data.first().copied().unwrap_or(Candidate {
            id: 0,
            logit: 0.0,
            p: 0.0
        });
        have
    ];
    for (c, &b) in data.iter().zip(&bucket_of) {
        if b >= lowest {
            out[starts[b]] = *c;
            starts[b] += 1;
        }
    }
    let mut done = 0;
    for b in (lowest + 1..BUCKETS).rev() {
        stl_sort::sort(&mut out[done..done + counts[b]], higher_logit);
        done += counts[b];
    }
    let last = &mut out[done..done + counts[lowest]];
    stl_sort::partial_sort(last, n.saturating_sub(done), higher_logit);
    out
}

/// Sampling parameters, with llama.rn's `completion()` defaults.
#[derive(Clone, Debug, PartialEq)]
pub struct SamplingParams {
    /// <= 0: greedy.
    pub temperature: f32,
    pub top_k: i32,
    pub top_p: f32,
    pub min_p: f32,
    pub typical_p: f32,
    /// How many recent tokens the penalties look at: 0 none, -1 the
    /// context size in effect (the completion resolves it).
    pub penalty_last_n: i32,
    pub penalty_repeat: f32,
    pub penalty_freq: f32,
    pub penalty_present: f32,
    /// 0 off, 1 or 2.
    pub mirostat: u8,
    pub mirostat_tau: f32,
    pub mirostat_eta: f32,
    /// None: a fresh random seed.
    pub seed: Option<u32>,
    pub min_keep: usize,
    pub logit_bias: Vec<(u32, f32)>,
    /// XTC ("exclude top choices"): with this probability per token, the
    /// tokens at or above `xtc_threshold` but the least likely of them are
    /// removed (0: off; a threshold above 0.5: off).
    pub xtc_probability: f32,
    pub xtc_threshold: f32,
    /// Keeps the tokens within this many standard deviations of the best
    /// logit (<= 0: off).
    pub top_n_sigma: f32,
    /// DRY: a token extending a repeat of at least `dry_allowed_length`
    /// tokens within the last `dry_penalty_last_n` (-1: the context size,
    /// resolved by the completion; 0: off) loses
    /// `dry_multiplier * dry_base^(length - dry_allowed_length)` (multiplier
    /// 0: off).
    pub dry_multiplier: f32,
    pub dry_base: f32,
    pub dry_allowed_length: i32,
    pub dry_penalty_last_n: i32,
    /// Strings no repeat reaches across (each as its tokens; a completion
    /// gives them to the sampler with `Sampler::set_dry_breakers`).
    pub dry_sequence_breakers: Vec<String>,
    /// A GBNF grammar (start rule `root`) every generated text must match.
    pub grammar: Option<String>,
    /// Whether the grammar waits for one of `grammar_triggers` before it
    /// constrains anything (tool calls after free text).
    pub grammar_lazy: bool,
    pub grammar_triggers: grammar::Triggers,
}

impl Default for SamplingParams {
    fn default() -> Self {
        SamplingParams {
            temperature: 0.8,
            top_k: 40,
            top_p: 0.95,
            min_p: 0.05,
            typical_p: 1.0,
            penalty_last_n: 64,
            penalty_repeat: 1.0,
            penalty_freq: 0.0,
            penalty_present: 0.0,
            mirostat: 0,
            mirostat_tau: 5.0,
            mirostat_eta: 0.1,
            seed: None,
            min_keep: 0,
            logit_bias: Vec::new(),
            xtc_probability: 0.0,
            xtc_threshold: 0.1,
            top_n_sigma: -1.0,
            dry_multiplier: 0.0,
            dry_base: 1.75,
            dry_allowed_length: 2,
            dry_penalty_last_n: 64,
            dry_sequence_breakers: ["\n", ":", "\"", "*"].map(String::from).to_vec(),
            grammar: None,
            grammar_lazy: false,
            grammar_triggers: grammar::Triggers::default(),
        }
    }
}

impl SamplingParams {
    /// Every parameter within its range, or an error naming the first that
    /// is not and its range. NaN is never a value: it would turn a sampler
    /// off or on silently.
    pub fn validate(&self) -> Result<()> {
        let finite = |name: &str, v: f32| -> Result<()> {
            if v.is_finite() {
                Ok(())
            } else {
                Err(Error::InvalidArgument(format!(
                    "{name} must be a finite number, got {v}"
                )))
            }
        };
        let within = |name: &str, v: f32, lo: f32, hi: f32| -> Result<()> {
            if (lo..=hi).contains(&v) {
                Ok(())
            } else {
                Err(Error::InvalidArgument(format!(
                    "{name} must be between {lo} and {hi}, got {v}"
                )))
            }
        };
        finite("temperature", self.temperature)?;
        within("top_p", self.top_p, 0.0, 1.0)?;
        within("min_p", self.min_p, 0.0, 1.0)?;
        within("typical_p", self.typical_p, 0.0, 1.0)?;
        if self.penalty_last_n < -1 {
            return Err(Error::InvalidArgument(format!(
                "penalty_last_n must be -1 (the context size), 0 (off) or a count, got {}",
                self.penalty_last_n
            )));
        }
        finite("penalty_repeat", self.penalty_repeat)?;
        if self.penalty_repeat <= 0.0 {
            return Err(Error::InvalidArgument(format!(
                "penalty_repeat must be above 0 (1 is off), got {}",
                self.penalty_repeat
            )));
        }
        finite("penalty_freq", self.penalty_freq)?;
        finite("penalty_present", self.penalty_present)?;
        if self.mirostat > 2 {
            return Err(Error::InvalidArgument(format!(
                "mirostat must be 0, 1 or 2, got {}",
                self.mirostat
            )));
        }
        within("xtc_probability", self.xtc_probability, 0.0, 1.0)?;
        finite("xtc_threshold", self.xtc_threshold)?;
        finite("top_n_sigma", self.top_n_sigma)?;
        finite("dry_multiplier", self.dry_multiplier)?;
        if self.dry_multiplier < 0.0 {
            return Err(Error::InvalidArgument(format!(
                "dry_multiplier must be 0 (off) or above, got {}",
                self.dry_multiplier
            )));
        }
        finite("dry_base", self.dry_base)?;
        if self.dry_allowed_length < 0 {
            return Err(Error::InvalidArgument(format!(
                "dry_allowed_length must be 0 or above, got {}",
                self.dry_allowed_length
            )));
        }
        if self.dry_penalty_last_n < -1 {
            return Err(Error::InvalidArgument(format!(
                "dry_penalty_last_n must be -1 (the context size), 0 (off) or a count, got {}",
                self.dry_penalty_last_n
            )));
        }
        finite("mirostat_tau", self.mirostat_tau)?;
        finite("mirostat_eta", self.mirostat_eta)?;
        if let Some(&(id, bias)) = self
            .logit_bias
            .iter()
            .find(|(_, b)| b.is_nan() || *b == f32::INFINITY)
        {
            return Err(Error::InvalidArgument(format!(
                "the logit bias of token {id} must be a finite number or -inf (banned), got {bias}"
            )));
        }
        Ok(())
    }
}

/// A sampler chain with its state (recent tokens, RNG, mirostat's mu).
pub struct Sampler {
    params: SamplingParams,
    n_vocab: usize,
    rng: Mt19937,
    recent: VecDeque<u32>,
    counts: HashMap<u32, i32>,
    mu: f32,
    /// XTC's own generator (llama.cpp seeds it apart from the draw's).
    xtc_rng: Mt19937,
    /// DRY's state, when it is on.
    dry: Option<Dry>,
    grammar: Option<GrammarState>,
    /// Every token id, for the grammar's filter.
    all_ids: Vec<u32>,
}

impl Sampler {
    /// A chain for `params` (validated; a `penalty_last_n` of -1 must have
    /// been resolved to the context size by the caller, else it counts as
    /// off) over a vocabulary of `n_vocab`.
    pub fn new(params: SamplingParams, n_vocab: usize) -> Result<Sampler> {
        params.validate()?;
        if n_vocab == 0 {
            return Err(Error::InvalidArgument(
                "cannot sample from an empty vocabulary".into(),
            ));
        }
        if let Some(&(id, _)) = params
            .logit_bias
            .iter()
            .find(|(id, _)| *id as usize >= n_vocab)
        {
            return Err(Error::InvalidArgument(format!(
                "logit bias for token {id}, outside the vocabulary of {n_vocab}"
            )));
        }
        let dry = Dry::new(
            params.dry_multiplier,
            params.dry_base,
            params.dry_allowed_length.max(0) as usize,
            params.dry_penalty_last_n.max(0) as usize,
        );
        let seed = params.seed.unwrap_or_else(rng::random_seed);
        let xtc_seed = params.seed.unwrap_or_else(rng::random_seed);
        Ok(Sampler {
            xtc_rng: Mt19937::new(xtc_seed),
            mu: 2.0 * params.mirostat_tau,
            rng: Mt19937::new(seed),
            params,
            n_vocab,
            recent: VecDeque::new(),
            counts: HashMap::new(),
            dry,
            grammar: None,
            all_ids: Vec::new(),
        })
    }

    /// Records a generated (or prompt) token for the penalties and DRY.
    pub fn accept(&mut self, token: u32) {
        if let Some(dry) = &mut self.dry {
            dry.accept(token);
        }
        let n = self.params.penalty_last_n.max(0) as usize;
        if n == 0 {
            return;
        }
        if self.recent.len() == n {
            if let Some(old) = self.recent.pop_front() {
                if let Some(c) = self.counts.get_mut(&old) {
                    *c -= 1;
                    if *c == 0 {
                        self.counts.remove(&old);
                    }
                }
            }
        }
        self.recent.push_back(token);
        *self.counts.entry(token).or_insert(0) += 1;
    }

    fn penalize(&self, cands: &mut Candidates) {
        let p = &self.params;
        if p.penalty_last_n == 0
            || (p.penalty_repeat == 1.0 && p.penalty_freq == 0.0 && p.penalty_present == 0.0)
        {
            return;
        }
        for c in &mut cands.data {
            let Some(&count) = self.counts.get(&c.id) else {
                continue;
            };
            if c.logit <= 0.0 {
                c.logit *= p.penalty_repeat;
            } else {
                c.logit /= p.penalty_repeat;
            }
            c.logit -=
                count as f32 * p.penalty_freq + (count > 0) as i32 as f32 * p.penalty_present;
        }
        cands.sorted = false;
    }

    /// Chooses the next token from a row of logits.
    pub fn sample(&mut self, logits: &[f32]) -> Result<u32> {
        self.check_logits(logits)?;
        let id = self.run_chain(Candidates::from_logits(logits))?;
        let Some(grammar) = self.grammar.as_ref().filter(|g| g.is_active()) else {
            return Ok(id);
        };
        if grammar.allows(id) {
            return Ok(id);
        }
        // As llama.cpp's common sampler: the chain's choice broke the
        // grammar, so the grammar filters the whole vocabulary first and the
        // chain runs again (a second draw).
        let mut keep = vec![true; logits.len()];
        grammar.filter(&self.all_ids, &mut keep);
        if !keep.contains(&true) {
            return Err(Error::InvalidArgument(
                "the grammar allows none of the vocabulary's tokens here".into(),
            ));
        }
        let mut c = Candidates::from_logits(logits);
        for (cand, &k) in c.data.iter_mut().zip(&keep) {
            if !k {
                cand.logit = f32::NEG_INFINITY;
            }
        }
        let id = self.run_chain(c)?;
        if !keep[id as usize] {
            return Err(Error::InvalidArgument(
                "the sampling parameters left only tokens the grammar does not allow".into(),
            ));
        }
        Ok(id)
    }

    fn check_logits(&self, logits: &[f32]) -> Result<()> {
        if logits.len() != self.n_vocab {
            return Err(Error::InvalidArgument(format!(
                "{} logits for a vocabulary of {}",
                logits.len(),
                self.n_vocab
            )));
        }
        Ok(())
    }

    /// Records a generated token: for the penalties, and moves the grammar
    /// (if any) past it.
    pub fn accept_generated(&mut self, token: u32) -> Result<()> {
        self.accept(token);
        match &mut self.grammar {
            Some(g) => g.accept(token),
            None => Ok(()),
        }
    }

    /// The sequence breakers DRY uses (as tokens; without them no repeat is
    /// cut short). Nothing changes while DRY is off.
    pub fn set_dry_breakers(&mut self, breakers: DryBreakers) {
        if let Some(dry) = &mut self.dry {
            dry.breakers = breakers;
        }
    }

    /// Whether DRY is on (and so wants its breakers).
    pub fn uses_dry(&self) -> bool {
        self.dry.is_some()
    }

    /// Constrains the tokens this chain chooses to those `grammar` allows.
    pub fn set_grammar(&mut self, grammar: GrammarState) {
        self.all_ids = (0..self.n_vocab as u32).collect();
        self.grammar = Some(grammar);
    }

    /// What the chain (without mirostat) leaves for the draw from a row of
    /// logits: every stage but the draw, which is not made. XTC's own
    /// generator does move.
    pub fn candidates_left(&mut self, logits: &[f32]) -> Result<Candidates> {
        self.check_logits(logits)?;
        let mut c = Candidates::from_logits(logits);
        self.bias(&mut c);
        self.filters(&mut c);
        Ok(c)
    }

    fn bias(&self, c: &mut Candidates) {
        for &(id, bias) in &self.params.logit_bias {
            c.data[id as usize].logit += bias;
        }
    }

    /// The chain's stages in llama.cpp's order, up to the draw.
    fn filters(&mut self, c: &mut Candidates) {
        let p = self.params.clone();
        self.penalize(c);
        if let Some(dry) = &self.dry {
            dry.apply(c);
        }
        c.top_n_sigma(p.top_n_sigma);
        c.top_k(p.top_k);
        c.typical(p.typical_p, p.min_keep);
        c.top_p(p.top_p, p.min_keep);
        c.min_p(p.min_p, p.min_keep);
        self.xtc(c);
        c.temperature(p.temperature);
    }

    /// The chain over `c`: bias, penalties, filters, the draw.
    fn run_chain(&mut self, mut c: Candidates) -> Result<u32> {
        self.bias(&mut c);
        let p = self.params.clone();
        match p.mirostat {
            0 => {
                self.filters(&mut c);
                let i = self.draw_in_order(&mut c)?;
                Ok(c.data[i].id)
            }
            1 => {
                c.temperature(p.temperature);
                c.softmax();
                let m = 100usize;
                let (mut sum_ti_bi, mut sum_ti_sq) = (0.0f32, 0.0f32);
                for i in 0..(m - 1).min(c.data.len().saturating_sub(1)) {
                    let t_i = ((i + 2) as f32 / (i + 1) as f32).ln();
                    let b_i = (c.data[i].p / c.data[i + 1].p).ln();
                    sum_ti_bi += t_i * b_i;
                    sum_ti_sq += t_i * t_i;
                }
                let s_hat = sum_ti_bi / sum_ti_sq;
                let eps = s_hat - 1.0;
                let k = ((eps * 2f32.powf(self.mu)) / (1.0 - (self.n_vocab as f32).powf(-eps)))
                    .powf(1.0 / s_hat);
                // A NaN k (a degenerate distribution) keeps the top token.
                c.top_k((k as i32).max(1));
                c.softmax();
                let i = self.draw_discrete(&c)?;
                self.mu -= p.mirostat_eta * (-c.data[i].p.log2() - p.mirostat_tau);
                Ok(c.data[i].id)
            }
            _ => {
                c.temperature(p.temperature);
                c.softmax();
                let keep = c
                    .data
                    .iter()
                    .position(|x| -x.p.log2() > self.mu)
                    .unwrap_or(c.data.len());
                c.data.truncate(keep.max(1));
                c.softmax();
                let i = self.draw_discrete(&c)?;
                self.mu -= p.mirostat_eta * (-c.data[i].p.log2() - p.mirostat_tau);
                Ok(c.data[i].id)
            }
        }
    }
}

impl Sampler {
    /// XTC, as llama.cpp's: a draw from its own generator decides whether
    /// it acts; then every candidate at or above the threshold but the last
    /// of them (in probability order) goes, unless fewer than `min_keep`
    /// would remain.
    fn xtc(&mut self, c: &mut Candidates) {
        let (probability, threshold) = (self.params.xtc_probability, self.params.xtc_threshold);
        if probability <= 0.0 || threshold > 0.5 || c.data.len() < 2 {
            return;
        }
        if self.xtc_rng.canonical_f32() > probability {
            return;
        }
        c.softmax();
        let last = c
            .data
            .iter()
            .take_while(|x| x.p >= threshold)
            .count()
            .saturating_sub(1);
        if c.data.len() - last >= self.params.min_keep && last > 0 {
            c.data.drain(..last);
        }
    }

    /// The seeded draw at the end of the chain, as llama.cpp's `dist`
    /// sampler makes it: the candidates in the order the chain left them
    /// (sorted or not), their probabilities summed in f64, and the first
    /// whose running sum reaches a canonical draw times the total. One
    /// candidate still takes a draw, so the generator stays in step.
    fn draw_in_order(&mut self, c: &mut Candidates) -> Result<usize> {
        if c.data.is_empty() {
            return Err(Error::InvalidArgument(
                "every candidate token was filtered out".into(),
            ));
        }
        let target = self.rng.canonical();
        if c.data.len() == 1 {
            c.data[0].p = 1.0;
            return Ok(0);
        }
        let max = if c.sorted {
            c.data[0].logit
        } else {
            c.data.iter().fold(f32::NEG_INFINITY, |m, x| m.max(x.logit))
        };
        let mut total = 0.0f64;
        for x in &mut c.data {
            x.p = (x.logit - max).exp();
            total += x.p as f64;
        }
        if !(total.is_finite() && total > 0.0) {
            // Logits all -inf or NaN from the model: the first, the
            // best-ranked one.
            return Ok(0);
        }
        let target = total * target;
        let mut running = 0.0f64;
        let mut chosen = None;
        for (i, x) in c.data.iter_mut().enumerate() {
            if chosen.is_none() {
                running += x.p as f64;
                if running >= target {
                    chosen = Some(i);
                }
            }
            x.p = (x.p as f64 / total) as f32;
        }
        Ok(chosen.unwrap_or(c.data.len() - 1))
    }

    /// Mirostat's seeded draw, as llama.cpp's mirostat samplers make it
    /// (`std::discrete_distribution` over the sorted candidates). Every
    /// filter keeps at least one candidate; weights that are not a
    /// distribution (logits all -inf or NaN from the model) give the first,
    /// the best-ranked one.
    fn draw_discrete(&mut self, c: &Candidates) -> Result<usize> {
        if c.data.is_empty() {
            return Err(Error::InvalidArgument(
                "every candidate token was filtered out".into(),
            ));
        }
        let total: f32 = c.data.iter().map(|x| x.p).sum();
        if !(total.is_finite() && total > 0.0) {
            return Ok(0);
        }
        let i = self.rng.discrete(c.data.iter().map(|x| x.p));
        Ok(i.min(c.data.len() - 1))
    }
}

/// The greedy choice: the highest logit, the lowest id on ties (as llama.cpp's
/// greedy sampler).
pub fn greedy(logits: &[f32]) -> Option<u32> {
    let mut best: Option<(usize, f32)> = None;
    for (i, &l) in logits.iter().enumerate() {
        if best.is_none_or(|(_, b)| l > b) {
            best = Some((i, l));
        }
    }
    best.map(|(i, _)| i as u32)
}

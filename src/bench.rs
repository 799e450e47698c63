//! Throughput as llama-bench measures it: `pp` evaluates a prompt of random
//! tokens in batches from an empty cache; `tg` generates tokens one at a time
//! from an empty cache (each step a decode with logits). A warm-up run comes
//! first; tokens/s are averaged over the repetitions, with their sample
//! standard deviation.

use serde::Serialize;

use crate::context::{Batch, Context};
use crate::error::{Error, Result};
use crate::model::Model;
use crate::stopwatch::Stopwatch;

/// One row of results, with llama-bench's JSON keys.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct BenchResult {
    pub model_filename: String,
    pub model_type: String,
    pub cpu_variant: String,
    pub n_batch: usize,
    pub n_ubatch: usize,
    pub n_threads: usize,
    pub type_k: String,
    pub type_v: String,
    pub n_prompt: usize,
    pub n_gen: usize,
    /// Tokens already in the cache when the test starts (llama-bench `-d`).
    pub n_depth: usize,
    /// Sequences generating at once in the `tg` test (llama.rn's `pl`);
    /// its tokens/s count every sequence's tokens.
    pub n_parallel: usize,
    pub avg_ns: f64,
    pub stddev_ns: f64,
    pub avg_ts: f64,
    pub stddev_ts: f64,
    pub samples_ns: Vec<f64>,
    pub samples_ts: Vec<f64>,
}

/// A small deterministic generator for the random tokens (llama-bench uses
/// `rand()`; any token ids do, speed does not depend on them).
struct Lcg(u64);

impl Lcg {
    fn next(&mut self, n: usize) -> u32 {
        self.0 = self
            .0
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        ((self.0 >> 33) % n as u64) as u32
    }
}

fn first_token(ctx: &Context, rng: &mut Lcg) -> u32 {
    let vocab = &ctx.model().vocab;
    match (vocab.add_bos, vocab.bos) {
        (true, Some(b)) => b,
        _ => rng.next(vocab.len()),
    }
}

/// Clears the cache and fills it with `depth` random tokens (untimed).
fn fill(ctx: &mut Context, depth: usize, rng: &mut Lcg) -> Result<()> {
    ctx.kv_clear();
    if depth == 0 {
        return Ok(());
    }
    let n_vocab = ctx.model().vocab.len();
    let n_batch = ctx.params().n_batch;
    let mut tokens: Vec<u32> = (0..depth).map(|_| rng.next(n_vocab)).collect();
    tokens[0] = first_token(ctx, rng);
    for (c, chunk) in tokens.chunks(n_batch).enumerate() {
        ctx.decode(&Batch::for_sequence(chunk, (c * n_batch) as i32, 0)?)?;
    }
    Ok(())
}

/// Milliseconds of a prompt of `n` tokens after `depth` cached ones.
fn run_pp(ctx: &mut Context, n: usize, depth: usize, rng: &mut Lcg) -> Result<f64> {
    fill(ctx, depth, rng)?;
    let n_vocab = ctx.model().vocab.len();
    let n_batch = ctx.params().n_batch;
    let mut tokens: Vec<u32> = (0..n).map(|_| rng.next(n_vocab)).collect();
    if depth == 0 {
        tokens[0] = first_token(ctx, rng);
    }
    let t = Stopwatch::start();
    if !ctx.model().can_generate() {
        // An encoder takes the prompt as one sequence, in one pass.
        ctx.encode(&Batch::for_sequence(&tokens, 0, 0)?)?;
        return Ok(t.elapsed_ms());
    }
    for (c, chunk) in tokens.chunks(n_batch).enumerate() {
        ctx.decode(&Batch::for_sequence(
            chunk,
            (depth + c * n_batch) as i32,
            0,
        )?)?;
    }
    Ok(t.elapsed_ms())
}

/// Milliseconds of `n` generated tokens in each of `pl` sequences after
/// `depth` cached ones they share (llama.rn's `pl`: one decode per step
/// carries a token of every sequence).
fn run_tg(ctx: &mut Context, n: usize, depth: usize, pl: usize, rng: &mut Lcg) -> Result<f64> {
    fill(ctx, depth, rng)?;
    for seq in 1..pl {
        ctx.kv_seq_cp(0, seq as u32, -1, -1)?;
    }
    let n_vocab = ctx.model().vocab.len();
    let mut tokens: Vec<u32> = (0..pl)
        .map(|_| {
            if depth == 0 {
                first_token(ctx, rng)
            } else {
                rng.next(n_vocab)
            }
        })
        .collect();
    let mut batch = Batch::new(pl);
    let t = Stopwatch::start();
    for pos in depth..depth + n {
        batch.clear();
        for (seq, &token) in tokens.iter().enumerate() {
            batch.add(token, pos as i32, &[seq as u32], true)?;
        }
        ctx.decode(&batch)?;
        for token in &mut tokens {
            *token = rng.next(n_vocab);
        }
    }
    Ok(t.elapsed_ms())
}

/// "llama 30 layers, 576 embd, Q4_1" style summary (llama-bench's model type).
pub fn model_type(model: &Model) -> String {
    let ftype = model
        .file()
        .metadata()
        .get_u32("general.file_type")
        .ok()
        .and_then(crate::gguf::describe::file_type_name)
        .unwrap_or("?");
    format!(
        "{} {} layers, {} embd, {ftype}",
        model.arch_name(),
        model.n_layer(),
        model.n_embd()
    )
}

fn stats(samples: &[f64]) -> (f64, f64) {
    let n = samples.len() as f64;
    let mean = samples.iter().sum::<f64>() / n;
    let var = if samples.len() > 1 {
        samples.iter().map(|s| (s - mean) * (s - mean)).sum::<f64>() / (n - 1.0)
    } else {
        0.0
    };
    (mean, var.sqrt())
}

/// Runs the `pp` test (when `n_prompt` > 0) and the `tg` test (when `n_gen` >
/// 0), `reps` times each after a warm-up.
pub fn bench(
    ctx: &mut Context,
    model_filename: &str,
    n_prompt: usize,
    n_gen: usize,
    reps: usize,
) -> Result<Vec<BenchResult>> {
    bench_at_depth(ctx, model_filename, n_prompt, n_gen, reps, 0)
}

/// `bench` with `depth` tokens in the cache before each test (llama-bench's
/// `-d`: how speed holds up as the context fills). Encoders take no depth.
pub fn bench_at_depth(
    ctx: &mut Context,
    model_filename: &str,
    n_prompt: usize,
    n_gen: usize,
    reps: usize,
    depth: usize,
) -> Result<Vec<BenchResult>> {
    bench_parallel(ctx, model_filename, n_prompt, n_gen, reps, depth, 1)
}

/// `bench_at_depth` with the `tg` test generating in `pl` sequences at once
/// (its tokens/s count all of them, as llama.rn's `bench(pp, tg, pl, nr)`).
pub fn bench_parallel(
    ctx: &mut Context,
    model_filename: &str,
    n_prompt: usize,
    n_gen: usize,
    reps: usize,
    depth: usize,
    pl: usize,
) -> Result<Vec<BenchResult>> {
    if pl == 0 || pl > crate::context::MAX_SEQUENCES || pl > ctx.params().n_batch {
        return Err(Error::InvalidArgument(format!(
            "pl (parallel sequences) must be between 1 and {}, got {pl}",
            crate::context::MAX_SEQUENCES.min(ctx.params().n_batch)
        )));
    }
    if depth > 0 && !ctx.model().can_generate() {
        return Err(Error::InvalidArgument(
            "an encoder keeps no cache: the depth must be 0".into(),
        ));
    }
    if reps == 0 {
        return Err(Error::InvalidArgument(
            "repetitions must be at least 1".into(),
        ));
    }
    let largest = n_prompt.max(n_gen.saturating_mul(pl));
    if largest.saturating_add(depth) > ctx.n_ctx() {
        return Err(Error::InvalidArgument(format!(
            "a test of {largest} tokens after {depth} cached ones does not fit the context of {}",
            ctx.n_ctx()
        )));
    }
    let mut rng = Lcg(0x5eed);
    let mut out = Vec::new();
    // An encoder generates nothing: only its prompt test runs.
    let n_gen = if !ctx.model().can_generate() {
        0
    } else {
        n_gen
    };
    for (np, ng) in [(n_prompt, 0), (0, n_gen)] {
        if np + ng == 0 {
            continue;
        }
        let run = |ctx: &mut Context, rng: &mut Lcg| {
            if np > 0 {
                run_pp(ctx, np, depth, rng)
            } else {
                run_tg(ctx, ng, depth, pl, rng)
            }
        };
        run(ctx, &mut rng)?;
        let mut samples_ns = Vec::new();
        samples_ns.try_reserve_exact(reps).map_err(|_| {
            Error::InvalidArgument(format!("{reps} repetitions are too many to record"))
        })?;
        for _ in 0..reps {
            samples_ns.push(run(ctx, &mut rng)? * 1e6);
        }
        let n = (np + ng * pl) as f64;
        let samples_ts: Vec<f64> = samples_ns.iter().map(|ns| n * 1e9 / ns).collect();
        let (avg_ns, stddev_ns) = stats(&samples_ns);
        let (avg_ts, stddev_ts) = stats(&samples_ts);
        let model = ctx.model().clone();
        let p = ctx.params();
        out.push(BenchResult {
            model_filename: model_filename.to_string(),
            model_type: model_type(&model),
            cpu_variant: ctx.cpu_variant(),
            n_batch: p.n_batch,
            n_ubatch: p.n_ubatch,
            n_threads: ctx.n_threads(),
            type_k: p.type_k.name().into(),
            type_v: p.type_v.name().into(),
            n_prompt: np,
            n_gen: ng,
            n_depth: depth,
            n_parallel: if ng > 0 { pl } else { 1 },
            avg_ns,
            stddev_ns,
            avg_ts,
            stddev_ts,
            samples_ns,
            samples_ts,
        });
    }
    ctx.kv_clear();
    Ok(out)
}

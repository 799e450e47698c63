//! The commands that run a model: `run`, `bench` and `perplexity`.

use std::io::{IsTerminal, Write};
use std::path::{Path, PathBuf};
use std::sync::Arc;

use clap::Args;
use lamina::backend::cpu::CpuRegistry;
use lamina::chat::tools::{ChatOptions, ReasoningFormat, ToolChoice};
use lamina::chat::ChatMessage;
use lamina::completion::{CompletionParams, TokenEvent};
use lamina::context::{Context, ContextParams, KvType};
use lamina::embedding::Pooling;
use lamina::gguf::GgufFile;
use lamina::lora::{ActiveLora, LoraAdapter};
use lamina::model::Model;
use serde_json::json;

use crate::cli::write_stdout;

/// What every model-running command takes.
#[derive(Args, Clone)]
pub struct ModelArgs {
    /// The GGUF model file.
    #[arg(short, long)]
    pub model: PathBuf,
    /// Context size (positions in the KV cache); 0: the model's own.
    #[arg(short = 'c', long = "ctx-size", default_value_t = 2048)]
    pub n_ctx: usize,
    /// Most tokens per decode.
    #[arg(short = 'b', long = "batch-size", default_value_t = 512)]
    pub n_batch: usize,
    /// Most tokens per forward pass.
    #[arg(long = "ubatch-size", visible_alias = "ub", default_value_t = 512)]
    pub n_ubatch: usize,
    /// K cache type: f16, f32 or q8_0.
    #[arg(long = "cache-type-k", visible_alias = "ctk", default_value = "f16")]
    pub type_k: String,
    /// V cache type: f16, f32 or q8_0.
    #[arg(long = "cache-type-v", visible_alias = "ctv", default_value = "f16")]
    pub type_v: String,
    /// A LoRA adapter (GGUF) to apply, with its scale after a colon (default 1); repeat for more.
    #[arg(long = "lora", value_name = "FILE[:SCALE]")]
    pub lora: Vec<String>,
}

/// `FILE` or `FILE:SCALE` (a colon followed by anything but a number belongs
/// to the file name).
fn lora_arg(arg: &str) -> (&str, f32) {
    match arg.rsplit_once(':') {
        Some((path, scale)) if !path.is_empty() => match scale.parse::<f32>() {
            Ok(s) => (path, s),
            Err(_) => (arg, 1.0),
        },
        _ => (arg, 1.0),
    }
}

impl ModelArgs {
    fn context_params(
        &self,
        n_threads: usize,
        pooling: Option<Pooling>,
    ) -> lamina::Result<ContextParams> {
        Ok(ContextParams {
            n_ctx: self.n_ctx,
            n_batch: self.n_batch,
            n_ubatch: self.n_ubatch,
            n_threads,
            type_k: KvType::from_name(&self.type_k)?,
            type_v: KvType::from_name(&self.type_v)?,
            pooling,
        })
    }

    /// Loads the model (a progress bar on a terminal) and makes a context.
    pub fn open(&self, registry: &CpuRegistry, n_threads: usize) -> lamina::Result<Context> {
        self.open_pooled(registry, n_threads, None)
    }

    /// `open`, with the pooling embeddings take (None: the model's).
    pub fn open_pooled(
        &self,
        registry: &CpuRegistry,
        n_threads: usize,
        pooling: Option<Pooling>,
    ) -> lamina::Result<Context> {
        let file = Arc::new(GgufFile::open(&self.model)?);
        let interactive = std::io::stderr().is_terminal();
        let mut bar = |f: f32| {
            if interactive {
                let width = 30;
                let filled = (f * width as f32) as usize;
                eprint!(
                    "\rloading [{}{}] {:>3.0}%",
                    "#".repeat(filled),
                    " ".repeat(width - filled),
                    f * 100.0
                );
            }
            true
        };
        let model = Model::load(file, registry.cpu().clone(), Some(&mut bar))?;
        if interactive {
            eprint!("\r{:60}\r", "");
        }
        let model = Arc::new(model);
        let mut loras = Vec::new();
        for arg in &self.lora {
            let (path, scale) = lora_arg(arg);
            let file = Arc::new(GgufFile::open(Path::new(path))?);
            let adapter = LoraAdapter::load(file, &model, path)?;
            loras.push(ActiveLora {
                adapter: Arc::new(adapter),
                scale,
            });
        }
        let mut ctx = Context::new(model, self.context_params(n_threads, pooling)?)?;
        if !loras.is_empty() {
            ctx.set_lora_adapters(loras)?;
        }
        Ok(ctx)
    }
}

#[derive(Args)]
pub struct RunArgs {
    #[command(flatten)]
    pub model: ModelArgs,
    #[arg(short, long)]
    pub prompt: String,
    /// Tokens to generate at most (-1: until end of generation).
    #[arg(short = 'n', long, default_value_t = 64, allow_negative_numbers = true)]
    pub n_predict: i32,
    /// Temperature; 0 or less is greedy.
    #[arg(long, default_value_t = 0.8)]
    pub temp: f32,
    #[arg(long, default_value_t = 40)]
    pub top_k: i32,
    #[arg(long, default_value_t = 0.95)]
    pub top_p: f32,
    #[arg(long, default_value_t = 0.05)]
    pub min_p: f32,
    #[arg(long, default_value_t = 1.0)]
    pub repeat_penalty: f32,
    /// Tokens the penalties look back over (-1: the whole context).
    #[arg(long, default_value_t = 64, allow_negative_numbers = true)]
    pub repeat_last_n: i32,
    #[arg(long, default_value_t = 0.0)]
    pub frequency_penalty: f32,
    #[arg(long, default_value_t = 0.0)]
    pub presence_penalty: f32,
    /// Locally typical sampling (1.0: off).
    #[arg(long, default_value_t = 1.0)]
    pub typical: f32,
    /// XTC: the chance per token of removing the likeliest tokens (0: off).
    #[arg(long, default_value_t = 0.0)]
    pub xtc_probability: f32,
    /// XTC: tokens at or above this probability are removed, but the least likely of them (> 0.5: off).
    #[arg(long, default_value_t = 0.1)]
    pub xtc_threshold: f32,
    /// Keep tokens within N standard deviations of the best logit (-1: off).
    #[arg(long = "top-nsigma", visible_alias = "top-n-sigma", default_value_t = -1.0, allow_negative_numbers = true)]
    pub top_n_sigma: f32,
    /// Shift a token's logit, as llama.cpp's: `15043+1`, `15043-0.5`, `15043-inf` (banned).
    #[arg(short = 'l', long = "logit-bias", allow_hyphen_values = true)]
    pub logit_bias: Vec<String>,
    /// DRY: penalty multiplier for tokens that extend a repeat (0: off).
    #[arg(long, default_value_t = 0.0)]
    pub dry_multiplier: f32,
    /// DRY: the penalty is multiplier * base^(repeat length - allowed length).
    #[arg(long, default_value_t = 1.75)]
    pub dry_base: f32,
    /// DRY: repeats up to this many tokens are free.
    #[arg(long, default_value_t = 2)]
    pub dry_allowed_length: i32,
    /// DRY: how many recent tokens to look at (0: off, -1: the context size).
    #[arg(long, default_value_t = 64, allow_negative_numbers = true)]
    pub dry_penalty_last_n: i32,
    /// DRY: a string no repeat reaches across; replaces the defaults (newline, ':', '"', '*'); "none" for none.
    #[arg(long = "dry-sequence-breaker")]
    pub dry_sequence_breakers: Vec<String>,
    /// Mirostat: 0 off, 1 or 2.
    #[arg(long, default_value_t = 0)]
    pub mirostat: u8,
    /// Mirostat learning rate (eta).
    #[arg(long, default_value_t = 0.1)]
    pub mirostat_lr: f32,
    /// Mirostat target entropy (tau).
    #[arg(long, default_value_t = 5.0)]
    pub mirostat_ent: f32,
    /// Random seed (default: a fresh one).
    #[arg(long)]
    pub seed: Option<u32>,
    /// A string that ends generation (repeatable); it is not printed.
    #[arg(long = "stop")]
    pub stop: Vec<String>,
    /// Keep generating past end-of-generation tokens.
    #[arg(long)]
    pub ignore_eos: bool,
    /// Report this many top probabilities per token (in --json).
    #[arg(long, default_value_t = 0)]
    pub n_probs: usize,
    /// Treat the prompt as a user message and format it with the model's chat template.
    #[arg(long)]
    pub chat: bool,
    /// A system message for --chat.
    #[arg(long, requires = "chat")]
    pub system: Option<String>,
    /// A chat template for --chat in place of the model's: Jinja text or a built-in name (chatml, llama3, ...).
    #[arg(long, requires = "chat", conflicts_with = "chat_template_file")]
    pub chat_template: Option<String>,
    /// The same, read from a file.
    #[arg(long, requires = "chat")]
    pub chat_template_file: Option<PathBuf>,
    /// Render --chat with the template's Jinja even where a built-in format matches (llama.cpp's --jinja).
    #[arg(long, requires = "chat")]
    pub jinja: bool,
    /// Tools the model may call in --chat (OpenAI's JSON array of tool definitions, or a file
    /// holding it); calls come back in --json's `tool_calls`. Renders with the Jinja template.
    #[arg(long, requires = "chat")]
    pub tools: Option<String>,
    /// Whether a tool may be called: auto, required or none.
    #[arg(long, requires = "tools", default_value = "auto")]
    pub tool_choice: String,
    /// Where reasoning goes: auto or deepseek (--json's `reasoning_content`), none (left in the text).
    #[arg(long, default_value = "auto")]
    pub reasoning_format: String,
    /// Extra template variables for --chat, a JSON object (e.g. '{"enable_thinking": false}').
    #[arg(long, requires = "chat")]
    pub chat_template_kwargs: Option<String>,
    /// Print one JSON object at the end instead of streaming.
    #[arg(long)]
    pub json: bool,
    /// A GBNF grammar (llama.cpp's language, start rule `root`) the output must match.
    #[arg(long, conflicts_with = "grammar_file")]
    pub grammar: Option<String>,
    /// The same, read from a file.
    #[arg(long)]
    pub grammar_file: Option<PathBuf>,
    /// A JSON schema the output must follow (made a grammar as llama.cpp's -j makes it).
    #[arg(short = 'j', long, conflicts_with_all = ["grammar", "grammar_file", "json_schema_file"])]
    pub json_schema: Option<String>,
    /// The same, read from a file.
    #[arg(long, conflicts_with_all = ["grammar", "grammar_file"])]
    pub json_schema_file: Option<PathBuf>,
    /// A session file: loaded first when it exists (the prompt reuses its
    /// tokens), then written with the prompt's tokens (llama.cpp's flag).
    #[arg(long)]
    pub prompt_cache: Option<PathBuf>,
    /// Save the generated tokens in the session too.
    #[arg(long, requires = "prompt_cache")]
    pub prompt_cache_all: bool,
    /// Load the session but never write it.
    #[arg(long, requires = "prompt_cache", conflicts_with = "prompt_cache_all")]
    pub prompt_cache_ro: bool,
    /// Generate N completions of the prompt at once, one decode per step
    /// for all (each with seed + i when --seed is given); the texts are
    /// printed when all have ended.
    #[arg(
        long = "parallel",
        visible_alias = "np",
        default_value_t = 1,
        conflicts_with = "prompt_cache"
    )]
    pub n_parallel: usize,
}

fn read_arg_file(what: &str, path: &std::path::Path) -> lamina::Result<String> {
    std::fs::read_to_string(path).map_err(|e| {
        lamina::Error::InvalidArgument(format!(
            "cannot read the {what} file {}: {e}",
            path.display()
        ))
    })
}

/// `TOKEN+BIAS` or `TOKEN-BIAS` (llama.cpp's `--logit-bias`).
fn logit_bias(entries: &[String]) -> lamina::Result<Vec<(u32, f32)>> {
    entries
        .iter()
        .map(|e| {
            let bad = || {
                lamina::Error::InvalidArgument(format!(
                    "--logit-bias {e}: expected TOKEN+BIAS or TOKEN-BIAS (e.g. 15043+1, 15043-inf)"
                ))
            };
            let sign = e.find(['+', '-']).ok_or_else(bad)?;
            let token: u32 = e[..sign].trim().parse().map_err(|_| bad())?;
            let magnitude: f32 = e[sign + 1..].trim().parse().map_err(|_| bad())?;
            Ok((
                token,
                if e.as_bytes()[sign] == b'-' {
                    -magnitude
                } else {
                    magnitude
                },
            ))
        })
        .collect()
}

/// The grammar the output must match: given, read, or made from a schema.
fn output_grammar(a: &RunArgs) -> lamina::Result<Option<String>> {
    let schema = match (&a.json_schema, &a.json_schema_file) {
        (Some(s), _) => s.clone(),
        (None, Some(path)) => read_arg_file("JSON schema", path)?,
        (None, None) => {
            return match &a.grammar_file {
                Some(path) => read_arg_file("grammar", path).map(Some),
                None => Ok(a.grammar.clone()),
            }
        }
    };
    let converted = lamina::sampling::json_schema::json_schema_text_to_grammar(&schema)?;
    for w in &converted.warnings {
        eprintln!("warning: {w}");
    }
    Ok(Some(converted.grammar))
}

pub fn run(registry: &CpuRegistry, threads: usize, a: RunArgs) -> lamina::Result<()> {
    // Nonsense sampler values are refused before the model is loaded.
    let sampling = lamina::sampling::SamplingParams {
        temperature: a.temp,
        top_k: a.top_k,
        top_p: a.top_p,
        min_p: a.min_p,
        penalty_repeat: a.repeat_penalty,
        penalty_last_n: a.repeat_last_n,
        penalty_freq: a.frequency_penalty,
        penalty_present: a.presence_penalty,
        typical_p: a.typical,
        xtc_probability: a.xtc_probability,
        xtc_threshold: a.xtc_threshold,
        top_n_sigma: a.top_n_sigma,
        logit_bias: logit_bias(&a.logit_bias)?,
        dry_multiplier: a.dry_multiplier,
        dry_base: a.dry_base,
        dry_allowed_length: a.dry_allowed_length,
        dry_penalty_last_n: a.dry_penalty_last_n,
        dry_sequence_breakers: match a.dry_sequence_breakers.as_slice() {
            [] => lamina::sampling::SamplingParams::default().dry_sequence_breakers,
            [none] if none == "none" => Vec::new(),
            given => given.to_vec(),
        },
        mirostat: a.mirostat,
        mirostat_eta: a.mirostat_lr,
        mirostat_tau: a.mirostat_ent,
        seed: a.seed,
        grammar: output_grammar(&a)?,
        ..Default::default()
    };
    sampling.validate()?;
    let mut ctx = a.model.open(registry, threads)?;
    if let Some(path) = a.prompt_cache.as_deref().filter(|p| p.exists()) {
        let loaded = lamina::session::load_file(&mut ctx, path)?;
        eprintln!(
            "lamina: loaded {} tokens from the session {}",
            loaded.tokens_loaded,
            path.display()
        );
    }
    let messages = a.chat.then(|| {
        let mut m = Vec::new();
        if let Some(s) = &a.system {
            m.push(ChatMessage::new("system", s.as_str()));
        }
        m.push(ChatMessage::new("user", a.prompt.as_str()));
        m
    });
    let chat_template = match &a.chat_template_file {
        Some(path) => Some(read_arg_file("chat template", path)?),
        None => a.chat_template.clone(),
    };
    let params = CompletionParams {
        prompt: a.prompt.clone(),
        messages,
        chat_template,
        jinja: a.jinja,
        chat: chat_options(&a)?,
        n_predict: a.n_predict,
        sampling,
        stop: a.stop.clone(),
        ignore_eos: a.ignore_eos,
        n_probs: a.n_probs,
        ..Default::default()
    };
    if a.n_parallel > 1 {
        return run_parallel(&mut ctx, &params, a.n_parallel, a.json);
    }
    let mut stdout = std::io::stdout().lock();
    let json_out = a.json;
    let result = ctx.completion(&params, |ev: &TokenEvent| {
        if !json_out && !ev.text.is_empty() {
            let _ = stdout.write_all(ev.text.as_bytes());
            let _ = stdout.flush();
        }
    })?;
    if let Some(path) = a.prompt_cache.as_deref().filter(|_| !a.prompt_cache_ro) {
        // As llama-cli: the prompt's tokens, or with --prompt-cache-all
        // everything the context now holds.
        let keep = (!a.prompt_cache_all).then_some(result.prompt_ids.len());
        lamina::session::save_file(&ctx, path, keep)?;
    }
    if json_out {
        drop(stdout);
        let mut v = serde_json::to_value(&result).map_err(|e| {
            lamina::Error::InvalidArgument(format!("cannot encode the result: {e}"))
        })?;
        v["cpu_variant"] = json!(ctx.cpu_variant());
        v["n_threads"] = json!(ctx.n_threads());
        return write_stdout(&format!("{v}\n"));
    }
    let _ = writeln!(stdout);
    let t = &result.timings;
    eprintln!(
        "lamina: {} prompt tokens at {:.1} t/s, {} generated at {:.1} t/s ({}, variant {}, {} threads)",
        t.prompt_n,
        t.prompt_per_second,
        t.predicted_n,
        t.predicted_per_second,
        result.stop_reason,
        ctx.cpu_variant(),
        ctx.n_threads()
    );
    Ok(())
}

/// `n` completions of `params` at once (`--parallel`): the texts, or with
/// `json` one object with every result; the total tokens/s on stderr.
fn run_parallel(
    ctx: &mut Context,
    params: &CompletionParams,
    n: usize,
    json: bool,
) -> lamina::Result<()> {
    let requests: Vec<CompletionParams> = (0..n)
        .map(|i| {
            let mut p = params.clone();
            p.sampling.seed = p.sampling.seed.map(|s| s.wrapping_add(i as u32));
            p
        })
        .collect();
    let clock = std::time::Instant::now();
    let results = ctx.completions(&requests, n, |_, _| {})?;
    let seconds = clock.elapsed().as_secs_f64();
    let generated: usize = results.iter().map(|r| r.tokens_predicted).sum();
    let per_second = generated as f64 / seconds.max(1e-9);
    if json {
        let v = json!({
            "n_parallel": n,
            "tokens_predicted": generated,
            "seconds": seconds,
            "tokens_per_second": per_second,
            "cpu_variant": ctx.cpu_variant(),
            "n_threads": ctx.n_threads(),
            "results": results,
        });
        return write_stdout(&format!("{v}\n"));
    }
    let mut text = String::new();
    for (i, r) in results.iter().enumerate() {
        text += &format!("--- {} ({}) ---\n{}\n", i + 1, r.stop_reason, r.text);
    }
    write_stdout(&text)?;
    eprintln!(
        "lamina: {n} parallel streams, {generated} tokens in {seconds:.2} s: {per_second:.1} t/s in all (variant {}, {} threads)",
        ctx.cpu_variant(),
        ctx.n_threads()
    );
    Ok(())
}

#[derive(Args)]
pub struct BenchArgs {
    #[command(flatten)]
    pub model: ModelArgs,
    /// Prompt tokens for the pp test (0: skip it).
    #[arg(short = 'p', long = "n-prompt", default_value_t = 128)]
    pub n_prompt: usize,
    /// Generated tokens for the tg test (0: skip it).
    #[arg(short = 'n', long = "n-gen", default_value_t = 64)]
    pub n_gen: usize,
    /// Repetitions of each test.
    #[arg(short = 'r', long = "repetitions", default_value_t = 5)]
    pub reps: usize,
    /// Tokens in the cache before each test (llama-bench's -d).
    #[arg(short = 'd', long = "n-depth", default_value_t = 0)]
    pub depth: usize,
    /// Sequences generating at once in the tg test (llama.rn's bench pl);
    /// its t/s count all of them.
    #[arg(long = "parallel", visible_alias = "pl", default_value_t = 1)]
    pub n_parallel: usize,
    #[arg(long)]
    pub json: bool,
}

pub fn bench(registry: &CpuRegistry, threads: usize, a: BenchArgs) -> lamina::Result<()> {
    let mut ctx = a.model.open(registry, threads)?;
    let name = file_name(&a.model.model);
    let results = lamina::bench::bench_parallel(
        &mut ctx,
        &name,
        a.n_prompt,
        a.n_gen,
        a.reps,
        a.depth,
        a.n_parallel,
    )?;
    if a.json {
        let v = serde_json::to_string_pretty(&results).map_err(|e| {
            lamina::Error::InvalidArgument(format!("cannot encode the results: {e}"))
        })?;
        return write_stdout(&format!("{v}\n"));
    }
    let mut text = format!(
        "| {:<28} | {:<12} | {:>7} | {:>12} | {:>20} |\n|{:-<30}|{:-<14}|{:-<9}|{:-<14}|{:-<22}|\n",
        "model", "variant", "threads", "test", "t/s", "", "", "", "", ""
    );
    for r in &results {
        let mut test = if r.n_prompt > 0 {
            format!("pp{}", r.n_prompt)
        } else {
            format!("tg{}", r.n_gen)
        };
        if r.n_parallel > 1 {
            test += &format!(" x{}", r.n_parallel);
        }
        if r.n_depth > 0 {
            test += &format!(" @ d{}", r.n_depth);
        }
        text += &format!(
            "| {:<28} | {:<12} | {:>7} | {:>12} | {:>20} |\n",
            r.model_type,
            r.cpu_variant,
            r.n_threads,
            test,
            format!("{:.2} ± {:.2}", r.avg_ts, r.stddev_ts)
        );
    }
    write_stdout(&text)
}

#[derive(Args)]
pub struct PerplexityArgs {
    #[command(flatten)]
    pub model: ModelArgs,
    /// The text file (one trailing newline is dropped, as llama-perplexity does).
    #[arg(short, long)]
    pub file: PathBuf,
    #[arg(long)]
    pub json: bool,
}

pub fn perplexity(registry: &CpuRegistry, threads: usize, a: PerplexityArgs) -> lamina::Result<()> {
    let bytes = std::fs::read(&a.file)
        .map_err(|e| lamina::Error::io(format!("cannot read {}", a.file.display()), e))?;
    let mut text = String::from_utf8(bytes).map_err(|_| lamina::Error::InvalidUtf8 {
        what: a.file.display().to_string(),
    })?;
    if text.ends_with('\n') {
        text.pop();
    }
    // As llama-perplexity: -c is the chunk size; a batch of -b tokens runs
    // b / c chunks at once, each in its own sequence.
    let n_chunk = a.model.n_ctx;
    if n_chunk == 0 {
        return Err(lamina::Error::InvalidArgument(
            "perplexity needs a chunk size: -c N".into(),
        ));
    }
    let n_seq = (a.model.n_batch / n_chunk).clamp(1, lamina::kv::MAX_SEQUENCES);
    let mut args = a.model.clone();
    args.n_ctx = n_chunk * n_seq;
    args.n_batch = args.n_ctx.max(a.model.n_batch.min(n_chunk));
    let mut ctx = args.open(registry, threads)?;
    let quiet = a.json;
    let result = lamina::perplexity::perplexity(&mut ctx, &text, n_chunk, |i, n, ppl| {
        if !quiet {
            eprint!("[{i}/{n}] {ppl:.4}  ");
        }
        true
    })?;
    if a.json {
        let v = serde_json::to_value(&result).map_err(|e| {
            lamina::Error::InvalidArgument(format!("cannot encode the result: {e}"))
        })?;
        return write_stdout(&format!("{v}\n"));
    }
    eprintln!();
    write_stdout(&format!(
        "Final estimate: PPL = {:.4} +/- {:.5}\n",
        result.ppl, result.ppl_error
    ))
}

fn file_name(p: &Path) -> String {
    p.file_name().map_or_else(
        || p.display().to_string(),
        |n| n.to_string_lossy().into_owned(),
    )
}

/// --tools, --tool-choice, --reasoning-format and --chat-template-kwargs.
fn chat_options(a: &RunArgs) -> lamina::Result<ChatOptions> {
    let bad = |msg: String| lamina::Error::InvalidArgument(msg);
    let tools = match &a.tools {
        None => Vec::new(),
        Some(arg) => {
            let text = if arg.trim_start().starts_with('[') {
                arg.clone()
            } else {
                read_arg_file("tools", Path::new(arg))?
            };
            let value: serde_json::Value = serde_json::from_str(&text)
                .map_err(|e| bad(format!("--tools is not JSON: {e}")))?;
            match value {
                serde_json::Value::Array(tools) => tools,
                _ => {
                    return Err(bad(
                        "--tools must be a JSON array of tool definitions".into()
                    ))
                }
            }
        }
    };
    let mut options = ChatOptions {
        tools,
        tool_choice: ToolChoice::from_name(&a.tool_choice)?,
        reasoning_format: ReasoningFormat::from_name(&a.reasoning_format)?,
        ..ChatOptions::default()
    };
    if let Some(kwargs) = &a.chat_template_kwargs {
        match serde_json::from_str(kwargs)
            .map_err(|e| bad(format!("--chat-template-kwargs is not JSON: {e}")))?
        {
            serde_json::Value::Object(map) => {
                if let Some(serde_json::Value::Bool(b)) = map.get("enable_thinking") {
                    options.enable_thinking = *b;
                }
                options.chat_template_kwargs = map;
            }
            _ => return Err(bad("--chat-template-kwargs must be a JSON object".into())),
        }
    }
    Ok(options)
}

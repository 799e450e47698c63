//! The `lamina` command line, over the library's public API.

#[cfg(not(target_family = "wasm"))]
mod embed;
#[cfg(not(target_family = "wasm"))]
mod generate;
#[cfg(not(target_family = "wasm"))]
mod split;

#[cfg(not(target_family = "wasm"))]
mod cli {
    use super::{embed, generate, split};
    use std::io::{IsTerminal, Write};
    use std::path::PathBuf;
    use std::process::ExitCode;

    use clap::{Parser, Subcommand};
    use lamina::backend::cpu::{CpuRegistry, CpuVariant};
    use lamina::backend::{Device, Registry};
    use lamina::gguf::{describe, GgufFile};
    use lamina::kernel_bench::Budget;
    use serde_json::json;

    #[derive(Parser)]
    #[command(name = "lamina", version, about = "GGUF language models on the CPU")]
    struct Cli {
        #[command(subcommand)]
        command: Command,
        /// Force a CPU kernel variant (scalar, avx2, avx-vnni, avx512, neon, neon-dotprod,
        /// neon-i8mm, sve, simd128, relaxed-simd); default: LAMINA_CPU_VARIANT, else the best
        /// this CPU supports.
        #[arg(long, global = true, value_name = "NAME")]
        cpu_variant: Option<String>,
        /// Threads for the commands that compute (run, bench, perplexity,
        /// quantize); default: the machine's cores, at most 4.
        #[arg(short = 't', long, global = true)]
        threads: Option<usize>,
        /// Print the engine's log on stderr (the model, the context, the kernel variant).
        #[arg(short = 'v', long, global = true)]
        verbose: bool,
    }

    #[derive(Subcommand)]
    enum Command {
        /// List the compute devices and CPU kernel variants, and which is selected.
        Devices {
            /// Print one JSON object.
            #[arg(long)]
            json: bool,
        },
        /// Print a GGUF file's version, metadata and tensor table.
        Info {
            /// The GGUF file.
            model: PathBuf,
            /// Print one JSON object instead of tables.
            #[arg(long)]
            json: bool,
        },
        /// Measure every kernel of every supported CPU variant (GB/s of weights).
        BenchKernels {
            /// Weight matrix rows.
            #[arg(long, default_value_t = 1536)]
            rows: usize,
            /// Weight matrix columns (a multiple of 256).
            #[arg(long, default_value_t = 2048)]
            cols: usize,
            /// Minimum time per measurement, in milliseconds.
            #[arg(long, default_value_t = 300)]
            ms: u64,
            /// Instead of timing, run each kernel exactly this many passes (for
            /// counting instructions under qemu).
            #[arg(long)]
            passes: Option<u32>,
            /// Only kernels whose name contains this ("q4_0", "gemv").
            #[arg(long)]
            kernel: Option<String>,
            #[arg(long)]
            json: bool,
        },
        /// Generate text from a prompt, streaming it to stdout.
        Run(generate::RunArgs),
        /// Prompt-processing and generation speed, as llama-bench (pp/tg tokens/s).
        Bench(generate::BenchArgs),
        /// Perplexity of a text file, as llama-perplexity (chunks of -c tokens).
        Perplexity(generate::PerplexityArgs),
        /// Embeddings of texts, as llama-embedding (pooled per text, or per token).
        Embed(embed::EmbedArgs),
        /// Score documents against a query with a reranker (rank pooling).
        Rerank(embed::RerankArgs),
        /// Tokenize text with a model's vocabulary (vocab-only GGUF files work).
        Tokenize {
            /// The GGUF file.
            #[arg(short, long)]
            model: PathBuf,
            /// The text.
            #[arg(short, long, conflicts_with = "file", required_unless_present = "file")]
            prompt: Option<String>,
            /// Read the text from a file, byte for byte.
            #[arg(short, long)]
            file: Option<PathBuf>,
            /// Add no special tokens (BOS/EOS) at all.
            #[arg(long)]
            no_bos: bool,
            /// Treat special-token text (e.g. <|im_start|>) as ordinary text.
            #[arg(long)]
            no_parse_special: bool,
            #[arg(long)]
            json: bool,
        },
        /// Requantize a model, as `llama-quantize --allow-requantize IN OUT TYPE`.
        Quantize {
            /// The source GGUF file.
            input: PathBuf,
            /// Where to write the result.
            output: PathBuf,
            /// Target type: F32, F16, BF16, Q4_0, Q4_1, Q5_0, Q5_1, Q8_0, Q6_K, or a k-quant mixture: Q2_K, Q3_K_S, Q3_K_M, Q3_K_L, Q4_K_S, Q4_K_M, Q5_K_S, Q5_K_M; or IQ4_NL, IQ4_XS (llama-quantize's mixtures without an importance matrix).
            #[arg(value_name = "TYPE")]
            target: String,
        },
        /// Split a model into several files, as `llama-gguf-split --split`.
        Split(split::SplitArgs),
        /// Merge a split model into one file, as `llama-gguf-split --merge`.
        Merge(split::MergeArgs),
    }

    pub fn main() -> ExitCode {
        let cli = Cli::parse();
        if cli.verbose {
            lamina::log::set_log_sink(Some(std::sync::Arc::new(|level, text: &str| {
                eprintln!("lamina [{}]: {text}", level.name());
            })));
        }
        let threads = cli.threads.unwrap_or_else(lamina::context::default_threads);
        let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
        if threads > cores {
            // Allowed (up to the pool's own limit), but rarely what was meant.
            eprintln!(
                "lamina: warning: {threads} threads on {cores} cores: threads beyond the cores wait for each other"
            );
        }
        let result =
            CpuRegistry::new(cli.cpu_variant.as_deref()).and_then(|registry| match cli.command {
                Command::Devices { json } => devices(&registry, json),
                Command::BenchKernels {
                    rows,
                    cols,
                    ms,
                    passes,
                    kernel,
                    json,
                } => {
                    let budget = match passes {
                        Some(n) => Budget::Passes(n),
                        None => Budget::Time(std::time::Duration::from_millis(ms)),
                    };
                    bench_kernels(&registry, rows, cols, budget, kernel.as_deref(), json)
                }
                Command::Info { model, json } => info(&model, json),
                Command::Run(a) => generate::run(&registry, threads, a),
                Command::Bench(a) => generate::bench(&registry, threads, a),
                Command::Perplexity(a) => generate::perplexity(&registry, threads, a),
                Command::Embed(a) => embed::embed(&registry, threads, a),
                Command::Rerank(a) => embed::rerank(&registry, threads, a),
                Command::Tokenize {
                    model,
                    prompt,
                    file,
                    no_bos,
                    no_parse_special,
                    json,
                } => tokenize(&model, prompt, file, !no_bos, !no_parse_special, json),
                Command::Quantize {
                    input,
                    output,
                    target,
                } => quantize(&input, &output, &target, threads),
                Command::Split(a) => split::split(a),
                Command::Merge(a) => split::merge(a),
            });
        match result {
            Ok(()) => ExitCode::SUCCESS,
            Err(e) => {
                eprintln!("lamina: {e}");
                ExitCode::FAILURE
            }
        }
    }

    fn info(model: &PathBuf, json: bool) -> lamina::Result<()> {
        let file = std::sync::Arc::new(GgufFile::open(model)?);
        // Whether lamina runs the file, and its architecture as read.
        let device = CpuRegistry::new(None)?.cpu().shared();
        let arch = lamina::model::Model::load(file.clone(), device, None).map(|m| {
            let hp = m.arch().hyperparameters();
            (m.arch_name(), hp)
        });
        let text = if json {
            let mut j = describe::to_json(&file);
            j["model"] = match &arch {
                Ok((name, hp)) => json!({
                    "architecture": name,
                    "hyperparameters": hp.iter().map(|(k, v)| json!([k, v])).collect::<Vec<_>>(),
                }),
                Err(e) => json!({"error": e.to_string()}),
            };
            format!("{j}\n")
        } else {
            let mut t = describe::to_text(&file);
            match &arch {
                Ok((name, hp)) => {
                    t += &format!("\nmodel: {name}, as lamina runs it\n");
                    for (k, v) in hp {
                        t += &format!("  {k:<18} {v}\n");
                    }
                }
                Err(e) => t += &format!("\nmodel: lamina cannot run it: {e}\n"),
            }
            t
        };
        write_stdout(&text)
    }

    fn devices(registry: &CpuRegistry, json: bool) -> lamina::Result<()> {
        let cpu = registry.cpu();
        let features = cpu.features();
        let variants: Vec<_> = CpuVariant::ALL
            .into_iter()
            .map(|v| {
                json!({
                    "name": v.name(),
                    "requires": v.requires().iter().map(|f| f.name()).collect::<Vec<_>>(),
                    "compiled": v.compiled(),
                    "supported": v.supported(features),
                    "score": v.score(),
                    "selected": v == cpu.variant(),
                })
            })
            .collect();
        let report = json!({"devices": [{
            "name": cpu.name(),
            "kind": cpu.kind().name(),
            "description": cpu.description(),
            "features": features.describe(),
            "forced": cpu.forced(),
            "variants": variants,
        }]});
        if json {
            return write_stdout(&format!("{report}\n"));
        }
        let mut text = String::new();
        for device in registry.devices() {
            text += &format!(
                "{} ({}): {}\n",
                device.name(),
                device.kind().name(),
                device.description()
            );
        }
        text += &format!(
            "  {:<14} {:<22} {:>9} {:>5}\n",
            "variant", "requires", "supported", "score"
        );
        for v in CpuVariant::ALL {
            let requires: Vec<&str> = v.requires().iter().map(|f| f.name()).collect();
            let mark = if v == cpu.variant() {
                if cpu.forced() {
                    "  <- selected (forced)"
                } else {
                    "  <- selected"
                }
            } else {
                ""
            };
            text += &format!(
                "  {:<14} {:<22} {:>9} {:>5}{mark}\n",
                v.name(),
                if requires.is_empty() {
                    "-".to_string()
                } else {
                    requires.join("+")
                },
                if v.supported(features) {
                    "yes"
                } else if v.compiled() {
                    "no"
                } else {
                    "not built"
                },
                v.score()
            );
        }
        write_stdout(&text)
    }

    fn bench_kernels(
        registry: &CpuRegistry,
        rows: usize,
        cols: usize,
        budget: Budget,
        kernel: Option<&str>,
        json: bool,
    ) -> lamina::Result<()> {
        if cols == 0 || !cols.is_multiple_of(256) || rows == 0 {
            return Err(lamina::Error::InvalidArgument(format!(
                "--cols must be a positive multiple of 256 and --rows positive (got {rows} x {cols})"
            )));
        }
        // A forced variant is measured alone; otherwise every supported one.
        let cpu = registry.cpu();
        let variants = if cpu.forced() {
            vec![cpu.variant()]
        } else {
            CpuVariant::compiled_variants()
        };
        let results =
            lamina::kernel_bench::run(cpu.features(), &variants, kernel, rows, cols, budget);
        if json {
            let v = json!({"rows": rows, "cols": cols, "results": results});
            return write_stdout(&format!("{v}\n"));
        }
        let mut text = format!("kernels on a {rows} x {cols} weight matrix (GB/s of weights; x = speed-up over scalar)\n");
        text += &format!(
            "  {:<14} {:<14} {:>9} {:>9} {:>8}\n",
            "kernel", "variant", "GB/s", "Gop/s", "x"
        );
        for r in &results {
            // Repacked kernels compare with the plain scalar q4_0 dot product.
            let base = if r.kernel.contains("q4_0 ") {
                "q4_0·q8_0"
            } else {
                r.kernel
            };
            let scalar = results
                .iter()
                .find(|s| s.kernel == base && s.variant == "scalar")
                .map_or(f64::NAN, |s| s.gb_per_s);
            let ratio = if scalar.is_nan() {
                "-".to_string()
            } else {
                format!("{:.2}", r.gb_per_s / scalar)
            };
            text += &format!(
                "  {:<14} {:<14} {:>9.2} {:>9.2} {:>8}\n",
                r.kernel, r.variant, r.gb_per_s, r.gops, ratio
            );
        }
        write_stdout(&text)
    }

    fn tokenize(
        model: &PathBuf,
        prompt: Option<String>,
        file: Option<PathBuf>,
        add_special: bool,
        parse_special: bool,
        json: bool,
    ) -> lamina::Result<()> {
        let text = match (prompt, file) {
            (Some(p), _) => p,
            (None, Some(f)) => {
                let bytes = std::fs::read(&f)
                    .map_err(|e| lamina::Error::io(format!("cannot read {}", f.display()), e))?;
                String::from_utf8(bytes).map_err(|_| lamina::Error::InvalidUtf8 {
                    what: format!("{}", f.display()),
                })?
            }
            (None, None) => {
                return Err(lamina::Error::InvalidArgument(
                    "give -p TEXT or -f FILE".into(),
                ))
            }
        };
        let gguf = GgufFile::open(model)?;
        let vocab = lamina::tokenizer::Vocab::from_metadata(gguf.metadata())?;
        let ids = vocab.tokenize(&text, add_special, parse_special)?;
        let pieces: Vec<String> = ids
            .iter()
            .map(|&id| String::from_utf8_lossy(&vocab.token_bytes(id, true)).into_owned())
            .collect();
        if json {
            return write_stdout(&format!("{}\n", json!({"ids": ids, "pieces": pieces})));
        }
        let mut out = String::new();
        for (id, piece) in ids.iter().zip(&pieces) {
            out += &format!("{id:>6} -> {piece:?}\n");
        }
        write_stdout(&out)
    }

    fn quantize(
        input: &std::path::Path,
        output: &std::path::Path,
        target: &str,
        threads: usize,
    ) -> lamina::Result<()> {
        use lamina::requantize::{requantize_to, Target};
        let target = Target::from_name(target)?;
        // Refused before the input is even read when the output is the
        // input; for a split model, before any tensor is read when it is
        // one of the other parts.
        let out = lamina::output_file::OutputFile::create(output, &[input])?;
        let file = GgufFile::open(input)?;
        lamina::output_file::refuse_inputs(output, &file.paths())?;
        let interactive = std::io::stderr().is_terminal();
        let workers = lamina::parallel::Workers::new(threads)?;
        let out = requantize_to(
            &file,
            target,
            &workers,
            std::io::BufWriter::new(out),
            |done, total| {
                if interactive {
                    eprint!(
                        "\rlamina: quantizing to {}: {done}/{total} tensors",
                        target.name
                    );
                }
            },
        )?;
        if interactive {
            eprintln!();
        }
        let out = out
            .into_inner()
            .map_err(|e| lamina::Error::io("cannot write the output", e.into_error()))?;
        out.commit()
    }

    /// Writes to stdout; a reader that went away (`| head`) is not an error.
    pub fn write_stdout(text: &str) -> lamina::Result<()> {
        match std::io::stdout().lock().write_all(text.as_bytes()) {
            Err(e) if e.kind() != std::io::ErrorKind::BrokenPipe => Err(lamina::Error::Io {
                context: "cannot write to stdout".into(),
                source: e,
            }),
            _ => Ok(()),
        }
    }
}

#[cfg(not(target_family = "wasm"))]
fn main() -> std::process::ExitCode {
    cli::main()
}

// The CLI is native only; wasm32 builds of the package still compile this target.
#[cfg(target_family = "wasm")]
fn main() {}

//! The `lamina` command line, over the library's public API.

#[cfg(not(target_arch = "wasm32"))]
mod cli {
    use std::io::{IsTerminal, Write};
    use std::path::PathBuf;
    use std::process::ExitCode;

    use clap::{Parser, Subcommand};
    use lamina::gguf::{describe, GgufFile};

    #[derive(Parser)]
    #[command(name = "lamina", version, about = "GGUF language models on the CPU")]
    struct Cli {
        #[command(subcommand)]
        command: Command,
    }

    #[derive(Subcommand)]
    enum Command {
        /// Print a GGUF file's version, metadata and tensor table.
        Info {
            /// The GGUF file.
            model: PathBuf,
            /// Print one JSON object instead of tables.
            #[arg(long)]
            json: bool,
        },
        /// Requantize a model, as `llama-quantize --allow-requantize IN OUT TYPE`.
        Quantize {
            /// The source GGUF file.
            input: PathBuf,
            /// Where to write the result.
            output: PathBuf,
            /// Target type: F32, F16, BF16, Q4_0, Q4_1, Q5_0, Q5_1, Q8_0 or Q6_K.
            #[arg(value_name = "TYPE")]
            target: String,
        },
    }

    pub fn main() -> ExitCode {
        let cli = Cli::parse();
        let result = match cli.command {
            Command::Info { model, json } => info(&model, json),
            Command::Quantize {
                input,
                output,
                target,
            } => quantize(&input, &output, &target),
        };
        match result {
            Ok(()) => ExitCode::SUCCESS,
            Err(e) => {
                eprintln!("lamina: {e}");
                ExitCode::FAILURE
            }
        }
    }

    fn info(model: &PathBuf, json: bool) -> lamina::Result<()> {
        let file = GgufFile::open(model)?;
        let text = if json {
            format!("{}\n", describe::to_json(&file))
        } else {
            describe::to_text(&file)
        };
        write_stdout(&text)
    }

    fn quantize(input: &PathBuf, output: &PathBuf, target: &str) -> lamina::Result<()> {
        use lamina::requantize::{requantize, Target};
        let target = Target::from_name(target)?;
        let file = GgufFile::open(input)?;
        let interactive = std::io::stderr().is_terminal();
        let writer = requantize(&file, target, |done, total| {
            if interactive {
                eprint!(
                    "\rlamina: quantizing to {}: {done}/{total} tensors",
                    target.name
                );
            }
        })?;
        if interactive {
            eprintln!();
        }
        let out = std::fs::File::create(output)
            .map_err(|e| lamina::Error::io(format!("cannot create {}", output.display()), e))?;
        writer.write_to(std::io::BufWriter::new(out))
    }

    /// Writes to stdout; a reader that went away (`| head`) is not an error.
    fn write_stdout(text: &str) -> lamina::Result<()> {
        match std::io::stdout().lock().write_all(text.as_bytes()) {
            Err(e) if e.kind() != std::io::ErrorKind::BrokenPipe => Err(lamina::Error::Io {
                context: "cannot write to stdout".into(),
                source: e,
            }),
            _ => Ok(()),
        }
    }
}

#[cfg(not(target_arch = "wasm32"))]
fn main() -> std::process::ExitCode {
    cli::main()
}

// The CLI is native only; wasm32 builds of the package still compile this target.
#[cfg(target_arch = "wasm32")]
fn main() {}

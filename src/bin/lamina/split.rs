//! `lamina split` and `lamina merge`: a model in several files and back, as
//! `llama-gguf-split --split` and `--merge` write them.

use std::path::{Path, PathBuf};

use clap::Args;
use lamina::gguf::split_write::{plan_split, write_merged, write_split, SplitLimit, SplitOptions};
use lamina::gguf::GgufFile;

#[derive(Args)]
pub struct SplitArgs {
    /// The model (a split model by its first part).
    input: PathBuf,
    /// The parts' prefix: they are written as PREFIX-00001-of-0000N.gguf, ...
    prefix: String,
    /// At most this many tensors per part (the default, 128).
    #[arg(long, conflicts_with = "split_max_size")]
    split_max_tensors: Option<usize>,
    /// At most this much tensor data per part: a whole number and M or G
    /// (10^6 or 10^9 bytes), e.g. 500M.
    #[arg(long)]
    split_max_size: Option<String>,
    /// The first part holds only the metadata.
    #[arg(long)]
    no_tensor_first_split: bool,
    /// Print the plan; write nothing.
    #[arg(long)]
    dry_run: bool,
}

#[derive(Args)]
pub struct MergeArgs {
    /// The first part (PREFIX-00001-of-0000N.gguf); the others are found beside it.
    input: PathBuf,
    /// The merged file.
    output: PathBuf,
}

pub fn split(a: SplitArgs) -> lamina::Result<()> {
    let limit = match (&a.split_max_size, a.split_max_tensors) {
        (Some(size), _) => SplitLimit::parse_size(size)?,
        (None, n) => SplitLimit::Tensors(n.unwrap_or(128)),
    };
    let options = SplitOptions {
        limit,
        no_tensor_first_split: a.no_tensor_first_split,
    };
    let file = GgufFile::open(&a.input)?;
    if a.dry_run {
        let plan = plan_split(&file, options)?;
        println!("{} parts:", plan.len());
        for (i, part) in plan.iter().enumerate() {
            let bytes: u64 = part.iter().map(|&t| file.tensors()[t].n_bytes).sum();
            println!(
                "  part {:05}: {} tensors, {} bytes of tensor data",
                i + 1,
                part.len(),
                bytes
            );
        }
        return Ok(());
    }
    for part in write_split(&file, &a.prefix, options)? {
        eprintln!(
            "lamina: wrote {} ({} tensors, {} bytes)",
            part.path.display(),
            part.tensors,
            part.bytes
        );
    }
    Ok(())
}

pub fn merge(a: MergeArgs) -> lamina::Result<()> {
    let file = GgufFile::open(&a.input)?;
    if file.part_count() == 1 {
        return Err(lamina::Error::Split(format!(
            "{} is not the first part of a split model (named PREFIX-00001-of-0000N.gguf, with split.count > 1)",
            a.input.display()
        )));
    }
    let written = write_merged(&file, Path::new(&a.output))?;
    eprintln!(
        "lamina: merged {} parts into {} ({} tensors, {} bytes)",
        file.part_count(),
        written.path.display(),
        written.tensors,
        written.bytes
    );
    Ok(())
}

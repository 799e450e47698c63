//! Writing split models and merging them, byte for byte as llama.cpp's
//! `llama-gguf-split --split` and `--merge` do (for files with the default
//! alignment of 32, which is every file the reference writes):
//!
//! - split: the first part carries every metadata key of the model, then
//!   `split.no`, `split.tensors.count`, `split.count` (any of these the
//!   model had move to the end, as the reference re-sets them); the other
//!   parts carry only those three keys. Tensors keep the model's order. A
//!   new part starts every N tensors, or before the tensor that would take
//!   the part's data (each tensor padded to 32 bytes) over the size limit.
//! - merge: the first part's metadata with `split.count` 0 (so the result
//!   is not taken for a part), then every part's tensors in order.
//!
//! Each file goes through `OutputFile`: written beside its target and
//! renamed in place when complete, never over a file being read.

use std::path::{Path, PathBuf};

use super::split::{part_path, KEY_COUNT, KEY_NO, KEY_TENSORS};
use super::{GgufFile, GgufLayout, TensorInfo, Value};
use crate::error::{Error, Result};
use crate::output_file::OutputFile;

/// The padding the reference counts each tensor with when sizing parts.
const SIZE_PADDING: u64 = 32;

/// When a new part starts.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SplitLimit {
    /// At most this many tensors per part (`--split-max-tensors`, 128 by default).
    Tensors(usize),
    /// At most this many bytes of tensor data per part (`--split-max-size`).
    Bytes(u64),
}

impl SplitLimit {
    /// `--split-max-size`'s syntax: a positive whole number and `M`
    /// (megabytes, 10^6) or `G` (gigabytes, 10^9).
    pub fn parse_size(text: &str) -> Result<SplitLimit> {
        let bad = |why: &str| Error::InvalidArgument(format!("split size '{text}': {why}"));
        let (digits, unit) = match text.char_indices().last() {
            Some((i, 'M')) => (&text[..i], 1_000_000u64),
            Some((i, 'G')) => (&text[..i], 1_000_000_000u64),
            _ => return Err(bad("the unit must be M (megabytes) or G (gigabytes)")),
        };
        let n: u64 = digits
            .parse()
            .map_err(|_| bad("expected a whole number before the unit"))?;
        if n == 0 {
            return Err(bad("the size must be positive"));
        }
        n.checked_mul(unit)
            .map(SplitLimit::Bytes)
            .ok_or_else(|| bad("too large"))
    }
}

/// How to split.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SplitOptions {
    pub limit: SplitLimit,
    /// The first part holds only metadata (`--no-tensor-first-split`).
    pub no_tensor_first_split: bool,
}

impl Default for SplitOptions {
    fn default() -> Self {
        SplitOptions {
            limit: SplitLimit::Tensors(128),
            no_tensor_first_split: false,
        }
    }
}

/// Which tensors (indices into `file.tensors()`) each part holds.
pub fn plan_split(file: &GgufFile, options: SplitOptions) -> Result<Vec<Vec<usize>>> {
    if options.limit == SplitLimit::Tensors(0) {
        return Err(Error::InvalidArgument(
            "at least one tensor per part is needed".into(),
        ));
    }
    let mut parts: Vec<Vec<usize>> = vec![Vec::new()];
    if options.no_tensor_first_split {
        parts.push(Vec::new());
    }
    let mut part_bytes = 0u64;
    for (i, t) in file.tensors().iter().enumerate() {
        let padded = t.n_bytes.div_ceil(SIZE_PADDING) * SIZE_PADDING;
        let next = part_bytes.saturating_add(padded);
        let start_new = match options.limit {
            SplitLimit::Tensors(n) => i > 0 && i % n == 0,
            SplitLimit::Bytes(max) => next > max,
        };
        if start_new {
            if parts.last().is_some_and(|p| p.is_empty()) {
                return Err(Error::InvalidArgument(format!(
                    "tensor '{}' ({} bytes) alone is over the split size: a part would hold no tensors",
                    t.name, t.n_bytes
                )));
            }
            parts.push(Vec::new());
            part_bytes = padded;
        } else {
            part_bytes = next;
        }
        if let Some(part) = parts.last_mut() {
            part.push(i);
        }
    }
    Ok(parts)
}

/// The tensors of part `index` of `plan`, checked to be `file`'s.
fn part_tensors<'f>(
    file: &'f GgufFile,
    plan: &[Vec<usize>],
    index: usize,
) -> Result<Vec<&'f TensorInfo>> {
    let indices = plan.get(index).ok_or_else(|| {
        Error::InvalidArgument(format!("part {} of a split into {}", index + 1, plan.len()))
    })?;
    indices
        .iter()
        .map(|&i| {
            file.tensors().get(i).ok_or_else(|| {
                Error::InvalidArgument(format!(
                    "the plan names tensor #{i} of {}",
                    file.tensors().len()
                ))
            })
        })
        .collect()
}

/// The header of part `index` of a split of `file` into `plan` (`count`
/// parts), holding `tensors`.
fn part_layout(
    file: &GgufFile,
    count: usize,
    index: usize,
    tensors: &[&TensorInfo],
) -> Result<GgufLayout> {
    // Version 3, as the reference writes whatever it read.
    let mut layout = GgufLayout::new();
    if index == 0 {
        for (key, value) in file.metadata().iter() {
            if ![KEY_NO, KEY_COUNT, KEY_TENSORS].contains(&key) {
                layout.add_metadata(key, value.clone())?;
            }
        }
    }
    let n_tensors = i32::try_from(file.tensors().len())
        .map_err(|_| Error::InvalidArgument("too many tensors to split".into()))?;
    let count = u16::try_from(count).map_err(|_| {
        Error::InvalidArgument(format!(
            "{count} parts: a split model has at most {}",
            u16::MAX
        ))
    })?;
    layout.add_metadata(KEY_NO, Value::U16(index as u16))?;
    layout.add_metadata(KEY_TENSORS, Value::I32(n_tensors))?;
    layout.add_metadata(KEY_COUNT, Value::U16(count))?;
    for t in tensors {
        layout.add_tensor(t.name.clone(), t.ggml_type, &t.shape)?;
    }
    Ok(layout)
}

/// Writes `layout` (which declares `tensors`, in order) and their data read
/// from `file` to `out`.
fn write_file<W: std::io::Write>(
    layout: GgufLayout,
    file: &GgufFile,
    tensors: &[&TensorInfo],
    out: W,
) -> Result<W> {
    let mut stream = layout.stream_to(out)?;
    for t in tensors {
        stream.write_tensor(&t.name, file.tensor_data(t)?)?;
    }
    stream.finish()
}

/// Writes part `index` of a split of `file` into `plan` (from `plan_split`)
/// to `out`, and returns it (the parts of a model split in memory).
pub fn write_part<W: std::io::Write>(
    file: &GgufFile,
    plan: &[Vec<usize>],
    index: usize,
    out: W,
) -> Result<W> {
    let tensors = part_tensors(file, plan, index)?;
    let layout = part_layout(file, plan.len(), index, &tensors)?;
    write_file(layout, file, &tensors, out)
}

/// One file written: where, and how many tensors.
#[derive(Clone, Debug)]
pub struct WrittenPart {
    pub path: PathBuf,
    pub tensors: usize,
    pub bytes: u64,
}

/// Splits `file` into `PREFIX-00001-of-0000N.gguf`, ...; returns the parts
/// written. None of them may be one of `file`'s own files.
pub fn write_split(
    file: &GgufFile,
    prefix: &str,
    options: SplitOptions,
) -> Result<Vec<WrittenPart>> {
    file.check_complete()?;
    let plan = plan_split(file, options)?;
    let inputs = file.paths();
    let mut written = Vec::with_capacity(plan.len());
    for (index, tensors) in plan.iter().enumerate() {
        let path = PathBuf::from(part_path(prefix, index, plan.len()));
        let out = OutputFile::create(&path, &inputs)?;
        let counted = write_part(file, &plan, index, CountingWriter::new(out))?;
        counted.inner.commit()?;
        written.push(WrittenPart {
            path,
            tensors: tensors.len(),
            bytes: counted.count,
        });
    }
    Ok(written)
}

/// Writes the model `file` (every part of a split model, joined) as one
/// file at `output`.
pub fn write_merged(file: &GgufFile, output: &Path) -> Result<WrittenPart> {
    file.check_complete()?;
    let mut layout = GgufLayout::new();
    let split = file.metadata().contains(KEY_COUNT);
    for (key, value) in file.metadata().iter() {
        if key != KEY_COUNT {
            layout.add_metadata(key, value.clone())?;
        }
    }
    if split {
        layout.add_metadata(KEY_COUNT, Value::U16(0))?;
    }
    for t in file.tensors() {
        layout.add_tensor(t.name.clone(), t.ggml_type, &t.shape)?;
    }
    let out = OutputFile::create(output, &file.paths())?;
    let tensors: Vec<&TensorInfo> = file.tensors().iter().collect();
    let counted = write_file(layout, file, &tensors, CountingWriter::new(out))?;
    counted.inner.commit()?;
    Ok(WrittenPart {
        path: output.to_path_buf(),
        tensors: file.tensors().len(),
        bytes: counted.count,
    })
}

/// Counts the bytes passing through.
struct CountingWriter<W> {
    inner: W,
    count: u64,
}

impl<W> CountingWriter<W> {
    fn new(inner: W) -> Self {
        CountingWriter { inner, count: 0 }
    }
}

impl<W: std::io::Write> std::io::Write for CountingWriter<W> {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        let n = self.inner.write(buf)?;
        self.count += n as u64;
        Ok(n)
    }

    fn flush(&mut self) -> std::io::Result<()> {
        self.inner.flush()
    }
}

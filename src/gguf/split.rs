//! Models split across several GGUF files, in the layout llama.cpp's
//! `llama-gguf-split` writes and its loader reads: parts named
//! `PREFIX-00001-of-0000N.gguf` ..., each a GGUF file of its own. The first
//! part holds the model's metadata; every part holds `split.no` (its index
//! from 0), `split.count` (N) and `split.tensors.count` (the model's tensors
//! in all parts), and the tensors it carries.
//!
//! Here: the part names, and the checks that the parts given make one model.

use std::collections::HashMap;

use super::GgufFile;
use crate::error::{Error, Result};

/// This part's index, from 0 (u16).
pub const KEY_NO: &str = "split.no";
/// How many parts the model has (u16; 0 in a merged file).
pub const KEY_COUNT: &str = "split.count";
/// How many tensors the model has across its parts (i32).
pub const KEY_TENSORS: &str = "split.tensors.count";

/// The name of part `index` (from 0) of `count`: `PREFIX-0000I-of-0000N.gguf`.
pub fn part_path(prefix: &str, index: usize, count: usize) -> String {
    format!("{prefix}-{:05}-of-{count:05}.gguf", index + 1)
}

/// The prefix of `path` if it is named as part `index` of `count`.
pub fn prefix_of(path: &str, index: usize, count: usize) -> Option<&str> {
    let suffix = format!("-{:05}-of-{count:05}.gguf", index + 1);
    path.strip_suffix(&suffix).filter(|p| !p.is_empty())
}

/// A split key's value (a u16), if the part has the key.
fn split_key(file: &GgufFile, key: &str) -> Result<Option<usize>> {
    let md = file.metadata();
    Ok(if md.contains(key) {
        Some(md.get_u16(key)? as usize)
    } else {
        None
    })
}

/// `split.count` of a part's metadata: 0 when absent (an unsplit file).
pub fn split_count(file: &GgufFile) -> Result<usize> {
    Ok(split_key(file, KEY_COUNT)?.unwrap_or(0))
}

/// How many files the model whose first part is `first` is in (1 when
/// not split); an error when `first` is a later part.
pub fn parts_expected(first: &GgufFile) -> Result<usize> {
    let count = split_count(first)?;
    match split_no(first)? {
        Some(no) if count > 1 && no != 0 => Err(Error::Split(format!(
            "this is part {} of a model in {count} files: load the model from its first part",
            no + 1
        ))),
        _ => Ok(count.max(1)),
    }
}

/// `split.no` of a part's metadata, if present.
fn split_no(file: &GgufFile) -> Result<Option<usize>> {
    split_key(file, KEY_NO)
}

/// The paths of parts 2..N when `first` (opened from its path) is the first
/// part of a split model; `None` for an unsplit file or a later part (which
/// is then opened alone, and cannot load as a model).
#[cfg(not(target_family = "wasm"))]
pub(super) fn other_part_paths(first: &GgufFile) -> Result<Option<Vec<std::path::PathBuf>>> {
    let count = split_count(first)?;
    if count <= 1 || split_no(first)? != Some(0) {
        return Ok(None);
    }
    let path = first.path().unwrap_or(std::path::Path::new(""));
    let name = path.to_str().ok_or_else(|| {
        Error::Split(format!(
            "{} is part 1 of {count}, but its path is not UTF-8, so the others cannot be named",
            path.display()
        ))
    })?;
    let prefix = prefix_of(name, 0, count).ok_or_else(|| {
        Error::Split(format!(
            "{name} is part 1 of {count}, but is not named PREFIX-00001-of-{count:05}.gguf, so the other parts cannot be found"
        ))
    })?;
    Ok(Some(
        (1..count)
            .map(|i| part_path(prefix, i, count).into())
            .collect(),
    ))
}

/// The parts, each parsed alone, are one split model's, all of them, in
/// order.
pub(super) fn check_parts(parts: &[GgufFile]) -> Result<()> {
    let Some(first) = parts.first() else {
        return Err(Error::Split("no parts were given".into()));
    };
    if let Some(p) = parts.iter().find(|p| p.part_count() != 1) {
        return Err(Error::Split(format!(
            "a part given is itself {} files joined",
            p.part_count()
        )));
    }
    let count = split_count(first)?;
    if count <= 1 {
        return if parts.len() == 1 {
            Ok(())
        } else {
            Err(Error::Split(format!(
                "{} files were given, but the first is not split ({KEY_COUNT} is {count})",
                parts.len()
            )))
        };
    }
    if parts.len() != count {
        return Err(Error::Split(format!(
            "{} parts were given, but the model has {count} ({KEY_COUNT} of the first part)",
            parts.len()
        )));
    }
    for (i, part) in parts.iter().enumerate() {
        match split_no(part)? {
            Some(no) if no == i => {}
            Some(no) => {
                return Err(Error::Split(format!(
                    "part {} of {count} is part {} ({KEY_NO} is {no}): the parts are out of order or of another model",
                    i + 1,
                    no + 1
                )))
            }
            None => {
                return Err(Error::Split(format!(
                    "part {} of {count} has no {KEY_NO}: it is not a part of a split model",
                    i + 1
                )))
            }
        }
        let says = split_count(part)?;
        if says != count {
            return Err(Error::Split(format!(
                "part {} says the model has {says} parts, the first says {count}",
                i + 1
            )));
        }
    }
    Ok(())
}

/// The joined parts' tensors: none named twice (in two parts, or twice
/// across them), and as many as the first part declares.
pub(super) fn check_tensors(joined: &GgufFile) -> Result<()> {
    let mut seen: HashMap<&str, usize> = HashMap::with_capacity(joined.tensors().len());
    for t in joined.tensors() {
        if let Some(first) = seen.insert(&t.name, t.part) {
            return Err(Error::Split(format!(
                "tensor '{}' is in part {} and again in part {}",
                t.name,
                first + 1,
                t.part + 1
            )));
        }
    }
    if joined.part_count() > 1 {
        let md = joined.metadata();
        let declared = md.get_i32(KEY_TENSORS)?;
        if declared as i64 != joined.tensors().len() as i64 {
            return Err(Error::Split(format!(
                "the parts hold {} tensors, the first part declares {declared} ({KEY_TENSORS})",
                joined.tensors().len()
            )));
        }
    }
    Ok(())
}

/// An error unless `file` is a whole model: an unsplit file, a merged one,
/// or every part of a split one.
pub(super) fn check_complete(file: &GgufFile) -> Result<()> {
    let count = split_count(file)?;
    if count <= 1 || file.part_count() == count {
        return Ok(());
    }
    let index = split_no(file)?.unwrap_or(0);
    let name = file
        .path()
        .and_then(|p| p.to_str())
        .and_then(|p| prefix_of(p, index, count))
        .map(|prefix| format!(" ({})", part_path(prefix, 0, count)));
    Err(Error::Split(if index == 0 {
        format!(
            "this is part 1 of a model in {count} files, and only it was given: give every part, or open the first by its path{}",
            name.unwrap_or_default()
        )
    } else {
        format!(
            "this is part {} of a model in {count} files: load the model from its first part{}",
            index + 1,
            name.unwrap_or_default()
        )
    }))
}

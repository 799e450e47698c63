//! A parsed GGUF file together with the bytes it came from: one file, or
//! every part of a model split across files (`split.rs`).

use std::path::{Path, PathBuf};

use super::header::{self, Header};
use super::{Metadata, TensorInfo};
use crate::error::{Error, Result};

/// Where a file's bytes live. Tensor data is borrowed from here, never copied.
enum Storage {
    Owned(Vec<u8>),
    #[cfg(not(target_family = "wasm"))]
    Mapped(memmap2::Mmap),
}

impl Storage {
    fn bytes(&self) -> &[u8] {
        match self {
            Storage::Owned(v) => v,
            #[cfg(not(target_family = "wasm"))]
            Storage::Mapped(m) => m,
        }
    }
}

/// One file's bytes and where its data section starts.
pub(super) struct Part {
    storage: Storage,
    /// Tensor offsets of this part are relative to here.
    data_offset: u64,
    /// Where it was opened from, when from a path: files lamina writes
    /// beside a model (sessions) refuse to replace it.
    path: Option<PathBuf>,
}

/// A validated GGUF file: header, metadata, tensor infos and access to the
/// data. A split model is one `GgufFile` of several parts: the metadata is
/// the first part's, the tensors every part's (each `TensorInfo::part` says
/// whose bytes it reads).
pub struct GgufFile {
    header: Header,
    parts: Vec<Part>,
}

impl std::fmt::Debug for GgufFile {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("GgufFile")
            .field("version", &self.header.version)
            .field("metadata", &self.header.metadata.len())
            .field("tensors", &self.header.tensors.len())
            .field("parts", &self.parts.len())
            .field("file_len", &self.file_len())
            .finish()
    }
}

impl GgufFile {
    /// Parses a file held in memory (a part of a split model: that part
    /// alone, see `join`).
    pub fn from_bytes(bytes: Vec<u8>) -> Result<GgufFile> {
        let header = header::parse(&bytes, bytes.len() as u64)?;
        Ok(GgufFile::single(header, Storage::Owned(bytes)))
    }

    /// Joins a header parsed by the stream loader with the bytes it has collected.
    pub(crate) fn from_header_and_bytes(header: Header, bytes: Vec<u8>) -> GgufFile {
        GgufFile::single(header, Storage::Owned(bytes))
    }

    /// One file (its path, if any, set by `open_part`).
    fn single(header: Header, storage: Storage) -> GgufFile {
        let data_offset = header.data_offset;
        GgufFile {
            header,
            parts: vec![Part {
                storage,
                data_offset,
                path: None,
            }],
        }
    }

    /// Memory-maps and parses the file at `path`. The first part of a split
    /// model (`NAME-00001-of-0000N.gguf`) brings the others, found beside it
    /// by name; any other part is opened alone.
    #[cfg(not(target_family = "wasm"))]
    pub fn open(path: impl AsRef<Path>) -> Result<GgufFile> {
        let first = Self::open_part(path.as_ref())?;
        match super::split::other_part_paths(&first)? {
            Some(paths) => {
                let mut parts = vec![first];
                for (i, p) in paths.iter().enumerate() {
                    let part = Self::open_part(p).map_err(|e| {
                        Error::Split(format!(
                            "part {} of {} of the model: {e}",
                            i + 2,
                            paths.len() + 1
                        ))
                    })?;
                    parts.push(part);
                }
                GgufFile::join(parts)
            }
            None => Ok(first),
        }
    }

    /// Memory-maps and parses the one file at `path`.
    #[cfg(not(target_family = "wasm"))]
    pub fn open_part(path: &Path) -> Result<GgufFile> {
        let file = std::fs::File::open(path)
            .map_err(|e| Error::io(format!("cannot open {}", path.display()), e))?;
        let mut mapped = Self::map(&file, || path.display().to_string())?;
        mapped.parts[0].path = Some(path.to_path_buf());
        Ok(mapped)
    }

    /// The parts of a split model, each parsed on its own, as one file: they
    /// must be all the parts, in order (`split.no` 0, 1, ...), with
    /// `split.count` parts and `split.tensors.count` tensors between them,
    /// none named twice. A single unsplit file joins as itself.
    pub fn join(parts: Vec<GgufFile>) -> Result<GgufFile> {
        super::split::check_parts(&parts)?;
        let mut parts = parts.into_iter();
        let Some(mut joined) = parts.next() else {
            return Err(Error::Split("no parts were given".into()));
        };
        for (i, part) in parts.enumerate() {
            let GgufFile {
                header,
                parts: mut p,
            } = part;
            joined.header.tensors.extend(
                header
                    .tensors
                    .into_iter()
                    .map(|t| TensorInfo { part: i + 1, ..t }),
            );
            joined.parts.append(&mut p);
        }
        super::split::check_tensors(&joined)?;
        Ok(joined)
    }

    /// An error when this is not a whole model: one part of a split model
    /// (opened alone, or with parts missing).
    pub fn check_complete(&self) -> Result<()> {
        super::split::check_complete(self)
    }

    /// Memory-maps and parses the file open on `fd`, which stays the caller's: it
    /// is neither closed nor moved (Android apps open a `content://` URI and pass
    /// its descriptor). The caller may close it once this returns.
    #[cfg(unix)]
    pub fn from_fd(fd: std::os::fd::BorrowedFd<'_>) -> Result<GgufFile> {
        use std::os::fd::AsRawFd;
        Self::map(&fd, || format!("file descriptor {}", fd.as_raw_fd()))
    }

    /// `from_fd` for a raw descriptor number, as bindings receive it. An invalid
    /// or closed descriptor is an error, not undefined behaviour: it is only
    /// passed to `fstat` and `mmap`, which reject it.
    #[cfg(unix)]
    pub fn from_raw_fd(fd: std::os::fd::RawFd) -> Result<GgufFile> {
        if fd < 0 {
            return Err(Error::InvalidArgument(format!(
                "file descriptor {fd} is not a valid descriptor"
            )));
        }
        Self::map(fd, || format!("file descriptor {fd}"))
    }

    #[cfg(not(target_family = "wasm"))]
    fn map<D: memmap2::MmapAsRawDesc>(desc: D, name: impl Fn() -> String) -> Result<GgufFile> {
        // SAFETY: the map is read-only and private to this process. As with every
        // memory-mapped model loader, a file truncated by another process while
        // mapped would fault on access; model files are not modified in place.
        let map = unsafe { memmap2::MmapOptions::new().map(desc) }
            .map_err(|e| Error::io(format!("cannot memory-map {}", name()), e))?;
        let header = header::parse(&map, map.len() as u64)?;
        Ok(GgufFile::single(header, Storage::Mapped(map)))
    }

    /// Drops this process's hold on the mapped pages of `range` in part
    /// `part`, for bytes the device has copied (repacked, or into huge
    /// pages): the process's resident memory stops counting them twice. The
    /// pages stay in the page cache, and reading the range still gives the
    /// same bytes, faulted in again. A part held in memory is left as it is.
    pub fn release_pages(&self, part: usize, range: std::ops::Range<usize>) {
        #[cfg(all(unix, not(target_family = "wasm")))]
        if let Some(Storage::Mapped(map)) = self.parts.get(part).map(|p| &p.storage) {
            if !range.is_empty() && range.end <= map.len() {
                // SAFETY: the mapping is read-only, so it holds no pages of
                // its own (written copies): MADV_DONTNEED only drops the page
                // table entries of the range (and of the page parts around
                // it), and the next read faults the same file bytes back in.
                // No reference to the map sees different bytes. A failure
                // leaves the pages mapped, which is harmless.
                let _ = unsafe {
                    map.unchecked_advise_range(
                        memmap2::UncheckedAdvice::DontNeed,
                        range.start,
                        range.len(),
                    )
                };
            }
        }
        #[cfg(not(all(unix, not(target_family = "wasm"))))]
        let _ = (part, range);
    }

    /// The path the file (the first part of a split model) was opened from,
    /// if any.
    pub fn path(&self) -> Option<&Path> {
        self.parts[0].path.as_deref()
    }

    /// The paths every part was opened from.
    pub fn paths(&self) -> Vec<&Path> {
        self.parts
            .iter()
            .filter_map(|p| p.path.as_deref())
            .collect()
    }

    /// How many files the data comes from (1 unless split).
    pub fn part_count(&self) -> usize {
        self.parts.len()
    }

    /// Bytes of part `i` (header included).
    pub fn part_len(&self, i: usize) -> u64 {
        self.parts
            .get(i)
            .map_or(0, |p| p.storage.bytes().len() as u64)
    }

    pub fn version(&self) -> u32 {
        self.header.version
    }

    pub fn metadata(&self) -> &Metadata {
        &self.header.metadata
    }

    pub fn tensors(&self) -> &[TensorInfo] {
        &self.header.tensors
    }

    pub fn tensor(&self, name: &str) -> Option<&TensorInfo> {
        self.header.tensors.iter().find(|t| t.name == name)
    }

    /// Alignment of the data section and of every tensor in it.
    pub fn alignment(&self) -> u64 {
        self.header.alignment
    }

    /// Offset in the (first) file where the data section starts.
    pub fn data_offset(&self) -> u64 {
        self.header.data_offset
    }

    /// Bytes of every part together.
    pub fn file_len(&self) -> u64 {
        (0..self.parts.len()).map(|i| self.part_len(i)).sum()
    }

    /// The (first) file's bytes, header included.
    pub fn bytes(&self) -> &[u8] {
        self.parts[0].storage.bytes()
    }

    /// The bytes of part `part`, header included (empty past the last).
    pub fn part_bytes(&self, part: usize) -> &[u8] {
        self.parts.get(part).map_or(&[], |p| p.storage.bytes())
    }

    /// Where a tensor's data lies: its part and the byte range within that
    /// part's `part_bytes`. Ranges were checked at parse time; an info from
    /// another file that does not fit is an error.
    pub fn tensor_location(&self, info: &TensorInfo) -> Result<(usize, std::ops::Range<usize>)> {
        let part = self.parts.get(info.part);
        let file_len = part.map_or(0, |p| p.storage.bytes().len() as u64);
        let start = part
            .map_or(0, |p| p.data_offset)
            .saturating_add(info.offset);
        let end = start.saturating_add(info.n_bytes);
        if part.is_none() || end > file_len {
            return Err(Error::TensorOutOfRange {
                tensor: info.name.clone(),
                start,
                end,
                file_len,
            });
        }
        Ok((info.part, start as usize..end as usize))
    }

    /// The raw data of a tensor of this file.
    pub fn tensor_data(&self, info: &TensorInfo) -> Result<&[u8]> {
        let (part, range) = self.tensor_location(info)?;
        Ok(&self.part_bytes(part)[range])
    }

    /// The raw data of the tensor named `name`.
    pub fn tensor_data_by_name(&self, name: &str) -> Result<&[u8]> {
        let info = self.tensor(name).ok_or_else(|| Error::MissingTensor {
            name: name.to_string(),
        })?;
        self.tensor_data(info)
    }
}

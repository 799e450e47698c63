//! A parsed GGUF file together with the bytes it came from.

use super::header::{self, Header};
use super::{Metadata, TensorInfo};
use crate::error::{Error, Result};

/// Where a file's bytes live. Tensor data is borrowed from here, never copied.
enum Storage {
    Owned(Vec<u8>),
    #[cfg(not(target_arch = "wasm32"))]
    Mapped(memmap2::Mmap),
}

impl Storage {
    fn bytes(&self) -> &[u8] {
        match self {
            Storage::Owned(v) => v,
            #[cfg(not(target_arch = "wasm32"))]
            Storage::Mapped(m) => m,
        }
    }
}

/// A validated GGUF file: header, metadata, tensor infos and access to the data.
pub struct GgufFile {
    header: Header,
    storage: Storage,
    /// Where it was opened from, when from a path: files lamina writes
    /// beside a model (sessions) refuse to replace it.
    path: Option<std::path::PathBuf>,
}

impl std::fmt::Debug for GgufFile {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("GgufFile")
            .field("version", &self.header.version)
            .field("metadata", &self.header.metadata.len())
            .field("tensors", &self.header.tensors.len())
            .field("file_len", &self.file_len())
            .finish()
    }
}

impl GgufFile {
    /// Parses a file held in memory.
    pub fn from_bytes(bytes: Vec<u8>) -> Result<GgufFile> {
        let header = header::parse(&bytes, bytes.len() as u64)?;
        Ok(GgufFile {
            header,
            storage: Storage::Owned(bytes),
            path: None,
        })
    }

    /// Joins a header parsed by the stream loader with the bytes it has collected.
    pub(crate) fn from_parts(header: Header, bytes: Vec<u8>) -> GgufFile {
        GgufFile {
            header,
            storage: Storage::Owned(bytes),
            path: None,
        }
    }

    /// Memory-maps and parses the file at `path`.
    #[cfg(not(target_arch = "wasm32"))]
    pub fn open(path: impl AsRef<std::path::Path>) -> Result<GgufFile> {
        let path = path.as_ref();
        let file = std::fs::File::open(path)
            .map_err(|e| Error::io(format!("cannot open {}", path.display()), e))?;
        let mut mapped = Self::map(&file, || path.display().to_string())?;
        mapped.path = Some(path.to_path_buf());
        Ok(mapped)
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

    #[cfg(not(target_arch = "wasm32"))]
    fn map<D: memmap2::MmapAsRawDesc>(desc: D, name: impl Fn() -> String) -> Result<GgufFile> {
        // SAFETY: the map is read-only and private to this process. As with every
        // memory-mapped model loader, a file truncated by another process while
        // mapped would fault on access; model files are not modified in place.
        let map = unsafe { memmap2::MmapOptions::new().map(desc) }
            .map_err(|e| Error::io(format!("cannot memory-map {}", name()), e))?;
        let header = header::parse(&map, map.len() as u64)?;
        Ok(GgufFile {
            header,
            storage: Storage::Mapped(map),
            path: None,
        })
    }

    /// The path the file was opened from (`open`), if any.
    pub fn path(&self) -> Option<&std::path::Path> {
        self.path.as_deref()
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

    /// Absolute file offset where the data section starts.
    pub fn data_offset(&self) -> u64 {
        self.header.data_offset
    }

    pub fn file_len(&self) -> u64 {
        self.storage.bytes().len() as u64
    }

    /// The file's bytes, header included.
    pub fn bytes(&self) -> &[u8] {
        self.storage.bytes()
    }

    /// The raw data of a tensor of this file. Ranges were checked at parse time;
    /// an info from another file that does not fit is an error.
    pub fn tensor_data(&self, info: &TensorInfo) -> Result<&[u8]> {
        let file_len = self.file_len();
        let start = self.header.data_offset.saturating_add(info.offset);
        let end = start.saturating_add(info.n_bytes);
        if end > file_len {
            return Err(Error::TensorOutOfRange {
                tensor: info.name.clone(),
                start,
                end,
                file_len,
            });
        }
        Ok(&self.storage.bytes()[start as usize..end as usize])
    }

    /// The raw data of the tensor named `name`.
    pub fn tensor_data_by_name(&self, name: &str) -> Result<&[u8]> {
        let info = self.tensor(name).ok_or_else(|| Error::MissingTensor {
            name: name.to_string(),
        })?;
        self.tensor_data(info)
    }
}

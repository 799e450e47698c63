//! Files lamina writes, written so that none is ever lost: the data goes to
//! a temporary file beside the target, is synced to disk, and only then
//! renamed over the target. A failure (an error, a full disk, a crash)
//! leaves the target as it was; the temporary is removed when the write is
//! abandoned. Writing over the file being read is refused before anything
//! is opened for writing.

use std::fs::File;
use std::io::{self, Write};
use std::path::{Path, PathBuf};

use crate::error::{Error, Result};

/// A file being written to a temporary beside its target; `commit` puts it
/// in place, dropping it without committing removes it.
pub struct OutputFile {
    target: PathBuf,
    temp: PathBuf,
    file: Option<File>,
}

impl OutputFile {
    /// Starts writing `target` (in a temporary file in the same directory,
    /// so the final rename never crosses file systems). Refuses a target
    /// that is one of `inputs` (the same file, through any path or link).
    pub fn create(target: &Path, inputs: &[&Path]) -> Result<OutputFile> {
        refuse_inputs(target, inputs)?;
        let name = target.file_name().ok_or_else(|| {
            Error::InvalidArgument(format!("{} is not a file name", target.display()))
        })?;
        let dir = match target.parent() {
            Some(d) if !d.as_os_str().is_empty() => d.to_path_buf(),
            _ => PathBuf::from("."),
        };
        // Unique per process and call: two writers of one target never
        // share a temporary.
        static NEXT: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
        let n = NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let temp = dir.join(format!(
            ".{}.lamina-{}-{n}.tmp",
            name.to_string_lossy(),
            std::process::id()
        ));
        let file = std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .open(&temp)
            .map_err(|e| Error::io(format!("cannot create {}", temp.display()), e))?;
        Ok(OutputFile {
            target: target.to_path_buf(),
            temp,
            file: Some(file),
        })
    }

    /// The temporary file's path (until `commit`).
    pub fn temp_path(&self) -> &Path {
        &self.temp
    }

    /// Syncs the data and renames the temporary over the target.
    pub fn commit(mut self) -> Result<()> {
        let Some(file) = self.file.take() else {
            return Err(Error::InvalidArgument(
                "the output was already committed".into(),
            ));
        };
        file.sync_all()
            .map_err(|e| Error::io(format!("cannot sync {}", self.temp.display()), e))?;
        drop(file);
        std::fs::rename(&self.temp, &self.target).map_err(|e| {
            Error::io(
                format!(
                    "cannot rename {} to {}",
                    self.temp.display(),
                    self.target.display()
                ),
                e,
            )
        })?;
        // The rename itself is durable once the directory is synced; not
        // every platform can open a directory, and the data is safe either
        // way, so a failure here is not an error.
        if let Some(dir) = self.target.parent().filter(|d| !d.as_os_str().is_empty()) {
            if let Ok(d) = File::open(dir) {
                let _ = d.sync_all();
            }
        }
        Ok(())
    }
}

impl Write for OutputFile {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        self.file.as_mut().map_or(Ok(0), |f| f.write(buf))
    }

    fn flush(&mut self) -> io::Result<()> {
        self.file.as_mut().map_or(Ok(()), |f| f.flush())
    }
}

impl Drop for OutputFile {
    fn drop(&mut self) {
        if self.file.take().is_some() {
            let _ = std::fs::remove_file(&self.temp);
        }
    }
}

/// An error when `target` is one of `inputs` (the same file, through any
/// path or link).
pub fn refuse_inputs(target: &Path, inputs: &[&Path]) -> Result<()> {
    for input in inputs {
        if same_file(input, target) {
            return Err(Error::InvalidArgument(format!(
                "the output {} is the input {}: lamina does not write over the file it reads",
                target.display(),
                input.display()
            )));
        }
    }
    Ok(())
}

/// Whether two paths name one existing file (the same device and inode,
/// which also catches hard links and symbolic links).
fn same_file(a: &Path, b: &Path) -> bool {
    let (Ok(ma), Ok(mb)) = (std::fs::metadata(a), std::fs::metadata(b)) else {
        return false;
    };
    #[cfg(unix)]
    {
        use std::os::unix::fs::MetadataExt;
        ma.dev() == mb.dev() && ma.ino() == mb.ino()
    }
    #[cfg(not(unix))]
    {
        let _ = (ma, mb);
        matches!((a.canonicalize(), b.canonicalize()), (Ok(x), Ok(y)) if x == y)
    }
}

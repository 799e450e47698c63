//! Weights that products read in their file's layout (F16, BF16, F32 and
//! the quantized types without a repacked layout), copied at load into
//! anonymous memory advised for the kernel's huge pages (Linux's
//! transparent huge pages, 2 MB on x86_64 and on 4 KB-page aarch64).
//!
//! Why: generating a token streams every weight once. Read from the file's
//! mapping, that is a TLB miss every 4 KB, and the hardware prefetchers stop
//! at every page's end; the page cache gives a file 2 MB pages only where it
//! happens to hold them (most distributions set THP to `madvise`, and not
//! for files). SmolLM2-135M F16 generated about 1.3x as fast at one thread
//! on a Zen 4 once its weights were in 2 MB pages.
//!
//! The copies go into chunks of `CHUNK` bytes (or one matrix's size, if
//! larger), one model file's matrices after another, so that small matrices
//! share huge pages. A chunk lives as long as a matrix copied into it.
//! Where the system has no transparent huge pages, or the copy would not
//! fit in the memory available, matrices stay in the file's mapping.

use std::sync::{Arc, Mutex, OnceLock, Weak};

use crate::gguf::GgufFile;

/// A chunk's size where one matrix does not need more: 32 huge pages of
/// 2 MB. At most the partly used huge page at a chunk's end is wasted.
const CHUNK: usize = 64 << 20;

/// Start of every copy within its chunk (a cache line, as host buffers).
const ALIGN: usize = 64;

/// The largest huge page this is worth it for: on kernels with 16 or 64 KB
/// base pages, a PMD page is 32 MB or 512 MB, too coarse to fill with one
/// model's matrices without waste.
const MAX_HUGE_PAGE: usize = 32 << 20;

/// The huge page size when the system gives anonymous memory huge pages on
/// request (THP `always` or `madvise`), read once; None where matrices stay
/// in the file's mapping.
pub fn huge_page_size() -> Option<usize> {
    static SIZE: OnceLock<Option<usize>> = OnceLock::new();
    *SIZE.get_or_init(read_huge_page_size)
}

#[cfg(any(target_os = "linux", target_os = "android"))]
fn read_huge_page_size() -> Option<usize> {
    let dir = "/sys/kernel/mm/transparent_hugepage";
    let enabled = std::fs::read_to_string(format!("{dir}/enabled")).ok()?;
    if !thp_on_request(&enabled) {
        return None;
    }
    let size: usize = std::fs::read_to_string(format!("{dir}/hpage_pmd_size"))
        .ok()?
        .trim()
        .parse()
        .ok()?;
    (size.is_power_of_two() && size <= MAX_HUGE_PAGE).then_some(size)
}

#[cfg(not(any(target_os = "linux", target_os = "android")))]
fn read_huge_page_size() -> Option<usize> {
    None
}

/// Whether a THP `enabled` setting (`always [madvise] never`: the bracketed
/// word is the one in force) gives huge pages to memory advised for them.
pub(crate) fn thp_on_request(enabled: &str) -> bool {
    ["[always]", "[madvise]"]
        .iter()
        .any(|mode| enabled.contains(mode))
}

/// Anonymous memory, advised for huge pages, that copies are written into
/// once each, in ranges no `ArenaBytes` covers yet.
struct Chunk {
    map: memmap2::MmapRaw,
    /// Offset of the first huge page boundary in `map`.
    start: usize,
    /// Usable bytes from `start`.
    len: usize,
}

impl Chunk {
    fn new(len: usize, huge_page: usize) -> Option<Chunk> {
        crate::memory::check_fits("weights in huge pages", len as u64, "").ok()?;
        // A huge page boundary lies within the first `huge_page` bytes.
        let map_len = len.checked_add(huge_page)?;
        let map = memmap2::MmapRaw::from(memmap2::MmapMut::map_anon(map_len).ok()?);
        // Without the advice the memory still works, in small pages.
        let _ = map.advise(memmap2::Advice::HugePage);
        let addr = map.as_ptr() as usize;
        let start = (huge_page - addr % huge_page) % huge_page;
        Some(Chunk { map, start, len })
    }
}

/// Bytes of a matrix copied into a chunk.
pub(crate) struct ArenaBytes {
    chunk: Arc<Chunk>,
    /// From the chunk's `start`.
    offset: usize,
    len: usize,
}

impl ArenaBytes {
    pub(crate) fn as_slice(&self) -> &[u8] {
        // SAFETY: `offset + len <= chunk.len` (checked in `copy`), so the
        // range lies inside the mapping, which lives as long as `chunk`. Its
        // bytes were written in `copy` before this value existed, and the
        // arena never writes a range it has handed out again: reads here
        // race with no write.
        unsafe {
            std::slice::from_raw_parts(
                self.chunk.map.as_ptr().add(self.chunk.start + self.offset),
                self.len,
            )
        }
    }
}

/// The chunk being filled, with the file whose matrices it holds.
struct Filling {
    file: Weak<GgufFile>,
    chunk: Weak<Chunk>,
    used: usize,
}

/// Where a device copies the matrices it reads in place.
#[derive(Default)]
pub(crate) struct WeightArena {
    filling: Mutex<Option<Filling>>,
}

impl WeightArena {
    /// A copy of `bytes` (a matrix of `file`) in huge-page memory, or None
    /// where the system has none or the memory is not available (the caller
    /// then reads the file's bytes in place).
    pub(crate) fn copy(&self, file: &Arc<GgufFile>, bytes: &[u8]) -> Option<ArenaBytes> {
        let huge_page = huge_page_size()?;
        self.copy_with(file, bytes, huge_page)
    }

    fn copy_with(
        &self,
        file: &Arc<GgufFile>,
        bytes: &[u8],
        huge_page: usize,
    ) -> Option<ArenaBytes> {
        let mut filling = self.filling.lock().unwrap_or_else(|e| e.into_inner());
        // The chunk being filled, if it holds this file's matrices, is still
        // alive and has room.
        let current = filling.as_ref().and_then(|f| {
            let same_file = Weak::ptr_eq(&f.file, &Arc::downgrade(file));
            let chunk = f.chunk.upgrade()?;
            let offset = f.used.next_multiple_of(ALIGN);
            (same_file && offset.checked_add(bytes.len())? <= chunk.len).then_some((chunk, offset))
        });
        let (chunk, offset) = match current {
            Some(found) => found,
            None => {
                let len = bytes.len().max(CHUNK).checked_next_multiple_of(huge_page)?;
                (Arc::new(Chunk::new(len, huge_page)?), 0)
            }
        };
        debug_assert!(offset + bytes.len() <= chunk.len);
        // SAFETY: `offset + bytes.len() <= chunk.len` (above), so the range
        // lies inside the mapping. No `ArenaBytes` covers it: the chunk is
        // new, or `offset` is past every range handed out from it (`used`),
        // and the lock serializes the arena's writers. The source is the
        // file's memory, not this mapping, so they do not overlap.
        unsafe {
            std::ptr::copy_nonoverlapping(
                bytes.as_ptr(),
                chunk.map.as_mut_ptr().add(chunk.start + offset),
                bytes.len(),
            );
        }
        *filling = Some(Filling {
            file: Arc::downgrade(file),
            chunk: Arc::downgrade(&chunk),
            used: offset + bytes.len(),
        });
        Some(ArenaBytes {
            chunk,
            offset,
            len: bytes.len(),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn file() -> Arc<GgufFile> {
        // The smallest valid GGUF: version 3, no tensors, no metadata.
        let mut bytes = b"GGUF".to_vec();
        bytes.extend_from_slice(&3u32.to_le_bytes());
        bytes.extend_from_slice(&0u64.to_le_bytes());
        bytes.extend_from_slice(&0u64.to_le_bytes());
        Arc::new(GgufFile::from_bytes(bytes).unwrap())
    }

    fn pattern(len: usize, seed: u8) -> Vec<u8> {
        (0..len)
            .map(|i| (i as u8).wrapping_mul(31) ^ seed)
            .collect()
    }

    const PAGE: usize = 2 << 20;

    /// Whether a copy starts on a huge page boundary (the first one in a
    /// chunk does).
    fn on_boundary(copy: &ArenaBytes) -> bool {
        copy.as_slice().as_ptr() as usize % PAGE == 0
    }

    #[test]
    fn copies_share_a_chunk_per_file_from_a_huge_page_boundary() {
        let arena = WeightArena::default();
        let (a, b) = (file(), file());
        let x = pattern(1000, 1);
        let y = pattern(3 << 20, 2);
        let z = pattern(77, 3);
        let cx = arena.copy_with(&a, &x, PAGE).unwrap();
        let cy = arena.copy_with(&a, &y, PAGE).unwrap();
        let cz = arena.copy_with(&b, &z, PAGE).unwrap();
        assert_eq!(
            (cx.as_slice(), cy.as_slice(), cz.as_slice()),
            (&x[..], &y[..], &z[..])
        );
        assert!(on_boundary(&cx) && on_boundary(&cz));
        // One file's copies follow one another, each on a cache line.
        assert!(Arc::ptr_eq(&cx.chunk, &cy.chunk));
        assert_eq!(cy.offset, 1024);
        // Another file's start a chunk of their own.
        assert!(!Arc::ptr_eq(&cx.chunk, &cz.chunk));
    }

    #[test]
    fn a_matrix_larger_than_a_chunk_gets_one_of_its_size() {
        let arena = WeightArena::default();
        let a = file();
        let small = arena.copy_with(&a, &pattern(10, 4), PAGE).unwrap();
        let big = pattern(CHUNK + 5, 5);
        let cbig = arena.copy_with(&a, &big, PAGE).unwrap();
        assert_eq!(cbig.as_slice(), &big[..]);
        assert!(!Arc::ptr_eq(&small.chunk, &cbig.chunk));
        assert_eq!(cbig.chunk.len, (CHUNK + 5).next_multiple_of(PAGE));
        assert!(on_boundary(&cbig));
    }

    #[test]
    fn a_freed_chunk_is_not_written_again() {
        let arena = WeightArena::default();
        let a = file();
        let first = arena.copy_with(&a, &pattern(100, 6), PAGE).unwrap();
        drop(first);
        // The only copy is gone, so is its chunk: the next copy starts a new
        // one at its beginning.
        let next = arena.copy_with(&a, &pattern(50, 7), PAGE).unwrap();
        assert_eq!(next.offset, 0);
        assert_eq!(next.as_slice(), &pattern(50, 7)[..]);
    }

    #[test]
    fn thp_modes() {
        assert!(thp_on_request("always [madvise] never\n"));
        assert!(thp_on_request("[always] madvise never"));
        assert!(!thp_on_request("always madvise [never]"));
        assert!(!thp_on_request(""));
    }
}

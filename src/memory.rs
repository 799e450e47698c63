//! How much memory the machine can still give, so that sizes asked for by a
//! user or a file (a context of ten million positions) are refused with the
//! numbers instead of filling memory until the system kills the process.

use crate::error::{Error, Result};

/// Bytes that can still be allocated, where the platform says: Linux's
/// `MemAvailable`; in WebAssembly, what is left of the address space (4 GiB
/// in wasm32; in the memory64 build 16 GiB, the most V8 gives one memory).
/// `None` where unknown (then nothing is refused ahead of the allocation).
pub fn available_bytes() -> Option<u64> {
    #[cfg(target_family = "wasm")]
    {
        let space: u64 = if cfg!(target_arch = "wasm64") {
            16 << 30
        } else {
            4 << 30
        };
        let used = crate::wasm_arch::memory_size(0) as u64 * 65536;
        Some(space.saturating_sub(used))
    }
    #[cfg(all(not(target_family = "wasm"), target_os = "linux"))]
    {
        let meminfo = std::fs::read_to_string("/proc/meminfo").ok()?;
        let line = meminfo.lines().find(|l| l.starts_with("MemAvailable:"))?;
        let kib: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
        kib.checked_mul(1024)
    }
    #[cfg(all(not(target_family = "wasm"), not(target_os = "linux")))]
    {
        None
    }
}

/// An error naming `what` and both sizes when `bytes` is more than the
/// memory available (`hint`: which setting to lower).
pub fn check_fits(what: &str, bytes: u64, hint: &str) -> Result<()> {
    match available_bytes() {
        Some(available) if bytes > available => Err(Error::InvalidArgument(format!(
            "{what} needs {}, and {} of memory are available ({hint})",
            human(bytes),
            human(available)
        ))),
        _ => Ok(()),
    }
}

/// Bytes as MiB or GiB with one decimal.
pub fn human(bytes: u64) -> String {
    let mib = bytes as f64 / (1u64 << 20) as f64;
    if mib >= 1024.0 {
        format!("{:.1} GiB", mib / 1024.0)
    } else {
        format!("{mib:.1} MiB")
    }
}

//! A read one page ahead of the weights a product is about to stream, in
//! WebAssembly only.
//!
//! Why: wasm has no prefetch instruction, and engines give its memory 4 KB
//! pages (V8's gets no huge pages under THP `madvise`). A product streams its
//! weights once, and the hardware prefetcher stops at every page's end, so
//! each new page began with a TLB walk and cold misses. Reading one byte a
//! page ahead of the group being multiplied starts both early: SmolLM2 Q4_1
//! tg64 in Node went from 48–50 to 53–57 t/s on a Xeon (Sapphire Rapids).
//! Natively the CPUs' own prefetchers and lamina's huge pages cover this
//! (software prefetch in the AVX-512 F16 GEMV made it slower on a Zen 4), so
//! elsewhere this does nothing.

/// How far ahead: one 4 KB page.
#[cfg(target_family = "wasm")]
const AHEAD: usize = 4096;

/// Reads the byte `AHEAD` bytes past the start of `data[at]`, if `data` has
/// one there; the value is discarded. Values never change.
#[inline(always)]
pub(crate) fn touch_ahead<T>(data: &[T], at: usize) {
    #[cfg(target_family = "wasm")]
    {
        let offset = at
            .saturating_mul(std::mem::size_of::<T>())
            .saturating_add(AHEAD);
        if offset < std::mem::size_of_val(data) {
            let byte = data.as_ptr().cast::<std::mem::MaybeUninit<u8>>();
            // SAFETY: `offset` is under the slice's length in bytes, so the
            // byte lies inside memory `data` borrows for reading. It is read
            // as `MaybeUninit<u8>` (a padding byte would be fine too), and
            // volatile only so that the read is kept.
            let _ = unsafe { std::ptr::read_volatile(byte.add(offset)) };
        }
    }
    #[cfg(not(target_family = "wasm"))]
    let _ = (data, at);
}

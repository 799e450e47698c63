//! Quantized blocks as plain old data: the `Block` trait, checked views of
//! tensor bytes as blocks and back, and the block sizes. The block structs
//! themselves live with their type in `tensor/quants/` (re-exported here).

use super::GgmlType;
use crate::error::{Error, Result};

/// Elements per block of the legacy types (Q4_0 .. Q8_1).
pub const QK: usize = 32;
/// Elements per super-block of the k-quants.
pub const QK_K: usize = 256;

/// A quantized block: plain old data (every bit pattern is a valid value), so a
/// tensor's bytes can be viewed as a slice of blocks.
///
/// # Safety
/// Implementors must be `#[repr(C)]`, contain only integer and float fields
/// (no padding, no invalid bit patterns), and have `size_of` equal to the
/// type's block size in GGUF.
pub unsafe trait Block: Copy + Send + Sync + 'static {
    const TYPE: GgmlType;
    /// Elements per block.
    const ELEMENTS: usize;

    /// A block of zero bytes.
    fn zeroed() -> Self {
        // SAFETY: all-zero bytes are a valid value of plain old data.
        unsafe { std::mem::zeroed() }
    }
}

pub use super::quants::{
    BlockIQ4NL, BlockIQ4XS, BlockQ2K, BlockQ3K, BlockQ4K, BlockQ4_0, BlockQ4_1, BlockQ5K,
    BlockQ5_0, BlockQ5_1, BlockQ6K, BlockQ8K, BlockQ8_0, BlockQ8_1,
};

/// Views `bytes` as blocks. The length must be a whole number of blocks and the
/// start suitably aligned (GGUF data always is: tensors start 32-byte aligned).
pub fn as_blocks<B: Block>(bytes: &[u8]) -> Result<&[B]> {
    check_view::<B>(bytes.as_ptr(), bytes.len())?;
    // SAFETY: B is plain old data (Block's contract); length and alignment
    // were checked above; the lifetime is tied to `bytes`.
    Ok(unsafe { std::slice::from_raw_parts(bytes.as_ptr().cast(), bytes.len() / size_of::<B>()) })
}

/// Mutable `as_blocks`.
pub fn as_blocks_mut<B: Block>(bytes: &mut [u8]) -> Result<&mut [B]> {
    check_view::<B>(bytes.as_ptr(), bytes.len())?;
    // SAFETY: B is plain old data (Block's contract: any byte pattern is a
    // valid B, so writes through the view keep the bytes valid too); length
    // and alignment were checked above; the exclusive borrow of `bytes` is
    // moved into the result.
    Ok(unsafe {
        std::slice::from_raw_parts_mut(bytes.as_mut_ptr().cast(), bytes.len() / size_of::<B>())
    })
}

/// The bytes of a slice of blocks, as stored in GGUF.
pub fn blocks_as_bytes<B: Block>(blocks: &[B]) -> &[u8] {
    // SAFETY: B has no padding (Block's contract), so every byte is initialised.
    unsafe { std::slice::from_raw_parts(blocks.as_ptr().cast(), std::mem::size_of_val(blocks)) }
}

/// Mutable `blocks_as_bytes`.
pub fn blocks_as_bytes_mut<B: Block>(blocks: &mut [B]) -> &mut [u8] {
    // SAFETY: no padding, and any byte pattern is a valid B (Block's contract).
    unsafe {
        std::slice::from_raw_parts_mut(blocks.as_mut_ptr().cast(), std::mem::size_of_val(blocks))
    }
}

fn check_view<B: Block>(ptr: *const u8, len: usize) -> Result<()> {
    if len % size_of::<B>() != 0 {
        return Err(Error::InvalidArgument(format!(
            "{} bytes is not a whole number of {} blocks ({} bytes each)",
            len,
            B::TYPE,
            size_of::<B>()
        )));
    }
    if ptr.align_offset(std::mem::align_of::<B>()) != 0 {
        return Err(Error::InvalidArgument(format!(
            "{} data is not {}-byte aligned",
            B::TYPE,
            std::mem::align_of::<B>()
        )));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    #[cfg(target_family = "wasm")]
    use wasm_bindgen_test::wasm_bindgen_test as test;

    fn check<B: Block>() {
        assert_eq!(size_of::<B>() as u64, B::TYPE.block_bytes(), "{}", B::TYPE);
        assert_eq!(B::ELEMENTS as u64, B::TYPE.block_size(), "{}", B::TYPE);
    }

    #[test]
    fn layouts_agree_with_the_type_table() {
        check::<BlockQ4_0>();
        check::<BlockQ4_1>();
        check::<BlockQ5_0>();
        check::<BlockQ5_1>();
        check::<BlockQ8_0>();
        check::<BlockQ8_1>();
        check::<BlockQ2K>();
        check::<BlockQ3K>();
        check::<BlockQ4K>();
        check::<BlockQ5K>();
        check::<BlockQ6K>();
        check::<BlockQ8K>();
        check::<BlockIQ4NL>();
        check::<BlockIQ4XS>();
    }

    #[test]
    fn views_check_length_and_alignment() {
        let storage = [0u16; 40];
        // SAFETY: 40 initialised u16s are 80 initialised bytes, u8 needs no
        // alignment, and the view borrows `storage`.
        let bytes: &[u8] = unsafe { std::slice::from_raw_parts(storage.as_ptr().cast(), 80) };
        assert_eq!(as_blocks::<BlockQ4_0>(&bytes[..36]).unwrap().len(), 2);
        assert!(as_blocks::<BlockQ4_0>(&bytes[..35]).is_err());
        assert!(as_blocks::<BlockQ4_0>(&bytes[1..37]).is_err());
    }
}

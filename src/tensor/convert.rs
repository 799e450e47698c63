//! Whole-row conversions between f32 and any `DType`, dispatching to each
//! type's reference (de)quantizers (`tensor/quants/`). Lengths are checked
//! here, once, so the per-type functions can stay free of error handling.

use half::{bf16, f16};

use super::blocks::{as_blocks, as_blocks_mut, blocks_as_bytes, blocks_as_bytes_mut, Block};
use super::quants::{with_quant_type, QuantType};
use super::DType;
use crate::error::{Error, Result};

fn check_len(dtype: DType, bytes: usize, n: usize) -> Result<()> {
    if n % dtype.block_size() != 0 || dtype.bytes_for(n) != bytes {
        return Err(Error::InvalidArgument(format!(
            "{n} {dtype} values do not fit {bytes} bytes (blocks of {} values in {} bytes)",
            dtype.block_size(),
            dtype.block_bytes()
        )));
    }
    Ok(())
}

// Lengths are checked by the callers, so a view can only fail on alignment (a
// byte buffer at an odd address): then the blocks go through an aligned copy.

fn deq<B: Block>(bytes: &[u8], out: &mut [f32], f: fn(&[B], &mut [f32])) -> Result<()> {
    match as_blocks::<B>(bytes) {
        Ok(blocks) => f(blocks, out),
        Err(_) => {
            let mut aligned = vec![B::zeroed(); bytes.len() / size_of::<B>()];
            blocks_as_bytes_mut(&mut aligned).copy_from_slice(bytes);
            f(&aligned, out)
        }
    }
    Ok(())
}

fn quant<B: Block>(src: &[f32], bytes: &mut [u8], f: fn(&[f32], &mut [B])) -> Result<()> {
    match as_blocks_mut::<B>(bytes) {
        Ok(blocks) => f(src, blocks),
        Err(_) => {
            let mut aligned = vec![B::zeroed(); bytes.len() / size_of::<B>()];
            f(src, &mut aligned);
            bytes.copy_from_slice(blocks_as_bytes(&aligned));
        }
    }
    Ok(())
}

/// Reads `out.len()` values of type `dtype` from `bytes` (little-endian GGUF data).
pub fn dequantize(dtype: DType, bytes: &[u8], out: &mut [f32]) -> Result<()> {
    check_len(dtype, bytes.len(), out.len())?;
    with_quant_type!(dtype, T => deq::<T>(bytes, out, T::DEQUANTIZE), float => {
        match dtype {
            DType::F16 => {
                for (o, b) in out.iter_mut().zip(bytes.chunks_exact(2)) {
                    *o = f16::from_le_bytes([b[0], b[1]]).to_f32();
                }
            }
            DType::BF16 => {
                for (o, b) in out.iter_mut().zip(bytes.chunks_exact(2)) {
                    *o = bf16::from_le_bytes([b[0], b[1]]).to_f32();
                }
            }
            _ => {
                for (o, b) in out.iter_mut().zip(bytes.chunks_exact(4)) {
                    *o = f32::from_le_bytes([b[0], b[1], b[2], b[3]]);
                }
            }
        }
        Ok(())
    })
}

/// Whether `quantize` can produce this type (every type lamina reads has a
/// quantizer today; a type added with `QUANTIZE: None` would be read only).
pub fn can_quantize(dtype: DType) -> bool {
    with_quant_type!(dtype, T => T::QUANTIZE.is_some(), float => true)
}

/// Writes `src` as `dtype` into `bytes`, bit-exact with ggml's reference
/// quantizers (and round-to-nearest-even for F16/BF16).
pub fn quantize(dtype: DType, src: &[f32], bytes: &mut [u8]) -> Result<()> {
    check_len(dtype, bytes.len(), src.len())?;
    let unsupported = || Error::InvalidArgument(format!("quantizing to {dtype} is not supported"));
    with_quant_type!(dtype, T => quant::<T>(src, bytes, T::QUANTIZE.ok_or_else(unsupported)?), float => {
        match dtype {
            DType::F16 => {
                for (b, v) in bytes.chunks_exact_mut(2).zip(src) {
                    b.copy_from_slice(&f16::from_f32(*v).to_le_bytes());
                }
            }
            DType::BF16 => {
                for (b, v) in bytes.chunks_exact_mut(2).zip(src) {
                    b.copy_from_slice(&bf16::from_f32(*v).to_le_bytes());
                }
            }
            _ => {
                for (b, v) in bytes.chunks_exact_mut(4).zip(src) {
                    b.copy_from_slice(&v.to_le_bytes());
                }
            }
        }
        Ok(())
    })
}

/// `dequantize` into a new vector; `n` elements.
pub fn to_f32(dtype: DType, bytes: &[u8], n: usize) -> Result<Vec<f32>> {
    let mut out = vec![0.0; n];
    dequantize(dtype, bytes, &mut out)?;
    Ok(out)
}

/// `quantize` into a new, suitably aligned buffer.
pub fn from_f32(dtype: DType, src: &[f32]) -> Result<Vec<u8>> {
    if src.len() % dtype.block_size() != 0 {
        return Err(Error::InvalidArgument(format!(
            "{} values is not a whole number of {dtype} blocks of {}",
            src.len(),
            dtype.block_size()
        )));
    }
    let mut out = vec![0u8; dtype.bytes_for(src.len())];
    quantize(dtype, src, &mut out)?;
    Ok(out)
}

//! Rows of a cache (K or V of one layer) in a device buffer, viewed in the
//! cache's type. The KV storage above the backend allocates these from the
//! device's buffer type and hands their views to the backend's ops.

use half::f16;

use super::ops::{CacheRows, CacheRowsMut, CacheType};
use super::{Buffer, BufferType};
use crate::error::{Error, Result};
use crate::tensor::blocks::{BlockQ8_0, QK};

pub struct CacheBuffer {
    buffer: Box<dyn Buffer>,
    ty: CacheType,
    width: usize,
    rows: usize,
}

/// Views host bytes as `T`s; `None` unless aligned and whole.
fn typed<T: Copy>(bytes: &[u8]) -> Option<&[T]> {
    // SAFETY: `T` is one of f32, f16, BlockQ8_0 (callers below): plain old
    // data with no padding, valid for every bit pattern; `align_to` puts
    // only aligned, whole elements in the middle part, and the prefix and
    // suffix are checked to be empty.
    let (pre, mid, post) = unsafe { bytes.align_to::<T>() };
    (pre.is_empty() && post.is_empty()).then_some(mid)
}

fn typed_mut<T: Copy>(bytes: &mut [u8]) -> Option<&mut [T]> {
    // SAFETY: as in `typed`, with the exclusive borrow of the bytes.
    let (pre, mid, post) = unsafe { bytes.align_to_mut::<T>() };
    (pre.is_empty() && post.is_empty()).then_some(mid)
}

impl CacheBuffer {
    /// `rows` zeroed rows of `width` values of type `ty` from `bt`.
    pub fn new(
        bt: &dyn BufferType,
        ty: CacheType,
        width: usize,
        rows: usize,
    ) -> Result<CacheBuffer> {
        if ty == CacheType::Q8_0 && width % QK != 0 {
            return Err(Error::InvalidArgument(format!(
                "a q8_0 cache needs rows that are a multiple of {QK} values, not {width}"
            )));
        }
        if !bt.is_host() {
            return Err(Error::InvalidArgument(format!(
                "the {} buffer type is not host memory",
                bt.name()
            )));
        }
        let size = ty.bytes_per_row(width).checked_mul(rows).ok_or_else(|| {
            Error::InvalidArgument(format!("a cache of {rows} rows of {width} is too large"))
        })?;
        Ok(CacheBuffer {
            buffer: bt.alloc(size)?,
            ty,
            width,
            rows,
        })
    }

    pub fn cache_type(&self) -> CacheType {
        self.ty
    }

    pub fn width(&self) -> usize {
        self.width
    }

    pub fn rows(&self) -> usize {
        self.rows
    }

    pub fn size_bytes(&self) -> usize {
        self.buffer.size()
    }

    /// Bytes one row takes in the cache's type.
    pub fn row_bytes(&self) -> usize {
        self.ty.bytes_per_row(self.width)
    }

    /// Rows `[first, first + n)` as stored (a session file copies them).
    pub fn raw_rows(&self, first: usize, n: usize) -> Result<&[u8]> {
        let range = self.byte_range(first, n)?;
        Ok(&self.buffer.as_bytes()[range])
    }

    /// Rows `[first, first + n)` as stored, to overwrite.
    pub fn raw_rows_mut(&mut self, first: usize, n: usize) -> Result<&mut [u8]> {
        let range = self.byte_range(first, n)?;
        Ok(&mut self.buffer.as_bytes_mut()[range])
    }

    fn byte_range(&self, first: usize, n: usize) -> Result<std::ops::Range<usize>> {
        match first.checked_add(n) {
            Some(end) if end <= self.rows => Ok(first * self.row_bytes()..end * self.row_bytes()),
            _ => Err(Error::InvalidArgument(format!(
                "cache rows [{first}, {first} + {n}) are outside the {} rows",
                self.rows
            ))),
        }
    }

    pub fn view(&self) -> CacheRows<'_> {
        let bytes = self.buffer.as_bytes();
        let w = self.width;
        let bad = "a host buffer is aligned for every cache type";
        match self.ty {
            CacheType::F16 => CacheRows::F16(typed::<f16>(bytes).expect(bad), w),
            CacheType::F32 => CacheRows::F32(typed::<f32>(bytes).expect(bad), w),
            CacheType::Q8_0 => CacheRows::Q8_0(typed::<BlockQ8_0>(bytes).expect(bad), w),
        }
    }

    pub fn view_mut(&mut self) -> CacheRowsMut<'_> {
        let bytes = self.buffer.as_bytes_mut();
        let w = self.width;
        let bad = "a host buffer is aligned for every cache type";
        match self.ty {
            CacheType::F16 => CacheRowsMut::F16(typed_mut::<f16>(bytes).expect(bad), w),
            CacheType::F32 => CacheRowsMut::F32(typed_mut::<f32>(bytes).expect(bad), w),
            CacheType::Q8_0 => CacheRowsMut::Q8_0(typed_mut::<BlockQ8_0>(bytes).expect(bad), w),
        }
    }
}

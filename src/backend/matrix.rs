//! A weight matrix as a device holds it. The model code binds each weight
//! through `Device::bind_matrix` and hands the result back to the backend's
//! ops; what is inside (bytes read in place from the file, or a repacked
//! copy) is the device's business.

use std::ops::Range;
use std::sync::Arc;

#[cfg(not(target_family = "wasm"))]
use crate::backend::cpu::huge_pages::ArenaBytes;
use crate::backend::cpu::repack::RepackedQ4_0;
use crate::backend::cpu::repack_q4_1::RepackedQ4_1;
use crate::backend::cpu::repack_q4_k::RepackedQ4K;
use crate::backend::cpu::repack_q5_0::RepackedQ5_0;
use crate::backend::cpu::repack_q6_k::RepackedQ6K;
use crate::backend::cpu::repack_q8_0::{RepackedQ8_0, RepackedQ8_0x8i4};
use crate::error::{Error, Result};
use crate::gguf::GgufFile;
use crate::tensor::DType;

/// A tensor of a model file, as the model code names it.
#[derive(Clone)]
pub struct WeightSource<'a> {
    pub name: &'a str,
    pub dtype: DType,
    /// Rows (the product of every dimension but the first).
    pub rows: usize,
    /// Values per row (the first dimension).
    pub cols: usize,
    pub file: &'a Arc<GgufFile>,
    /// The file's part holding the tensor (0 unless the model is split).
    pub part: usize,
    /// The tensor's bytes within `file.part_bytes(part)`.
    pub range: Range<usize>,
}

impl<'a> WeightSource<'a> {
    /// The tensor's bytes (empty if the range lies outside its part, which
    /// `Matrix::mapped` refuses).
    pub fn bytes(&self) -> &'a [u8] {
        let part: &'a [u8] = self.file.part_bytes(self.part);
        part.get(self.range.clone()).unwrap_or(&[])
    }
}

/// Where a bound matrix's values live.
pub(crate) enum Storage {
    /// In the file's memory, read in place.
    Mapped {
        file: Arc<GgufFile>,
        part: usize,
        range: Range<usize>,
    },
    /// Copied at load into one of the CPU's interleaved layouts.
    Repacked(Repacked),
    /// Copied at load as in the file, into memory of huge pages.
    #[cfg(not(target_family = "wasm"))]
    Copied(ArenaBytes),
}

/// A weight copied at load into an interleaved layout of the CPU's.
pub(crate) enum Repacked {
    Q4_0(RepackedQ4_0),
    Q5_0(RepackedQ5_0),
    Q4K(RepackedQ4K),
    Q6K(RepackedQ6K),
    Q8_0(RepackedQ8_0),
    Q8_0x8i4(RepackedQ8_0x8i4),
    Q4_1(RepackedQ4_1),
}

/// A weight matrix bound to a device.
pub struct Matrix {
    name: String,
    dtype: DType,
    rows: usize,
    cols: usize,
    pub(crate) storage: Storage,
}

impl Matrix {
    /// A matrix read in place from its file. The byte range must hold
    /// exactly `rows` rows of `cols` values of `dtype`.
    pub(crate) fn mapped(src: &WeightSource) -> Result<Matrix> {
        let expected = src
            .rows
            .checked_mul(src.dtype.bytes_for(src.cols))
            .ok_or_else(|| Error::InvalidArgument(format!("tensor '{}' is too large", src.name)))?;
        if src.cols % src.dtype.block_size() != 0
            || src.range.len() != expected
            || src.range.end > src.file.part_bytes(src.part).len()
        {
            return Err(Error::InvalidArgument(format!(
                "tensor '{}' ({}, {}x{}) does not fit its {} bytes",
                src.name,
                src.dtype,
                src.rows,
                src.cols,
                src.range.len()
            )));
        }
        Ok(Matrix {
            name: src.name.to_string(),
            dtype: src.dtype,
            rows: src.rows,
            cols: src.cols,
            storage: Storage::Mapped {
                file: src.file.clone(),
                part: src.part,
                range: src.range.clone(),
            },
        })
    }

    pub(crate) fn repacked(src: &WeightSource, repacked: Repacked) -> Matrix {
        Matrix {
            name: src.name.to_string(),
            dtype: src.dtype,
            rows: src.rows,
            cols: src.cols,
            storage: Storage::Repacked(repacked),
        }
    }

    /// A matrix read in place, from a copy of its file bytes.
    #[cfg(not(target_family = "wasm"))]
    pub(crate) fn copied(src: &WeightSource, copy: ArenaBytes) -> Matrix {
        Matrix {
            name: src.name.to_string(),
            dtype: src.dtype,
            rows: src.rows,
            cols: src.cols,
            storage: Storage::Copied(copy),
        }
    }

    pub fn name(&self) -> &str {
        &self.name
    }

    /// The type of the file's tensor.
    pub fn dtype(&self) -> DType {
        self.dtype
    }

    pub fn rows(&self) -> usize {
        self.rows
    }

    pub fn cols(&self) -> usize {
        self.cols
    }

    /// Whether the device keeps it in a layout of its own.
    pub fn is_repacked(&self) -> bool {
        matches!(self.storage, Storage::Repacked(_))
    }

    /// Whether the device keeps a copy of its own (repacked, or in huge
    /// pages), rather than reading the file's memory.
    pub fn is_copied(&self) -> bool {
        !matches!(self.storage, Storage::Mapped { .. })
    }

    /// The values in the file's layout, wherever they are read from; None
    /// when repacked.
    pub(crate) fn file_layout_bytes(&self) -> Option<&[u8]> {
        match &self.storage {
            Storage::Mapped { file, part, range } => Some(&file.part_bytes(*part)[range.clone()]),
            #[cfg(not(target_family = "wasm"))]
            Storage::Copied(copy) => Some(copy.as_slice()),
            Storage::Repacked(_) => None,
        }
    }

    /// Bytes the matrix takes where it lives.
    pub fn size_bytes(&self) -> usize {
        match &self.storage {
            Storage::Mapped { range, .. } => range.len(),
            #[cfg(not(target_family = "wasm"))]
            Storage::Copied(copy) => copy.as_slice().len(),
            Storage::Repacked(Repacked::Q4_0(_)) => self.rows * self.dtype.bytes_for(self.cols),
            Storage::Repacked(Repacked::Q5_0(p)) => p.size_bytes(),
            Storage::Repacked(Repacked::Q4K(p)) => p.size_bytes(),
            Storage::Repacked(Repacked::Q6K(p)) => p.size_bytes(),
            Storage::Repacked(Repacked::Q8_0(p)) => p.size_bytes(),
            Storage::Repacked(Repacked::Q8_0x8i4(p)) => p.size_bytes(),
            Storage::Repacked(Repacked::Q4_1(p)) => p.size_bytes(),
        }
    }
}

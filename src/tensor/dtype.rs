//! `DType`: the element types lamina computes with (a subset of `GgmlType`).

use super::GgmlType;
use crate::error::{Error, Result};

/// A tensor type lamina can dequantize and compute with.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[allow(non_camel_case_types)]
pub enum DType {
    F32,
    F16,
    BF16,
    Q4_0,
    Q4_1,
    Q5_0,
    Q5_1,
    Q8_0,
    Q8_1,
    Q2_K,
    Q3_K,
    Q4_K,
    Q5_K,
    Q6_K,
    Q8_K,
    IQ4_NL,
    IQ4_XS,
}

impl DType {
    pub const ALL: [DType; 17] = [
        DType::F32,
        DType::F16,
        DType::BF16,
        DType::Q4_0,
        DType::Q4_1,
        DType::Q5_0,
        DType::Q5_1,
        DType::Q8_0,
        DType::Q8_1,
        DType::Q2_K,
        DType::Q3_K,
        DType::Q4_K,
        DType::Q5_K,
        DType::Q6_K,
        DType::Q8_K,
        DType::IQ4_NL,
        DType::IQ4_XS,
    ];

    pub fn ggml_type(self) -> GgmlType {
        match self {
            DType::F32 => GgmlType::F32,
            DType::F16 => GgmlType::F16,
            DType::BF16 => GgmlType::BF16,
            DType::Q4_0 => GgmlType::Q4_0,
            DType::Q4_1 => GgmlType::Q4_1,
            DType::Q5_0 => GgmlType::Q5_0,
            DType::Q5_1 => GgmlType::Q5_1,
            DType::Q8_0 => GgmlType::Q8_0,
            DType::Q8_1 => GgmlType::Q8_1,
            DType::Q2_K => GgmlType::Q2_K,
            DType::Q3_K => GgmlType::Q3_K,
            DType::Q4_K => GgmlType::Q4_K,
            DType::Q5_K => GgmlType::Q5_K,
            DType::Q6_K => GgmlType::Q6_K,
            DType::Q8_K => GgmlType::Q8_K,
            DType::IQ4_NL => GgmlType::IQ4_NL,
            DType::IQ4_XS => GgmlType::IQ4_XS,
        }
    }

    /// The `DType` of a tensor, or "unsupported tensor type X in tensor Y".
    pub fn of_tensor(ggml_type: GgmlType, tensor: &str) -> Result<DType> {
        DType::try_from(ggml_type).map_err(|_| Error::UnsupportedTensorType {
            tensor: tensor.to_string(),
            ggml_type: ggml_type.name(),
        })
    }

    pub fn name(self) -> &'static str {
        self.ggml_type().name()
    }

    /// Elements per block (1 for F32, F16, BF16).
    pub fn block_size(self) -> usize {
        self.ggml_type().block_size() as usize
    }

    /// Bytes per block.
    pub fn block_bytes(self) -> usize {
        self.ggml_type().block_bytes() as usize
    }

    /// Bytes taken by `n` elements (`n` a multiple of the block size).
    pub fn bytes_for(self, n: usize) -> usize {
        n / self.block_size() * self.block_bytes()
    }

    pub fn is_quantized(self) -> bool {
        !matches!(self, DType::F32 | DType::F16 | DType::BF16)
    }
}

impl TryFrom<GgmlType> for DType {
    type Error = GgmlType;

    fn try_from(t: GgmlType) -> std::result::Result<DType, GgmlType> {
        DType::ALL.into_iter().find(|d| d.ggml_type() == t).ok_or(t)
    }
}

impl std::fmt::Display for DType {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

//! The CPU backend's half of a quantized type: which entries of a variant's
//! table multiply it. The type's layout, dequantizer, quantizer and
//! activation type are in `tensor/quants/<type>.rs`; `matmul.rs` is written
//! once over `CpuProduct` and never names a type.

use super::kernels::{Kernels, QuantizeFn, VecDot4Fn, VecDotFn};
use super::matmul::{ActKind, Prepared};
use crate::tensor::blocks::*;
use crate::tensor::quants::QuantType;

/// A weight type's dot products in one variant.
pub(super) struct Dots<W: QuantType> {
    /// One weight row against one activation row.
    pub dot: VecDotFn<W, W::Dot>,
    /// One weight row against four activation rows, where the variant has it
    /// (bit-equal to four `dot`s).
    pub dot4: Option<VecDot4Fn<W, W::Dot>>,
}

impl<W: QuantType> Dots<W> {
    fn one(dot: VecDotFn<W, W::Dot>) -> Option<Dots<W>> {
        Some(Dots { dot, dot4: None })
    }
}

/// A block type activations are quantized to: the variant's quantizer and
/// where prepared activations hold its rows.
pub(super) trait ActType: Block {
    /// Which type it is, to compare products' preparations.
    const KIND: ActKind;
    fn quantizer(k: &Kernels) -> QuantizeFn<Self>;
    /// The rows of this type in prepared activations.
    fn prepared<'s>(a: &Prepared<'s>) -> &'s [Self];
}

impl ActType for BlockQ8_0 {
    const KIND: ActKind = ActKind::Q8_0;
    fn quantizer(k: &Kernels) -> QuantizeFn<Self> {
        k.quantize_q8_0
    }
    fn prepared<'s>(a: &Prepared<'s>) -> &'s [Self] {
        a.q8_0
    }
}

impl ActType for BlockQ8_1 {
    const KIND: ActKind = ActKind::Q8_1;
    fn quantizer(k: &Kernels) -> QuantizeFn<Self> {
        k.quantize_q8_1
    }
    fn prepared<'s>(a: &Prepared<'s>) -> &'s [Self] {
        a.q8_1
    }
}

impl ActType for BlockQ8K {
    const KIND: ActKind = ActKind::Q8K;
    fn quantizer(k: &Kernels) -> QuantizeFn<Self> {
        k.quantize_q8_k
    }
    fn prepared<'s>(a: &Prepared<'s>) -> &'s [Self] {
        a.q8_k
    }
}

/// A quantized type as the CPU backend multiplies it.
pub(super) trait CpuProduct: QuantType<Dot: ActType> {
    /// The variant's dot products with this weight type; `None` where the
    /// CPU backend has no product for it (the model is then refused at load).
    fn dots(_k: &Kernels) -> Option<Dots<Self>> {
        None
    }
}

impl CpuProduct for BlockQ4_0 {
    fn dots(k: &Kernels) -> Option<Dots<Self>> {
        Dots::one(k.vec_dot_q4_0_q8_0)
    }
}

impl CpuProduct for BlockQ4_1 {
    fn dots(k: &Kernels) -> Option<Dots<Self>> {
        Some(Dots {
            dot: k.vec_dot_q4_1_q8_1,
            dot4: k.vec_dot4_q4_1_q8_1,
        })
    }
}

impl CpuProduct for BlockQ5_0 {
    fn dots(k: &Kernels) -> Option<Dots<Self>> {
        Some(Dots {
            dot: k.vec_dot_q5_0_q8_0,
            dot4: k.vec_dot4_q5_0_q8_0,
        })
    }
}

impl CpuProduct for BlockQ5_1 {
    fn dots(k: &Kernels) -> Option<Dots<Self>> {
        Dots::one(k.vec_dot_q5_1_q8_1)
    }
}

impl CpuProduct for BlockQ8_0 {
    fn dots(k: &Kernels) -> Option<Dots<Self>> {
        Some(Dots {
            dot: k.vec_dot_q8_0_q8_0,
            dot4: k.vec_dot4_q8_0_q8_0,
        })
    }
}

impl CpuProduct for BlockQ4K {
    fn dots(k: &Kernels) -> Option<Dots<Self>> {
        Some(Dots {
            dot: k.vec_dot_q4_k_q8_k,
            dot4: k.vec_dot4_q4_k_q8_k,
        })
    }
}

impl CpuProduct for BlockQ5K {
    fn dots(k: &Kernels) -> Option<Dots<Self>> {
        Dots::one(k.vec_dot_q5_k_q8_k)
    }
}

impl CpuProduct for BlockQ6K {
    fn dots(k: &Kernels) -> Option<Dots<Self>> {
        Some(Dots {
            dot: k.vec_dot_q6_k_q8_k,
            dot4: k.vec_dot4_q6_k_q8_k,
        })
    }
}

impl CpuProduct for BlockQ2K {
    fn dots(k: &Kernels) -> Option<Dots<Self>> {
        Dots::one(k.vec_dot_q2_k_q8_k)
    }
}

impl CpuProduct for BlockQ3K {
    fn dots(k: &Kernels) -> Option<Dots<Self>> {
        Dots::one(k.vec_dot_q3_k_q8_k)
    }
}

impl CpuProduct for BlockIQ4NL {
    fn dots(k: &Kernels) -> Option<Dots<Self>> {
        Dots::one(k.vec_dot_iq4_nl_q8_0)
    }
}

impl CpuProduct for BlockIQ4XS {
    fn dots(k: &Kernels) -> Option<Dots<Self>> {
        Dots::one(k.vec_dot_iq4_xs_q8_k)
    }
}

// Activation types, never weights here.
impl CpuProduct for BlockQ8_1 {}
impl CpuProduct for BlockQ8K {}

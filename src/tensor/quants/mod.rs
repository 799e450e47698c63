//! The quantized types, one module each (as candle's `impl GgmlType for
//! BlockQ4_0`): the block layout, bit-identical to ggml's `ggml-common.h`
//! and size-checked at compile time; its reference dequantizer and quantizer,
//! bit-exact with ggml's; and the block type its dot products take the
//! activations in. `with_quant_type!` is the one place a `DType` becomes its
//! block type. The CPU backend binds each type's product kernels in
//! `backend/cpu/products.rs`.

use half::f16;

use super::blocks::{Block, QK, QK_K};
use super::GgmlType;

/// Declares a block struct, `#[repr(C)]`, with a compile-time size check and
/// its `Block` impl.
macro_rules! block {
    ($(#[$doc:meta])* $name:ident: $ty:ident, $elements:expr, $bytes:literal {
        $($field:ident: $fty:ty),* $(,)?
    }) => {
        $(#[$doc])*
        #[repr(C)]
        #[derive(Clone, Copy, Debug, PartialEq)]
        pub struct $name { $(pub $field: $fty),* }

        const _: () = assert!(std::mem::size_of::<$name>() == $bytes);

        // SAFETY: repr(C), integer/f16/f32 fields only, size checked above.
        unsafe impl Block for $name {
            const TYPE: GgmlType = GgmlType::$ty;
            const ELEMENTS: usize = $elements;
        }
    };
}

mod iq4;
mod kscales;
mod rounding;
// The shared helpers, for the type modules' `use super::*`.
use kscales::*;
use rounding::*;

pub mod iq4_nl;
pub mod iq4_xs;
pub mod q2_k;
pub mod q3_k;
pub mod q4_0;
pub mod q4_1;
pub mod q4_k;
pub mod q5_0;
pub mod q5_1;
pub mod q5_k;
pub mod q6_k;
pub mod q8_0;
pub mod q8_1;
pub mod q8_k;

pub use iq4::IQ4_LEVELS;
pub use iq4_nl::BlockIQ4NL;
pub use iq4_xs::BlockIQ4XS;
pub use kscales::scale_min_k4;
pub use q2_k::BlockQ2K;
pub use q3_k::BlockQ3K;
pub use q4_0::BlockQ4_0;
pub use q4_1::BlockQ4_1;
pub use q4_k::BlockQ4K;
pub use q5_0::BlockQ5_0;
pub use q5_1::BlockQ5_1;
pub use q5_k::BlockQ5K;
pub use q6_k::BlockQ6K;
pub use q8_0::BlockQ8_0;
pub use q8_1::BlockQ8_1;
pub use q8_k::BlockQ8K;

/// Blocks to f32: `y.len() == x.len() * ELEMENTS` (the caller checks).
pub type DequantizeFn<B> = fn(&[B], &mut [f32]);
/// f32 to blocks: `x.len() == y.len() * ELEMENTS` (the caller checks).
pub type QuantizeFn<B> = fn(&[f32], &mut [B]);

/// What a quantized type is, in one place.
pub trait QuantType: Block {
    /// The block type its dot products take the activations in (ggml's
    /// `vec_dot_type`): activation rows are quantized to it once per product.
    type Dot: Block;
    /// The reference dequantizer, bit-identical to ggml's.
    const DEQUANTIZE: DequantizeFn<Self>;
    /// The reference quantizer, bit-exact with ggml's `quantize_row_*_ref`;
    /// `None` for the types lamina reads but cannot write yet.
    const QUANTIZE: Option<QuantizeFn<Self>>;
}

/// Evaluates `$quant` with `$T` naming the block type of `$dtype` when it is
/// quantized, or `$float` for F32, F16 and BF16. The only match from `DType`
/// to a block type: a new quantized `DType` without its line here fails to
/// compile.
macro_rules! with_quant_type {
    ($dtype:expr, $T:ident => $quant:expr, float => $float:expr) => {{
        use $crate::tensor::{quants, DType};
        match $dtype {
            DType::F32 | DType::F16 | DType::BF16 => $float,
            DType::Q4_0 => {
                type $T = quants::BlockQ4_0;
                $quant
            }
            DType::Q4_1 => {
                type $T = quants::BlockQ4_1;
                $quant
            }
            DType::Q5_0 => {
                type $T = quants::BlockQ5_0;
                $quant
            }
            DType::Q5_1 => {
                type $T = quants::BlockQ5_1;
                $quant
            }
            DType::Q8_0 => {
                type $T = quants::BlockQ8_0;
                $quant
            }
            DType::Q8_1 => {
                type $T = quants::BlockQ8_1;
                $quant
            }
            DType::Q2_K => {
                type $T = quants::BlockQ2K;
                $quant
            }
            DType::Q3_K => {
                type $T = quants::BlockQ3K;
                $quant
            }
            DType::Q4_K => {
                type $T = quants::BlockQ4K;
                $quant
            }
            DType::Q5_K => {
                type $T = quants::BlockQ5K;
                $quant
            }
            DType::Q6_K => {
                type $T = quants::BlockQ6K;
                $quant
            }
            DType::Q8_K => {
                type $T = quants::BlockQ8K;
                $quant
            }
            DType::IQ4_NL => {
                type $T = quants::BlockIQ4NL;
                $quant
            }
            DType::IQ4_XS => {
                type $T = quants::BlockIQ4XS;
                $quant
            }
        }
    }};
}
pub(crate) use with_quant_type;

//! f16 → f32 for the kernels' block scales. On wasm there are no f16
//! instructions, and `half` converts with a branchy software routine of some
//! twenty operations (a clz for subnormals), which cost more per block than
//! the block's SIMD dot product itself; this one is branchless and exact.
//! Elsewhere `half`'s conversion (F16C, FP16) is used as is.

use half::f16;

/// `h` as f32, bit for bit as `half::f16::to_f32` gives it.
#[inline(always)]
pub fn f16_to_f32(h: f16) -> f32 {
    #[cfg(target_family = "wasm")]
    {
        // The exponent and mantissa moved into an f32's place read as a
        // value 2^112 too small for every finite f16 (normal or subnormal:
        // wasm keeps f32 subnormals), so one exact multiply fixes it; the
        // all-ones exponent (infinity, NaN) is set directly, NaNs quieted
        // as `half` does.
        let b = h.to_bits() as u32;
        let sign = (b & 0x8000) << 16;
        let em = (b & 0x7fff) << 13;
        let finite = (f32::from_bits(em) * f32::from_bits(0x7780_0000)).to_bits(); // × 2^112
        let quiet = if b & 0x03ff != 0 { 0x0040_0000 } else { 0 };
        let special = em | 0x7f80_0000 | quiet;
        f32::from_bits(
            sign | if b & 0x7c00 == 0x7c00 {
                special
            } else {
                finite
            },
        )
    }
    #[cfg(not(target_family = "wasm"))]
    {
        h.to_f32()
    }
}

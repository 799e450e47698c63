//! aarch64 SVE kernels, vector-length agnostic: written with inline asm (SVE
//! intrinsics are not stable), correct for any vector length from 128 to 2048
//! bits. Each block's integer dot product is exact and is combined in the
//! scalar kernel's order, so results equal the scalar kernels' bit for bit.

use std::arch::asm;

use super::kernels::Kernels;
use crate::tensor::blocks::*;

/// SVE kernels over `base` (the NEON table for what SVE does not replace).
pub fn kernels(base: Kernels) -> Kernels {
    Kernels {
        vec_dot_q4_0_q8_0,
        vec_dot_q8_0_q8_0,
        ..base
    }
}

/// The SVE vector length in bytes.
///
/// # Safety
/// The CPU must support SVE.
#[target_feature(enable = "sve")]
pub unsafe fn vector_bytes() -> usize {
    let n: usize;
    asm!("cntb {n}", n = out(reg) n, options(pure, nomem, nostack));
    n
}

// Safe wrappers. SAFETY: the SVE table is only built when SVE was detected.

fn vec_dot_q8_0_q8_0(x: &[BlockQ8_0], y: &[BlockQ8_0]) -> f32 {
    let mut sum = 0.0f32;
    for (x, y) in x.iter().zip(y) {
        let sumi = unsafe { dot_i8(x.qs.as_ptr(), y.qs.as_ptr(), QK) };
        sum += sumi as f32 * (x.d.to_f32() * y.d.to_f32());
    }
    sum
}

fn vec_dot_q4_0_q8_0(x: &[BlockQ4_0], y: &[BlockQ8_0]) -> f32 {
    let mut sum = 0.0f32;
    for (x, y) in x.iter().zip(y) {
        let sumi = unsafe { q4_0_dot(x, y) };
        sum += sumi as f32 * x.d.to_f32() * y.d.to_f32();
    }
    sum
}

/// Σ a[i]·b[i] for `n` int8 values, in vector-length steps under a WHILELO
/// predicate (so any length and any vector width work).
#[target_feature(enable = "sve")]
unsafe fn dot_i8(a: *const i8, b: *const i8, n: usize) -> i32 {
    let sum: i64;
    asm!(
        "mov {i}, #0",
        "mov z2.s, #0",
        "whilelo p0.b, {i}, {n}",
        "2:",
        "ld1b {{z0.b}}, p0/z, [{a}, {i}]",
        "ld1b {{z1.b}}, p0/z, [{b}, {i}]",
        "sdot z2.s, z0.b, z1.b",
        "incb {i}",
        "whilelo p0.b, {i}, {n}",
        "b.first 2b",
        "ptrue p1.s",
        "saddv d3, p1, z2.s",
        "fmov {sum}, d3",
        a = in(reg) a,
        b = in(reg) b,
        n = in(reg) n,
        i = out(reg) _,
        sum = out(reg) sum,
        out("z0") _, out("z1") _, out("z2") _, out("z3") _,
        out("p0") _, out("p1") _,
        options(readonly, nostack),
    );
    sum as i32
}

/// One Q4_0 block against one Q8_0 block: the 16 low nibbles meet y[0..16],
/// the 16 high nibbles y[16..32]; a 16-lane predicate keeps this correct at
/// every vector width.
#[target_feature(enable = "sve")]
unsafe fn q4_0_dot(x: &BlockQ4_0, y: &BlockQ8_0) -> i32 {
    let sum: i64;
    asm!(
        "ptrue p0.b, vl16",
        "ld1b {{z0.b}}, p0/z, [{qs}]",
        "ld1b {{z1.b}}, p0/z, [{y0}]",
        "ld1b {{z3.b}}, p0/z, [{y1}]",
        "mov z4.d, z0.d",
        "and z4.b, z4.b, #0xf",
        "lsr z5.b, z0.b, #4",
        "sub z4.b, z4.b, #8",
        "sub z5.b, z5.b, #8",
        "mov z2.s, #0",
        "sdot z2.s, z4.b, z1.b",
        "sdot z2.s, z5.b, z3.b",
        "ptrue p1.s",
        "saddv d6, p1, z2.s",
        "fmov {sum}, d6",
        qs = in(reg) x.qs.as_ptr(),
        y0 = in(reg) y.qs.as_ptr(),
        y1 = in(reg) y.qs.as_ptr().add(16),
        sum = out(reg) sum,
        out("z0") _, out("z1") _, out("z2") _, out("z3") _, out("z4") _, out("z5") _, out("z6") _,
        out("p0") _, out("p1") _,
        options(readonly, nostack),
    );
    sum as i32
}

//! aarch64 SVE kernels, vector-length agnostic: written with inline asm (SVE
//! intrinsics are not stable), correct for any vector length from 128 to 2048
//! bits. Each block's integer dot product is exact and is combined in the
//! scalar kernel's order, so results equal the scalar kernels' bit for bit.

use std::arch::asm;

use super::kernels::Kernels;
use super::repack::BlockQ4_0x8;
use crate::tensor::blocks::*;

/// SVE kernels over `base` (the NEON table for what SVE does not replace).
/// The 8x8 GEMV needs vectors of at least 256 bits (`sve_bytes` >= 32).
pub fn kernels(base: Kernels, sve_bytes: usize) -> Kernels {
    let k = Kernels {
        vec_dot_q4_0_q8_0,
        vec_dot_q8_0_q8_0,
        ..base
    };
    if sve_bytes >= 32 {
        Kernels {
            gemv_q4_0_x8i8,
            ..k
        }
    } else {
        k
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

/// 8x8 layout (chosen for 256-bit SVE): per block, eight exact integer row sums,
/// scaled in `vec_dot`'s order, so outputs equal the scalar `vec_dot` of each
/// row. Correct at any vector length of 256 bits or more (only the first 32
/// bytes of each vector are used); not in the table below that.
fn gemv_q4_0_x8i8(group: &[BlockQ4_0x8], x: &[BlockQ8_0], out: &mut [f32]) {
    let mut acc = [0f32; 8];
    for (b, y) in group.iter().zip(x) {
        let mut lanes = [0i32; 16];
        // SAFETY: SVE was detected (this table exists only then) and this
        // layout is only chosen at 256 bits or more.
        unsafe { block_x8i8(b, y, &mut lanes) };
        let dy = y.d.to_f32();
        for r in 0..8 {
            let sumi = lanes[2 * r] + lanes[2 * r + 1];
            acc[r] += sumi as f32 * b.d[r].to_f32() * dy;
        }
    }
    out[..8].copy_from_slice(&acc);
}

/// Word 2r+p of `lanes` gets half p of row r's sum: each 32-byte load is 8
/// bytes of 4 rows, and LD1RD broadcasts the matching 8 activation bytes.
#[target_feature(enable = "sve")]
unsafe fn block_x8i8(b: &BlockQ4_0x8, y: &BlockQ8_0, lanes: &mut [i32; 16]) {
    let qs = b.qs.as_ptr();
    let yq = y.qs.as_ptr();
    asm!(
        "ptrue p0.b, vl32",
        "ptrue p1.d",
        "ptrue p2.s, vl8",
        "mov z6.s, #0",
        "mov z7.s, #0",
        // k = 0
        "ld1rd {{z1.d}}, p1/z, [{y0}]",
        "ld1rd {{z2.d}}, p1/z, [{y16}]",
        "ld1b {{z0.b}}, p0/z, [{q0}]",
        "mov z3.d, z0.d",
        "and z3.b, z3.b, #0xf",
        "sub z3.b, z3.b, #8",
        "lsr z4.b, z0.b, #4",
        "sub z4.b, z4.b, #8",
        "sdot z6.s, z3.b, z1.b",
        "sdot z6.s, z4.b, z2.b",
        "ld1b {{z0.b}}, p0/z, [{q32}]",
        "mov z3.d, z0.d",
        "and z3.b, z3.b, #0xf",
        "sub z3.b, z3.b, #8",
        "lsr z4.b, z0.b, #4",
        "sub z4.b, z4.b, #8",
        "sdot z7.s, z3.b, z1.b",
        "sdot z7.s, z4.b, z2.b",
        // k = 1
        "ld1rd {{z1.d}}, p1/z, [{y8}]",
        "ld1rd {{z2.d}}, p1/z, [{y24}]",
        "ld1b {{z0.b}}, p0/z, [{q64}]",
        "mov z3.d, z0.d",
        "and z3.b, z3.b, #0xf",
        "sub z3.b, z3.b, #8",
        "lsr z4.b, z0.b, #4",
        "sub z4.b, z4.b, #8",
        "sdot z6.s, z3.b, z1.b",
        "sdot z6.s, z4.b, z2.b",
        "ld1b {{z0.b}}, p0/z, [{q96}]",
        "mov z3.d, z0.d",
        "and z3.b, z3.b, #0xf",
        "sub z3.b, z3.b, #8",
        "lsr z4.b, z0.b, #4",
        "sub z4.b, z4.b, #8",
        "sdot z7.s, z3.b, z1.b",
        "sdot z7.s, z4.b, z2.b",
        "st1w {{z6.s}}, p2, [{out0}]",
        "st1w {{z7.s}}, p2, [{out8}]",
        y0 = in(reg) yq,
        y8 = in(reg) yq.add(8),
        y16 = in(reg) yq.add(16),
        y24 = in(reg) yq.add(24),
        q0 = in(reg) qs,
        q32 = in(reg) qs.add(32),
        q64 = in(reg) qs.add(64),
        q96 = in(reg) qs.add(96),
        out0 = in(reg) lanes.as_mut_ptr(),
        out8 = in(reg) lanes.as_mut_ptr().add(8),
        out("z0") _, out("z1") _, out("z2") _, out("z3") _, out("z4") _, out("z6") _, out("z7") _,
        out("p0") _, out("p1") _, out("p2") _,
        options(nostack),
    );
}

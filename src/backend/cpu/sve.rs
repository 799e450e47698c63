//! aarch64 SVE kernels, vector-length agnostic: written with inline asm (SVE
//! intrinsics are not stable), correct for any vector length from 128 to 2048
//! bits. Each block's integer dot product is exact and is combined in the
//! scalar kernel's order, so results equal the scalar kernels' bit for bit.

use std::arch::asm;
use std::mem::{offset_of, size_of};

use super::features::{CpuFeatures, Feature};
use super::kernels::Kernels;
use super::neon::fp16;
use super::repack::{BlockQ4_0x8, X8I8_FLIP};
use crate::tensor::blocks::*;

// The asm below hard-codes these layouts; a change fails the build here.
// `q8_0_block_sums`, `q4_0_block_sums`: a block's quants start 2 bytes in
// (after the f16 scale); Q8_0 blocks are 34 bytes apart and hold 32 quants
// (read as two 16-byte halves), Q4_0 blocks 18 apart with 16 bytes of quants.
const _: () = assert!(offset_of!(BlockQ8_0, qs) == 2);
const _: () = assert!(size_of::<BlockQ8_0>() == 34);
const _: () = assert!(size_of::<[i8; QK]>() == 32);
const _: () = assert!(offset_of!(BlockQ4_0, qs) == 2);
const _: () = assert!(size_of::<BlockQ4_0>() == 18);
const _: () = assert!(size_of::<[u8; QK / 2]>() == 16);
// `block_x8i8`: four 32-byte loads at 0, 32, 64, 96 of a 128-byte `qs` (the
// rest of a BlockQ4_0x8 is its 8 f16 scales), 8-byte loads at 0, 8, 16, 24
// of a Q8_0 block's 32 quants, two 8-word stores into 16 words.
const _: () = assert!(offset_of!(BlockQ4_0x8, qs) == 16);
const _: () = assert!(size_of::<BlockQ4_0x8>() == 16 + 128);
// ... whose nibbles are stored XOR 8 on aarch64.
const _: () = assert!(X8I8_FLIP == 0x88);

/// SVE kernels over `base` (the best NEON table, for what SVE does not
/// replace). The Q4_0/Q8_0 dots and the 8x8 GEMV here replace NEON's only
/// without dotprod (A64FX): with SDOT, NEON's per-block code is shorter
/// (bench-kernels under qemu). The 8x8 GEMV needs vectors of at least 256
/// bits. At exactly 256 bits Q4_0's 8x8 kernels are `sve256`'s, which loop
/// over the blocks in asm and take half NEON's instructions. Panics unless this CPU has
/// SVE: every kernel here relies on it, so it is checked here, once per
/// table, and not only by the caller.
pub(super) fn kernels(base: Kernels, features: &CpuFeatures) -> Kernels {
    assert!(
        std::arch::is_aarch64_feature_detected!("sve"),
        "the sve kernel table needs sve, which this CPU lacks"
    );
    let mut k = base;
    if !features.has(Feature::Dotprod) {
        k.vec_dot_q4_0_q8_0 = vec_dot_q4_0_q8_0;
        k.vec_dot_q8_0_q8_0 = vec_dot_q8_0_q8_0;
        // Products then loop over this kernel: NEON's four-row one is
        // NEON's one-row kernel four times.
        k.vec_dot4_q8_0_q8_0 = None;
    }
    if features.sve_bytes >= 32 && !features.has(Feature::Dotprod) {
        // Memory-safe at any vector length (see `block_x8i8`); correct from
        // 256 bits, which `sve_bytes` says.
        k.gemv_q4_0_x8i8 = gemv_q4_0_x8i8;
    }
    if features.sve_bytes == 32 {
        // Correct at exactly 256 bits only (lane orders); shorter than
        // NEON's kernels and the one above (which calls per block).
        k.gemv_q4_0_x8i8 = super::sve256::gemv_q4_0_x8;
        if features.has(Feature::I8mm) {
            k.gemm_q4_0_x8i8_pairs = Some(super::sve256::gemm_q4_0_x8_pairs);
        }
    }
    k
}

/// The SVE vector length in bytes.
///
/// # Safety
/// The CPU must support SVE.
#[target_feature(enable = "sve")]
pub(super) unsafe fn vector_bytes() -> usize {
    let n: usize;
    asm!("cntb {n}", n = out(reg) n, options(pure, nomem, nostack));
    n
}

// Safety. Every `unsafe fn` of this module needs an SVE CPU
// (`#[target_feature(enable = "sve")]`). The safe wrappers below are private
// and reachable only through the table `kernels` builds, which it builds
// only after detecting SVE; each checks its slices' lengths before the
// call, and hands the asm loops only counts and buffers it has sized.

/// Blocks per call of the asm loops (their integer sums go to a stack buffer).
const CHUNK: usize = 64;

fn vec_dot_q8_0_q8_0(x: &[BlockQ8_0], y: &[BlockQ8_0]) -> f32 {
    super::scalar::check_dot(x, y);
    let mut sum = 0.0f32;
    let mut sums = [0i32; CHUNK];
    for (x, y) in x.chunks(CHUNK).zip(y.chunks(CHUNK)) {
        // SAFETY: only reachable through the table built after detecting
        // SVE; the callee bounds its loop by both slices and `sums`.
        let n = unsafe { q8_0_block_sums(x, y, &mut sums) };
        for ((x, y), &sumi) in x.iter().zip(y).zip(&sums[..n]) {
            sum += sumi as f32 * (fp16(x.d) * fp16(y.d));
        }
    }
    sum
}

fn vec_dot_q4_0_q8_0(x: &[BlockQ4_0], y: &[BlockQ8_0]) -> f32 {
    super::scalar::check_dot(x, y);
    let mut sum = 0.0f32;
    let mut sums = [0i32; CHUNK];
    for (x, y) in x.chunks(CHUNK).zip(y.chunks(CHUNK)) {
        // SAFETY: only reachable through the table built after detecting
        // SVE; the callee bounds its loop by both slices and `sums`.
        let n = unsafe { q4_0_block_sums(x, y, &mut sums) };
        for ((x, y), &sumi) in x.iter().zip(y).zip(&sums[..n]) {
            sum += sumi as f32 * fp16(x.d) * fp16(y.d);
        }
    }
    sum
}

/// sums[i] = x[i].qs · y[i].qs for the first `n` Q8_0 block pairs, where `n`
/// (returned) is the least of the two lengths and `CHUNK`. Each block's 32
/// bytes are read as two 16-byte halves under a 16-lane predicate, so this
/// is correct at every vector length.
///
/// # Safety
/// The CPU must have SVE. (Any lengths: the loop runs `n` times and reads
/// only the `qs` of blocks below `n`; layouts asserted at the top.)
#[target_feature(enable = "sve")]
unsafe fn q8_0_block_sums(x: &[BlockQ8_0], y: &[BlockQ8_0], sums: &mut [i32; CHUNK]) -> usize {
    let n = x.len().min(y.len()).min(CHUNK);
    // The loop counts down to zero after each block: it must not start at 0.
    if n == 0 {
        return 0;
    }
    asm!(
        "ptrue p0.b, vl16",
        "ptrue p1.s",
        "2:",
        "ld1b {{z0.b}}, p0/z, [{x}]",
        "ld1b {{z1.b}}, p0/z, [{y}]",
        "ld1b {{z4.b}}, p0/z, [{x}, {sixteen}]",
        "ld1b {{z5.b}}, p0/z, [{y}, {sixteen}]",
        "mov z2.s, #0",
        "sdot z2.s, z0.b, z1.b",
        "sdot z2.s, z4.b, z5.b",
        "saddv d3, p1, z2.s",
        "fmov {t:x}, d3",
        "str {t:w}, [{out}], #4",
        "add {x}, {x}, #34",
        "add {y}, {y}, #34",
        "subs {n}, {n}, #1",
        "b.ne 2b",
        x = inout(reg) x.as_ptr().cast::<u8>().add(2) => _,
        y = inout(reg) y.as_ptr().cast::<u8>().add(2) => _,
        n = inout(reg) n => _,
        out = inout(reg) sums.as_mut_ptr() => _,
        sixteen = in(reg) 16usize,
        t = out(reg) _,
        out("z0") _, out("z1") _, out("z2") _, out("z3") _, out("z4") _, out("z5") _,
        out("p0") _, out("p1") _,
        options(nostack),
    );
    n
}

/// sums[i] = Σ (nibble - 8) · y for the first `n` Q4_0 / Q8_0 block pairs,
/// where `n` (returned) is the least of the two lengths and `CHUNK`: the 16
/// low nibbles meet y[0..16], the 16 high nibbles y[16..32]; a 16-lane
/// predicate keeps this correct at every vector length.
///
/// # Safety
/// The CPU must have SVE. (Any lengths: the loop runs `n` times and reads
/// only the `qs` of blocks below `n`; layouts asserted at the top.)
#[target_feature(enable = "sve")]
unsafe fn q4_0_block_sums(x: &[BlockQ4_0], y: &[BlockQ8_0], sums: &mut [i32; CHUNK]) -> usize {
    let n = x.len().min(y.len()).min(CHUNK);
    // The loop counts down to zero after each block: it must not start at 0.
    if n == 0 {
        return 0;
    }
    asm!(
        "ptrue p0.b, vl16",
        "ptrue p1.s",
        "2:",
        "ld1b {{z0.b}}, p0/z, [{x}]",
        "ld1b {{z1.b}}, p0/z, [{y}]",
        "ld1b {{z3.b}}, p0/z, [{y}, {sixteen}]",
        "mov z4.d, z0.d",
        "and z4.b, z4.b, #0xf",
        "sub z4.b, z4.b, #8",
        "lsr z5.b, z0.b, #4",
        "sub z5.b, z5.b, #8",
        "mov z2.s, #0",
        "sdot z2.s, z4.b, z1.b",
        "sdot z2.s, z5.b, z3.b",
        "saddv d6, p1, z2.s",
        "fmov {t:x}, d6",
        "str {t:w}, [{out}], #4",
        "add {x}, {x}, #18",
        "add {y}, {y}, #34",
        "subs {n}, {n}, #1",
        "b.ne 2b",
        x = inout(reg) x.as_ptr().cast::<u8>().add(2) => _,
        y = inout(reg) y.as_ptr().cast::<u8>().add(2) => _,
        n = inout(reg) n => _,
        out = inout(reg) sums.as_mut_ptr() => _,
        sixteen = in(reg) 16usize,
        t = out(reg) _,
        out("z0") _, out("z1") _, out("z2") _, out("z3") _, out("z4") _, out("z5") _, out("z6") _,
        out("p0") _, out("p1") _,
        options(nostack),
    );
    n
}

/// 8x8 layout (chosen for 256-bit SVE): per block, eight exact integer row sums,
/// scaled in `vec_dot`'s order, so outputs equal the scalar `vec_dot` of each
/// row. Correct at any vector length of 256 bits or more (only the first 32
/// bytes of each vector are used); not in the table below that.
fn gemv_q4_0_x8i8(group: &[BlockQ4_0x8], x: &[BlockQ8_0], out: &mut [f32]) {
    super::repack::check_gemv(group, x, out, 8);
    let mut acc = [0f32; 8];
    for (b, y) in group.iter().zip(x) {
        let mut lanes = [0i32; 16];
        // SAFETY: only reachable through the table built after detecting SVE
        // (and only placed there at 256 bits or more, for correctness); the
        // arguments are typed blocks and a 16-word buffer.
        unsafe { block_x8i8(b, y, &mut lanes) };
        let dy = fp16(y.d);
        for r in 0..8 {
            let sumi = lanes[2 * r] + lanes[2 * r + 1];
            acc[r] += sumi as f32 * fp16(b.d[r]) * dy;
        }
    }
    out[..8].copy_from_slice(&acc);
}

/// Word 2r+p of `lanes` gets half p of row r's sum: each 32-byte load is 8
/// bytes of 4 rows (their nibbles XOR 8, `repack::X8I8_FLIP`, undone here),
/// and LD1RD broadcasts the matching 8 activation bytes.
///
/// # Safety
/// The CPU must have SVE. Memory-safe at every vector length: the loads are
/// under `vl32` predicates (32 bytes at 0, 32, 64, 96 of the 128-byte `qs`)
/// or are LD1RD (8 bytes at 0, 8, 16, 24 of the 32-byte `y.qs`), and the
/// stores under a `vl8` predicate (8 words at 0 and 8 of the 16 of `lanes`);
/// below 256 bits those predicates are all false, and nothing is read or
/// written (the results are then wrong: the table uses this only from 256).
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
        "eor z0.b, z0.b, #0x88",
        "mov z3.d, z0.d",
        "and z3.b, z3.b, #0xf",
        "sub z3.b, z3.b, #8",
        "lsr z4.b, z0.b, #4",
        "sub z4.b, z4.b, #8",
        "sdot z6.s, z3.b, z1.b",
        "sdot z6.s, z4.b, z2.b",
        "ld1b {{z0.b}}, p0/z, [{q32}]",
        "eor z0.b, z0.b, #0x88",
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
        "eor z0.b, z0.b, #0x88",
        "mov z3.d, z0.d",
        "and z3.b, z3.b, #0xf",
        "sub z3.b, z3.b, #8",
        "lsr z4.b, z0.b, #4",
        "sub z4.b, z4.b, #8",
        "sdot z6.s, z3.b, z1.b",
        "sdot z6.s, z4.b, z2.b",
        "ld1b {{z0.b}}, p0/z, [{q96}]",
        "eor z0.b, z0.b, #0x88",
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

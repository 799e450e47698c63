//! aarch64 kernels: NEON (stable intrinsics) and NEON with the dot-product
//! extension (SDOT through inline asm: its intrinsic is not stable). Same names
//! and signatures as `scalar.rs`. Each block's integer dot product is exact and
//! is scaled and summed in the scalar kernel's order, so results equal the
//! scalar kernels' bit for bit.

use std::arch::aarch64::*;
use std::arch::asm;

use super::group_tiles::by_take;
use super::iq4_dot;
use super::kernels::Kernels;
use super::kquant_dot::{self, IntDots};
use super::neon_groups;
use super::neon_i8mm::{self, smmla};
use super::neon_q4_0;
use super::neon_q8_0;
use super::repack::BlockQ4_0x4;
use crate::tensor::blocks::*;
use crate::tensor::quants::IQ4_LEVELS;

// NEON (Advanced SIMD) is part of the aarch64 targets' baseline: the whole
// build is compiled with it, so every CPU that runs this code has it.
const _: () = assert!(cfg!(target_feature = "neon"));

/// NEON only (every AArch64 CPU).
pub(super) fn kernels(base: Kernels) -> Kernels {
    Kernels {
        quantize_q8_0,
        quantize_q8_1,
        quantize_q8_k,
        vec_dot_q4_0_q8_0,
        vec_dot_q4_1_q8_1,
        vec_dot4_q4_1_q8_1: Some(vec_dot4_q4_1_q8_1),
        vec_dot_q5_0_q8_0,
        vec_dot4_q5_0_q8_0: Some(vec_dot4_q5_0_q8_0),
        vec_dot_q5_1_q8_1,
        vec_dot_q8_0_q8_0,
        vec_dot4_q8_0_q8_0: Some(vec_dot4_q8_0_q8_0),
        vec_dot_f32,
        vec_dot_f16,
        vec_dot_q4_k_q8_k,
        vec_dot4_q4_k_q8_k: Some(vec_dot4_q4_k_q8_k),
        vec_dot_q5_k_q8_k,
        vec_dot_q6_k_q8_k,
        vec_dot4_q6_k_q8_k: Some(vec_dot4_q6_k_q8_k),
        vec_dot_q2_k_q8_k,
        vec_dot_q3_k_q8_k,
        vec_dot_iq4_nl_q8_0,
        vec_dot_iq4_xs_q8_k,
        scores_f16,
        wsum_f16,
        scores_f16_heads: Some(scores_f16_heads),
        wsum_f16_heads: Some(wsum_f16_heads),
        axpy_f32,
        delta_net_columns,
        causal_conv,
        silu_mul,
        round_f16,
        gemm_f32,
        softmax_poly,
        ..base
    }
}

/// NEON with SDOT (dotprod), also used by the i8mm variant for vector dots.
/// Panics unless this CPU has dotprod: the SDOT kernels rely on it, so it is
/// checked here, once per table, and not only by the caller.
pub(super) fn dotprod_kernels(base: Kernels) -> Kernels {
    assert!(
        std::arch::is_aarch64_feature_detected!("dotprod"),
        "the neon-dotprod kernel table needs dotprod, which this CPU lacks"
    );
    Kernels {
        vec_dot_q4_0_q8_0: vec_dot_q4_0_q8_0_sdot,
        vec_dot_q4_1_q8_1: vec_dot_q4_1_q8_1_sdot,
        vec_dot4_q4_1_q8_1: Some(vec_dot4_q4_1_q8_1_sdot),
        vec_dot_q8_0_q8_0: vec_dot_q8_0_q8_0_sdot,
        vec_dot4_q8_0_q8_0: Some(vec_dot4_q8_0_q8_0_sdot),
        gemv_q4_0_x4i4: neon_q4_0::gemv_q4_0_x4i4,
        gemm_q4_0_x4i4: Some(neon_q4_0::gemm_q4_0_x4i4),
        gemv_q4_0_x4i8,
        gemm_q8_0_x8: Some(neon_groups::gemm_q8_0_x8),
        gemm_q8_0_x8i4: Some(neon_q8_0::gemm_q8_0_x8i4),
        gemm_q8_0_x8i4_quads: Some(neon_q8_0::gemm_q8_0_x8i4_quads),
        gemm_q4_0_x4i4_quads: Some(neon_q4_0::gemm_q4_0_x4i4_quads),
        gemm_q4_1_x8: Some(neon_groups::gemm_q4_1_x8),
        gemm_q4_k_x8: Some(neon_groups::gemm_q4_k_x8),
        gemm_q5_0_x8: Some(neon_groups::gemm_q5_0_x8),
        gemm_q6_k_x8: Some(neon_groups::gemm_q6_k_x8),
        ..kernels(base)
    }
}

/// NEON with dotprod and i8mm: adds the SMMLA matrix-matrix kernels (and
/// the SDOT GEMV of Q4_0's 8x8 layout, which this table's repacking picks). Panics
/// unless this CPU has i8mm (and dotprod, checked by `dotprod_kernels`).
pub(super) fn i8mm_kernels(base: Kernels) -> Kernels {
    assert!(
        std::arch::is_aarch64_feature_detected!("i8mm"),
        "the neon-i8mm kernel table needs i8mm, which this CPU lacks"
    );
    Kernels {
        gemm_q4_0_x4i8: Some(gemm_q4_0_x4i8),
        gemm_q8_0_x8_pairs: Some(neon_i8mm::gemm_q8_0_x8_pairs),
        // SMMLA takes eight-byte runs: Q8_0 keeps them here.
        gemm_q8_0_x8i4: None,
        gemm_q8_0_x8i4_quads: None,
        gemv_q4_0_x8i8: neon_groups::gemv_q4_0_x8,
        gemm_q4_0_x8i8_pairs: Some(neon_i8mm::gemm_q4_0_x8_pairs),
        ..dotprod_kernels(base)
    }
}

/// The best NEON table this CPU supports, for what the SVE variant does not
/// replace.
pub(super) fn best_neon(base: Kernels) -> Kernels {
    if std::arch::is_aarch64_feature_detected!("i8mm")
        && std::arch::is_aarch64_feature_detected!("dotprod")
    {
        i8mm_kernels(base)
    } else if std::arch::is_aarch64_feature_detected!("dotprod") {
        dotprod_kernels(base)
    } else {
        kernels(base)
    }
}

// Safety. The `unsafe fn`s of this module are unsafe for these reasons, as
// each one's doc says: NEON intrinsics (always present, see above); SDOT or
// SMMLA (dotprod or i8mm: the CPU must have it); raw pointers (they must be
// valid for the bytes read). The safe wrappers below are private and
// reachable only through the tables above: the plain ones need only NEON,
// the `_sdot` ones are only in the tables `dotprod_kernels` builds after
// detecting dotprod, and the SMMLA one only in the table `i8mm_kernels`
// builds after detecting i8mm. Each wrapper checks its slices' lengths (the
// `check_*` functions of `scalar.rs` and `repack.rs`) before the call, so no
// kernel reads or writes out of bounds whatever it is passed.

fn quantize_q8_0(x: &[f32], y: &mut [BlockQ8_0]) {
    super::scalar::check_quantize(x, y);
    // SAFETY: NEON only (always present); lengths checked above (the kernel
    // reads whole chunks of 32 only).
    unsafe { quantize_q8_0_impl(x, y) }
}
fn quantize_q8_1(x: &[f32], y: &mut [BlockQ8_1]) {
    // `q8_1_from_q8_0` checks the lengths, then passes one block at a time.
    super::scalar::q8_1_from_q8_0(x, y, |x, y| {
        // SAFETY: NEON only (always present); one block and its 32 values
        // (typed arrays).
        unsafe { quantize_q8_0_impl(x, y) }
    })
}
fn quantize_q8_k(x: &[f32], y: &mut [BlockQ8K]) {
    // `q8_k_with` checks the lengths, then passes one block at a time.
    super::scalar::q8_k_with(x, y, |x, iscale, q| {
        // SAFETY: NEON only (always present); 256 values in, 256 out (typed
        // arrays).
        unsafe { round_scaled_q8_k(x, iscale, q) }
    })
}
fn vec_dot_q4_0_q8_0(x: &[BlockQ4_0], y: &[BlockQ8_0]) -> f32 {
    super::scalar::check_dot(x, y);
    // SAFETY: NEON only (always present); the per-block helpers take typed
    // blocks; lengths checked above.
    unsafe { dot_blocks(x, y, |x, y| (q4_0_dot(x, y), fp16(x.d), fp16(y.d))) }
}
fn vec_dot_q4_1_q8_1(x: &[BlockQ4_1], y: &[BlockQ8_1]) -> f32 {
    super::scalar::check_dot(x, y);
    // SAFETY: NEON only (always present); typed blocks; lengths checked above.
    unsafe { q4_1_sum(x, y, |x, y| q4_1_dot(x, y)) }
}
fn vec_dot4_q4_1_q8_1(x: &[BlockQ4_1], y: [&[BlockQ8_1]; 4]) -> [f32; 4] {
    super::scalar::check_dot4(x, &y);
    // SAFETY: NEON only (always present); each load reads 16 bytes at 0 or
    // 16 of a 32-byte `qs`; lengths checked above.
    unsafe {
        q4_1_sum4(
            x,
            y,
            |q, y| dot16(q.0, vld1q_s8(y.qs.as_ptr())),
            |q, y| dot16(q.1, vld1q_s8(y.qs.as_ptr().add(16))),
        )
    }
}
fn vec_dot4_q8_0_q8_0(x: &[BlockQ8_0], y: [&[BlockQ8_0]; 4]) -> [f32; 4] {
    super::scalar::check_dot4(x, &y);
    // SAFETY: NEON only (always present); each load reads 16 bytes at 0 or
    // 16 of a 32-byte `qs`; lengths checked above.
    unsafe {
        q8_0_sum4(x, y, |q, y| {
            let s0 = dot16(q.0, vld1q_s8(y.qs.as_ptr()));
            vaddq_s32(s0, dot16(q.1, vld1q_s8(y.qs.as_ptr().add(16))))
        })
    }
}
fn vec_dot4_q8_0_q8_0_sdot(x: &[BlockQ8_0], y: [&[BlockQ8_0]; 4]) -> [f32; 4] {
    super::scalar::check_dot4(x, &y);
    // SAFETY: only in the tables built after detecting dotprod; lengths
    // checked above.
    unsafe { q8_0_rows4_sdot(x, y) }
}
fn vec_dot4_q4_1_q8_1_sdot(x: &[BlockQ4_1], y: [&[BlockQ8_1]; 4]) -> [f32; 4] {
    super::scalar::check_dot4(x, &y);
    // SAFETY: only in the tables built after detecting dotprod; lengths
    // checked above.
    unsafe { q4_1_rows4_sdot(x, y) }
}
fn vec_dot_q8_0_q8_0(x: &[BlockQ8_0], y: &[BlockQ8_0]) -> f32 {
    super::scalar::check_dot(x, y);
    // SAFETY: NEON only (always present); typed blocks; lengths checked above.
    unsafe { q8_0_sum(x, y, |x, y| q8_dot(&x.qs, &y.qs)) }
}
fn vec_dot_q5_0_q8_0(x: &[BlockQ5_0], y: &[BlockQ8_0]) -> f32 {
    super::scalar::check_dot(x, y);
    // SAFETY: NEON only (always present); typed blocks; lengths checked above.
    unsafe {
        dot_blocks(x, y, |x, y| {
            (q5_dot(&x.qs, x.qh, &y.qs, 16), fp16(x.d), fp16(y.d))
        })
    }
}
fn vec_dot4_q5_0_q8_0(x: &[BlockQ5_0], y: [&[BlockQ8_0]; 4]) -> [f32; 4] {
    super::scalar::check_dot4(x, &y);
    // SAFETY: NEON only (always present); typed blocks, indexed with bounds
    // checks; lengths checked above.
    unsafe { q5_0_sum4(x, y) }
}
fn vec_dot_q5_1_q8_1(x: &[BlockQ5_1], y: &[BlockQ8_1]) -> f32 {
    super::scalar::check_dot(x, y);
    let mut sum = 0.0f32;
    for (x, y) in x.iter().zip(y) {
        // SAFETY: NEON only (always present); typed arrays of one block each.
        let sumi = unsafe { q5_dot(&x.qs, x.qh, &y.qs, 0) };
        sum += (fp16(x.d) * fp16(y.d)) * sumi as f32 + fp16(x.m) * fp16(y.s);
    }
    sum
}
fn vec_dot_q4_0_q8_0_sdot(x: &[BlockQ4_0], y: &[BlockQ8_0]) -> f32 {
    super::scalar::check_dot(x, y);
    // SAFETY: only in the tables built after detecting dotprod; lengths
    // checked above.
    unsafe { q4_0_rows_sdot(x, y) }
}
fn vec_dot_q4_1_q8_1_sdot(x: &[BlockQ4_1], y: &[BlockQ8_1]) -> f32 {
    super::scalar::check_dot(x, y);
    // SAFETY: only in the tables built after detecting dotprod; lengths
    // checked above.
    unsafe { q4_1_rows_sdot(x, y) }
}
fn vec_dot_q8_0_q8_0_sdot(x: &[BlockQ8_0], y: &[BlockQ8_0]) -> f32 {
    super::scalar::check_dot(x, y);
    // SAFETY: only in the tables built after detecting dotprod; lengths
    // checked above.
    unsafe { q8_0_rows_sdot(x, y) }
}

// The row loops carry the dotprod feature themselves, so the per-block SDOT
// helpers inline into them.
/// # Safety
/// The CPU must have dotprod. Any lengths (the slices are zipped).
#[target_feature(enable = "dotprod")]
unsafe fn q4_0_rows_sdot(x: &[BlockQ4_0], y: &[BlockQ8_0]) -> f32 {
    dot_blocks(x, y, |x, y| (q4_0_dot_sdot(x, y), fp16(x.d), fp16(y.d)))
}
/// # Safety
/// The CPU must have dotprod. Any lengths (the slices are zipped).
#[target_feature(enable = "dotprod")]
unsafe fn q4_1_rows_sdot(x: &[BlockQ4_1], y: &[BlockQ8_1]) -> f32 {
    q4_1_sum(x, y, |x, y| q4_1_dot_sdot(x, y))
}
/// # Safety
/// The CPU must have dotprod. Any lengths (the shortest row counts).
#[target_feature(enable = "dotprod")]
unsafe fn q4_1_rows4_sdot(x: &[BlockQ4_1], y: [&[BlockQ8_1]; 4]) -> [f32; 4] {
    q4_1_sum4(
        x,
        y,
        |q, y| sdot16(vdupq_n_s32(0), q.0, vld1q_s8(y.qs.as_ptr())),
        |q, y| sdot16(vdupq_n_s32(0), q.1, vld1q_s8(y.qs.as_ptr().add(16))),
    )
}
/// # Safety
/// The CPU must have dotprod. Any lengths (the shortest row counts).
#[target_feature(enable = "dotprod")]
unsafe fn q8_0_rows4_sdot(x: &[BlockQ8_0], y: [&[BlockQ8_0]; 4]) -> [f32; 4] {
    q8_0_sum4(x, y, |q, y| {
        let acc = sdot16(vdupq_n_s32(0), q.0, vld1q_s8(y.qs.as_ptr()));
        sdot16(acc, q.1, vld1q_s8(y.qs.as_ptr().add(16)))
    })
}
/// # Safety
/// The CPU must have dotprod. Any lengths (the slices are zipped).
#[target_feature(enable = "dotprod")]
unsafe fn q8_0_rows_sdot(x: &[BlockQ8_0], y: &[BlockQ8_0]) -> f32 {
    q8_0_sum(x, y, |x, y| q8_dot_sdot(&x.qs, &y.qs))
}
fn vec_dot_f32(x: &[f32], y: &[f32]) -> f32 {
    super::scalar::check_dot(x, y);
    // SAFETY: NEON only (always present); lengths checked above (the kernel
    // loads below the shorter length anyway).
    unsafe { vec_dot_f32_impl(x, y) }
}
fn vec_dot_f16(x: &[half::f16], y: &[half::f16]) -> f32 {
    super::scalar::check_dot(x, y);
    // SAFETY: NEON and FCVTL only (base aarch64); lengths checked above (the
    // kernel loads below the shorter length anyway).
    unsafe { vec_dot_f16_impl(x, y) }
}
fn vec_dot_q4_k_q8_k(x: &[BlockQ4K], y: &[BlockQ8K]) -> f32 {
    super::scalar::check_dot(x, y);
    // SAFETY: NeonDots uses NEON only (always present); its arguments are
    // typed arrays; lengths checked above.
    unsafe { kquant_dot::q4_k::<NeonDots>(x, y) }
}
fn vec_dot4_q4_k_q8_k(x: &[BlockQ4K], y: [&[BlockQ8K]; 4]) -> [f32; 4] {
    // SAFETY: NeonDots uses NEON only (always present); any lengths (the
    // shortest row counts).
    unsafe { kquant_dot::q4_k4::<NeonDots>(x, y) }
}
fn vec_dot4_q6_k_q8_k(x: &[BlockQ6K], y: [&[BlockQ8K]; 4]) -> [f32; 4] {
    // SAFETY: as `vec_dot4_q4_k_q8_k`.
    unsafe { kquant_dot::q6_k4::<NeonDots>(x, y) }
}
fn vec_dot_q5_k_q8_k(x: &[BlockQ5K], y: &[BlockQ8K]) -> f32 {
    super::scalar::check_dot(x, y);
    // SAFETY: NeonDots uses NEON only (always present); its arguments are
    // typed arrays; lengths checked above.
    unsafe { kquant_dot::q5_k::<NeonDots>(x, y) }
}
fn vec_dot_q6_k_q8_k(x: &[BlockQ6K], y: &[BlockQ8K]) -> f32 {
    super::scalar::check_dot(x, y);
    // SAFETY: NeonDots uses NEON only (always present); its arguments are
    // typed arrays; lengths checked above.
    unsafe { kquant_dot::q6_k::<NeonDots>(x, y) }
}
fn vec_dot_q2_k_q8_k(x: &[BlockQ2K], y: &[BlockQ8K]) -> f32 {
    super::scalar::check_dot(x, y);
    // SAFETY: NeonDots uses NEON only (always present); its arguments are
    // typed arrays; lengths checked above.
    unsafe { kquant_dot::q2_k::<NeonDots>(x, y) }
}
fn vec_dot_q3_k_q8_k(x: &[BlockQ3K], y: &[BlockQ8K]) -> f32 {
    super::scalar::check_dot(x, y);
    // SAFETY: NeonDots uses NEON only (always present); its arguments are
    // typed arrays; lengths checked above.
    unsafe { kquant_dot::q3_k::<NeonDots>(x, y) }
}
fn vec_dot_iq4_nl_q8_0(x: &[BlockIQ4NL], y: &[BlockQ8_0]) -> f32 {
    super::scalar::check_dot(x, y);
    // SAFETY: NeonDots uses NEON only (always present); its arguments are
    // typed arrays; lengths checked above.
    unsafe { iq4_dot::iq4_nl::<NeonDots>(x, y) }
}
fn vec_dot_iq4_xs_q8_k(x: &[BlockIQ4XS], y: &[BlockQ8K]) -> f32 {
    super::scalar::check_dot(x, y);
    // SAFETY: NeonDots uses NEON only (always present); its arguments are
    // typed arrays; lengths checked above.
    unsafe { iq4_dot::iq4_xs::<NeonDots>(x, y) }
}
fn gemv_q4_0_x4i8(group: &[BlockQ4_0x4], x: &[BlockQ8_0], out: &mut [f32]) {
    super::repack::check_gemv(group, x, out, 4);
    // SAFETY: only in the tables built after detecting dotprod; checked
    // above: `out` holds the 4 values stored.
    unsafe { gemv_x4i8_sdot(group, x, out) }
}
/// # Safety
/// The CPU must have dotprod. `out` must hold at least 4 values (4 are stored);
/// `group` and `x` may have any lengths (they are zipped).
#[target_feature(enable = "dotprod")]
unsafe fn gemv_x4i8_sdot(group: &[BlockQ4_0x4], x: &[BlockQ8_0], out: &mut [f32]) {
    gemv_x4(group, x, out, |b, y| block_x4i8(b, y))
}

/// One f16 to f32 with FCVT (base ARMv8 floating point; exact), without the
/// run-time dispatch `half` performs on every call.
#[inline(always)]
pub(crate) fn fp16(h: half::f16) -> f32 {
    let out: f32;
    // SAFETY: FCVT Sd, Hn is part of every AArch64 CPU's floating point; the
    // asm touches registers only (nomem).
    unsafe {
        asm!("fcvt {o:s}, {i:h}", i = in(vreg) h.to_bits() as i16, o = out(vreg) out,
            options(pure, nomem, nostack));
    }
    out
}

fn scores_f16(
    k: &[half::f16],
    stride: usize,
    offset: usize,
    cells: &[u32],
    q: &[f32],
    out: &mut [f32],
) {
    super::rows::check_cells(k.len(), stride, offset, q.len(), cells, out.len());
    // SAFETY: NEON is part of every AArch64 CPU; every row read lies in `k`
    // (checked above).
    unsafe { scores_f16_impl(k, stride, offset, cells, q, out) }
}
fn wsum_f16(
    v: &[half::f16],
    stride: usize,
    offset: usize,
    cells: &[u32],
    p: &[f32],
    out: &mut [f32],
) {
    super::rows::check_cells(v.len(), stride, offset, out.len(), cells, p.len());
    // SAFETY: as for `scores_f16`: every row read lies in `v`.
    unsafe { wsum_f16_impl(v, stride, offset, cells, p, out) }
}
fn scores_f16_heads(
    k: &[half::f16],
    stride: usize,
    offset: usize,
    cells: &[u32],
    q: &[f32],
    out: &mut [f32],
    heads: usize,
) {
    let hd =
        super::rows::check_head_scores(k.len(), stride, offset, cells, (q.len(), out.len()), heads);
    let n = cells.len();
    // Four heads at a time keep 16 accumulators and the row's 4 vectors in
    // the 32 registers.
    let mut h = 0;
    while h < heads {
        let take = (heads - h).min(4);
        let (q, out) = (&q[h * hd..(h + take) * hd], &mut out[h * n..(h + take) * n]);
        // SAFETY: NEON is part of every AArch64 CPU; every row read lies in
        // `k`, and `q`, `out` hold `take` heads (checked above).
        unsafe {
            match take {
                4 => scores_f16_heads_impl::<4>(k, stride, offset, cells, q, out),
                3 => scores_f16_heads_impl::<3>(k, stride, offset, cells, q, out),
                2 => scores_f16_heads_impl::<2>(k, stride, offset, cells, q, out),
                _ => scores_f16_impl(k, stride, offset, cells, q, out),
            }
        }
        h += take;
    }
}

fn wsum_f16_heads(
    v: &[half::f16],
    stride: usize,
    offset: usize,
    cells: &[u32],
    p: &[f32],
    out: &mut [f32],
    heads: usize,
) {
    let w =
        super::rows::check_head_sums(v.len(), stride, offset, cells, (p.len(), out.len()), heads);
    let n = cells.len();
    let mut h = 0;
    while h < heads {
        let take = (heads - h).min(4);
        let (p, out) = (&p[h * n..(h + take) * n], &mut out[h * w..(h + take) * w]);
        // SAFETY: as for `scores_f16_heads`: every row read lies in `v`, and
        // `p`, `out` hold `take` heads.
        unsafe {
            match take {
                4 => wsum_f16_heads_impl::<4>(v, stride, offset, cells, p, out),
                3 => wsum_f16_heads_impl::<3>(v, stride, offset, cells, p, out),
                2 => wsum_f16_heads_impl::<2>(v, stride, offset, cells, p, out),
                _ => wsum_f16_impl(v, stride, offset, cells, p, out),
            }
        }
        h += take;
    }
}

fn gemm_f32(g: &super::rows::GemmShape, a: &[f32], b: &[f32], c: &mut [f32]) {
    super::rows::gemm_f32_in_row_groups(g, a, b, c, |take, a, c| {
        // SAFETY: NEON is part of every AArch64 CPU; the frame checked the
        // shape, and `a` and `c` start at a group of `take` rows of it.
        unsafe { by_take!(take, gemm_rows_f32(g, a, b, c)) }
    });
}

/// `R` rows of `rows::gemm_f32` from the first rows of `a` and `c`: 16
/// columns per step (then 4), one lane per output, per `p` a multiply by
/// `a[r][p]` and an add (not FMLA), in the twin's order; the last columns
/// (under 4) as the twin computes them.
///
/// # Safety
/// NEON only; `a` and `c` hold `R` rows of the shape, `b` all `k`.
#[inline]
unsafe fn gemm_rows_f32<const R: usize>(
    g: &super::rows::GemmShape,
    a: &[f32],
    b: &[f32],
    c: &mut [f32],
) {
    let (ap, bp, cp) = (a.as_ptr(), b.as_ptr(), c.as_mut_ptr());
    let mut j = 0;
    while j + 4 <= g.n {
        let vecs = if j + 16 <= g.n { 4 } else { 1 };
        let mut acc = [[vdupq_n_f32(0.0); 4]; R];
        for p in 0..g.k {
            let row = bp.add(p * g.ldb + j);
            let mut bv = [vdupq_n_f32(0.0); 4];
            for (v, b) in bv.iter_mut().enumerate().take(vecs) {
                *b = vld1q_f32(row.add(4 * v));
            }
            for (r, acc) in acc.iter_mut().enumerate() {
                let x = vdupq_n_f32(*ap.add(r * g.lda + p));
                for (a, &bv) in acc.iter_mut().zip(&bv).take(vecs) {
                    *a = vaddq_f32(*a, vmulq_f32(x, bv));
                }
            }
        }
        for (r, acc) in acc.iter().enumerate() {
            for (v, a) in acc.iter().enumerate().take(vecs) {
                vst1q_f32(cp.add(r * g.ldc + j + 4 * v), *a);
            }
        }
        j += 4 * vecs;
    }
    super::rows::gemm_f32_columns(g, R, j, a, b, c);
}

fn axpy_f32(p: f32, v: &[f32], out: &mut [f32]) {
    super::scalar::check_axpy(v, out);
    // SAFETY: NEON is part of every AArch64 CPU; lengths checked above.
    unsafe { axpy_f32_impl(p, v, out) }
}

fn delta_net_columns(
    cols: &mut [f32],
    k: &[f32],
    q: &[f32],
    decay: f32,
    v: &[f32],
    b: f32,
    read: &mut [f32],
) {
    super::rows::delta_net_in_groups::<2>(
        cols,
        k,
        q,
        decay,
        v,
        b,
        read,
        // SAFETY (both): NEON is part of every AArch64 CPU;
        // `delta_net_in_groups` passes whole columns of `k.len()` (2 to a
        // group), `q` as long, a multiple of 8, and the kernels load and
        // store only whole 4-lane chunks.
        |pair, v| unsafe { delta_net_columns2_impl(pair, k, q, decay, v, b) },
        |col, vc| unsafe { delta_net_column_impl(col, k, q, decay, vc, b) },
    );
}

/// Two columns' `delta_net_column_impl` interleaved: each keeps its own
/// two accumulators and the same operations in the same order (so the bits
/// are one column's at a time), while four dependency chains run at once.
///
/// # Safety
/// NEON only; `cols` 2 columns of `k.len()`, `q` as long as `k`, a
/// multiple of 8; `v` 2 values.
unsafe fn delta_net_columns2_impl(
    cols: &mut [f32],
    k: &[f32],
    q: &[f32],
    decay: f32,
    v: &[f32],
    b: f32,
) -> [f32; 2] {
    let d = k.len();
    let (c, kp, qp) = (cols.as_mut_ptr(), k.as_ptr(), q.as_ptr());
    let dv = vdupq_n_f32(decay);
    let mut recall = [[vdupq_n_f32(0.0); 2]; 2];
    for i in (0..d).step_by(8) {
        let kk = [vld1q_f32(kp.add(i)), vld1q_f32(kp.add(i + 4))];
        for (j, acc) in recall.iter_mut().enumerate() {
            for h in 0..2 {
                let p = c.add(j * d + i + 4 * h);
                let s = vmulq_f32(vld1q_f32(p), dv);
                vst1q_f32(p, s);
                acc[h] = vaddq_f32(acc[h], vmulq_f32(s, kk[h]));
            }
        }
    }
    let delta = [
        vdupq_n_f32((v[0] - sum8_neon(recall[0][0], recall[0][1])) * b),
        vdupq_n_f32((v[1] - sum8_neon(recall[1][0], recall[1][1])) * b),
    ];
    let mut read = [[vdupq_n_f32(0.0); 2]; 2];
    for i in (0..d).step_by(8) {
        let kk = [vld1q_f32(kp.add(i)), vld1q_f32(kp.add(i + 4))];
        let qq = [vld1q_f32(qp.add(i)), vld1q_f32(qp.add(i + 4))];
        for (j, acc) in read.iter_mut().enumerate() {
            for h in 0..2 {
                let p = c.add(j * d + i + 4 * h);
                let s = vaddq_f32(vld1q_f32(p), vmulq_f32(kk[h], delta[j]));
                vst1q_f32(p, s);
                acc[h] = vaddq_f32(acc[h], vmulq_f32(s, qq[h]));
            }
        }
    }
    [
        sum8_neon(read[0][0], read[0][1]),
        sum8_neon(read[1][0], read[1][1]),
    ]
}

/// `rows::delta_net_column` on columns of a multiple of 8: two registers
/// hold `dot8`'s lanes 0-3 and 4-7, multiplies and adds stay separate (no
/// fused multiply-add), and `sum8_neon` adds the lanes in `dot8`'s order,
/// so the bits are the scalar twin's. Two sweeps instead of four.
///
/// # Safety
/// NEON only; `col`, `k` and `q` equally long, a multiple of 8.
unsafe fn delta_net_column_impl(
    col: &mut [f32],
    k: &[f32],
    q: &[f32],
    decay: f32,
    v: f32,
    b: f32,
) -> f32 {
    let (c, kp, qp) = (col.as_mut_ptr(), k.as_ptr(), q.as_ptr());
    let d = vdupq_n_f32(decay);
    let (mut lo, mut hi) = (vdupq_n_f32(0.0), vdupq_n_f32(0.0));
    for i in (0..col.len()).step_by(8) {
        let s0 = vmulq_f32(vld1q_f32(c.add(i)), d);
        let s1 = vmulq_f32(vld1q_f32(c.add(i + 4)), d);
        vst1q_f32(c.add(i), s0);
        vst1q_f32(c.add(i + 4), s1);
        lo = vaddq_f32(lo, vmulq_f32(s0, vld1q_f32(kp.add(i))));
        hi = vaddq_f32(hi, vmulq_f32(s1, vld1q_f32(kp.add(i + 4))));
    }
    let delta = vdupq_n_f32((v - sum8_neon(lo, hi)) * b);
    let (mut lo, mut hi) = (vdupq_n_f32(0.0), vdupq_n_f32(0.0));
    for i in (0..col.len()).step_by(8) {
        let s0 = vaddq_f32(vld1q_f32(c.add(i)), vmulq_f32(vld1q_f32(kp.add(i)), delta));
        let s1 = vaddq_f32(
            vld1q_f32(c.add(i + 4)),
            vmulq_f32(vld1q_f32(kp.add(i + 4)), delta),
        );
        vst1q_f32(c.add(i), s0);
        vst1q_f32(c.add(i + 4), s1);
        lo = vaddq_f32(lo, vmulq_f32(s0, vld1q_f32(qp.add(i))));
        hi = vaddq_f32(hi, vmulq_f32(s1, vld1q_f32(qp.add(i + 4))));
    }
    sum8_neon(lo, hi)
}

/// Lanes 0-3 (`lo`) and 4-7 (`hi`) added as `rows::sum8`: lane by lane,
/// then lanes 0 and 2 and lanes 1 and 3, then those two (not `vaddvq`,
/// whose pairs are 0+1 and 2+3).
///
/// # Safety
/// NEON only.
unsafe fn sum8_neon(lo: float32x4_t, hi: float32x4_t) -> f32 {
    let halves = vaddq_f32(lo, hi);
    let pairs = vadd_f32(vget_low_f32(halves), vget_high_f32(halves));
    vget_lane_f32::<0>(pairs) + vget_lane_f32::<1>(pairs)
}

fn causal_conv(taps: &[f32], state: &[f32], x: &[f32], out: &mut [f32]) {
    super::rows::check_causal_conv(taps, state, x, out);
    // SAFETY: NEON is part of every AArch64 CPU; the shapes are checked
    // above (the state and the taps whole rows of `out.len()`), and the
    // kernel loads and stores 4-lane chunks only below `out.len()` in each
    // row.
    unsafe { causal_conv_impl(taps, state, x, out) }
}

/// `rows::causal_conv_sums` eight channels at a time in two registers:
/// each starts at zero and adds the tap products in the twin's order,
/// multiplies and adds separate (no fused multiply-add), so the bits are
/// the twin's; the last channels go through the twin's per-channel sums.
///
/// # Safety
/// NEON only; shapes as `rows::check_causal_conv` asserts.
unsafe fn causal_conv_impl(taps: &[f32], state: &[f32], x: &[f32], out: &mut [f32]) {
    let n = out.len();
    let rows = state.len() / n;
    let (t, s) = (taps.as_ptr(), state.as_ptr());
    let mut ch = 0;
    while ch + 8 <= n {
        let (mut lo, mut hi) = (vdupq_n_f32(0.0), vdupq_n_f32(0.0));
        for k in 0..rows {
            let at = k * n + ch;
            lo = vaddq_f32(lo, vmulq_f32(vld1q_f32(s.add(at)), vld1q_f32(t.add(at))));
            hi = vaddq_f32(
                hi,
                vmulq_f32(vld1q_f32(s.add(at + 4)), vld1q_f32(t.add(at + 4))),
            );
        }
        let (xp, last) = (x.as_ptr().add(ch), t.add(rows * n + ch));
        lo = vaddq_f32(lo, vmulq_f32(vld1q_f32(xp), vld1q_f32(last)));
        hi = vaddq_f32(hi, vmulq_f32(vld1q_f32(xp.add(4)), vld1q_f32(last.add(4))));
        vst1q_f32(out.as_mut_ptr().add(ch), lo);
        vst1q_f32(out.as_mut_ptr().add(ch + 4), hi);
        ch += 8;
    }
    super::rows::causal_conv_tail(taps, state, x, out, ch);
}

fn round_f16(x: &[f32], out: &mut [f32]) {
    super::rows::check_round(x, out);
    // SAFETY: NEON (FCVTN/FCVTL, base AArch64 floating point) is part of
    // every AArch64 CPU; the lengths are equal (checked above), and the
    // kernel loads and stores whole chunks of the slices.
    unsafe { round_f16_impl(x, out) }
}

/// f32 to f16 and back eight at a time: FCVTN rounds to nearest, ties to
/// even (the default rounding mode), as `half` (the scalar twin) does, and
/// FCVTL widens exactly. The FP16 extension is not needed: these two
/// conversions are base AArch64.
///
/// # Safety
/// NEON only.
unsafe fn round_f16_impl(x: &[f32], out: &mut [f32]) {
    let mut xs = x.chunks_exact(8);
    let mut outs = out.chunks_exact_mut(8);
    for (x, o) in (&mut xs).zip(&mut outs) {
        let (lo, hi) = (vld1q_f32(x.as_ptr()), vld1q_f32(x.as_ptr().add(4)));
        let (rlo, rhi): (float32x4_t, float32x4_t);
        asm!("fcvtn {h:v}.4h, {lo:v}.4s", "fcvtn2 {h:v}.8h, {hi:v}.4s",
            "fcvtl {rlo:v}.4s, {h:v}.4h", "fcvtl2 {rhi:v}.4s, {h:v}.8h",
            lo = in(vreg) lo, hi = in(vreg) hi, h = out(vreg) _,
            rlo = out(vreg) rlo, rhi = out(vreg) rhi,
            options(pure, nomem, nostack));
        vst1q_f32(o.as_mut_ptr(), rlo);
        vst1q_f32(o.as_mut_ptr().add(4), rhi);
    }
    super::rows::round_f16(xs.remainder(), outs.into_remainder());
}

fn silu_mul(gate: &mut [f32], up: &[f32]) {
    // SAFETY: NEON is part of every AArch64 CPU; the kernel loads and stores
    // whole chunks of the slices.
    unsafe { silu_mul_impl(gate, up) }
}

/// `gate = silu(gate) · up` four at a time: the scalar twin's steps
/// (`rows::exp`, then a divide and a multiply) lane by lane, so bit-equal.
///
/// # Safety
/// NEON only.
unsafe fn silu_mul_impl(gate: &mut [f32], up: &[f32]) {
    let mut gs = gate.chunks_exact_mut(4);
    let mut us = up.chunks_exact(4);
    for (g, u) in (&mut gs).zip(&mut us) {
        let x = vld1q_f32(g.as_ptr());
        let silu = vdivq_f32(x, vaddq_f32(vdupq_n_f32(1.0), exp4(vnegq_f32(x))));
        vst1q_f32(g.as_mut_ptr(), vmulq_f32(silu, vld1q_f32(u.as_ptr())));
    }
    super::rows::silu_mul(gs.into_remainder(), us.remainder());
}

fn softmax_poly(x: &mut [f32]) {
    // SAFETY: NEON is part of every AArch64 CPU; the kernel loads and stores
    // whole chunks of the slice.
    unsafe { softmax_poly_impl(x) }
}

/// `rows::softmax_poly` eight values at a time: the maximum by FMAXNM
/// (which keeps the running maximum over a NaN, as the twin's comparison
/// does; a maximum is the same whatever the order), `exp4`, each chunk's
/// values widened to f64 and added to the eight partial sums (two per
/// register, in lane order, as value `j` goes to sum `j % 8`), the tail as
/// the twin.
///
/// # Safety
/// NEON only.
unsafe fn softmax_poly_impl(x: &mut [f32]) {
    let mut chunks = x.chunks_exact(4);
    let mut m4 = vdupq_n_f32(f32::NEG_INFINITY);
    for c in &mut chunks {
        m4 = vmaxnmq_f32(m4, vld1q_f32(c.as_ptr()));
    }
    let mut lanes = [0f32; 4];
    vst1q_f32(lanes.as_mut_ptr(), m4);
    let max = lanes
        .iter()
        .chain(chunks.remainder())
        .fold(f32::NEG_INFINITY, |m, &v| if v > m { v } else { m });
    let maxv = vdupq_n_f32(max);
    let mut acc = [vdupq_n_f64(0.0); 4];
    let full = x.len() / 8 * 8;
    for c in x[..full].chunks_exact_mut(8) {
        let e0 = exp4(vsubq_f32(vld1q_f32(c.as_ptr()), maxv));
        let e1 = exp4(vsubq_f32(vld1q_f32(c.as_ptr().add(4)), maxv));
        vst1q_f32(c.as_mut_ptr(), e0);
        vst1q_f32(c.as_mut_ptr().add(4), e1);
        acc[0] = vaddq_f64(acc[0], vcvt_f64_f32(vget_low_f32(e0)));
        acc[1] = vaddq_f64(acc[1], vcvt_high_f64_f32(e0));
        acc[2] = vaddq_f64(acc[2], vcvt_f64_f32(vget_low_f32(e1)));
        acc[3] = vaddq_f64(acc[3], vcvt_high_f64_f32(e1));
    }
    let mut sums = [0f64; 8];
    for (i, a) in acc.iter().enumerate() {
        vst1q_f64(sums.as_mut_ptr().add(2 * i), *a);
    }
    for (j, v) in x[full..].iter_mut().enumerate() {
        *v = super::rows::exp(*v - max);
        sums[j] += *v as f64;
    }
    let inv = (1.0 / super::rows::sum8_f64(sums)) as f32;
    let invv = vdupq_n_f32(inv);
    let mut chunks = x.chunks_exact_mut(4);
    for c in &mut chunks {
        vst1q_f32(c.as_mut_ptr(), vmulq_f32(vld1q_f32(c.as_ptr()), invv));
    }
    for v in chunks.into_remainder() {
        *v *= inv;
    }
}

/// `rows::exp` on four lanes, step for step (separate multiplies and adds:
/// no fused multiply-add, so every lane equals the scalar twin).
///
/// # Safety
/// NEON only.
unsafe fn exp4(x: float32x4_t) -> float32x4_t {
    use super::rows::exp_consts::*;
    let set = |v: f32| vdupq_n_f32(v);
    let x = vminq_f32(vmaxq_f32(x, set(LO)), set(HI));
    let n = vrndnq_f32(vmulq_f32(x, set(LOG2E)));
    let r = vsubq_f32(
        vsubq_f32(x, vmulq_f32(n, set(LN2_HI))),
        vmulq_f32(n, set(LN2_LO)),
    );
    let mut p = set(P[0]);
    for &c in &P[1..] {
        p = vaddq_f32(vmulq_f32(p, r), set(c));
    }
    let e = vaddq_f32(vaddq_f32(vmulq_f32(p, vmulq_f32(r, r)), r), set(1.0));
    let bits = vaddq_s32(vcvtq_s32_f32(n), vdupq_n_s32(127));
    vmulq_f32(e, vreinterpretq_f32_s32(vshlq_n_s32::<23>(bits)))
}

/// One query against cached f16 K rows, each score with the same
/// operations in the same order as `vec_dot_f16_impl` of the row and the
/// query in f16 (so bit-equal to it), the query widened once for all rows.
///
/// # Safety
/// NEON only; `out.len() == cells.len()` and every row
/// `c * stride + offset .. + q.len()` inside `k` (`rows::check_cells`).
unsafe fn scores_f16_impl(
    k: &[half::f16],
    stride: usize,
    offset: usize,
    cells: &[u32],
    q: &[f32],
    out: &mut [f32],
) {
    let n = q.len();
    for (o, &c) in out.iter_mut().zip(cells) {
        let x = k.as_ptr().add(c as usize * stride + offset);
        let mut acc = [vdupq_n_f32(0.0); 4];
        let mut i = 0;
        while i + 16 <= n {
            for j in 0..2 {
                let (x0, x1) = f16x8_to_f32(x.add(i + 8 * j));
                let y = q.as_ptr().add(i + 8 * j);
                acc[2 * j] = vfmaq_f32(acc[2 * j], x0, vld1q_f32(y));
                acc[2 * j + 1] = vfmaq_f32(acc[2 * j + 1], x1, vld1q_f32(y.add(4)));
            }
            i += 16;
        }
        let mut sum = vaddvq_f32(vaddq_f32(
            vaddq_f32(acc[0], acc[1]),
            vaddq_f32(acc[2], acc[3]),
        ));
        while i < n {
            sum += fp16(*x.add(i)) * q[i];
            i += 1;
        }
        *o = sum;
    }
}

/// The weighted sum of cached f16 V rows with the sums held in registers
/// across the cells (16 columns at a time): per value one exact widening
/// (FCVTL), one multiply and one add in cell order, as the scalar twin.
///
/// # Safety
/// NEON only; `p.len() == cells.len()` and every row
/// `c * stride + offset .. + out.len()` inside `v` (`rows::check_cells`).
unsafe fn wsum_f16_impl(
    v: &[half::f16],
    stride: usize,
    offset: usize,
    cells: &[u32],
    p: &[f32],
    out: &mut [f32],
) {
    let n = out.len();
    let row = |c: u32, col: usize| v.as_ptr().add(c as usize * stride + offset + col);
    let mut col = 0;
    while col + 16 <= n {
        let mut acc = [vdupq_n_f32(0.0); 4];
        for (&c, &w) in cells.iter().zip(p) {
            let (r, pw) = (row(c, col), vdupq_n_f32(w));
            let (x0, x1) = f16x8_to_f32(r);
            let (x2, x3) = f16x8_to_f32(r.add(8));
            for (a, x) in acc.iter_mut().zip([x0, x1, x2, x3]) {
                *a = vaddq_f32(*a, vmulq_f32(pw, x));
            }
        }
        for (j, a) in acc.iter().enumerate() {
            vst1q_f32(out.as_mut_ptr().add(col + 4 * j), *a);
        }
        col += 16;
    }
    for (d, o) in out.iter_mut().enumerate().skip(col) {
        let mut sum = 0.0f32;
        for (&c, &w) in cells.iter().zip(p) {
            sum += w * fp16(*row(c, d));
        }
        *o = sum;
    }
}

/// `scores_f16_impl` for `G` query heads (`q` and `out` hold them back to
/// back): each row widened once for all of them, each head's score with
/// the operations of `scores_f16_impl` in its order, so bit-equal to it.
///
/// # Safety
/// NEON only; `q.len() == G * hd`, `out.len() == G * cells.len()`, and
/// every row `c * stride + offset .. + hd` inside `k`.
unsafe fn scores_f16_heads_impl<const G: usize>(
    k: &[half::f16],
    stride: usize,
    offset: usize,
    cells: &[u32],
    q: &[f32],
    out: &mut [f32],
) {
    let hd = q.len() / G;
    let n = cells.len();
    for (c_i, &c) in cells.iter().enumerate() {
        let x = k.as_ptr().add(c as usize * stride + offset);
        let mut acc = [[vdupq_n_f32(0.0); 4]; G];
        let mut i = 0;
        while i + 16 <= hd {
            for j in 0..2 {
                let (x0, x1) = f16x8_to_f32(x.add(i + 8 * j));
                for (g, a) in acc.iter_mut().enumerate() {
                    let y = q.as_ptr().add(g * hd + i + 8 * j);
                    a[2 * j] = vfmaq_f32(a[2 * j], x0, vld1q_f32(y));
                    a[2 * j + 1] = vfmaq_f32(a[2 * j + 1], x1, vld1q_f32(y.add(4)));
                }
            }
            i += 16;
        }
        for (g, a) in acc.iter().enumerate() {
            let mut sum = vaddvq_f32(vaddq_f32(vaddq_f32(a[0], a[1]), vaddq_f32(a[2], a[3])));
            for t in i..hd {
                sum += fp16(*x.add(t)) * q[g * hd + t];
            }
            out[g * n + c_i] = sum;
        }
    }
}

/// `wsum_f16_impl` for `G` heads (`p` and `out` hold them back to back):
/// 16 columns per pass over the cells, each row's values widened once for
/// all heads, and per head and column one multiply and one add in cell
/// order, so bit-equal to it (and to the scalar twin).
///
/// # Safety
/// NEON only; `p.len() == G * cells.len()`, `out.len()` a multiple of `G`,
/// and every row `c * stride + offset .. + out.len() / G` inside `v`.
unsafe fn wsum_f16_heads_impl<const G: usize>(
    v: &[half::f16],
    stride: usize,
    offset: usize,
    cells: &[u32],
    p: &[f32],
    out: &mut [f32],
) {
    let (n, w) = (cells.len(), out.len() / G);
    let row = |c: u32, col: usize| v.as_ptr().add(c as usize * stride + offset + col);
    let mut col = 0;
    while col + 16 <= w {
        let mut acc = [[vdupq_n_f32(0.0); 4]; G];
        for (j, &c) in cells.iter().enumerate() {
            let r = row(c, col);
            let (x0, x1) = f16x8_to_f32(r);
            let (x2, x3) = f16x8_to_f32(r.add(8));
            for (g, a) in acc.iter_mut().enumerate() {
                let pw = vdupq_n_f32(*p.get_unchecked(g * n + j));
                for (a, x) in a.iter_mut().zip([x0, x1, x2, x3]) {
                    *a = vaddq_f32(*a, vmulq_f32(pw, x));
                }
            }
        }
        for (g, a) in acc.iter().enumerate() {
            for (t, a) in a.iter().enumerate() {
                vst1q_f32(out.as_mut_ptr().add(g * w + col + 4 * t), *a);
            }
        }
        col += 16;
    }
    // The columns left (fewer than 16): each head's own pass.
    if col < w {
        for g in 0..G {
            let o = &mut out[g * w..(g + 1) * w];
            wsum_f16_impl(
                v,
                stride,
                offset + col,
                cells,
                &p[g * n..(g + 1) * n],
                &mut o[col..],
            );
        }
    }
}

/// `out += p · v` for f32 rows, four at a time (multiply, then add).
///
/// # Safety
/// NEON only; `v.len() == out.len()`.
unsafe fn axpy_f32_impl(p: f32, v: &[f32], out: &mut [f32]) {
    let pv = vdupq_n_f32(p);
    let mut chunks = v.chunks_exact(4);
    let mut outs = out.chunks_exact_mut(4);
    for (x, o) in (&mut chunks).zip(&mut outs) {
        let x = vld1q_f32(x.as_ptr());
        vst1q_f32(
            o.as_mut_ptr(),
            vaddq_f32(vld1q_f32(o.as_ptr()), vmulq_f32(pv, x)),
        );
    }
    for (o, x) in outs.into_remainder().iter_mut().zip(chunks.remainder()) {
        *o += p * x;
    }
}

/// Four f16 to four f32 with one FCVTL (exact; Rust has no stable f16
/// vector type to do it with intrinsics).
///
/// # Safety
/// NEON only (always present): no requirement beyond the arguments' types.
#[inline(always)]
pub(super) unsafe fn fp16x4(h: &[half::f16; 4]) -> float32x4_t {
    let bits = vld1_u16(h.as_ptr().cast());
    let out: float32x4_t;
    asm!("fcvtl {o:v}.4s, {i:v}.4h", i = in(vreg) bits, o = out(vreg) out,
        options(pure, nomem, nostack));
    out
}

/// Σ sumi·dx·dy over blocks, in the scalar kernel's order.
///
/// # Safety
/// `block` must be sound for any pair of blocks. Any lengths (zipped).
#[inline(always)]
unsafe fn dot_blocks<X, Y>(x: &[X], y: &[Y], block: impl Fn(&X, &Y) -> (i32, f32, f32)) -> f32 {
    let mut sum = 0.0f32;
    for (x, y) in x.iter().zip(y) {
        let (sumi, dx, dy) = block(x, y);
        sum += sumi as f32 * dx * dy;
    }
    sum
}

/// # Safety
/// `dot` must be sound for any pair of blocks. Any lengths (zipped).
#[inline(always)]
unsafe fn q8_0_sum(
    x: &[BlockQ8_0],
    y: &[BlockQ8_0],
    dot: impl Fn(&BlockQ8_0, &BlockQ8_0) -> i32,
) -> f32 {
    let mut sum = 0.0f32;
    for (x, y) in x.iter().zip(y) {
        sum += dot(x, y) as f32 * (fp16(x.d) * fp16(y.d));
    }
    sum
}

/// # Safety
/// `dot` must be sound for any pair of blocks. Any lengths (zipped).
#[inline(always)]
unsafe fn q4_1_sum(
    x: &[BlockQ4_1],
    y: &[BlockQ8_1],
    dot: impl Fn(&BlockQ4_1, &BlockQ8_1) -> i32,
) -> f32 {
    let mut sum = 0.0f32;
    for (x, y) in x.iter().zip(y) {
        sum += (fp16(x.d) * fp16(y.d)) * dot(x, y) as f32 + fp16(x.m) * fp16(y.s);
    }
    sum
}

/// `q4_1_sum` for one weight row and four activation rows: each weight block's
/// nibbles and scales are decoded once. `lo`/`hi` give the lane sums of the
/// low and high halves; per row, the integer sum and the float operations are
/// the one-row kernel's, so each result equals it bit for bit.
///
/// # Safety
/// `lo` and `hi` must be sound for any block. Any lengths: blocks are
/// indexed with bounds checks up to the shortest row.
#[inline(always)]
unsafe fn q4_1_sum4(
    x: &[BlockQ4_1],
    y: [&[BlockQ8_1]; 4],
    lo: impl Fn(&(int8x16_t, int8x16_t), &BlockQ8_1) -> int32x4_t,
    hi: impl Fn(&(int8x16_t, int8x16_t), &BlockQ8_1) -> int32x4_t,
) -> [f32; 4] {
    let n = y.iter().fold(x.len(), |n, r| n.min(r.len()));
    let mut sum = [0.0f32; 4];
    for b in 0..n {
        let xb = &x[b];
        let q = nibbles(&xb.qs);
        let (d, m) = (fp16(xb.d), fp16(xb.m));
        for r in 0..4 {
            let yb = &y[r][b];
            let sumi = vaddvq_s32(vaddq_s32(lo(&q, yb), hi(&q, yb)));
            sum[r] += (d * fp16(yb.d)) * sumi as f32 + m * fp16(yb.s);
        }
    }
    sum
}

/// `q8_0_sum` for four activation rows (the weight block loaded once); per
/// row the same integer sum and float operations, so results are bit-equal.
///
/// # Safety
/// `lanes` must be sound for any block. Any lengths: blocks are indexed
/// with bounds checks up to the shortest row.
#[inline(always)]
unsafe fn q8_0_sum4(
    x: &[BlockQ8_0],
    y: [&[BlockQ8_0]; 4],
    lanes: impl Fn(&(int8x16_t, int8x16_t), &BlockQ8_0) -> int32x4_t,
) -> [f32; 4] {
    let n = y.iter().fold(x.len(), |n, r| n.min(r.len()));
    let mut sum = [0.0f32; 4];
    for b in 0..n {
        let xb = &x[b];
        let q = (vld1q_s8(xb.qs.as_ptr()), vld1q_s8(xb.qs.as_ptr().add(16)));
        let d = fp16(xb.d);
        for r in 0..4 {
            let yb = &y[r][b];
            sum[r] += vaddvq_s32(lanes(&q, yb)) as f32 * (d * fp16(yb.d));
        }
    }
    sum
}

/// Low and high nibbles of 16 bytes, as two vectors of values 0..15.
///
/// # Safety
/// NEON only (always present): no requirement beyond the arguments' types.
#[inline(always)]
unsafe fn nibbles(qs: &[u8; 16]) -> (int8x16_t, int8x16_t) {
    let v = vld1q_u8(qs.as_ptr());
    (
        vreinterpretq_s8_u8(vandq_u8(v, vdupq_n_u8(0x0F))),
        vreinterpretq_s8_u8(vshrq_n_u8(v, 4)),
    )
}

/// Σ a·b over 16 lanes, with widening multiplies (plain NEON).
///
/// # Safety
/// NEON only (always present): no requirement beyond the arguments' types.
#[inline(always)]
unsafe fn dot16(a: int8x16_t, b: int8x16_t) -> int32x4_t {
    let lo = vmull_s8(vget_low_s8(a), vget_low_s8(b));
    let hi = vmull_high_s8(a, b);
    vpaddlq_s16(vaddq_s16(lo, hi))
}

/// The same with SDOT.
///
/// # Safety
/// The CPU must have dotprod (the asm is SDOT; it touches registers only).
#[inline(always)]
pub(super) unsafe fn sdot16(acc: int32x4_t, a: int8x16_t, b: int8x16_t) -> int32x4_t {
    let mut acc = acc;
    asm!("sdot {acc:v}.4s, {a:v}.16b, {b:v}.16b",
        acc = inout(vreg) acc, a = in(vreg) a, b = in(vreg) b,
        options(pure, nomem, nostack));
    acc
}

/// # Safety
/// NEON only (always present): no requirement beyond the arguments' types.
#[inline(always)]
unsafe fn q8_dot(x: &[i8; 32], y: &[i8; 32]) -> i32 {
    let s0 = dot16(vld1q_s8(x.as_ptr()), vld1q_s8(y.as_ptr()));
    let s1 = dot16(vld1q_s8(x.as_ptr().add(16)), vld1q_s8(y.as_ptr().add(16)));
    vaddvq_s32(vaddq_s32(s0, s1))
}

/// # Safety
/// The CPU must have dotprod.
#[target_feature(enable = "dotprod")]
unsafe fn q8_dot_sdot(x: &[i8; 32], y: &[i8; 32]) -> i32 {
    let acc = sdot16(vdupq_n_s32(0), vld1q_s8(x.as_ptr()), vld1q_s8(y.as_ptr()));
    let acc = sdot16(
        acc,
        vld1q_s8(x.as_ptr().add(16)),
        vld1q_s8(y.as_ptr().add(16)),
    );
    vaddvq_s32(acc)
}

/// # Safety
/// NEON only (always present): no requirement beyond the arguments' types.
#[inline(always)]
unsafe fn q4_0_dot(x: &BlockQ4_0, y: &BlockQ8_0) -> i32 {
    let (lo, hi) = nibbles(&x.qs);
    let eight = vdupq_n_s8(8);
    let s0 = dot16(vsubq_s8(lo, eight), vld1q_s8(y.qs.as_ptr()));
    let s1 = dot16(vsubq_s8(hi, eight), vld1q_s8(y.qs.as_ptr().add(16)));
    vaddvq_s32(vaddq_s32(s0, s1))
}

/// # Safety
/// The CPU must have dotprod.
#[target_feature(enable = "dotprod")]
unsafe fn q4_0_dot_sdot(x: &BlockQ4_0, y: &BlockQ8_0) -> i32 {
    let (lo, hi) = nibbles(&x.qs);
    let eight = vdupq_n_s8(8);
    let acc = sdot16(vdupq_n_s32(0), vsubq_s8(lo, eight), vld1q_s8(y.qs.as_ptr()));
    let acc = sdot16(acc, vsubq_s8(hi, eight), vld1q_s8(y.qs.as_ptr().add(16)));
    vaddvq_s32(acc)
}

/// # Safety
/// NEON only (always present): no requirement beyond the arguments' types.
#[inline(always)]
unsafe fn q4_1_dot(x: &BlockQ4_1, y: &BlockQ8_1) -> i32 {
    let (lo, hi) = nibbles(&x.qs);
    let s0 = dot16(lo, vld1q_s8(y.qs.as_ptr()));
    let s1 = dot16(hi, vld1q_s8(y.qs.as_ptr().add(16)));
    vaddvq_s32(vaddq_s32(s0, s1))
}

/// # Safety
/// The CPU must have dotprod.
#[target_feature(enable = "dotprod")]
unsafe fn q4_1_dot_sdot(x: &BlockQ4_1, y: &BlockQ8_1) -> i32 {
    let (lo, hi) = nibbles(&x.qs);
    let acc = sdot16(vdupq_n_s32(0), lo, vld1q_s8(y.qs.as_ptr()));
    let acc = sdot16(acc, hi, vld1q_s8(y.qs.as_ptr().add(16)));
    vaddvq_s32(acc)
}

/// # Safety
/// NEON only (always present). Any lengths: only whole chunks of 32
/// values that have a block to go to are read.
unsafe fn quantize_q8_0_impl(x: &[f32], y: &mut [BlockQ8_0]) {
    for (x, b) in x.chunks_exact(QK).zip(y) {
        let v: [float32x4_t; 8] = std::array::from_fn(|k| vld1q_f32(x.as_ptr().add(4 * k)));
        let mut m = vabsq_f32(v[0]);
        for vi in &v[1..] {
            m = vmaxq_f32(m, vabsq_f32(*vi));
        }
        let amax = vmaxvq_f32(m);
        b.d = half::f16::from_f32(amax / 127.0);
        let id = super::scalar::activation_scale(amax);
        for k in 0..4 {
            // FCVTNS rounds half to even, as the scalar twin.
            let i0 = vcvtnq_s32_f32(vmulq_n_f32(v[2 * k], id));
            let i1 = vcvtnq_s32_f32(vmulq_n_f32(v[2 * k + 1], id));
            let i16s = vcombine_s16(vmovn_s32(i0), vmovn_s32(i1));
            vst1_s8(b.qs.as_mut_ptr().add(8 * k), vmovn_s16(i16s));
        }
    }
}

/// # Safety
/// NEON only (always present). Any lengths: loads stay below the
/// shorter length.
unsafe fn vec_dot_f32_impl(x: &[f32], y: &[f32]) -> f32 {
    let n = x.len().min(y.len());
    let mut acc = [vdupq_n_f32(0.0); 4];
    let mut i = 0;
    while i + 16 <= n {
        for (k, a) in acc.iter_mut().enumerate() {
            *a = vfmaq_f32(
                *a,
                vld1q_f32(x.as_ptr().add(i + 4 * k)),
                vld1q_f32(y.as_ptr().add(i + 4 * k)),
            );
        }
        i += 16;
    }
    let mut sum = vaddvq_f32(vaddq_f32(
        vaddq_f32(acc[0], acc[1]),
        vaddq_f32(acc[2], acc[3]),
    ));
    while i < n {
        sum += x[i] * y[i];
        i += 1;
    }
    sum
}

/// Four repacked rows against one activation row: per block, four exact
/// integer sums, scaled in `vec_dot`'s order (no FMA), so each output equals
/// the scalar `vec_dot` of its row.
///
/// # Safety
/// `out` must hold at least 4 values (4 are stored); `block` must be
/// sound for any pair of blocks (for the SDOT ones: the CPU has dotprod).
/// `group` and `x` may have any lengths (they are zipped).
#[inline(always)]
unsafe fn gemv_x4(
    group: &[BlockQ4_0x4],
    x: &[BlockQ8_0],
    out: &mut [f32],
    block: impl Fn(&BlockQ4_0x4, &BlockQ8_0) -> int32x4_t,
) {
    let mut acc = vdupq_n_f32(0.0);
    for (b, y) in group.iter().zip(x) {
        let scaled = vmulq_n_f32(
            vmulq_f32(vcvtq_f32_s32(block(b, y)), fp16x4(&b.d)),
            fp16(y.d),
        );
        acc = vaddq_f32(acc, scaled);
    }
    vst1q_f32(out.as_mut_ptr(), acc);
}

/// Signed low and high nibbles of 16 bytes (value - 8).
///
/// # Safety
/// `p` must be valid for reading 16 bytes.
#[inline(always)]
unsafe fn signed_nibbles(p: *const u8) -> (int8x16_t, int8x16_t) {
    let v = vld1q_u8(p);
    let eight = vdupq_n_s8(8);
    (
        vsubq_s8(vreinterpretq_s8_u8(vandq_u8(v, vdupq_n_u8(0x0F))), eight),
        vsubq_s8(vreinterpretq_s8_u8(vshrq_n_u8(v, 4)), eight),
    )
}

/// 4x8 layout: each 16-byte load is 8 bytes of two rows; with 8 activation
/// bytes broadcast, SDOT leaves two lanes per row, added pairwise at the end.
///
/// # Safety
/// The CPU must have dotprod. (Loads stay inside the typed blocks: 16 bytes at
/// 32k + 16h of 64, 8 bytes at 8k and 16 + 8k of 32, k, h < 2.)
#[target_feature(enable = "dotprod")]
unsafe fn block_x4i8(b: &BlockQ4_0x4, y: &BlockQ8_0) -> int32x4_t {
    let mut s = [vdupq_n_s32(0); 2];
    for k in 0..2 {
        let ylo = vreinterpretq_s8_s64(vdupq_n_s64(
            y.qs.as_ptr().add(8 * k).cast::<i64>().read_unaligned(),
        ));
        let yhi = vreinterpretq_s8_s64(vdupq_n_s64(
            y.qs.as_ptr().add(16 + 8 * k).cast::<i64>().read_unaligned(),
        ));
        for (h, s) in s.iter_mut().enumerate() {
            let (lo, hi) = signed_nibbles(b.qs.as_ptr().add(32 * k + 16 * h));
            *s = sdot16(*s, lo, ylo);
            *s = sdot16(*s, hi, yhi);
        }
    }
    vpaddq_s32(s[0], s[1])
}

fn gemm_q4_0_x4i8(
    group: &[BlockQ4_0x4],
    x: &[BlockQ8_0],
    n: usize,
    out: &mut [f32],
    stride: usize,
) {
    super::repack::check_gemm(group, x, n, out, stride, 4);
    let per_row = group.len();
    let act = |i: usize| &x[i * per_row..(i + 1) * per_row];
    let mut i = 0;
    // Four activation rows at a time share each unpacked weight block; a pair,
    // then a single row (GEMV), take what is left.
    while i < n {
        let take = (n - i).min(4);
        if take == 1 {
            gemv_q4_0_x4i8(group, act(i), &mut out[i * stride..i * stride + 4]);
            break;
        }
        let pairs = take / 2;
        let mut res = [[0f32; 8]; 2];
        let xs = [
            act(i),
            act(i + 1),
            act(i + 2 * pairs - 2),
            act(i + 2 * pairs - 1),
        ];
        // SAFETY: only in the table `i8mm_kernels` builds after detecting
        // i8mm and dotprod; every `xs` row is `per_row` blocks long (sliced
        // above), and `res` is typed.
        unsafe {
            if pairs == 2 {
                gemm_tile_x4i8::<2>(group, &xs, &mut res)
            } else {
                gemm_tile_x4i8::<1>(group, &xs, &mut res)
            }
        };
        for (p, res) in res.iter().take(pairs).enumerate() {
            let (a0, a1) = (i + 2 * p, i + 2 * p + 1);
            for r in 0..4 {
                out[a0 * stride + r] = res[2 * r];
                out[a1 * stride + r] = res[2 * r + 1];
            }
        }
        i += 2 * pairs;
    }
}

/// Four repacked rows times `P` pairs of activation rows with SMMLA: each
/// instruction multiplies 8 bytes of two weight rows by 8 bytes of two
/// activation rows (a 2x2 tile); each unpacked weight block serves every pair.
/// Per block the integer sums are exact and are scaled in `vec_dot`'s order.
/// `res[p][2r + j]` = row r · activation row 2p + j of `xs`.
///
/// # Safety
/// The CPU must have dotprod and i8mm. `P` must be 1 or 2, and each of
/// the first `2P` rows of `xs` at least `group.len()` blocks long (they
/// are indexed with bounds checks).
#[target_feature(enable = "dotprod,i8mm")]
unsafe fn gemm_tile_x4i8<const P: usize>(
    group: &[BlockQ4_0x4],
    xs: &[&[BlockQ8_0]; 4],
    res: &mut [[f32; 8]; 2],
) {
    // acc[p][h] lanes: (row 2h, act 0), (row 2h, act 1), (row 2h+1, act 0), (row 2h+1, act 1)
    let mut acc = [[vdupq_n_f32(0.0); 2]; P];
    for (bi, b) in group.iter().enumerate() {
        let mut s = [[vdupq_n_s32(0); 2]; P];
        for k in 0..2 {
            let w = [
                signed_nibbles(b.qs.as_ptr().add(32 * k)),
                signed_nibbles(b.qs.as_ptr().add(32 * k + 16)),
            ];
            for (p, s) in s.iter_mut().enumerate() {
                let (y0, y1) = (&xs[2 * p][bi], &xs[2 * p + 1][bi]);
                let ylo = vcombine_s8(
                    vld1_s8(y0.qs.as_ptr().add(8 * k)),
                    vld1_s8(y1.qs.as_ptr().add(8 * k)),
                );
                let yhi = vcombine_s8(
                    vld1_s8(y0.qs.as_ptr().add(16 + 8 * k)),
                    vld1_s8(y1.qs.as_ptr().add(16 + 8 * k)),
                );
                for h in 0..2 {
                    s[h] = smmla(s[h], w[h].0, ylo);
                    s[h] = smmla(s[h], w[h].1, yhi);
                }
            }
        }
        // (d0, d0, d1, d1) and (d2, d2, d3, d3): each row's scale twice.
        let d = fp16x4(&b.d);
        let dw = [vzip1q_f32(d, d), vzip2q_f32(d, d)];
        for p in 0..P {
            let (d0, d1) = (fp16(xs[2 * p][bi].d), fp16(xs[2 * p + 1][bi].d));
            let dy = vld1q_f32([d0, d1, d0, d1].as_ptr());
            for h in 0..2 {
                let scaled = vmulq_f32(vmulq_f32(vcvtq_f32_s32(s[p][h]), dw[h]), dy);
                acc[p][h] = vaddq_f32(acc[p][h], scaled);
            }
        }
    }
    // Row order: acc[p][0] = rows 0,1; acc[p][1] = rows 2,3, each as (act 0, act 1).
    for p in 0..P {
        vst1q_f32(res[p].as_mut_ptr(), acc[p][0]);
        vst1q_f32(res[p].as_mut_ptr().add(4), acc[p][1]);
    }
}

/// Eight f16 to two f32x4 with FCVTL/FCVTL2 (base ARMv8; exact).
///
/// # Safety
/// `p` must be valid for reading 8 f16 (16 bytes). FCVTL is base aarch64.
#[inline(always)]
pub(super) unsafe fn f16x8_to_f32(p: *const half::f16) -> (float32x4_t, float32x4_t) {
    let h = vld1q_u16(p.cast());
    let (lo, hi): (float32x4_t, float32x4_t);
    asm!("fcvtl {lo:v}.4s, {h:v}.4h", "fcvtl2 {hi:v}.4s, {h:v}.8h",
        h = in(vreg) h, lo = out(vreg) lo, hi = out(vreg) hi,
        options(pure, nomem, nostack));
    (lo, hi)
}

/// # Safety
/// NEON only (always present). Any lengths: loads stay below the
/// shorter length.
unsafe fn vec_dot_f16_impl(x: &[half::f16], y: &[half::f16]) -> f32 {
    let n = x.len().min(y.len());
    let mut acc = [vdupq_n_f32(0.0); 4];
    let mut i = 0;
    while i + 16 <= n {
        for k in 0..2 {
            let (x0, x1) = f16x8_to_f32(x.as_ptr().add(i + 8 * k));
            let (y0, y1) = f16x8_to_f32(y.as_ptr().add(i + 8 * k));
            acc[2 * k] = vfmaq_f32(acc[2 * k], x0, y0);
            acc[2 * k + 1] = vfmaq_f32(acc[2 * k + 1], x1, y1);
        }
        i += 16;
    }
    let mut sum = vaddvq_f32(vaddq_f32(
        vaddq_f32(acc[0], acc[1]),
        vaddq_f32(acc[2], acc[3]),
    ));
    while i < n {
        sum += fp16(x[i]) * fp16(y[i]);
        i += 1;
    }
    sum
}

/// Exact integer primitives for the k-quant kernels, in plain NEON.
struct NeonDots;

// The methods' safety contract is the trait's (the CPU has the variant's
// features: here NEON only, always present); their arguments are typed
// arrays, and every load stays inside them.
impl IntDots for NeonDots {
    #[inline(always)]
    unsafe fn level_dots(q: &[u8; 16], a: &[i8; 32]) -> i32 {
        let grid = vld1q_s8(IQ4_LEVELS.as_ptr());
        let v = vld1q_u8(q.as_ptr());
        let lo = vqtbl1q_s8(grid, vandq_u8(v, vdupq_n_u8(0x0F)));
        let hi = vqtbl1q_s8(grid, vshrq_n_u8(v, 4));
        let s = vaddq_s32(
            dot16(lo, vld1q_s8(a.as_ptr())),
            dot16(hi, vld1q_s8(a.as_ptr().add(16))),
        );
        vaddvq_s32(s)
    }

    #[inline(always)]
    unsafe fn nibble_dots(q: &[u8; 32], a: &[i8; 32], b: &[i8; 32]) -> (i32, i32) {
        let m = vdupq_n_u8(0x0F);
        let (q0, q1) = (vld1q_u8(q.as_ptr()), vld1q_u8(q.as_ptr().add(16)));
        let lo = vaddq_s32(
            dot16(vreinterpretq_s8_u8(vandq_u8(q0, m)), vld1q_s8(a.as_ptr())),
            dot16(
                vreinterpretq_s8_u8(vandq_u8(q1, m)),
                vld1q_s8(a.as_ptr().add(16)),
            ),
        );
        let hi = vaddq_s32(
            dot16(vreinterpretq_s8_u8(vshrq_n_u8(q0, 4)), vld1q_s8(b.as_ptr())),
            dot16(
                vreinterpretq_s8_u8(vshrq_n_u8(q1, 4)),
                vld1q_s8(b.as_ptr().add(16)),
            ),
        );
        (vaddvq_s32(lo), vaddvq_s32(hi))
    }

    #[inline(always)]
    unsafe fn bit_sums(h: &[u8; 32], bit: u32, a: &[i8; 32], b: &[i8; 32]) -> (i32, i32) {
        let (h0, h1) = (vld1q_u8(h.as_ptr()), vld1q_u8(h.as_ptr().add(16)));
        let masked = |mask: u8, v: &[i8; 32]| {
            let m = vdupq_n_u8(mask);
            let s0 = vandq_s8(vld1q_s8(v.as_ptr()), vreinterpretq_s8_u8(vtstq_u8(h0, m)));
            let s1 = vandq_s8(
                vld1q_s8(v.as_ptr().add(16)),
                vreinterpretq_s8_u8(vtstq_u8(h1, m)),
            );
            vaddlvq_s8(s0) as i32 + vaddlvq_s8(s1) as i32
        };
        (masked(1 << bit, a), masked(1 << (bit + 1), b))
    }

    #[inline(always)]
    unsafe fn q6_dots(
        ql: &[u8; 32],
        high: bool,
        qh: &[u8; 32],
        shift: u32,
        a: &[i8; 32],
    ) -> (i32, i32) {
        let half = |off: usize| {
            let l = vld1q_u8(ql.as_ptr().add(off));
            let nib = if high {
                vshrq_n_u8(l, 4)
            } else {
                vandq_u8(l, vdupq_n_u8(0x0F))
            };
            let hb = vandq_u8(
                vshlq_u8(vld1q_u8(qh.as_ptr().add(off)), vdupq_n_s8(-(shift as i8))),
                vdupq_n_u8(3),
            );
            let q = vsubq_s8(
                vreinterpretq_s8_u8(vorrq_u8(nib, vshlq_n_u8(hb, 4))),
                vdupq_n_s8(32),
            );
            vaddvq_s32(dot16(q, vld1q_s8(a.as_ptr().add(off))))
        };
        (half(0), half(16))
    }

    #[inline(always)]
    unsafe fn crumb_dots(q: &[u8; 32], shift: u32, a: &[i8; 32]) -> (i32, i32) {
        let half = |off: usize| {
            let v = vandq_u8(
                vshlq_u8(vld1q_u8(q.as_ptr().add(off)), vdupq_n_s8(-(shift as i8))),
                vdupq_n_u8(3),
            );
            vaddvq_s32(dot16(vreinterpretq_s8_u8(v), vld1q_s8(a.as_ptr().add(off))))
        };
        (half(0), half(16))
    }

    #[inline(always)]
    unsafe fn masked_sums(h: &[u8; 32], bit: u32, a: &[i8; 32]) -> (i32, i32) {
        let half = |off: usize| {
            let set = vtstq_u8(vld1q_u8(h.as_ptr().add(off)), vdupq_n_u8(1 << bit));
            let s = vandq_s8(vld1q_s8(a.as_ptr().add(off)), vreinterpretq_s8_u8(set));
            vaddlvq_s8(s) as i32
        };
        (half(0), half(16))
    }
}

/// q = min(127, round-half-even(iscale × x)) for 256 values (FCVTNS rounds to
/// nearest even, as ggml's `nearest_int`).
///
/// # Safety
/// NEON only (always present): no requirement beyond the arguments' types.
unsafe fn round_scaled_q8_k(x: &[f32; QK_K], iscale: f32, q: &mut [i8; QK_K]) {
    let cap = vdupq_n_s32(127);
    for k in 0..QK_K / 8 {
        let a = vminq_s32(
            vcvtnq_s32_f32(vmulq_n_f32(vld1q_f32(x.as_ptr().add(8 * k)), iscale)),
            cap,
        );
        let b = vminq_s32(
            vcvtnq_s32_f32(vmulq_n_f32(vld1q_f32(x.as_ptr().add(8 * k + 4)), iscale)),
            cap,
        );
        vst1_s8(
            q.as_mut_ptr().add(8 * k),
            vmovn_s16(vcombine_s16(vmovn_s32(a), vmovn_s32(b))),
        );
    }
}

/// Σ (value - offset) · y over a Q5 block's 32 five-bit values.
///
/// # Safety
/// NEON only (always present): no requirement beyond the arguments' types.
#[inline(always)]
unsafe fn q5_dot(qs: &[u8; 16], qh: [u8; 4], y: &[i8; 32], offset: i8) -> i32 {
    let (v0, v1) = q5_values(qs, qh, offset);
    vaddvq_s32(vaddq_s32(
        dot16(v0, vld1q_s8(y.as_ptr())),
        dot16(v1, vld1q_s8(y.as_ptr().add(16))),
    ))
}

/// `vec_dot_q5_0_q8_0` for four activation rows: each weight block's
/// five-bit values are assembled once; per row the integer sum and the
/// float operations are `dot_blocks`'s, so each result equals the one-row
/// kernel's bit for bit.
///
/// # Safety
/// NEON only (always present). Any lengths: blocks are indexed with bounds
/// checks up to the shortest row.
#[inline(always)]
unsafe fn q5_0_sum4(x: &[BlockQ5_0], y: [&[BlockQ8_0]; 4]) -> [f32; 4] {
    let n = y.iter().fold(x.len(), |n, r| n.min(r.len()));
    let mut sum = [0.0f32; 4];
    for b in 0..n {
        let xb = &x[b];
        let (v0, v1) = q5_values(&xb.qs, xb.qh, 16);
        let dx = fp16(xb.d);
        for r in 0..4 {
            let yb = &y[r][b];
            let sumi = vaddvq_s32(vaddq_s32(
                dot16(v0, vld1q_s8(yb.qs.as_ptr())),
                dot16(v1, vld1q_s8(yb.qs.as_ptr().add(16))),
            ));
            sum[r] += sumi as f32 * dx * fp16(yb.d);
        }
    }
    sum
}

/// The 32 values of a Q5 block as two vectors of i8: nibbles plus 16 where
/// the value's bit in `qh` is set, minus `offset`.
///
/// # Safety
/// NEON only (always present): no requirement beyond the arguments' types.
#[inline(always)]
unsafe fn q5_values(qs: &[u8; 16], qh: [u8; 4], offset: i8) -> (int8x16_t, int8x16_t) {
    let (lo, hi) = nibbles(qs);
    // Byte j of each half takes byte j/8 of its 16 qh bits, then tests bit j%8.
    let bits = vld1q_u8([1u8, 2, 4, 8, 16, 32, 64, 128, 1, 2, 4, 8, 16, 32, 64, 128].as_ptr());
    let spread = |b0: u8, b1: u8| vcombine_u8(vdup_n_u8(b0), vdup_n_u8(b1));
    let h0 = vandq_u8(vtstq_u8(spread(qh[0], qh[1]), bits), vdupq_n_u8(0x10));
    let h1 = vandq_u8(vtstq_u8(spread(qh[2], qh[3]), bits), vdupq_n_u8(0x10));
    let off = vdupq_n_s8(offset);
    (
        vsubq_s8(vorrq_s8(lo, vreinterpretq_s8_u8(h0)), off),
        vsubq_s8(vorrq_s8(hi, vreinterpretq_s8_u8(h1)), off),
    )
}

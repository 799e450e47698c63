//! aarch64 SVE kernels for vectors of exactly 256 bits (the table places
//! them only there), for repacked Q4_0 (the 8x8 layout, `BlockQ4_0x8`): a
//! 32-byte vector holds eight bytes of four rows, half a block's nibbles
//! for half its rows, so a block of eight rows is four loads, and one SDOT
//! or SMMLA does twice a NEON one's work. Written with inline asm (SVE
//! intrinsics are not stable), each a loop over the group's blocks that
//! keeps the eight rows' sums in registers: the per-block calls of `sve.rs`
//! spent more on the call than on the products.
//!
//! Nibbles, stored XOR 8 (`repack::X8I8_FLIP`), are unpacked as 16·(q − 8)
//! by a shift or a mask (as `neon_groups::q4_0_sixteenths`), so the integer
//! sums are 16·S, exact. The float steps are the scalar twin's, S·d(w)·d(a)
//! then an add, lane by lane, so every result equals the twin's
//! (`repack::gemv_q4_0_x8i8`) bit for bit: the GEMV shifts 16·S back to S
//! before converting it; the tile multiplies 16·S by d(w)/16 (exact: a
//! power of two), whose product is S·d(w) to the bit.

use std::arch::asm;
use std::mem::{offset_of, size_of};

use super::act_rows::BlockQ8_0x2;
use super::group_tiles::{by_take, gemm_in_row_block_tiles};
use super::neon_i8mm::tile_q4_0_x8;
use super::repack::{check_gemv, BlockQ4_0x8, X8I8_FLIP};
use crate::tensor::blocks::BlockQ8_0;

// The asm below hard-codes these layouts; a change fails the build here.
// A group block: eight f16 scales, then 128 bytes of quants in four runs of
// 32 (values 8k.. of rows 4h..4h + 4 at 64k + 32h, eight bytes a row).
const _: () = assert!(offset_of!(BlockQ4_0x8, d) == 0);
const _: () = assert!(offset_of!(BlockQ4_0x8, qs) == 16);
const _: () = assert!(size_of::<BlockQ4_0x8>() == 144);
const _: () = assert!(X8I8_FLIP == 0x88);
// An activation block: its f16 scale, then 32 quants.
const _: () = assert!(offset_of!(BlockQ8_0, qs) == 2);
const _: () = assert!(size_of::<BlockQ8_0>() == 34);
// An activation pair: (d0, d1, d0, d1) as f32, then 64 quants in 16-byte
// runs (values 8c..8c + 8 of both rows at 16c).
const _: () = assert!(offset_of!(BlockQ8_0x2, d) == 0);
const _: () = assert!(offset_of!(BlockQ8_0x2, qs) == 16);
const _: () = assert!(size_of::<BlockQ8_0x2>() == 80);

/// One activation pair's step of `tile_four_pairs` (its asm, for the pair
/// at address `$a`, adding to sums `$lo` (rows 0..4) and `$hi` (rows 4..8)):
/// see there.
macro_rules! pair {
    ($a:literal, $lo:literal, $hi:literal) => {
        concat!(
            "ld1rqb {{z8.b}}, p0/z, [",
            $a,
            ", #16]\n",
            "ld1rqb {{z9.b}}, p0/z, [",
            $a,
            ", #32]\n",
            "ld1rqb {{z10.b}}, p0/z, [",
            $a,
            ", #48]\n",
            "ld1rqb {{z11.b}}, p0/z, [",
            $a,
            ", #64]\n",
            "ld1rqw {{z14.s}}, p1/z, [",
            $a,
            "]\n",
            "mov z16.s, #0\n",
            "mov z17.s, #0\n",
            "smmla z16.s, z4.b, z8.b\n",
            "smmla z17.s, z5.b, z8.b\n",
            "smmla z16.s, z6.b, z9.b\n",
            "smmla z17.s, z7.b, z9.b\n",
            "smmla z16.s, z0.b, z10.b\n",
            "smmla z17.s, z1.b, z10.b\n",
            "smmla z16.s, z2.b, z11.b\n",
            "smmla z17.s, z3.b, z11.b\n",
            "scvtf z16.s, p1/m, z16.s\n",
            "scvtf z17.s, p1/m, z17.s\n",
            "fmul z16.s, z16.s, z12.s\n",
            "fmul z17.s, z17.s, z13.s\n",
            "fmul z16.s, z16.s, z14.s\n",
            "fmul z17.s, z17.s, z14.s\n",
            "fadd ",
            $lo,
            ".s, ",
            $lo,
            ".s, z16.s\n",
            "fadd ",
            $hi,
            ".s, ",
            $hi,
            ".s, z17.s\n",
            "add ",
            $a,
            ", ",
            $a,
            ", #80",
        )
    };
}

// Safety. The wrappers below are reachable only through the table
// `sve::kernels` builds after detecting SVE with 256-bit vectors (and i8mm
// for the SMMLA tile). Every load and store of the asm is under a 32-byte
// (or eight-word) predicate, or is a fixed-size replicating load, inside
// the typed blocks and buffers handed to it: at any other vector length it
// would stay in bounds (and compute wrong sums, hence the table's check).

/// Eight repacked rows times one activation row.
pub(super) fn gemv_q4_0_x8(group: &[BlockQ4_0x8], x: &[BlockQ8_0], out: &mut [f32]) {
    check_gemv(group, x, out, 8);
    let out: &mut [f32; 8] = (&mut out[..8]).try_into().expect("eight outputs");
    if group.is_empty() {
        *out = [0.0; 8];
        return;
    }
    // SAFETY: see the module's safety note; `check_gemv` made `x` as long as
    // `group`, which is not empty.
    unsafe { gemv_blocks(group, x, out) }
}

/// Eight repacked rows times activation pairs, four pairs to a tile (each
/// block's nibbles unpacked once for eight activation rows); shorter tiles
/// go to NEON's tile (`neon_i8mm`), and an odd last row to the GEMV above.
pub(super) fn gemm_q4_0_x8_pairs(
    group: &[BlockQ4_0x8],
    pairs: &[BlockQ8_0x2],
    x: &[BlockQ8_0],
    n: usize,
    out: &mut [f32],
    stride: usize,
) {
    gemm_in_row_block_tiles::<4, _, _, 8>(
        group,
        pairs,
        x,
        n,
        out,
        stride,
        |take, ps, res| {
            if take == 4 && !group.is_empty() {
                // SAFETY: see the module's safety note; the frame sliced
                // every pair to `group.len()` blocks.
                unsafe { tile_four_pairs(group, ps, res) }
            } else {
                // SAFETY: the table holds this kernel only with i8mm; the
                // frame sliced every pair to `group.len()` blocks.
                unsafe { by_take!(take, tile_q4_0_x8(group, ps, res)) }
            }
        },
        |x, _, out| gemv_q4_0_x8(group, x, out),
    );
}

/// `out[r]` = Σ over blocks of S(r)·d(w, r)·d(y), added block by block.
/// Per block: four 32-byte loads of nibbles (values 0..8 and 16..24 of rows
/// 0..4, then of rows 4..8, then values 8..16 and 24..32), LD1RD
/// broadcasting the matching eight activation bytes to every row, and SDOT
/// into two vectors whose word 2r + j holds half j of row r's sum (rows
/// 0..4, then 4..8); UZP1/UZP2 and an add give the eight sums in row order.
///
/// # Safety
/// The CPU must have SVE; `x` must hold at least `group.len()` blocks, and
/// `group` at least one.
#[target_feature(enable = "sve")]
unsafe fn gemv_blocks(group: &[BlockQ4_0x8], x: &[BlockQ8_0], out: &mut [f32; 8]) {
    asm!(
        "ptrue p0.b, vl32",
        "ptrue p1.s, vl8",
        "mov z31.s, #0",
        "2:",
        "ld1b {{z0.b}}, p0/z, [{w}, {o16}]",
        "ld1b {{z1.b}}, p0/z, [{w}, {o48}]",
        "ld1b {{z2.b}}, p0/z, [{w}, {o80}]",
        "ld1b {{z3.b}}, p0/z, [{w}, {o112}]",
        "add {t}, {y}, #2",
        "ld1rd {{z4.d}}, p0/z, [{t}]",
        "ld1rd {{z5.d}}, p0/z, [{t}, #8]",
        "ld1rd {{z6.d}}, p0/z, [{t}, #16]",
        "ld1rd {{z7.d}}, p0/z, [{t}, #24]",
        "lsl z8.b, z0.b, #4",
        "lsl z9.b, z1.b, #4",
        "lsl z10.b, z2.b, #4",
        "lsl z11.b, z3.b, #4",
        "and z0.b, z0.b, #0xf0",
        "and z1.b, z1.b, #0xf0",
        "and z2.b, z2.b, #0xf0",
        "and z3.b, z3.b, #0xf0",
        "mov z16.s, #0",
        "mov z17.s, #0",
        "sdot z16.s, z8.b, z4.b",
        "sdot z17.s, z9.b, z4.b",
        "sdot z16.s, z0.b, z6.b",
        "sdot z17.s, z1.b, z6.b",
        "sdot z16.s, z10.b, z5.b",
        "sdot z17.s, z11.b, z5.b",
        "sdot z16.s, z2.b, z7.b",
        "sdot z17.s, z3.b, z7.b",
        "uzp1 z18.s, z16.s, z17.s",
        "uzp2 z19.s, z16.s, z17.s",
        "add z18.s, z18.s, z19.s",
        "asr z18.s, z18.s, #4",
        "scvtf z18.s, p1/m, z18.s",
        "ld1h {{z20.s}}, p1/z, [{w}]",
        "fcvt z20.s, p1/m, z20.h",
        "ld1rh {{z21.s}}, p1/z, [{y}]",
        "fcvt z21.s, p1/m, z21.h",
        "fmul z18.s, z18.s, z20.s",
        "fmul z18.s, z18.s, z21.s",
        "fadd z31.s, z31.s, z18.s",
        "add {w}, {w}, #144",
        "add {y}, {y}, #34",
        "subs {n}, {n}, #1",
        "b.ne 2b",
        "st1w {{z31.s}}, p1, [{out}]",
        w = inout(reg) group.as_ptr() => _,
        y = inout(reg) x.as_ptr() => _,
        n = inout(reg) group.len() => _,
        out = in(reg) out.as_mut_ptr(),
        t = out(reg) _,
        o16 = in(reg) 16usize,
        o48 = in(reg) 48usize,
        o80 = in(reg) 80usize,
        o112 = in(reg) 112usize,
        out("z0") _, out("z1") _, out("z2") _, out("z3") _, out("z4") _, out("z5") _,
        out("z6") _, out("z7") _, out("z8") _, out("z9") _, out("z10") _, out("z11") _,
        out("z16") _, out("z17") _, out("z18") _, out("z19") _, out("z20") _, out("z21") _,
        out("z31") _, out("p0") _, out("p1") _,
        options(nostack),
    );
}

/// `res[2p + j][r]` = row r times row j of pair p, for four pairs. Per
/// block: the nibbles' four loads unpacked into eight vectors (values
/// 8k..8k + 8 and 16 + 8k.. of rows 4h..4h + 4: SMMLA's first operand, two
/// rows per 128-bit segment), then per pair its four 16-byte runs
/// replicated to both segments (LD1RQB) and eight SMMLAs into two vectors
/// whose segment s holds rows 4h + 2s and 4h + 2s + 1 times the pair
/// (lanes w0·a0, w0·a1, w1·a0, w1·a1), scaled by the rows' scales (zipped
/// to that order, divided by 16 here for the nibbles' factor) and the
/// pair's (stored in it in that order) and added to that pair's two sums.
/// UZP1/UZP2 put the sums in `res`'s order.
///
/// # Safety
/// The CPU must have SVE and i8mm; `group` must hold at least one block and
/// each of `ps` at least `group.len()`.
#[target_feature(enable = "sve,i8mm")]
unsafe fn tile_four_pairs(
    group: &[BlockQ4_0x8],
    ps: &[&[BlockQ8_0x2]; 4],
    res: &mut [[f32; 8]; 8],
) {
    asm!(
        "ptrue p0.b, vl32",
        "ptrue p1.s, vl8",
        // z15: 1/16 in every lane (f32 bits 0x3d800000).
        "mov {t:w}, #0x3d800000",
        "dup z15.s, {t:w}",
        "mov z24.s, #0",
        "mov z25.s, #0",
        "mov z26.s, #0",
        "mov z27.s, #0",
        "mov z28.s, #0",
        "mov z29.s, #0",
        "mov z30.s, #0",
        "mov z31.s, #0",
        "2:",
        "ld1b {{z0.b}}, p0/z, [{w}, {o16}]",
        "ld1b {{z1.b}}, p0/z, [{w}, {o48}]",
        "ld1b {{z2.b}}, p0/z, [{w}, {o80}]",
        "ld1b {{z3.b}}, p0/z, [{w}, {o112}]",
        // z4..z7: values 0..8 (rows 0..4, 4..8), 8..16 (rows 0..4, 4..8);
        // z0..z3: values 16..24 and 24..32, in the same order.
        "lsl z4.b, z0.b, #4",
        "lsl z5.b, z1.b, #4",
        "lsl z6.b, z2.b, #4",
        "lsl z7.b, z3.b, #4",
        "and z0.b, z0.b, #0xf0",
        "and z1.b, z1.b, #0xf0",
        "and z2.b, z2.b, #0xf0",
        "and z3.b, z3.b, #0xf0",
        // z12, z13: (d0, d0, d1, d1, .., d3), (d4, d4, .., d7), over 16.
        "ld1h {{z12.s}}, p1/z, [{w}]",
        "fcvt z12.s, p1/m, z12.h",
        "fmul z12.s, z12.s, z15.s",
        "zip2 z13.s, z12.s, z12.s",
        "zip1 z12.s, z12.s, z12.s",
        "add {w}, {w}, #144",
        pair!("{a0}", "z24", "z25"),
        pair!("{a1}", "z26", "z27"),
        pair!("{a2}", "z28", "z29"),
        pair!("{a3}", "z30", "z31"),
        "subs {n}, {n}, #1",
        "b.ne 2b",
        "uzp1 z16.s, z24.s, z25.s",
        "uzp2 z17.s, z24.s, z25.s",
        "uzp1 z18.s, z26.s, z27.s",
        "uzp2 z19.s, z26.s, z27.s",
        "uzp1 z20.s, z28.s, z29.s",
        "uzp2 z21.s, z28.s, z29.s",
        "uzp1 z22.s, z30.s, z31.s",
        "uzp2 z23.s, z30.s, z31.s",
        "st1w {{z16.s}}, p1, [{res}]",
        "add {res}, {res}, #32",
        "st1w {{z17.s}}, p1, [{res}]",
        "add {res}, {res}, #32",
        "st1w {{z18.s}}, p1, [{res}]",
        "add {res}, {res}, #32",
        "st1w {{z19.s}}, p1, [{res}]",
        "add {res}, {res}, #32",
        "st1w {{z20.s}}, p1, [{res}]",
        "add {res}, {res}, #32",
        "st1w {{z21.s}}, p1, [{res}]",
        "add {res}, {res}, #32",
        "st1w {{z22.s}}, p1, [{res}]",
        "add {res}, {res}, #32",
        "st1w {{z23.s}}, p1, [{res}]",
        w = inout(reg) group.as_ptr() => _,
        a0 = inout(reg) ps[0].as_ptr() => _,
        a1 = inout(reg) ps[1].as_ptr() => _,
        a2 = inout(reg) ps[2].as_ptr() => _,
        a3 = inout(reg) ps[3].as_ptr() => _,
        n = inout(reg) group.len() => _,
        res = inout(reg) res.as_mut_ptr() => _,
        t = out(reg) _,
        o16 = in(reg) 16usize,
        o48 = in(reg) 48usize,
        o80 = in(reg) 80usize,
        o112 = in(reg) 112usize,
        out("z0") _, out("z1") _, out("z2") _, out("z3") _, out("z4") _, out("z5") _,
        out("z6") _, out("z7") _, out("z8") _, out("z9") _, out("z10") _, out("z11") _,
        out("z12") _, out("z13") _, out("z14") _, out("z15") _, out("z16") _, out("z17") _,
        out("z18") _, out("z19") _, out("z20") _, out("z21") _, out("z22") _, out("z23") _,
        out("z24") _, out("z25") _, out("z26") _, out("z27") _, out("z28") _, out("z29") _,
        out("z30") _, out("z31") _, out("p0") _, out("p1") _,
        options(nostack),
    );
}

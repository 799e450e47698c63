//! Q4_1 weights interleaved at load, eight rows at a time, for variants with
//! a kernel that multiplies eight rows at once (AVX2, AVX-512, NEON with
//! dotprod, SIMD128), as `repack_q8_0` does for Q8_0. Q4_1 is the type
//! SmolLM2's published file (the demo's model) keeps its layers in; row by
//! row, its dot ran at less than half the speed of repacked Q4_0, whose
//! blocks are only a tenth smaller.
//!
//! A group block holds, for one column block of eight rows, their scales,
//! their minimums and their nibbles interleaved eight bytes at a time as
//! `BlockQ4_0x8` stores Q4_0's: the same 160 bytes as the eight Q4_1
//! blocks. Rows that do not fill a last group stay plain Q4_1 and go through
//! `vec_dot`.
//!
//! A weight is d·q + m with q a nibble (0..15), and a Q8_1 activation block
//! carries s = d(a)·Σ its quants, so a block's product is d(w)·d(a)·Σ q·a +
//! m·s. Per row the kernels keep two sums: the exact integer sum of each
//! block added with one FMA by d(w)·d(a), and the minimums' terms added
//! with one FMA each; the row's result is their sum. Every native variant's
//! group kernel equals the scalar twin here bit for bit, and row-by-row
//! `vec_dot` within rounding; wasm's (SIMD128, relaxed SIMD), without a
//! fused multiply-add, round each block's product once more (within the
//! bound `simd128::q4_1_x8_tile` states).

use half::f16;

use super::interleaved::{GroupBlock, GroupGemmFn, Interleaved, PlainGroup, ROWS};
use super::kernels::{Kernels, VecDotFn};
use super::repack::check_gemm;
use crate::tensor::blocks::{BlockQ4_1, BlockQ8_1, QK};

/// One column block of eight Q4_1 rows.
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct BlockQ4_1x8 {
    pub d: [f16; ROWS],
    pub m: [f16; ROWS],
    /// For k in 0..2, for each row r: bytes 8k..8k+8 of the row's `qs` at
    /// `qs[64 k + 8 r..]` (low nibbles: values 8k.., high: 16 + 8k..).
    pub qs: [u8; 16 * ROWS],
}

const _: () = assert!(std::mem::size_of::<BlockQ4_1x8>() == ROWS * 20);

impl GroupBlock for BlockQ4_1x8 {
    type Row = BlockQ4_1;
    type Act = BlockQ8_1;

    fn interleave(rows: [&BlockQ4_1; ROWS]) -> BlockQ4_1x8 {
        let mut g = BlockQ4_1x8 {
            d: [f16::ZERO; ROWS],
            m: [f16::ZERO; ROWS],
            qs: [0; 16 * ROWS],
        };
        for (r, b) in rows.iter().enumerate() {
            g.d[r] = b.d;
            g.m[r] = b.m;
            for k in 0..2 {
                let at = 64 * k + 8 * r;
                g.qs[at..at + 8].copy_from_slice(&b.qs[8 * k..8 * k + 8]);
            }
        }
        g
    }
}

impl BlockQ4_1x8 {
    /// Nibble `j` (0..32) of row `r`.
    fn nibble(&self, r: usize, j: usize) -> i32 {
        let m = j % 16;
        let byte = self.qs[64 * (m / 8) + 8 * r + m % 8];
        (if j < 16 { byte & 0x0F } else { byte >> 4 }) as i32
    }
}

/// A Q4_1 weight matrix in groups of eight interleaved rows.
pub type RepackedQ4_1 = Interleaved<BlockQ4_1x8>;

impl PlainGroup for BlockQ4_1x8 {
    fn kernels(k: &Kernels) -> (GroupGemmFn<Self>, VecDotFn<Self::Row, Self::Act>) {
        (k.gemm_q4_1_x8.unwrap_or(gemm_q4_1_x8), k.vec_dot_q4_1_q8_1)
    }
}

/// One group of eight rows times `n` activation rows (the scalar twin):
/// output `r` of activation row `i` goes to `out[i * stride + r]`. Per
/// block, the exact nibble sum is added with one FMA by d(w)·d(a) and the
/// minimum's term with one FMA m·s, into two sums added at the end.
pub fn gemm_q4_1_x8(
    group: &[BlockQ4_1x8],
    x: &[BlockQ8_1],
    n: usize,
    out: &mut [f32],
    stride: usize,
) {
    check_gemm(group, x, n, out, stride, ROWS);
    let per_row = group.len();
    for i in 0..n {
        let xi = &x[i * per_row..(i + 1) * per_row];
        let mut dots = [0f32; ROWS];
        let mut mins = [0f32; ROWS];
        for (b, y) in group.iter().zip(xi) {
            let (dy, sy) = (y.d.to_f32(), y.s.to_f32());
            for r in 0..ROWS {
                let sum: i32 = (0..QK).map(|j| b.nibble(r, j) * y.qs[j] as i32).sum();
                dots[r] = (sum as f32).mul_add(b.d[r].to_f32() * dy, dots[r]);
                mins[r] = b.m[r].to_f32().mul_add(sy, mins[r]);
            }
        }
        for r in 0..ROWS {
            out[i * stride + r] = dots[r] + mins[r];
        }
    }
}

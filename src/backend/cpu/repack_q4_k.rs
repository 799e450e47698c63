//! Q4_K weights interleaved at load, eight rows at a time, for variants with
//! a kernel that multiplies eight rows at once (AVX2): llama.cpp's "q4_K 8x8"
//! idea in lamina's own layout. The eight rows' integer sums come out in the
//! eight lanes of one vector, so the scales, the mins and the float
//! combination are done for eight rows at once instead of one by one.
//!
//! A group block holds, for one super-block column of eight rows: their
//! scales `d` and `dmin`, their 6-bit sub-block scales and mins unpacked to
//! bytes (32 bytes more than the eight packed rows: 3%), and their quants
//! interleaved eight bytes at a time. Rows that do not fill a last group
//! stay plain Q4_K and go through `vec_dot`.
//!
//! Per row and super-block the kernels compute the integer sums exactly and
//! combine them with `kquant_dot::q4_k`'s float code, so repacked products
//! equal row-by-row `vec_dot` (every variant's, which equal the scalar one)
//! bit for bit.

use half::f16;

use super::interleaved::{GroupBlock, GroupGemmFn, Interleaved, PlainGroup, ROWS};
use super::kernels::{Kernels, VecDotFn};
use super::kquant_dot::k4_scales_mins;
use super::repack::check_gemm;
use crate::tensor::blocks::{BlockQ4K, BlockQ8K, QK_K};

/// One super-block column of eight Q4_K rows.
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct BlockQ4Kx8 {
    pub d: [f16; ROWS],
    pub dmin: [f16; ROWS],
    /// `scales[8 s + r]`: row r's scale of sub-block s (32 values).
    pub scales: [u8; 8 * ROWS],
    /// `mins[16 p + 2 r + t]`: row r's min of sub-block 2p + t.
    pub mins: [u8; 8 * ROWS],
    /// `qs[256 c + 64 k + 8 r + t]`: byte 32c + 8k + t of row r's quants
    /// (its low nibble is value 64c + 8k + t, its high nibble that + 32).
    pub qs: [u8; 128 * ROWS],
}

const _: () = assert!(std::mem::size_of::<BlockQ4Kx8>() == ROWS * 144 + 32);

impl GroupBlock for BlockQ4Kx8 {
    type Row = BlockQ4K;
    type Act = BlockQ8K;

    fn interleave(rows: [&BlockQ4K; ROWS]) -> BlockQ4Kx8 {
        let mut g = BlockQ4Kx8 {
            d: [f16::ZERO; ROWS],
            dmin: [f16::ZERO; ROWS],
            scales: [0; 8 * ROWS],
            mins: [0; 8 * ROWS],
            qs: [0; 128 * ROWS],
        };
        for (r, b) in rows.iter().enumerate() {
            g.d[r] = b.d;
            g.dmin[r] = b.dmin;
            let (scales, mins) = k4_scales_mins(&b.scales);
            for s in 0..8 {
                g.scales[8 * s + r] = scales[s];
                g.mins[16 * (s / 2) + 2 * r + s % 2] = mins[s];
            }
            for c in 0..4 {
                for k in 0..4 {
                    let at = 256 * c + 64 * k + 8 * r;
                    g.qs[at..at + 8].copy_from_slice(&b.qs[32 * c + 8 * k..32 * c + 8 * k + 8]);
                }
            }
        }
        g
    }
}

impl BlockQ4Kx8 {
    /// Value `j` (0..256, unsigned 4 bits) of row `r`.
    fn value(&self, r: usize, j: usize) -> i32 {
        let (c, within) = (j / 64, j % 64);
        let (high, m) = (within >= 32, within % 32);
        let byte = self.qs[256 * c + 64 * (m / 8) + 8 * r + m % 8];
        (if high { byte >> 4 } else { byte & 0x0F }) as i32
    }
}

/// A Q4_K weight matrix in groups of eight interleaved rows.
pub type RepackedQ4K = Interleaved<BlockQ4Kx8>;

impl PlainGroup for BlockQ4Kx8 {
    fn kernels(k: &Kernels) -> (GroupGemmFn<Self>, VecDotFn<Self::Row, Self::Act>) {
        (k.gemm_q4_k_x8.unwrap_or(gemm_q4_k_x8), k.vec_dot_q4_k_q8_k)
    }
}

/// One group of eight rows times `n` activation rows (the scalar twin):
/// output `r` of activation row `i` goes to `out[i * stride + r]`, with
/// `kquant_dot::q4_k`'s integer sums and float combination.
pub fn gemm_q4_k_x8(
    group: &[BlockQ4Kx8],
    x: &[BlockQ8K],
    n: usize,
    out: &mut [f32],
    stride: usize,
) {
    check_gemm(group, x, n, out, stride, ROWS);
    let per_row = group.len();
    for i in 0..n {
        let xi = &x[i * per_row..(i + 1) * per_row];
        let mut acc = [0f32; ROWS];
        for (b, y) in group.iter().zip(xi) {
            for (r, acc) in acc.iter_mut().enumerate() {
                let mut dot = 0i32;
                let mut mins = 0i32;
                for s in 0..8 {
                    let run: i32 = (32 * s..32 * s + 32)
                        .map(|j| b.value(r, j) * y.qs[j] as i32)
                        .sum();
                    dot += b.scales[8 * s + r] as i32 * run;
                    let min = b.mins[16 * (s / 2) + 2 * r + s % 2] as i32;
                    mins += min * (y.bsums[2 * s] as i32 + y.bsums[2 * s + 1] as i32);
                }
                let (d, dmin) = (b.d[r].to_f32(), b.dmin[r].to_f32());
                *acc += d * y.d * dot as f32 - dmin * y.d * mins as f32;
            }
        }
        out[i * stride..i * stride + ROWS].copy_from_slice(&acc);
    }
}

const _: () = assert!(QK_K == 256);

//! Q6_K weights interleaved at load, eight rows at a time, for variants with
//! a kernel that multiplies eight rows at once (AVX2), as `repack_q4_k` does
//! for Q4_K. Q6_K is what llama-quantize's K_M mixtures give some `ffn_down`
//! and `attn_v` matrices and most separate output matrices.
//!
//! A group block holds, for one super-block column of eight rows: their
//! scales `d`, their sixteen signed sub-block scales, and their low nibbles
//! and high bit pairs interleaved eight bytes at a time, in Q6_K's own order
//! (so a byte of `ql` still carries values j and j + 64 of its half, and a
//! byte of `qh` the high bits of values j, j + 32, j + 64, j + 96). The group
//! is exactly as large as the eight rows. Rows that do not fill a last group
//! stay plain Q6_K and go through `vec_dot`.
//!
//! Per row and super-block the kernels compute `kquant_dot::q6_k`'s integer
//! sum exactly (the unsigned values times the activations, less 32 × the
//! scaled 16-value sums of the activations) and combine it with the same
//! float code, so repacked products equal row-by-row `vec_dot` bit for bit.

use half::f16;

use super::interleaved::{GroupBlock, GroupGemmFn, Interleaved, PlainGroup, ROWS};
use super::kernels::{Kernels, VecDotFn};
use super::repack::check_gemm;
use crate::tensor::blocks::{BlockQ6K, BlockQ8K, QK_K};

/// One super-block column of eight Q6_K rows.
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct BlockQ6Kx8 {
    pub d: [f16; ROWS],
    /// `scales[16 p + 2 r + t]`: row r's scale of sub-block 2p + t (16
    /// values).
    pub scales: [i8; 16 * ROWS],
    /// `ql[512 h + 64 k + 8 r + t]`: byte 64h + 8k + t of row r's `ql`.
    pub ql: [u8; 128 * ROWS],
    /// `qh[256 h + 64 k + 8 r + t]`: byte 32h + 8k + t of row r's `qh`.
    pub qh: [u8; 64 * ROWS],
}

const _: () = assert!(std::mem::size_of::<BlockQ6Kx8>() == ROWS * 210);

impl GroupBlock for BlockQ6Kx8 {
    type Row = BlockQ6K;
    type Act = BlockQ8K;

    fn interleave(rows: [&BlockQ6K; ROWS]) -> BlockQ6Kx8 {
        let mut g = BlockQ6Kx8 {
            d: [f16::ZERO; ROWS],
            scales: [0; 16 * ROWS],
            ql: [0; 128 * ROWS],
            qh: [0; 64 * ROWS],
        };
        for (r, b) in rows.iter().enumerate() {
            g.d[r] = b.d;
            for s in 0..16 {
                g.scales[16 * (s / 2) + 2 * r + s % 2] = b.scales[s];
            }
            for h in 0..2 {
                for k in 0..8 {
                    let at = 512 * h + 64 * k + 8 * r;
                    let from = 64 * h + 8 * k;
                    g.ql[at..at + 8].copy_from_slice(&b.ql[from..from + 8]);
                }
                for k in 0..4 {
                    let at = 256 * h + 64 * k + 8 * r;
                    let from = 32 * h + 8 * k;
                    g.qh[at..at + 8].copy_from_slice(&b.qh[from..from + 8]);
                }
            }
        }
        g
    }
}

impl BlockQ6Kx8 {
    /// Value `j` (0..256) of row `r`, unsigned (0..63: the stored value
    /// plus 32).
    fn value(&self, r: usize, j: usize) -> i32 {
        let (h, within) = (j / 128, j % 128);
        // Within a half: byte `b` of `ql` holds values b (low nibble) and
        // b + 64 (high); byte `l` of `qh` holds values l + 32i in bits 2i.
        let (b, high_nibble) = (within % 64, within >= 64);
        let ql = self.ql[512 * h + 64 * (b / 8) + 8 * r + b % 8];
        let low = if high_nibble { ql >> 4 } else { ql & 0x0F };
        let l = within % 32;
        let qh = self.qh[256 * h + 64 * (l / 8) + 8 * r + l % 8];
        let pair = (qh >> (2 * (within / 32))) & 3;
        (low | (pair << 4)) as i32
    }

    /// Row `r`'s scale of sub-block `s`.
    fn scale(&self, r: usize, s: usize) -> i32 {
        self.scales[16 * (s / 2) + 2 * r + s % 2] as i32
    }
}

/// A Q6_K weight matrix in groups of eight interleaved rows.
pub type RepackedQ6K = Interleaved<BlockQ6Kx8>;

impl PlainGroup for BlockQ6Kx8 {
    fn kernels(k: &Kernels) -> (GroupGemmFn<Self>, VecDotFn<Self::Row, Self::Act>) {
        (k.gemm_q6_k_x8.unwrap_or(gemm_q6_k_x8), k.vec_dot_q6_k_q8_k)
    }
}

/// One group of eight rows times `n` activation rows (the scalar twin):
/// output `r` of activation row `i` goes to `out[i * stride + r]`, with
/// `kquant_dot::q6_k`'s integer sum and float combination.
pub fn gemm_q6_k_x8(
    group: &[BlockQ6Kx8],
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
                for s in 0..16 {
                    let run: i32 = (16 * s..16 * s + 16)
                        .map(|j| (b.value(r, j) - 32) * y.qs[j] as i32)
                        .sum();
                    dot += b.scale(r, s) * run;
                }
                *acc += b.d[r].to_f32() * y.d * dot as f32;
            }
        }
        out[i * stride..i * stride + ROWS].copy_from_slice(&acc);
    }
}

const _: () = assert!(QK_K == 256);

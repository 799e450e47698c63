//! Q5_0 weights interleaved at load, eight rows at a time, for variants with
//! a kernel that multiplies eight rows at once (x86, aarch64, wasm). Q5_0 is what
//! llama-quantize's k-quant presets fall back to for rows whose width is not
//! a multiple of 256 (SmolLM2's 576), so it carries most of such a model's
//! prompt processing.
//!
//! A group block holds, for one column block of eight rows: their scales,
//! their fifth bits (row by row) and their low nibbles interleaved eight
//! bytes at a time as `BlockQ4_0x8` stores Q4_0's. The same 176 bytes as the
//! eight Q5_0 blocks: repacking costs no memory. Rows that do not fill a last
//! group stay plain Q5_0 and go through `vec_dot`.
//!
//! The kernels sum each block exactly in integers, then add it to the row's
//! total with one fused multiply-add by `d(weight) × d(activation)`, as
//! ggml's SIMD dot products scale their lanes: every native variant's group
//! kernel equals the scalar one here bit for bit, and row-by-row `vec_dot`
//! within rounding. (Rounding matters: Gemma 3's chat golden moves by 1.5 at
//! one step between the scalar `vec_dot`'s order and ggml's.) wasm has no
//! fused multiply-add: its kernels (`wasm_q5_0`) take `vec_dot`'s steps and
//! equal it bit for bit, as the row-by-row products they replace. A SIMD
//! kernel may take each value as unsigned (value + 16, the nibble with its
//! fifth bit) and subtract 16 × the activation block's sum: the sums are
//! computed once per product (`activation_sums`) and passed in.

use half::f16;

pub use super::interleaved::ROWS;
use super::interleaved::{GroupBlock, Interleaved};
use super::kernels::Kernels;
use super::repack::check_gemm;
use crate::error::{Error, Result};
use crate::tensor::blocks::{BlockQ5_0, BlockQ8_0, QK};

/// One column block of eight Q5_0 rows.
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct BlockQ5_0x8 {
    pub d: [f16; ROWS],
    /// Row r's fifth bits (Q5_0's `qh`, little-endian) at bytes 4r..4r+4.
    pub qh: [u8; 4 * ROWS],
    /// For k in 0..2, for each row: bytes 8k..8k+8 of the row's `qs`.
    pub qs: [u8; 16 * ROWS],
}

const _: () = assert!(std::mem::size_of::<BlockQ5_0x8>() == ROWS * 22);

impl GroupBlock for BlockQ5_0x8 {
    type Row = BlockQ5_0;
    type Act = BlockQ8_0;

    fn interleave(rows: [&BlockQ5_0; ROWS]) -> BlockQ5_0x8 {
        let mut g = BlockQ5_0x8 {
            d: [f16::ZERO; ROWS],
            qh: [0; 4 * ROWS],
            qs: [0; 16 * ROWS],
        };
        for (r, b) in rows.iter().enumerate() {
            g.d[r] = b.d;
            g.qh[4 * r..4 * r + 4].copy_from_slice(&b.qh);
            for k in 0..2 {
                let at = 64 * k + 8 * r;
                g.qs[at..at + 8].copy_from_slice(&b.qs[8 * k..8 * k + 8]);
            }
        }
        g
    }
}

impl BlockQ5_0x8 {
    /// Value `j` (0..32) of row `r`, signed as Q5_0 defines it.
    fn value(&self, r: usize, j: usize) -> i32 {
        let m = j % 16;
        let byte = self.qs[64 * (m / 8) + 8 * r + m % 8];
        let nibble = if j < 16 { byte & 0x0F } else { byte >> 4 };
        let qh = u32::from_le_bytes(self.qh[4 * r..4 * r + 4].try_into().expect("4 bytes"));
        (nibble as i32 | (((qh >> j) & 1) << 4) as i32) - 16
    }
}

/// A Q5_0 weight matrix in groups of eight interleaved rows.
pub type RepackedQ5_0 = Interleaved<BlockQ5_0x8>;

impl RepackedQ5_0 {
    /// `Interleaved::rows_through` with the variant's group kernel where it
    /// has one, else the scalar one; `sums` are `activation_sums(x)`.
    pub fn product_rows(
        &self,
        k: &Kernels,
        x: &[BlockQ8_0],
        sums: &[i32],
        n: usize,
        rows: std::ops::Range<usize>,
        out: &mut [f32],
    ) -> Result<()> {
        if sums.len() != x.len() {
            return Err(Error::InvalidArgument(format!(
                "{} activation sums for {} blocks",
                sums.len(),
                x.len()
            )));
        }
        let gemm = k.gemm_q5_0_x8.unwrap_or(gemm_q5_0_x8);
        self.rows_through(
            |g: &[BlockQ5_0x8], x: &[BlockQ8_0], n: usize, out: &mut [f32], stride: usize| {
                // The group's activation rows are all of `x`: so are the sums.
                gemm(g, x, sums, n, out, stride)
            },
            k.vec_dot_q5_0_q8_0,
            x,
            n,
            rows,
            out,
        )
    }
}

/// Σ of each activation block's 32 quants, into `out` (one per block).
pub fn activation_sums(x: &[BlockQ8_0], out: &mut Vec<i32>) {
    out.clear();
    out.extend(
        x.iter()
            .map(|b| b.qs.iter().map(|&q| q as i32).sum::<i32>()),
    );
}

/// Panics unless the arguments of a group kernel of `rows` rows that takes
/// activation sums fit together: `x` holds `n` rows of `group.len()`
/// blocks, `sums` one value per block of `x`, and `out` reaches output
/// `rows - 1` of activation row `n - 1` (`check_gemm`).
#[inline(always)]
#[track_caller]
pub(crate) fn check_group<G>(
    group: &[G],
    x: &[BlockQ8_0],
    sums: &[i32],
    n: usize,
    out: &[f32],
    stride: usize,
    rows: usize,
) {
    check_gemm(group, x, n, out, stride, rows);
    assert_eq!(
        sums.len(),
        x.len(),
        "group kernel: {} activation sums for {} blocks",
        sums.len(),
        x.len()
    );
}

/// One group of eight rows times `n` activation rows (the scalar twin):
/// output `r` of activation row `i` goes to `out[i * stride + r]`. Each
/// block's integer sum is exact and added with one fused multiply-add (see
/// the module's note). The scalar kernel reads the values directly and
/// needs no `sums`.
pub fn gemm_q5_0_x8(
    group: &[BlockQ5_0x8],
    x: &[BlockQ8_0],
    sums: &[i32],
    n: usize,
    out: &mut [f32],
    stride: usize,
) {
    check_group(group, x, sums, n, out, stride, ROWS);
    let per_row = group.len();
    for i in 0..n {
        let xi = &x[i * per_row..(i + 1) * per_row];
        let mut acc = [0f32; ROWS];
        for (b, y) in group.iter().zip(xi) {
            for (r, acc) in acc.iter_mut().enumerate() {
                let sumi: i32 = (0..QK).map(|j| b.value(r, j) * y.qs[j] as i32).sum();
                *acc = (sumi as f32).mul_add(b.d[r].to_f32() * y.d.to_f32(), *acc);
            }
        }
        out[i * stride..i * stride + ROWS].copy_from_slice(&acc);
    }
}

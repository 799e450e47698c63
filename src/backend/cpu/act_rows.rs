//! Activation rows interleaved for matrix kernels that multiply several
//! activation rows by one weight vector: arranged once per product, they
//! serve every weight group, where a kernel that interleaved the rows
//! itself would do it again for each group. The scales are widened (exactly)
//! to f32 in the kernels' lane order.
//! - Pairs (`BlockQ8_0x2`) for SMMLA (`neon_i8mm`): its second operand is
//!   eight values of two rows, and its 2x2 results are (row pair, activation
//!   pair) products, so the scales are (d0, d1, d0, d1).
//! - Quads (`BlockQ8_0x4`) for SDOT by element (`neon_q4_0`, `neon_q8_0`): lane j of a
//!   16-byte load holds four values of row j, so one load serves four SDOTs,
//!   one per activation row.

use crate::parallel::Workers;
use crate::tensor::blocks::{BlockQ8_0, QK};

/// One column block of two Q8_0 activation rows.
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct BlockQ8_0x2 {
    /// (d0, d1, d0, d1): the two rows' scales.
    pub d: [f32; 4],
    /// `qs[16 c + 8 j + t]`: value 8c + t of row j.
    pub qs: [i8; 2 * QK],
}

/// One column block of four Q8_0 activation rows.
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct BlockQ8_0x4 {
    /// The four rows' scales.
    pub d: [f32; 4],
    /// `qs[16 c + 4 j + t]`: value 4c + t of row j.
    pub qs: [i8; 4 * QK],
}

const _: () = assert!(std::mem::size_of::<BlockQ8_0x2>() == 80);
const _: () = assert!(std::mem::size_of::<BlockQ8_0x4>() == 144);

/// A block of `ROWS` interleaved activation rows.
pub trait ActRows: Copy + Send + Sync {
    const ROWS: usize;
    const ZERO: Self;
    /// The block of `rows` (`ROWS` blocks at one column block).
    fn interleave(rows: &[&BlockQ8_0]) -> Self;
}

/// The `R` rows' quants `STEP` values at a time, row after row (constant
/// sizes: each run is one load and one store).
fn interleave_quants<const N: usize, const STEP: usize, const R: usize>(
    rows: &[&BlockQ8_0],
) -> [i8; N] {
    let rows: &[&BlockQ8_0; R] = rows.try_into().expect("one block per row");
    let mut qs = [0i8; N];
    for (c, runs) in qs.chunks_exact_mut(STEP * R).enumerate() {
        for (run, row) in runs.chunks_exact_mut(STEP).zip(rows) {
            run.copy_from_slice(&row.qs[STEP * c..STEP * (c + 1)]);
        }
    }
    qs
}

impl ActRows for BlockQ8_0x2 {
    const ROWS: usize = 2;
    const ZERO: BlockQ8_0x2 = BlockQ8_0x2 {
        d: [0.0; 4],
        qs: [0; 2 * QK],
    };

    fn interleave(rows: &[&BlockQ8_0]) -> BlockQ8_0x2 {
        let (d0, d1) = (rows[0].d.to_f32(), rows[1].d.to_f32());
        BlockQ8_0x2 {
            d: [d0, d1, d0, d1],
            qs: interleave_quants::<{ 2 * QK }, 8, 2>(rows),
        }
    }
}

impl ActRows for BlockQ8_0x4 {
    const ROWS: usize = 4;
    const ZERO: BlockQ8_0x4 = BlockQ8_0x4 {
        d: [0.0; 4],
        qs: [0; 4 * QK],
    };

    fn interleave(rows: &[&BlockQ8_0]) -> BlockQ8_0x4 {
        BlockQ8_0x4 {
            d: std::array::from_fn(|j| rows[j].d.to_f32()),
            qs: interleave_quants::<{ 4 * QK }, 4, 4>(rows),
        }
    }
}

/// The `n` activation rows of `x` (`per_row` blocks each) in blocks of
/// `A::ROWS` rows (rows past the last whole block of rows are left out),
/// `per_row` blocks per block of rows, into `out` (resized). Arranged on
/// the workers.
pub fn interleave_rows<A: ActRows>(
    workers: &Workers,
    x: &[BlockQ8_0],
    n: usize,
    per_row: usize,
    out: &mut Vec<A>,
) {
    assert_eq!(
        x.len(),
        n * per_row,
        "interleave_rows: {} blocks are not {n} rows of {per_row}",
        x.len()
    );
    out.clear();
    out.resize(n / A::ROWS * per_row, A::ZERO);
    workers.for_each_chunk_mut(out, per_row.max(1), |g, blocks| {
        for (b, out) in blocks.iter_mut().enumerate() {
            let rows: [&BlockQ8_0; 4] =
                std::array::from_fn(|j| &x[(g * A::ROWS + j.min(A::ROWS - 1)) * per_row + b]);
            *out = A::interleave(&rows[..A::ROWS]);
        }
    });
}

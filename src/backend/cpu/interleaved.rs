//! A weight matrix stored as groups of eight interleaved rows (one group
//! block per column block of the eight rows), plus the rows past the last
//! whole group in the file's own type. The group layouts and their kernels
//! live with each type (`repack_q5_0`, `repack_q4_k`); this is what they
//! share: building the groups, and splitting a product between the group
//! kernel and `vec_dot` for the tail.

use std::ops::Range;

use super::kernels::{Kernels, VecDotFn};
use crate::error::{Error, Result};
use crate::tensor::blocks::Block;

/// Rows per group.
pub const ROWS: usize = 8;

/// The block of eight interleaved rows of a weight type.
pub trait GroupBlock: Copy + Send + Sync + std::fmt::Debug + 'static {
    /// The weight type's block.
    type Row: Block + std::fmt::Debug;
    /// The activation block its dot products take.
    type Act: Block;
    /// The group block of one column block of eight rows.
    fn interleave(rows: [&Self::Row; ROWS]) -> Self;
}

/// A weight matrix in groups of eight interleaved rows.
#[derive(Clone, Debug)]
pub struct Interleaved<G: GroupBlock> {
    rows: usize,
    cols: usize,
    groups: Vec<G>,
    /// Rows past the last whole group, as stored in the file.
    tail: Vec<G::Row>,
}

impl<G: GroupBlock> Interleaved<G> {
    /// Interleaves `rows` rows of `cols` values (`cols` a whole number of
    /// blocks).
    pub fn new(weights: &[G::Row], rows: usize, cols: usize) -> Result<Interleaved<G>> {
        let per_row = cols / G::Row::ELEMENTS;
        if cols % G::Row::ELEMENTS != 0 || Some(weights.len()) != rows.checked_mul(per_row) {
            return Err(Error::InvalidArgument(format!(
                "cannot interleave {} {} blocks as {rows} rows of {cols}",
                weights.len(),
                G::Row::TYPE
            )));
        }
        let whole = rows / ROWS * ROWS;
        let groups = (0..whole / ROWS)
            .flat_map(|g| (0..per_row).map(move |b| (g, b)))
            .map(|(g, b)| {
                G::interleave(std::array::from_fn(|r| {
                    &weights[(ROWS * g + r) * per_row + b]
                }))
            })
            .collect();
        Ok(Interleaved {
            rows,
            cols,
            groups,
            tail: weights[whole * per_row..].to_vec(),
        })
    }

    pub fn rows(&self) -> usize {
        self.rows
    }

    pub fn cols(&self) -> usize {
        self.cols
    }

    /// Bytes the groups and the tail take.
    pub fn size_bytes(&self) -> usize {
        std::mem::size_of_val(&self.groups[..]) + std::mem::size_of_val(&self.tail[..])
    }

    /// Rows `rows` of the product with `n` activation rows `x`:
    /// `out[i * len + j]` = row `rows.start + j` · activation row `i`, where
    /// `len = rows.len()`. Whole groups go through `gemm(group, x, n, out,
    /// stride)` (output `r` of activation row `i` at `out[i * stride + r]`),
    /// the tail rows through `dot`. The range must start at a group boundary
    /// and end at one or at the last row, so threads split a matrix between
    /// whole groups.
    pub fn rows_through(
        &self,
        gemm: impl Fn(&[G], &[G::Act], usize, &mut [f32], usize),
        dot: VecDotFn<G::Row, G::Act>,
        x: &[G::Act],
        n: usize,
        rows: Range<usize>,
        out: &mut [f32],
    ) -> Result<()> {
        let per_row = self.cols / G::Row::ELEMENTS;
        let len = rows.len();
        if rows.start % ROWS != 0
            || (rows.end % ROWS != 0 && rows.end != self.rows)
            || rows.end > self.rows
            || Some(x.len()) != n.checked_mul(per_row)
            || Some(out.len()) != n.checked_mul(len)
        {
            return Err(Error::InvalidArgument(format!(
                "product of rows {rows:?} of a {}x{} interleaved {} matrix with {n} activation rows",
                self.rows,
                self.cols,
                G::Row::TYPE
            )));
        }
        let whole = self.rows / ROWS * ROWS;
        let mut row = rows.start;
        while row + ROWS <= rows.end.min(whole) {
            let g = row / ROWS;
            let group = &self.groups[g * per_row..(g + 1) * per_row];
            super::touch_ahead::touch_ahead(&self.groups, g * per_row);
            gemm(group, x, n, &mut out[row - rows.start..], len);
            row += ROWS;
        }
        for row in rows.start.max(whole)..rows.end {
            let w = &self.tail[(row - whole) * per_row..(row - whole + 1) * per_row];
            for (i, xi) in x.chunks_exact(per_row).enumerate() {
                out[i * len + row - rows.start] = dot(w, xi);
            }
        }
        Ok(())
    }
}

/// One group times `n` activation rows: output `r` of activation row `i`
/// goes to `out[i * stride + r]`.
pub type GroupGemmFn<G> = fn(&[G], &[<G as GroupBlock>::Act], usize, &mut [f32], usize);

/// A group layout whose kernel takes the activations alone (Q5_0's also
/// takes their sums, and has its own `product_rows`).
pub trait PlainGroup: GroupBlock {
    /// The variant's group kernel, else the scalar twin; and the variant's
    /// `vec_dot` for the tail rows.
    fn kernels(k: &Kernels) -> (GroupGemmFn<Self>, VecDotFn<Self::Row, Self::Act>);
}

impl<G: PlainGroup> Interleaved<G> {
    /// `rows_through` with the layout's kernels for variant `k`.
    pub fn product_rows(
        &self,
        k: &Kernels,
        x: &[G::Act],
        n: usize,
        rows: Range<usize>,
        out: &mut [f32],
    ) -> Result<()> {
        let (gemm, dot) = G::kernels(k);
        self.rows_through(gemm, dot, x, n, rows, out)
    }
}

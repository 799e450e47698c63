//! Matrix-vector products with a weight of any supported type, through the
//! selected variant's kernels: the activation row is quantized to the type the
//! weight's dot product takes (Q8_0, Q8_1, Q8_K, f16 or f32), as ggml does.

use half::f16;

use crate::backend::cpu::Kernels;
use crate::error::{Error, Result};
use crate::tensor::blocks::*;
use crate::tensor::{convert, DType};

/// A 2-D weight: `rows` rows of `cols` values of `dtype`, borrowed.
#[derive(Clone, Copy)]
pub struct Weight<'a> {
    pub dtype: DType,
    pub rows: usize,
    pub cols: usize,
    pub data: &'a [u8],
}

impl<'a> Weight<'a> {
    fn row(&self, r: usize) -> &'a [u8] {
        let n = self.dtype.bytes_for(self.cols);
        &self.data[r * n..(r + 1) * n]
    }

    /// Row `r` as f32 (embedding lookup).
    pub fn row_f32(&self, r: usize, out: &mut [f32]) -> Result<()> {
        convert::dequantize(self.dtype, self.row(r), out)
    }
}

fn blocks<B: Block>(x: &[f32], f: fn(&[f32], &mut [B])) -> Vec<B> {
    let mut q = vec![B::zeroed(); x.len() / B::ELEMENTS];
    f(x, &mut q);
    q
}

fn dot_rows<X: Block, Y: Block>(
    w: &Weight,
    y: &[Y],
    out: &mut [f32],
    dot: fn(&[X], &[Y]) -> f32,
) -> Result<()> {
    for (r, o) in out.iter_mut().enumerate() {
        *o = dot(as_blocks::<X>(w.row(r))?, y);
    }
    Ok(())
}

/// out = W · x.
pub fn matvec(k: &Kernels, w: &Weight, x: &[f32], out: &mut [f32]) -> Result<()> {
    if x.len() != w.cols || out.len() != w.rows {
        return Err(Error::InvalidArgument(format!(
            "matvec of a {}x{} weight with {} inputs and {} outputs",
            w.rows,
            w.cols,
            x.len(),
            out.len()
        )));
    }
    match w.dtype {
        DType::Q4_0 => dot_rows(w, &blocks(x, k.quantize_q8_0), out, k.vec_dot_q4_0_q8_0),
        DType::Q5_0 => dot_rows(w, &blocks(x, k.quantize_q8_0), out, k.vec_dot_q5_0_q8_0),
        DType::Q8_0 => dot_rows(w, &blocks(x, k.quantize_q8_0), out, k.vec_dot_q8_0_q8_0),
        DType::Q4_1 => dot_rows(w, &blocks(x, k.quantize_q8_1), out, k.vec_dot_q4_1_q8_1),
        DType::Q5_1 => dot_rows(w, &blocks(x, k.quantize_q8_1), out, k.vec_dot_q5_1_q8_1),
        DType::Q4_K => dot_rows(w, &blocks(x, k.quantize_q8_k), out, k.vec_dot_q4_k_q8_k),
        DType::Q5_K => dot_rows(w, &blocks(x, k.quantize_q8_k), out, k.vec_dot_q5_k_q8_k),
        DType::Q6_K => dot_rows(w, &blocks(x, k.quantize_q8_k), out, k.vec_dot_q6_k_q8_k),
        DType::F16 => {
            let xh: Vec<f16> = x.iter().map(|&v| f16::from_f32(v)).collect();
            // One row buffer for all rows (the file's bytes need not be 2-aligned).
            let mut wh = vec![f16::ZERO; w.cols];
            for (r, o) in out.iter_mut().enumerate() {
                for (h, b) in wh.iter_mut().zip(w.row(r).chunks_exact(2)) {
                    *h = f16::from_le_bytes([b[0], b[1]]);
                }
                *o = (k.vec_dot_f16)(&wh, &xh);
            }
            Ok(())
        }
        DType::F32 => {
            let mut row = vec![0.0f32; w.cols];
            for (r, o) in out.iter_mut().enumerate() {
                for (v, b) in row.iter_mut().zip(w.row(r).chunks_exact(4)) {
                    *v = f32::from_le_bytes([b[0], b[1], b[2], b[3]]);
                }
                *o = (k.vec_dot_f32)(&row, x);
            }
            Ok(())
        }
        other => Err(Error::InvalidArgument(format!(
            "matrix products with {other} weights are not supported"
        ))),
    }
}

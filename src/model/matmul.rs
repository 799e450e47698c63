//! Matrix products `out = x · Wᵀ` for `n` activation rows and a weight of any
//! supported type, through the selected variant's kernels. Each activation row
//! is quantized once to the type the weight's dot product takes (Q8_0, Q8_1,
//! Q8_K, f16 or f32), as ggml does; the weight rows are then split between the
//! workers, and each weight row, once loaded, meets every activation row.

use half::f16;
use half::slice::HalfFloatSliceExt;

use crate::backend::cpu::repack::RepackedQ4_0;
use crate::backend::cpu::Kernels;
use crate::error::{Error, Result};
use crate::parallel::Workers;
use crate::tensor::blocks::*;
use crate::tensor::{convert, DType};

/// A 2-D weight in the file: `rows` rows of `cols` values of `dtype`, borrowed.
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

/// A weight as a product sees it: in the file, or repacked at load.
#[derive(Clone, Copy)]
pub enum MatRef<'a> {
    Mapped(Weight<'a>),
    Repacked(&'a RepackedQ4_0),
}

impl MatRef<'_> {
    fn rows(&self) -> usize {
        match self {
            MatRef::Mapped(w) => w.rows,
            MatRef::Repacked(r) => r.rows(),
        }
    }

    fn cols(&self) -> usize {
        match self {
            MatRef::Mapped(w) => w.cols,
            MatRef::Repacked(r) => r.cols(),
        }
    }
}

/// The activation rows, converted to what the weight's kernel takes.
enum Activations<'x> {
    Q8_0(Vec<BlockQ8_0>),
    Q8_1(Vec<BlockQ8_1>),
    Q8K(Vec<BlockQ8K>),
    F16(Vec<f16>),
    /// wasm32 (no f16 hardware): the activations rounded to f16 as ggml
    /// does, held as f32 (exactly: f16 × f16 products are exact in f32);
    /// each weight row is then widened once for all activation rows instead
    /// of both sides being converted in software inside every dot.
    F16Wide(Vec<f32>),
    F32(&'x [f32]),
}

fn quantize_rows<B: Block>(x: &[f32], cols: usize, f: fn(&[f32], &mut [B])) -> Vec<B> {
    let per_row = cols / B::ELEMENTS;
    let mut q = vec![B::zeroed(); x.len() / B::ELEMENTS];
    for (xr, qr) in x.chunks_exact(cols).zip(q.chunks_exact_mut(per_row)) {
        f(xr, qr);
    }
    q
}

fn prepare<'x>(k: &Kernels, dtype: DType, x: &'x [f32], cols: usize) -> Result<Activations<'x>> {
    Ok(match dtype {
        DType::Q4_0 | DType::Q5_0 | DType::Q8_0 => {
            Activations::Q8_0(quantize_rows(x, cols, k.quantize_q8_0))
        }
        DType::Q4_1 | DType::Q5_1 => Activations::Q8_1(quantize_rows(x, cols, k.quantize_q8_1)),
        DType::Q4_K | DType::Q5_K | DType::Q6_K => {
            Activations::Q8K(quantize_rows(x, cols, k.quantize_q8_k))
        }
        DType::F16 if cfg!(target_arch = "wasm32") || k.tile_f16.is_some() => {
            Activations::F16Wide(x.iter().map(|&v| f16::from_f32(v).to_f32()).collect())
        }
        DType::F16 => Activations::F16(x.iter().map(|&v| f16::from_f32(v)).collect()),
        DType::F32 => Activations::F32(x),
        other => {
            return Err(Error::InvalidArgument(format!(
                "matrix products with {other} weights are not supported"
            )))
        }
    })
}

/// Weight rows `rows` times every activation row, into `out[i * len + j]`.
fn rows_times<X: Block, Y: Block>(
    w: &Weight,
    rows: std::ops::Range<usize>,
    y: &[Y],
    out: &mut [f32],
    dot: fn(&[X], &[Y]) -> f32,
) -> Result<()> {
    let per_row = w.cols / Y::ELEMENTS;
    let len = rows.len();
    for (j, r) in rows.enumerate() {
        let wr = as_blocks::<X>(w.row(r))?;
        for (i, yi) in y.chunks_exact(per_row).enumerate() {
            out[i * len + j] = dot(wr, yi);
        }
    }
    Ok(())
}

/// `rows_times` with a kernel that takes four activation rows per weight row
/// (the remainder goes through `dot`; both give the same values).
fn rows_times4<X: Block, Y: Block>(
    w: &Weight,
    rows: std::ops::Range<usize>,
    y: &[Y],
    out: &mut [f32],
    dot: fn(&[X], &[Y]) -> f32,
    dot4: fn(&[X], [&[Y]; 4]) -> [f32; 4],
) -> Result<()> {
    let per_row = w.cols / Y::ELEMENTS;
    let n = y.len() / per_row;
    let len = rows.len();
    let act = |i: usize| &y[i * per_row..(i + 1) * per_row];
    for (j, r) in rows.enumerate() {
        let wr = as_blocks::<X>(w.row(r))?;
        let mut i = 0;
        while i + 4 <= n {
            let v = dot4(wr, [act(i), act(i + 1), act(i + 2), act(i + 3)]);
            for (t, v) in v.into_iter().enumerate() {
                out[(i + t) * len + j] = v;
            }
            i += 4;
        }
        for i in i..n {
            out[i * len + j] = dot(wr, act(i));
        }
    }
    Ok(())
}

/// Decodes row `r` of a 16- or 32-bit float weight (file bytes need not be
/// aligned for the element type).
fn float_row<T: Copy>(w: &Weight, r: usize, out: &mut [T], from: fn(&[u8]) -> T) {
    let size = std::mem::size_of::<T>();
    for (v, b) in out.iter_mut().zip(w.row(r).chunks_exact(size)) {
        *v = from(b);
    }
}

/// Row `r` of an f16 weight as `f16`s: borrowed when aligned (tensor data
/// is, in every GGUF file), else copied. All targets are little-endian.
fn f16_row<'a>(w: &Weight<'a>, r: usize) -> std::borrow::Cow<'a, [f16]> {
    let bytes = w.row(r);
    if bytes.as_ptr().align_offset(std::mem::align_of::<f16>()) == 0 {
        // SAFETY: aligned, in bounds, and every bit pattern is an f16.
        std::borrow::Cow::Borrowed(unsafe {
            std::slice::from_raw_parts(bytes.as_ptr().cast::<f16>(), bytes.len() / 2)
        })
    } else {
        std::borrow::Cow::Owned(
            bytes
                .chunks_exact(2)
                .map(|b| f16::from_le_bytes([b[0], b[1]]))
                .collect(),
        )
    }
}

/// f16 weight rows `rows` times every activation row (f32 holding f16
/// values) in 4x2 tiles; a tile at the end of the rows or activations
/// repeats its last row, which leaves every output's value unchanged.
fn f16_tiles(
    w: &Weight,
    rows: std::ops::Range<usize>,
    y: &[f32],
    out: &mut [f32],
    tile: crate::backend::cpu::kernels::TileF16Fn,
) -> Result<()> {
    let (cols, len) = (w.cols, rows.len());
    let acts: Vec<&[f32]> = y.chunks_exact(cols).collect();
    let n = acts.len();
    let weights: Vec<std::borrow::Cow<[f16]>> = rows.clone().map(|r| f16_row(w, r)).collect();
    for j0 in (0..len).step_by(4) {
        let wr: [&[f16]; 4] = std::array::from_fn(|t| &*weights[(j0 + t).min(len - 1)]);
        for i0 in (0..n).step_by(2) {
            let xr = [acts[i0], acts[(i0 + 1).min(n - 1)]];
            let res = tile(wr, xr);
            for (t, row) in res.iter().enumerate().take(len - j0) {
                for (c, &v) in row.iter().enumerate().take(n - i0) {
                    out[(i0 + c) * len + j0 + t] = v;
                }
            }
        }
    }
    Ok(())
}

fn mapped_rows(
    k: &Kernels,
    w: &Weight,
    x: &Activations,
    rows: std::ops::Range<usize>,
    out: &mut [f32],
) -> Result<()> {
    let len = rows.len();
    match (w.dtype, x) {
        (DType::Q4_0, Activations::Q8_0(y)) => rows_times(w, rows, y, out, k.vec_dot_q4_0_q8_0),
        (DType::Q5_0, Activations::Q8_0(y)) => rows_times(w, rows, y, out, k.vec_dot_q5_0_q8_0),
        (DType::Q8_0, Activations::Q8_0(y)) => match k.vec_dot4_q8_0_q8_0 {
            Some(dot4) => rows_times4(w, rows, y, out, k.vec_dot_q8_0_q8_0, dot4),
            None => rows_times(w, rows, y, out, k.vec_dot_q8_0_q8_0),
        },
        (DType::Q4_1, Activations::Q8_1(y)) => match k.vec_dot4_q4_1_q8_1 {
            Some(dot4) => rows_times4(w, rows, y, out, k.vec_dot_q4_1_q8_1, dot4),
            None => rows_times(w, rows, y, out, k.vec_dot_q4_1_q8_1),
        },
        (DType::Q5_1, Activations::Q8_1(y)) => rows_times(w, rows, y, out, k.vec_dot_q5_1_q8_1),
        (DType::Q4_K, Activations::Q8K(y)) => rows_times(w, rows, y, out, k.vec_dot_q4_k_q8_k),
        (DType::Q5_K, Activations::Q8K(y)) => rows_times(w, rows, y, out, k.vec_dot_q5_k_q8_k),
        (DType::Q6_K, Activations::Q8K(y)) => rows_times(w, rows, y, out, k.vec_dot_q6_k_q8_k),
        (DType::F16, Activations::F16(y)) => {
            let mut wr = vec![f16::ZERO; w.cols];
            for (j, r) in rows.enumerate() {
                float_row(w, r, &mut wr, |b| f16::from_le_bytes([b[0], b[1]]));
                for (i, yi) in y.chunks_exact(w.cols).enumerate() {
                    out[i * len + j] = (k.vec_dot_f16)(&wr, yi);
                }
            }
            Ok(())
        }
        (DType::F16, Activations::F16Wide(y)) if k.tile_f16.is_some() => {
            let tile = k.tile_f16.expect("checked by the guard");
            f16_tiles(w, rows, y, out, tile)
        }
        (DType::F16, Activations::F16Wide(y)) => {
            let mut wh = vec![f16::ZERO; w.cols];
            let mut wr = vec![0.0f32; w.cols];
            for (j, r) in rows.enumerate() {
                float_row(w, r, &mut wh, |b| f16::from_le_bytes([b[0], b[1]]));
                wh.convert_to_f32_slice(&mut wr);
                for (i, yi) in y.chunks_exact(w.cols).enumerate() {
                    out[i * len + j] = (k.vec_dot_f32)(&wr, yi);
                }
            }
            Ok(())
        }
        (DType::F32, Activations::F32(y)) => {
            let mut wr = vec![0.0f32; w.cols];
            for (j, r) in rows.enumerate() {
                float_row(w, r, &mut wr, |b| {
                    f32::from_le_bytes([b[0], b[1], b[2], b[3]])
                });
                for (i, yi) in y.chunks_exact(w.cols).enumerate() {
                    out[i * len + j] = (k.vec_dot_f32)(&wr, yi);
                }
            }
            Ok(())
        }
        (dtype, _) => Err(Error::InvalidArgument(format!(
            "matrix products with {dtype} weights are not supported"
        ))),
    }
}

/// `out[i * rows + r] = W[r] · x[i]` for `n` activation rows of `cols` values.
pub fn matmul(
    k: &Kernels,
    workers: &Workers,
    w: MatRef,
    x: &[f32],
    n: usize,
    out: &mut [f32],
) -> Result<()> {
    let (rows, cols) = (w.rows(), w.cols());
    if x.len() != n * cols || out.len() != n * rows {
        return Err(Error::InvalidArgument(format!(
            "product of a {rows}x{cols} weight with {} inputs and {} outputs for {n} rows",
            x.len(),
            out.len()
        )));
    }
    let x = match w {
        MatRef::Mapped(m) => prepare(k, m.dtype, x, cols)?,
        MatRef::Repacked(_) => Activations::Q8_0(quantize_rows(x, cols, k.quantize_q8_0)),
    };
    // Pieces of whole repack groups (8 rows covers every layout).
    let align = 8;
    let pieces = workers.pieces(rows / align);
    let step = rows.div_ceil(pieces).div_ceil(align) * align;
    let ranges: Vec<_> = (0..rows)
        .step_by(step.max(align))
        .map(|s| s..(s + step).min(rows))
        .collect();
    let run = |range: std::ops::Range<usize>, dst: &mut [f32]| -> Result<()> {
        match (w, &x) {
            (MatRef::Mapped(m), x) => mapped_rows(k, &m, x, range, dst),
            (MatRef::Repacked(p), Activations::Q8_0(y)) => p.product_rows(k, y, n, range, dst),
            _ => Err(Error::InvalidArgument(
                "a repacked weight needs Q8_0 activations".into(),
            )),
        }
    };
    if ranges.len() == 1 {
        return run(0..rows, out);
    }
    let parts = workers.map(ranges.len(), |p| {
        let range = ranges[p].clone();
        let mut dst = vec![0.0f32; n * range.len()];
        run(range, &mut dst).map(|_| dst)
    });
    for (range, part) in ranges.iter().zip(parts) {
        let part = part?;
        let len = range.len();
        for i in 0..n {
            out[i * rows + range.start..i * rows + range.end]
                .copy_from_slice(&part[i * len..(i + 1) * len]);
        }
    }
    Ok(())
}

//! Matrix products `out = x · Wᵀ` for `n` activation rows and a bound weight,
//! through the variant's kernels. Each activation row is quantized once to
//! the type the weight's dot product takes (Q8_0, Q8_1, Q8_K, f16 or f32), as
//! ggml does; the weight rows are then split between the workers in pieces
//! of whole repack groups, and each weight row, once loaded, meets every
//! activation row. Scratch space is kept between calls: after the first
//! product of each shape nothing is allocated.

use half::f16;
use half::slice::HalfFloatSliceExt;

use super::kernels::{Kernels, TileF16Fn};
use super::repack::RepackedQ4_0;
use crate::backend::matrix::{Matrix, Storage};
use crate::error::{Error, Result};
use crate::parallel::Workers;
use crate::tensor::blocks::*;
use crate::tensor::DType;

/// Activation rows converted for the weight's kernel, kept between calls.
#[derive(Default)]
pub(super) struct ActScratch {
    q8_0: Vec<BlockQ8_0>,
    q8_1: Vec<BlockQ8_1>,
    q8_k: Vec<BlockQ8K>,
    f16: Vec<f16>,
    f32: Vec<f32>,
}

/// One piece of a product's rows: its outputs and row scratch.
#[derive(Default)]
pub(super) struct Piece {
    out: Vec<f32>,
    row_f16: Vec<f16>,
    row_f32: Vec<f32>,
    result: Option<Error>,
}

/// The activations as the weight's kernel takes them.
#[derive(Clone, Copy)]
enum Acts<'s> {
    Q8_0(&'s [BlockQ8_0]),
    Q8_1(&'s [BlockQ8_1]),
    Q8K(&'s [BlockQ8K]),
    F16(&'s [f16]),
    /// The activations rounded to f16 as ggml does, held as f32 (exactly:
    /// f16 × f16 products are exact in f32), for variants whose f16 products
    /// widen each weight row once for all activation rows (tiles, or no f16
    /// hardware) instead of converting both sides inside every dot.
    F16Wide(&'s [f32]),
    F32(&'s [f32]),
}

/// `v[..len]`, grown (once) when shorter.
fn sized<T: Clone>(v: &mut Vec<T>, len: usize, fill: T) -> &mut [T] {
    if v.len() < len {
        v.resize(len, fill);
    }
    &mut v[..len]
}

fn quantize_rows<'s, B: Block>(
    x: &[f32],
    cols: usize,
    buf: &'s mut Vec<B>,
    f: fn(&[f32], &mut [B]),
) -> &'s [B] {
    let per_row = cols / B::ELEMENTS;
    let q = sized(buf, x.len() / B::ELEMENTS, B::zeroed());
    for (xr, qr) in x.chunks_exact(cols).zip(q.chunks_exact_mut(per_row)) {
        f(xr, qr);
    }
    q
}

/// Whether the variant widens f16 weight rows to f32 (tiles, or a target
/// whose f16 dot converts in software).
fn widens_f16(k: &Kernels) -> bool {
    k.tile_f16.is_some() || k.f16_in_software
}

/// Whether products with `dtype` weights have kernels in `k`.
pub(super) fn supports(dtype: DType) -> bool {
    matches!(
        dtype,
        DType::Q4_0
            | DType::Q4_1
            | DType::Q5_0
            | DType::Q5_1
            | DType::Q8_0
            | DType::Q4_K
            | DType::Q5_K
            | DType::Q6_K
            | DType::F16
            | DType::F32
    )
}

fn prepare<'s>(
    k: &Kernels,
    dtype: DType,
    x: &'s [f32],
    cols: usize,
    s: &'s mut ActScratch,
) -> Result<Acts<'s>> {
    Ok(match dtype {
        DType::Q4_0 | DType::Q5_0 | DType::Q8_0 => {
            Acts::Q8_0(quantize_rows(x, cols, &mut s.q8_0, k.quantize_q8_0))
        }
        DType::Q4_1 | DType::Q5_1 => {
            Acts::Q8_1(quantize_rows(x, cols, &mut s.q8_1, k.quantize_q8_1))
        }
        DType::Q4_K | DType::Q5_K | DType::Q6_K => {
            Acts::Q8K(quantize_rows(x, cols, &mut s.q8_k, k.quantize_q8_k))
        }
        DType::F16 if widens_f16(k) => {
            let wide = sized(&mut s.f32, x.len(), 0.0);
            for (w, &v) in wide.iter_mut().zip(x) {
                *w = f16::from_f32(v).to_f32();
            }
            Acts::F16Wide(wide)
        }
        DType::F16 => {
            let h = sized(&mut s.f16, x.len(), f16::ZERO);
            h.convert_from_f32_slice(x);
            Acts::F16(h)
        }
        DType::F32 => Acts::F32(x),
        other => {
            return Err(Error::InvalidArgument(format!(
                "matrix products with {other} weights are not supported"
            )))
        }
    })
}

/// A weight in the file's memory: `rows` rows of `row_bytes` bytes.
#[derive(Clone, Copy)]
struct Mapped<'a> {
    data: &'a [u8],
    cols: usize,
    row_bytes: usize,
}

impl<'a> Mapped<'a> {
    fn row(&self, r: usize) -> &'a [u8] {
        &self.data[r * self.row_bytes..(r + 1) * self.row_bytes]
    }

    /// Row `r` as blocks (tensor data is aligned for its blocks in every
    /// GGUF file; `as_blocks` checks).
    fn blocks<X: Block>(&self, r: usize) -> Result<&'a [X]> {
        as_blocks::<X>(self.row(r))
    }

    /// Row `r` of an f16 weight: borrowed when aligned, else decoded into `buf`.
    fn f16_row<'b>(&self, r: usize, buf: &'b mut [f16]) -> &'b [f16]
    where
        'a: 'b,
    {
        let bytes = self.row(r);
        match as_f16(bytes) {
            Some(row) => row,
            None => {
                for (v, b) in buf.iter_mut().zip(bytes.chunks_exact(2)) {
                    *v = f16::from_le_bytes([b[0], b[1]]);
                }
                buf
            }
        }
    }
}

/// `bytes` as f16 values when aligned for them (all targets are little-endian).
fn as_f16(bytes: &[u8]) -> Option<&[f16]> {
    // SAFETY: every bit pattern is an f16, `f16` has no padding, and
    // `align_to` only puts correctly aligned elements in the middle part;
    // the prefix and suffix are checked to be empty.
    let (pre, mid, post) = unsafe { bytes.align_to::<f16>() };
    (pre.is_empty() && post.is_empty()).then_some(mid)
}

/// Weight rows `rows` times every activation row, into `out[i * len + j]`.
fn rows_times<X: Block, Y: Block>(
    w: Mapped,
    rows: std::ops::Range<usize>,
    y: &[Y],
    out: &mut [f32],
    dot: fn(&[X], &[Y]) -> f32,
) -> Result<()> {
    let per_row = w.cols / Y::ELEMENTS;
    let len = rows.len();
    for (j, r) in rows.enumerate() {
        let wr = w.blocks::<X>(r)?;
        for (i, yi) in y.chunks_exact(per_row).enumerate() {
            out[i * len + j] = dot(wr, yi);
        }
    }
    Ok(())
}

/// `rows_times` with a kernel that takes four activation rows per weight row
/// (the remainder goes through `dot`; both give the same values).
fn rows_times4<X: Block, Y: Block>(
    w: Mapped,
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
        let wr = w.blocks::<X>(r)?;
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

/// f16 weight rows `rows` times every activation row (f32 holding f16
/// values) in 4x2 tiles; a tile at the end of the rows or activations
/// repeats its last row, which leaves every output's value unchanged.
fn f16_tiles(
    w: Mapped,
    rows: std::ops::Range<usize>,
    y: &[f32],
    out: &mut [f32],
    tile: TileF16Fn,
    piece: &mut Piece,
) {
    let (cols, len) = (w.cols, rows.len());
    let n = y.len() / cols;
    let act = |i: usize| &y[i * cols..(i + 1) * cols];
    let bufs = sized(&mut piece.row_f16, 4 * cols, f16::ZERO);
    for j0 in (0..len).step_by(4) {
        let mut parts = bufs.chunks_exact_mut(cols);
        let wr: [&[f16]; 4] = std::array::from_fn(|t| {
            let buf = parts.next().expect("four row buffers");
            w.f16_row(rows.start + (j0 + t).min(len - 1), buf)
        });
        for i0 in (0..n).step_by(2) {
            let res = tile(wr, [act(i0), act((i0 + 1).min(n - 1))]);
            for (t, row) in res.iter().enumerate().take(len - j0) {
                for (c, &v) in row.iter().enumerate().take(n - i0) {
                    out[(i0 + c) * len + j0 + t] = v;
                }
            }
        }
    }
}

fn mapped_rows(
    k: &Kernels,
    w: Mapped,
    dtype: DType,
    x: Acts,
    rows: std::ops::Range<usize>,
    out: &mut [f32],
    piece: &mut Piece,
) -> Result<()> {
    let len = rows.len();
    let cols = w.cols;
    match (dtype, x) {
        (DType::Q4_0, Acts::Q8_0(y)) => rows_times(w, rows, y, out, k.vec_dot_q4_0_q8_0),
        (DType::Q5_0, Acts::Q8_0(y)) => rows_times(w, rows, y, out, k.vec_dot_q5_0_q8_0),
        (DType::Q8_0, Acts::Q8_0(y)) => match k.vec_dot4_q8_0_q8_0 {
            Some(dot4) => rows_times4(w, rows, y, out, k.vec_dot_q8_0_q8_0, dot4),
            None => rows_times(w, rows, y, out, k.vec_dot_q8_0_q8_0),
        },
        (DType::Q4_1, Acts::Q8_1(y)) => match k.vec_dot4_q4_1_q8_1 {
            Some(dot4) => rows_times4(w, rows, y, out, k.vec_dot_q4_1_q8_1, dot4),
            None => rows_times(w, rows, y, out, k.vec_dot_q4_1_q8_1),
        },
        (DType::Q5_1, Acts::Q8_1(y)) => rows_times(w, rows, y, out, k.vec_dot_q5_1_q8_1),
        (DType::Q4_K, Acts::Q8K(y)) => rows_times(w, rows, y, out, k.vec_dot_q4_k_q8_k),
        (DType::Q5_K, Acts::Q8K(y)) => rows_times(w, rows, y, out, k.vec_dot_q5_k_q8_k),
        (DType::Q6_K, Acts::Q8K(y)) => rows_times(w, rows, y, out, k.vec_dot_q6_k_q8_k),
        (DType::F16, Acts::F16(y)) => {
            let buf = sized(&mut piece.row_f16, cols, f16::ZERO);
            for (j, r) in rows.enumerate() {
                let wr = w.f16_row(r, buf);
                for (i, yi) in y.chunks_exact(cols).enumerate() {
                    out[i * len + j] = (k.vec_dot_f16)(wr, yi);
                }
            }
            Ok(())
        }
        (DType::F16, Acts::F16Wide(y)) => {
            if let Some(tile) = k.tile_f16 {
                f16_tiles(w, rows, y, out, tile, piece);
                return Ok(());
            }
            let wh = sized(&mut piece.row_f16, cols, f16::ZERO);
            let wr = sized(&mut piece.row_f32, cols, 0.0);
            for (j, r) in rows.enumerate() {
                w.f16_row(r, wh).convert_to_f32_slice(wr);
                for (i, yi) in y.chunks_exact(cols).enumerate() {
                    out[i * len + j] = (k.vec_dot_f32)(wr, yi);
                }
            }
            Ok(())
        }
        (DType::F32, Acts::F32(y)) => {
            let wr = sized(&mut piece.row_f32, cols, 0.0);
            for (j, r) in rows.enumerate() {
                for (v, b) in wr.iter_mut().zip(w.row(r).chunks_exact(4)) {
                    *v = f32::from_le_bytes([b[0], b[1], b[2], b[3]]);
                }
                for (i, yi) in y.chunks_exact(cols).enumerate() {
                    out[i * len + j] = (k.vec_dot_f32)(wr, yi);
                }
            }
            Ok(())
        }
        (dtype, _) => Err(Error::InvalidArgument(format!(
            "matrix products with {dtype} weights are not supported"
        ))),
    }
}

/// What one piece multiplies: a matrix in the file, or a repacked one.
#[derive(Clone, Copy)]
enum Source<'a> {
    Mapped(Mapped<'a>, DType),
    Repacked(&'a RepackedQ4_0),
}

fn run_piece(
    k: &Kernels,
    src: Source,
    x: Acts,
    n: usize,
    rows: std::ops::Range<usize>,
    out: &mut [f32],
    piece: &mut Piece,
) -> Result<()> {
    match (src, x) {
        (Source::Mapped(m, dtype), x) => mapped_rows(k, m, dtype, x, rows, out, piece),
        (Source::Repacked(p), Acts::Q8_0(y)) => p.product_rows(k, y, n, rows, out),
        _ => Err(Error::InvalidArgument(
            "a repacked weight needs Q8_0 activations".into(),
        )),
    }
}

/// `out[i * rows + r] = W[r] · x[i]` for `n` activation rows of `cols` values.
#[allow(clippy::too_many_arguments)] // the backend's scratch, passed apart
pub(super) fn mul_mat(
    k: &Kernels,
    workers: &Workers,
    acts: &mut ActScratch,
    pieces: &mut Vec<Piece>,
    w: &Matrix,
    x: &[f32],
    n: usize,
    out: &mut [f32],
) -> Result<()> {
    let (rows, cols) = (w.rows(), w.cols());
    if x.len() != n * cols || out.len() != n * rows {
        return Err(Error::InvalidArgument(format!(
            "product of '{}' ({rows}x{cols}) with {} inputs and {} outputs for {n} rows",
            w.name(),
            x.len(),
            out.len()
        )));
    }
    let (src, act_type) = match &w.storage {
        Storage::Mapped { file, range } => {
            let mapped = Mapped {
                data: &file.bytes()[range.clone()],
                cols,
                row_bytes: w.dtype().bytes_for(cols),
            };
            (Source::Mapped(mapped, w.dtype()), w.dtype())
        }
        Storage::RepackedQ4_0(p) => (Source::Repacked(p), DType::Q4_0),
    };
    let x = prepare(k, act_type, x, cols, acts)?;
    // Pieces of whole repack groups (8 rows covers every layout).
    let align = 8;
    let wanted = workers.pieces(rows / align);
    let step = (rows.div_ceil(wanted).div_ceil(align) * align).max(align);
    let n_pieces = rows.div_ceil(step);
    if pieces.len() < n_pieces {
        pieces.resize_with(n_pieces, Piece::default);
    }
    if n_pieces == 1 {
        return run_piece(k, src, x, n, 0..rows, out, &mut pieces[0]);
    }
    for piece in pieces[..n_pieces].iter_mut() {
        sized(&mut piece.out, n * step, 0.0);
    }
    let piece_rows = |p: usize| p * step..((p + 1) * step).min(rows);
    workers.for_each_mut(&mut pieces[..n_pieces], |p, piece| {
        let range = piece_rows(p);
        let mut dst = std::mem::take(&mut piece.out);
        let len = range.len();
        piece.result = run_piece(k, src, x, n, range, &mut dst[..n * len], piece).err();
        piece.out = dst;
    });
    for (p, piece) in pieces[..n_pieces].iter_mut().enumerate() {
        if let Some(e) = piece.result.take() {
            return Err(e);
        }
        let range = piece_rows(p);
        let len = range.len();
        for i in 0..n {
            out[i * rows + range.start..i * rows + range.end]
                .copy_from_slice(&piece.out[i * len..(i + 1) * len]);
        }
    }
    Ok(())
}

/// Rows `ids` of a table as f32 (embedding look-up).
pub(super) fn get_rows(w: &Matrix, ids: &[u32], out: &mut [f32]) -> Result<()> {
    let cols = w.cols();
    if out.len() != ids.len() * cols {
        return Err(Error::InvalidArgument(format!(
            "get_rows of '{}': {} outputs for {} rows of {cols}",
            w.name(),
            out.len(),
            ids.len()
        )));
    }
    let Storage::Mapped { file, range } = &w.storage else {
        return Err(Error::InvalidArgument(format!(
            "get_rows of the repacked matrix '{}'",
            w.name()
        )));
    };
    let row_bytes = w.dtype().bytes_for(cols);
    let data = &file.bytes()[range.clone()];
    for (&id, dst) in ids.iter().zip(out.chunks_exact_mut(cols)) {
        let r = id as usize;
        if r >= w.rows() {
            return Err(Error::InvalidArgument(format!(
                "row {id} of '{}', which has {} rows",
                w.name(),
                w.rows()
            )));
        }
        crate::tensor::convert::dequantize(
            w.dtype(),
            &data[r * row_bytes..(r + 1) * row_bytes],
            dst,
        )?;
    }
    Ok(())
}

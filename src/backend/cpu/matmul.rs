//! Matrix products `out = x · Wᵀ` for `n` activation rows and a bound weight,
//! through the variant's kernels. Each activation row is quantized once to
//! the type the weight's dot product takes (Q8_0, Q8_1, Q8_K, f16 or f32), as
//! ggml does; the weight rows are then split between the workers in pieces
//! of whole repack groups, and each weight row, once loaded, meets every
//! activation row. Scratch space is kept between calls: after the first
//! product of each shape nothing is allocated.

use half::slice::HalfFloatSliceExt;
use half::{bf16, f16};

use super::act_rows::{interleave_rows, BlockQ8_0x2, BlockQ8_0x4};
use super::interleaved::{Interleaved, PlainGroup};
use super::kernels::{Kernels, TileF32Fn};
use super::products::{ActType, CpuProduct, Dots};
use super::repack::ActLayout;
use super::repack_q5_0::activation_sums;
use super::repack_q8_0::{RepackedQ8_0, RepackedQ8_0x8i4};
use crate::backend::matrix::{Matrix, Repacked, Storage};
use crate::backend::same_count;
use crate::error::{Error, Result};
use crate::parallel::Workers;
use crate::tensor::blocks::*;
use crate::tensor::quants::{with_quant_type, QuantType};
use crate::tensor::DType;

/// Activation rows converted for the weight's kernel, kept between calls.
#[derive(Default)]
pub(super) struct ActScratch {
    pub(super) q8_0: Vec<BlockQ8_0>,
    pub(super) q8_1: Vec<BlockQ8_1>,
    pub(super) q8_k: Vec<BlockQ8K>,
    /// Each Q8_0 block's sum of quants, for the repacked Q5_0 kernels.
    sums: Vec<i32>,
    /// The Q8_0 rows in pairs and in quads, for the kernels that take them
    /// so (`act_rows`).
    pairs: Vec<BlockQ8_0x2>,
    quads: Vec<BlockQ8_0x4>,
    f16: Vec<f16>,
    f32: Vec<f32>,
}

/// One piece of a product's rows: which product and rows, its outputs and
/// row scratch.
#[derive(Default)]
pub(super) struct Piece {
    product: usize,
    rows: std::ops::Range<usize>,
    out: Vec<f32>,
    row_f16: Vec<f16>,
    row_f32: Vec<f32>,
    result: Option<Error>,
}

/// `v[..len]`, grown (once) when shorter.
fn sized<T: Clone>(v: &mut Vec<T>, len: usize, fill: T) -> &mut [T] {
    if v.len() < len {
        v.resize(len, fill);
    }
    &mut v[..len]
}

/// The activation rows `x` (`cols` each) quantized to `A` with the variant's
/// quantizer, into `q` (the backend's scratch).
fn quantize_rows<'s, A: ActType>(
    k: &Kernels,
    workers: &Workers,
    x: &[f32],
    cols: usize,
    q: &'s mut Vec<A>,
) -> &'s [A] {
    let per_row = cols / A::ELEMENTS;
    let quantize = A::quantizer(k);
    let q = sized(q, x.len() / A::ELEMENTS, A::zeroed());
    let rows = x.len() / cols.max(1);
    // A prompt's rows are quantized on the workers (each row as on one
    // thread); a generated token's one row is not worth waking them.
    let per_piece = if rows < 8 {
        rows.max(1)
    } else {
        rows.div_ceil(workers.pieces(rows))
    };
    workers.for_each_chunk_mut(q, per_piece * per_row, |i, piece| {
        let x = &x[i * per_piece * cols..];
        for (xr, qr) in x.chunks_exact(cols).zip(piece.chunks_exact_mut(per_row)) {
            quantize(xr, qr);
        }
    });
    q
}

/// Whether the variant widens f16 weight rows to f32 (tiles, or a target
/// whose f16 dot converts in software).
fn widens_f16(k: &Kernels) -> bool {
    k.tile_f32.is_some() || k.f16_in_software
}

/// Whether the CPU backend multiplies `dtype` weights (on every variant:
/// the scalar table has every product the SIMD ones have).
pub(super) fn supports(dtype: DType) -> bool {
    with_quant_type!(dtype, T => T::dots(&Kernels::scalar()).is_some(),
        float => matches!(dtype, DType::F16 | DType::BF16 | DType::F32))
}

fn unsupported(dtype: impl std::fmt::Display) -> Error {
    Error::InvalidArgument(format!(
        "matrix products with {dtype} weights are not supported"
    ))
}

/// A weight in the file's memory: `rows` rows of `row_bytes` bytes.
#[derive(Clone, Copy)]
struct Mapped<'a> {
    data: &'a [u8],
    rows: usize,
    cols: usize,
    row_bytes: usize,
}

impl<'a> Mapped<'a> {
    /// A weight read in the file's layout: from its mapping or a copy.
    fn of(w: &'a Matrix) -> Result<Mapped<'a>> {
        let data = w.file_layout_bytes().ok_or_else(|| {
            Error::InvalidArgument(format!("matrix '{}' has no values", w.name()))
        })?;
        Ok(Mapped {
            data,
            rows: w.rows(),
            cols: w.cols(),
            row_bytes: w.dtype().bytes_for(w.cols()),
        })
    }

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
    // Cache blocking: a block of weight rows that stays in L2 meets the
    // activation rows in chunks that stay in L1, so each weight row comes
    // from memory once and each activation chunk from L2 once per block.
    let act_chunk = (ACT_CHUNK_BYTES / std::mem::size_of_val(act(0)).max(1) / 4 * 4).max(4);
    let weight_block = (WEIGHT_BLOCK_BYTES / w.row_bytes.max(1)).max(1);
    for (j0, r0) in rows.clone().enumerate().step_by(weight_block) {
        let block = r0..(r0 + weight_block).min(rows.end);
        for i0 in (0..n).step_by(act_chunk) {
            let end = (i0 + act_chunk).min(n);
            for (j, r) in block.clone().enumerate() {
                let (j, wr) = (j0 + j, w.blocks::<X>(r)?);
                let mut i = i0;
                while i + 4 <= end {
                    let v = dot4(wr, [act(i), act(i + 1), act(i + 2), act(i + 3)]);
                    for (t, v) in v.into_iter().enumerate() {
                        out[(i + t) * len + j] = v;
                    }
                    i += 4;
                }
                for i in i..end {
                    out[i * len + j] = dot(wr, act(i));
                }
            }
        }
    }
    Ok(())
}

/// Bytes of quantized activation rows a four-row product keeps in the L1
/// cache at a time (half of the smallest L1 data cache of the targets).
const ACT_CHUNK_BYTES: usize = 16 * 1024;

/// Bytes of weight rows a four-row product keeps in the L2 cache while the
/// activation chunks pass (a quarter of a small L2).
const WEIGHT_BLOCK_BYTES: usize = 128 * 1024;

/// Activation rows up to which f16 weight rows go to the tile as they are
/// (the kernel converts each value as it loads it): the widest tile takes
/// six rows, so each weight is converted once or twice either way, and
/// widening into a buffer first would add a store and a load per value.
const F16_DIRECT_ROWS: usize = 6;

/// f16 weight rows `rows` times every activation row (f32 holding f16
/// values): for one activation row all rows at once (`gemv_f16`), else
/// four weight rows at a time, for a few activation rows straight from the
/// file (`tile_f16`), else widened to f32 once for all of them
/// (`tile_f32`). All give the same bits. A group at the end of the rows
/// repeats its last row, and only the real rows are stored.
fn f16_tiles(
    k: &Kernels,
    w: Mapped,
    rows: std::ops::Range<usize>,
    y: &[f32],
    out: &mut [f32],
    tile: TileF32Fn,
    piece: &mut Piece,
) {
    let (cols, len) = (w.cols, rows.len());
    if y.len() == cols {
        // One activation row: the piece's rows in one call when the file
        // holds them aligned (every GGUF file does).
        let bytes = &w.data[rows.start * w.row_bytes..rows.end * w.row_bytes];
        if let (Some(gemv), Some(wr)) = (k.gemv_f16, as_f16(bytes)) {
            gemv(wr, y, &mut out[..len]);
            return;
        }
    }
    let staging = sized(&mut piece.row_f16, 4 * cols, f16::ZERO);
    let row = |j0: usize, t: usize| rows.start + (j0 + t).min(len - 1);
    let direct = k.tile_f16.filter(|_| y.len() <= F16_DIRECT_ROWS * cols);
    if let Some(direct) = direct {
        for j0 in (0..len).step_by(4) {
            let mut parts = staging.chunks_exact_mut(cols);
            let wr: [&[f16]; 4] =
                std::array::from_fn(|t| w.f16_row(row(j0, t), parts.next().expect("four rows")));
            direct(wr, y, &mut out[j0..], len, (len - j0).min(4));
        }
        return;
    }
    let wide = sized(&mut piece.row_f32, 4 * cols, 0.0);
    for j0 in (0..len).step_by(4) {
        // Four weight rows widened once (exactly) for all activation rows.
        for (t, dst) in wide.chunks_exact_mut(cols).enumerate() {
            (k.widen_f16)(w.f16_row(row(j0, t), &mut staging[..cols]), dst);
        }
        let mut parts = wide.chunks_exact(cols);
        let wr: [&[f32]; 4] = std::array::from_fn(|_| parts.next().expect("four rows"));
        tile(wr, y, &mut out[j0..], len, (len - j0).min(4));
    }
}

/// `split_products` for one product of `rows` weight rows into `out`, with
/// `f(rows, out, piece)`.
fn split_rows<F>(
    workers: &Workers,
    pieces: &mut Vec<Piece>,
    rows: usize,
    n: usize,
    out: &mut [f32],
    f: F,
) -> Result<()>
where
    F: Fn(std::ops::Range<usize>, &mut [f32], &mut Piece) -> Result<()> + Sync + Send,
{
    split_products(
        workers,
        pieces,
        &|_| rows,
        n,
        &mut [out],
        |_, rows, dst, piece| f(rows, dst, piece),
    )
}

/// Splits the weight rows of every product (`rows_of(j)` rows for output
/// `outs[j]`) into pieces of whole repack groups, runs `f(j, rows, out,
/// piece)` for each piece in one parallel region (`out[i * len + r]` for
/// activation row `i` and the piece's row `r`), and gathers each product's
/// pieces into its output (`out[i * rows + r]`). Products that share their
/// activations (a layer's Q, K and V) so cost one region instead of three:
/// in a generated token a region's pieces are a few microseconds of work
/// each, and an empty region measured about 3 us of synchronisation natively
/// at two threads.
fn split_products<F>(
    workers: &Workers,
    pieces: &mut Vec<Piece>,
    rows_of: &(dyn Fn(usize) -> usize + Sync),
    n: usize,
    outs: &mut [&mut [f32]],
    f: F,
) -> Result<()>
where
    F: Fn(usize, std::ops::Range<usize>, &mut [f32], &mut Piece) -> Result<()> + Sync + Send,
{
    // Pieces of whole repack groups (8 rows covers every layout), of one
    // length over all the products.
    let align = 8;
    let total: usize = (0..outs.len()).map(rows_of).sum();
    let wanted = workers.pieces(total / align);
    let step = (total.div_ceil(wanted).div_ceil(align) * align).max(align);
    let n_pieces: usize = (0..outs.len()).map(|j| rows_of(j).div_ceil(step)).sum();
    if pieces.len() < n_pieces.max(1) {
        pieces.resize_with(n_pieces.max(1), Piece::default);
    }
    if n_pieces <= 1 || workers.n_threads() == 1 {
        // Each product whole, straight into its output.
        for (j, out) in outs.iter_mut().enumerate() {
            let rows = rows_of(j);
            if rows > 0 {
                f(j, 0..rows, &mut out[..n * rows], &mut pieces[0])?;
            }
        }
        return Ok(());
    }
    let mut next = pieces.iter_mut();
    for j in 0..outs.len() {
        let rows = rows_of(j);
        for start in (0..rows).step_by(step) {
            let piece = next.next().expect("a piece for every step");
            piece.product = j;
            piece.rows = start..(start + step).min(rows);
            sized(&mut piece.out, n * piece.rows.len(), 0.0);
        }
    }
    workers.for_each_mut(&mut pieces[..n_pieces], |_, piece| {
        let mut dst = std::mem::take(&mut piece.out);
        let rows = piece.rows.clone();
        let len = rows.len();
        piece.result = f(piece.product, rows, &mut dst[..n * len], piece).err();
        piece.out = dst;
    });
    for piece in pieces[..n_pieces].iter_mut() {
        if let Some(e) = piece.result.take() {
            return Err(e);
        }
    }
    let mut first = 0;
    for (j, out) in outs.iter_mut().enumerate() {
        let (rows, count) = (rows_of(j), rows_of(j).div_ceil(step));
        gather(workers, &pieces[first..first + count], n, rows, out);
        first += count;
    }
    Ok(())
}

/// Each of the `n` output rows (`rows` values) gathers its columns from
/// every piece of its product; a prompt's rows are gathered on the workers
/// (a serial copy of the whole product took a few percent of a 2-thread
/// encode).
fn gather(workers: &Workers, pieces: &[Piece], n: usize, rows: usize, out: &mut [f32]) {
    let per_chunk = if n < 8 {
        n
    } else {
        n.div_ceil(workers.pieces(n))
    };
    workers.for_each_chunk_mut(&mut out[..n * rows], per_chunk * rows, |c, chunk| {
        for (ci, orow) in chunk.chunks_exact_mut(rows).enumerate() {
            let i = c * per_chunk + ci;
            for piece in pieces {
                let len = piece.rows.len();
                orow[piece.rows.clone()].copy_from_slice(&piece.out[i * len..(i + 1) * len]);
            }
        }
    });
}

/// `x` rounded to f16 and back into `y`, value by value (on the workers for
/// a prompt's activations; every value is rounded the same way wherever).
fn round_to_f16(k: &Kernels, workers: &Workers, x: &[f32], y: &mut [f32]) {
    const BLOCK: usize = 256;
    let chunk = if x.len() < 16 * 1024 {
        x.len()
    } else {
        x.len()
            .div_ceil(workers.pieces(x.len() / BLOCK))
            .next_multiple_of(BLOCK)
    };
    workers.for_each_chunk_mut(y, chunk, |i, piece| {
        let start = i * chunk;
        (k.round_f16)(&x[start..start + piece.len()], piece);
    });
}

/// Weight rows `rows` of a quantized type `W` in the file's memory times
/// the activations quantized to `W::Dot`, with the type's dot kernels.
fn quant_rows<W: CpuProduct>(
    k: &Kernels,
    w: Mapped,
    y: &[W::Dot],
    rows: std::ops::Range<usize>,
    dst: &mut [f32],
) -> Result<()> {
    let Dots { dot, dot4 } = W::dots(k).ok_or_else(|| unsupported(W::TYPE))?;
    match dot4 {
        Some(dot4) => rows_times4(w, rows, y, dst, dot, dot4),
        None => rows_times(w, rows, y, dst, dot),
    }
}

/// Row `r` of a BF16 weight widened to f32 (exact: a bf16 is the high half
/// of an f32).
fn widen_bf16_row(w: Mapped, r: usize, out: &mut [f32]) {
    for (v, b) in out.iter_mut().zip(w.row(r).chunks_exact(2)) {
        *v = f32::from_bits((u16::from_le_bytes([b[0], b[1]]) as u32) << 16);
    }
}

/// A product with F16, BF16 or F32 weights in the file's memory.
#[allow(clippy::too_many_arguments)] // the product's operands, and the backend's parts
fn float_product(
    k: &Kernels,
    workers: &Workers,
    s: &mut Scratch,
    w: Mapped,
    dtype: DType,
    x: &[f32],
    n: usize,
    out: &mut [f32],
) -> Result<()> {
    let cols = w.cols;
    let Scratch { acts, pieces } = s;
    match dtype {
        DType::F16 if widens_f16(k) => {
            // The activations rounded to f16 as ggml does, held as f32
            // (exactly: f16 × f16 products are exact in f32), so each weight
            // row is widened once for all activation rows.
            let y = sized(&mut acts.f32, x.len(), 0.0);
            round_to_f16(k, workers, x, y);
            let y = &*y;
            split_rows(workers, pieces, w.rows, n, out, |rows, dst, piece| {
                if let Some(tile) = k.tile_f32 {
                    f16_tiles(k, w, rows, y, dst, tile, piece);
                    return Ok(());
                }
                let len = rows.len();
                let wh = sized(&mut piece.row_f16, cols, f16::ZERO);
                let wr = sized(&mut piece.row_f32, cols, 0.0);
                for (j, r) in rows.enumerate() {
                    w.f16_row(r, wh).convert_to_f32_slice(wr);
                    for (i, yi) in y.chunks_exact(cols).enumerate() {
                        dst[i * len + j] = (k.vec_dot_f32)(wr, yi);
                    }
                }
                Ok(())
            })
        }
        DType::F16 => {
            let y = sized(&mut acts.f16, x.len(), f16::ZERO);
            y.convert_from_f32_slice(x);
            let y = &*y;
            split_rows(workers, pieces, w.rows, n, out, |rows, dst, piece| {
                let len = rows.len();
                let buf = sized(&mut piece.row_f16, cols, f16::ZERO);
                for (j, r) in rows.enumerate() {
                    let wr = w.f16_row(r, buf);
                    for (i, yi) in y.chunks_exact(cols).enumerate() {
                        dst[i * len + j] = (k.vec_dot_f16)(wr, yi);
                    }
                }
                Ok(())
            })
        }
        DType::BF16 => {
            // ggml multiplies BF16 weights with activations rounded to
            // bf16; held as f32 (exactly), the products of two bf16 values
            // are exact in f32 and the variant's f32 dot sums them.
            let y = sized(&mut acts.f32, x.len(), 0.0);
            for (v, &a) in y.iter_mut().zip(x) {
                *v = bf16::from_f32(a).to_f32();
            }
            let y = &*y;
            split_rows(workers, pieces, w.rows, n, out, |rows, dst, piece| {
                let len = rows.len();
                let wr = sized(&mut piece.row_f32, cols, 0.0);
                for (j, r) in rows.enumerate() {
                    widen_bf16_row(w, r, wr);
                    for (i, yi) in y.chunks_exact(cols).enumerate() {
                        dst[i * len + j] = (k.vec_dot_f32)(wr, yi);
                    }
                }
                Ok(())
            })
        }
        DType::F32 => split_rows(workers, pieces, w.rows, n, out, |rows, dst, piece| {
            let len = rows.len();
            let wr = sized(&mut piece.row_f32, cols, 0.0);
            for (j, r) in rows.enumerate() {
                for (v, b) in wr.iter_mut().zip(w.row(r).chunks_exact(4)) {
                    *v = f32::from_le_bytes([b[0], b[1], b[2], b[3]]);
                }
                for (i, yi) in x.chunks_exact(cols).enumerate() {
                    dst[i * len + j] = (k.vec_dot_f32)(wr, yi);
                }
            }
            Ok(())
        }),
        other => Err(unsupported(other)),
    }
}

/// The backend's product scratch, kept between calls.
#[derive(Default)]
pub(super) struct Scratch {
    acts: ActScratch,
    pieces: Vec<Piece>,
}

/// The quantized type of a product's activation rows.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub(super) enum ActKind {
    Q8_0,
    Q8_1,
    Q8K,
}

/// How a product's activation rows are prepared before its weight rows
/// run; products with the same preparation share it (`mul_mats`).
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Prep {
    /// Quantized rows.
    Rows(ActKind),
    /// Q8_0 rows and each block's sum (`activation_sums`), for kernels
    /// whose integer form offsets the weights.
    RowsAndSums,
    /// Q8_0 rows, also interleaved in pairs or in quads (`act_rows`).
    Pairs,
    Quads,
}

/// Activation rows as `prepare` left them in the scratch (what a
/// preparation does not make is empty).
#[derive(Default, Clone, Copy)]
pub(super) struct Prepared<'s> {
    pub(super) q8_0: &'s [BlockQ8_0],
    pub(super) q8_1: &'s [BlockQ8_1],
    pub(super) q8_k: &'s [BlockQ8K],
    sums: &'s [i32],
    pairs: &'s [BlockQ8_0x2],
    quads: &'s [BlockQ8_0x4],
}

/// The preparation `w`'s kernels take for `n` activation rows; `None` for
/// float weights, whose products prepare their own (`float_product`).
fn prep_of(k: &Kernels, w: &Matrix, n: usize) -> Option<Prep> {
    let Storage::Repacked(repacked) = &w.storage else {
        return with_quant_type!(w.dtype(), T => Some(Prep::Rows(<T as QuantType>::Dot::KIND)),
            float => None);
    };
    Some(match repacked {
        Repacked::Q4_0(p) => match p.act_layout(k, n) {
            ActLayout::Pairs => Prep::Pairs,
            ActLayout::Quads => Prep::Quads,
            ActLayout::Rows if p.wants_sums(k) => Prep::RowsAndSums,
            ActLayout::Rows => Prep::Rows(ActKind::Q8_0),
        },
        Repacked::Q8_0(_) if RepackedQ8_0::wants_pairs(k, n) => Prep::Pairs,
        Repacked::Q8_0x8i4(_) if RepackedQ8_0x8i4::wants_quads(k, n) => Prep::Quads,
        Repacked::Q5_0(_) => Prep::RowsAndSums,
        Repacked::Q4K(p) => plain_prep(p),
        Repacked::Q8_0(p) => plain_prep(p),
        Repacked::Q8_0x8i4(p) => plain_prep(p),
        Repacked::Q4_1(p) => plain_prep(p),
        Repacked::Q6K(p) => plain_prep(p),
    })
}

/// A plain eight-row layout's preparation: its activation type's rows.
fn plain_prep<G: PlainGroup>(_: &Interleaved<G>) -> Prep
where
    G::Act: ActType,
{
    Prep::Rows(G::Act::KIND)
}

/// The activation rows `x` (`n` of `cols`) prepared as `prep` says, once for
/// every product that shares them.
fn prepare<'s>(
    k: &Kernels,
    workers: &Workers,
    acts: &'s mut ActScratch,
    prep: Prep,
    x: &[f32],
    cols: usize,
    n: usize,
) -> Prepared<'s> {
    let ActScratch {
        q8_0,
        q8_1,
        q8_k,
        sums,
        pairs,
        quads,
        ..
    } = acts;
    let mut a = Prepared::default();
    match prep {
        Prep::Rows(ActKind::Q8_1) => a.q8_1 = quantize_rows(k, workers, x, cols, q8_1),
        Prep::Rows(ActKind::Q8K) => a.q8_k = quantize_rows(k, workers, x, cols, q8_k),
        Prep::Rows(ActKind::Q8_0) => a.q8_0 = quantize_rows(k, workers, x, cols, q8_0),
        Prep::RowsAndSums => {
            a.q8_0 = quantize_rows(k, workers, x, cols, q8_0);
            activation_sums(a.q8_0, sums);
            a.sums = sums;
        }
        Prep::Pairs => {
            a.q8_0 = quantize_rows(k, workers, x, cols, q8_0);
            interleave_rows(workers, a.q8_0, n, cols / QK, pairs);
            a.pairs = pairs;
        }
        Prep::Quads => {
            a.q8_0 = quantize_rows(k, workers, x, cols, q8_0);
            interleave_rows(workers, a.q8_0, n, cols / QK, quads);
            a.quads = quads;
        }
    }
    a
}

/// Weight rows `rows` of `w` times the prepared activation rows `a` (as
/// `prep_of(k, w, n)` said to prepare them), into `dst` (`split_products`'s
/// piece layout).
fn product_piece(
    k: &Kernels,
    w: &Matrix,
    a: &Prepared,
    n: usize,
    rows: std::ops::Range<usize>,
    dst: &mut [f32],
) -> Result<()> {
    let Storage::Repacked(repacked) = &w.storage else {
        let mapped = Mapped::of(w)?;
        return with_quant_type!(w.dtype(),
            T => quant_rows::<T>(k, mapped, <T as QuantType>::Dot::prepared(a), rows, dst),
            float => Err(unsupported(w.dtype())));
    };
    match repacked {
        Repacked::Q4_0(p) => match p.act_layout(k, n) {
            ActLayout::Pairs => p.product_rows_pairs(k, a.q8_0, a.pairs, n, rows, dst),
            ActLayout::Quads => p.product_rows_quads(k, a.q8_0, a.quads, n, rows, dst),
            ActLayout::Rows => p.product_rows(k, a.q8_0, a.sums, n, rows, dst),
        },
        Repacked::Q8_0(p) if RepackedQ8_0::wants_pairs(k, n) => {
            p.product_rows_pairs(k, a.q8_0, a.pairs, n, rows, dst)
        }
        Repacked::Q8_0x8i4(p) if RepackedQ8_0x8i4::wants_quads(k, n) => {
            p.product_rows_quads(k, a.q8_0, a.quads, n, rows, dst)
        }
        Repacked::Q5_0(p) => p.product_rows(k, a.q8_0, a.sums, n, rows, dst),
        Repacked::Q4K(p) => plain_rows(k, p, a, n, rows, dst),
        Repacked::Q8_0(p) => plain_rows(k, p, a, n, rows, dst),
        Repacked::Q8_0x8i4(p) => plain_rows(k, p, a, n, rows, dst),
        Repacked::Q4_1(p) => plain_rows(k, p, a, n, rows, dst),
        Repacked::Q6K(p) => plain_rows(k, p, a, n, rows, dst),
    }
}

/// Rows of a weight in one of the plain eight-row layouts
/// (`interleaved::PlainGroup`) times its activation type's rows.
fn plain_rows<G>(
    k: &Kernels,
    p: &Interleaved<G>,
    a: &Prepared,
    n: usize,
    rows: std::ops::Range<usize>,
    dst: &mut [f32],
) -> Result<()>
where
    G: PlainGroup,
    G::Act: ActType,
{
    p.product_rows(k, G::Act::prepared(a), n, rows, dst)
}

/// An error unless `w` times `n` rows of `x` fits `out`.
fn check_shape(w: &Matrix, x: &[f32], n: usize, out: &[f32]) -> Result<()> {
    let (rows, cols) = (w.rows(), w.cols());
    if x.len() != n * cols || out.len() != n * rows {
        return Err(Error::InvalidArgument(format!(
            "product of '{}' ({rows}x{cols}) with {} inputs and {} outputs for {n} rows",
            w.name(),
            x.len(),
            out.len()
        )));
    }
    Ok(())
}

/// `out[i * rows + r] = W[r] · x[i]` for `n` activation rows of `cols` values.
pub(super) fn mul_mat(
    k: &Kernels,
    workers: &Workers,
    s: &mut Scratch,
    w: &Matrix,
    x: &[f32],
    n: usize,
    out: &mut [f32],
) -> Result<()> {
    mul_mats(k, workers, s, &[w], x, n, &mut [out])
}

/// `outs[j] = ws[j] · x` for several weights of the same width, each as
/// `mul_mat` computes it: where every weight's kernels take the same
/// preparation of the activations (a layer's Q, K and V of one type), the
/// rows are prepared once and all the products' pieces run in one parallel
/// region; else each product runs on its own.
pub(super) fn mul_mats(
    k: &Kernels,
    workers: &Workers,
    s: &mut Scratch,
    ws: &[&Matrix],
    x: &[f32],
    n: usize,
    outs: &mut [&mut [f32]],
) -> Result<()> {
    same_count(ws, outs)?;
    for (w, out) in ws.iter().zip(outs.iter()) {
        check_shape(w, x, n, out)?;
    }
    let Some(first) = ws.first() else {
        return Ok(());
    };
    let prep = prep_of(k, first, n);
    let shared = prep.filter(|&p| ws.iter().all(|w| prep_of(k, w, n) == Some(p)));
    let Some(prep) = shared else {
        if let [w] = ws {
            // One float weight: its product prepares its own activations.
            return float_product(k, workers, s, Mapped::of(w)?, w.dtype(), x, n, &mut outs[0]);
        }
        for (w, out) in ws.iter().zip(outs.iter_mut()) {
            mul_mats(k, workers, s, &[w], x, n, &mut [&mut **out])?;
        }
        return Ok(());
    };
    let Scratch { acts, pieces } = s;
    let a = prepare(k, workers, acts, prep, x, first.cols(), n);
    split_products(
        workers,
        pieces,
        &|j| ws[j].rows(),
        n,
        outs,
        |j, rows, dst, _| product_piece(k, ws[j], &a, n, rows, dst),
    )
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
    let Some(data) = w.file_layout_bytes() else {
        return Err(Error::InvalidArgument(format!(
            "get_rows of the repacked matrix '{}'",
            w.name()
        )));
    };
    let row_bytes = w.dtype().bytes_for(cols);
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

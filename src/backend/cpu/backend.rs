//! The CPU backend: every op of a forward pass with the selected variant's
//! kernels, spread over this backend's worker threads, with scratch space
//! kept between calls (nothing is allocated per token once a micro-batch of
//! each size has run).

use std::sync::Arc;

use super::attention::{self, AttnScratch};
use super::kernels::Kernels;
use super::matmul;
use super::rows;
use crate::backend::matrix::Matrix;
use crate::backend::ops::{AttentionArgs, CacheRows, CacheRowsMut, DeltaNetArgs, Rope};
use crate::backend::{mul_mat_each, product_rows, Backend};
use crate::error::{Error, Result};
use crate::parallel::Workers;

pub struct CpuBackend {
    kernels: Kernels,
    workers: Arc<Workers>,
    products: matmul::Scratch,
    attn: AttnScratch,
    /// Cached positions attention is sized for (`reserve`).
    max_cells: usize,
    /// Gated DeltaNet's per-head outputs (grown on first use).
    delta_net: Vec<f32>,
    /// One thread's workers: each of `mul_mat_rows`'s products runs on one
    /// thread of a region, with its own scratch.
    inline: Workers,
    row_products: Vec<RowProduct>,
}

/// The scratch and outcome of one of `mul_mat_rows`'s products.
#[derive(Default)]
struct RowProduct {
    scratch: matmul::Scratch,
    error: Option<Error>,
}

/// Ones to multiply by: `silu` is `silu_mul` against them, so it takes the
/// same kernels (and bits).
const ONES: [f32; 256] = [1.0; 256];

/// Rows below which a row-wise op runs on the calling thread: a generated
/// token's one row is not worth waking a worker for; a prompt's are.
const MIN_PARALLEL_ROWS: usize = 8;
/// Values below which an element-wise op runs on the calling thread.
const MIN_PARALLEL_VALUES: usize = 16 * 1024;

impl CpuBackend {
    /// `f(first_row, piece)` over pieces of whole rows of `width` of `data`,
    /// on the workers when there are enough rows. Each row is computed as
    /// on one thread, so the results do not depend on the threads.
    fn in_row_pieces(
        &self,
        data: &mut [f32],
        width: usize,
        f: impl Fn(usize, &mut [f32]) + Sync + Send,
    ) {
        let rows = data.len() / width.max(1);
        if rows < MIN_PARALLEL_ROWS || self.workers.n_threads() == 1 {
            return f(0, data);
        }
        let per_piece = rows.div_ceil(self.workers.pieces(rows));
        self.workers
            .for_each_chunk_mut(data, per_piece * width, |i, piece| f(i * per_piece, piece));
    }

    /// `f(start, piece)` over pieces of an element-wise op's values, on the
    /// workers when there are enough. The pieces start at multiples of 64,
    /// so every value takes the same SIMD path as in one piece (only the
    /// last piece has the tail the whole slice has).
    fn in_pieces(&self, data: &mut [f32], f: impl Fn(usize, &mut [f32]) + Sync + Send) {
        if data.len() < MIN_PARALLEL_VALUES || self.workers.n_threads() == 1 {
            return f(0, data);
        }
        let chunk = data
            .len()
            .div_ceil(self.workers.n_threads() * 4)
            .next_multiple_of(64);
        self.workers
            .for_each_chunk_mut(data, chunk, |i, piece| f(i * chunk, piece));
    }
}

fn same_len(op: &str, a: usize, b: usize) -> Result<()> {
    if a == b {
        Ok(())
    } else {
        Err(Error::InvalidArgument(format!(
            "{op}: operands of {a} and {b} values"
        )))
    }
}

/// Checks that `x` is whole rows of `width` values.
fn rows_of(op: &str, x: usize, width: usize) -> Result<usize> {
    if width == 0 || x % width != 0 {
        return Err(Error::InvalidArgument(format!(
            "{op}: {x} values are not whole rows of {width}"
        )));
    }
    Ok(x / width)
}

impl CpuBackend {
    pub fn new(kernels: Kernels, n_threads: usize) -> Result<CpuBackend> {
        Ok(CpuBackend {
            kernels,
            workers: Arc::new(Workers::new(n_threads)?),
            products: matmul::Scratch::default(),
            attn: AttnScratch::default(),
            max_cells: 0,
            delta_net: Vec::new(),
            inline: Workers::new(1)?,
            row_products: Vec::new(),
        })
    }

    pub fn kernels(&self) -> &Kernels {
        &self.kernels
    }
}

impl Backend for CpuBackend {
    fn name(&self) -> String {
        format!("CPU ({})", self.kernels.variant)
    }

    fn device_name(&self) -> &str {
        "CPU"
    }

    fn n_threads(&self) -> usize {
        self.workers.n_threads()
    }

    fn variant_name(&self) -> String {
        self.kernels.variant.to_string()
    }

    fn reserve(&mut self, _max_tokens: usize, max_cells: usize) -> Result<()> {
        // The attention's per-piece buffers grow with the cells a query
        // sees: they are sized for the whole context on their first use, so
        // a filling context does not allocate. The products size themselves
        // on their first call of each shape (during warm-up).
        self.max_cells = max_cells;
        Ok(())
    }

    fn run(&mut self, f: &mut (dyn FnMut(&mut dyn Backend) -> Result<()> + Send)) -> Result<()> {
        let workers = self.workers.clone();
        workers.install(|| f(self))
    }

    fn mul_mat(&mut self, w: &Matrix, x: &[f32], n: usize, out: &mut [f32]) -> Result<()> {
        matmul::mul_mat(
            &self.kernels,
            &self.workers,
            &mut self.products,
            w,
            x,
            n,
            out,
        )
    }

    fn mul_mats(
        &mut self,
        ws: &[&Matrix],
        x: &[f32],
        n: usize,
        outs: &mut [&mut [f32]],
    ) -> Result<()> {
        matmul::mul_mats(
            &self.kernels,
            &self.workers,
            &mut self.products,
            ws,
            x,
            n,
            outs,
        )
    }

    /// With several threads, one region for all the products, each on one
    /// thread: a token's experts are a few small products, and one region
    /// apiece left the threads waiting on each other more than computing.
    /// Each output equals `mul_mat`'s (which splits a product's rows, never
    /// a row).
    fn mul_mat_rows<'m>(
        &mut self,
        count: usize,
        weight: &(dyn Fn(usize) -> &'m Matrix + Sync),
        x: &[f32],
        x_width: usize,
        out: &mut [f32],
        out_width: usize,
    ) -> Result<()> {
        // Every product is checked before any runs.
        for j in 0..count {
            product_rows(weight(j), j, x, x_width, out, out_width)?;
        }
        let whole_rows = count.checked_mul(out_width).filter(|&len| len <= out.len());
        let (Some(len), true) = (whole_rows, count > 1 && self.workers.n_threads() > 1) else {
            return mul_mat_each(self, count, weight, x, x_width, out, out_width);
        };
        if self.row_products.len() < count {
            self.row_products.resize_with(count, RowProduct::default);
        }
        let CpuBackend {
            kernels,
            workers,
            inline,
            row_products,
            ..
        } = self;
        let (kernels, inline) = (&*kernels, &*inline);
        workers.for_each_chunk_pair_mut(
            &mut row_products[..count],
            1,
            &mut out[..len],
            out_width,
            |j, product, o| {
                let (w, product) = (weight(j), &mut product[0]);
                let xj = &x[j * x_width..j * x_width + w.cols()];
                let oj = &mut o[..w.rows()];
                product.error =
                    matmul::mul_mat(kernels, inline, &mut product.scratch, w, xj, 1, oj).err();
            },
        );
        for product in &mut row_products[..count] {
            if let Some(e) = product.error.take() {
                return Err(e);
            }
        }
        Ok(())
    }

    fn get_rows(&mut self, table: &Matrix, ids: &[u32], out: &mut [f32]) -> Result<()> {
        matmul::get_rows(table, ids, out)
    }

    fn rms_norm(&mut self, x: &[f32], w: &[f32], eps: f32, out: &mut [f32]) -> Result<()> {
        same_len("rms_norm", x.len(), out.len())?;
        rows_of("rms_norm", x.len(), w.len())?;
        let (k, width) = (&self.kernels, w.len());
        self.in_row_pieces(out, width, |first, piece| {
            let x = &x[first * width..];
            for (xr, or) in x.chunks_exact(width).zip(piece.chunks_exact_mut(width)) {
                (k.rms_norm)(xr, w, eps, or);
            }
        });
        Ok(())
    }

    fn layer_norm(&mut self, x: &mut [f32], w: &[f32], b: &[f32], eps: f32) -> Result<()> {
        same_len("layer_norm", w.len(), b.len())?;
        rows_of("layer_norm", x.len(), w.len())?;
        let k = &self.kernels;
        self.in_row_pieces(x, w.len(), |_, piece| {
            for row in piece.chunks_exact_mut(w.len()) {
                (k.layer_norm)(row, w, b, eps);
            }
        });
        Ok(())
    }

    fn rope(&mut self, rope: &Rope, x: &mut [f32], pos: &[i32]) -> Result<()> {
        let n = pos.len().max(1);
        let width = x.len() / n;
        if pos.is_empty() || x.len() % n != 0 || width % rope.head_dim != 0 {
            return Err(Error::InvalidArgument(format!(
                "rope: {} values for {} positions with heads of {}",
                x.len(),
                pos.len(),
                rope.head_dim
            )));
        }
        if rope
            .freq_factors
            .as_ref()
            .is_some_and(|f| f.len() < rope.dim / 2)
        {
            return Err(Error::InvalidArgument(
                "rope: fewer frequency factors than rotated pairs".into(),
            ));
        }
        let k = &self.kernels;
        self.in_row_pieces(x, width, |first, piece| {
            for (row, &p) in piece.chunks_exact_mut(width).zip(&pos[first..]) {
                (k.rope)(rope, row, p);
            }
        });
        Ok(())
    }

    fn add(&mut self, x: &mut [f32], y: &[f32]) -> Result<()> {
        same_len("add", x.len(), y.len())?;
        self.in_pieces(x, |start, piece| {
            for (a, b) in piece.iter_mut().zip(&y[start..]) {
                *a += b;
            }
        });
        Ok(())
    }

    fn add_bias(&mut self, x: &mut [f32], bias: &[f32]) -> Result<()> {
        rows_of("add_bias", x.len(), bias.len())?;
        self.in_row_pieces(x, bias.len(), |_, piece| {
            for row in piece.chunks_exact_mut(bias.len()) {
                for (o, &b) in row.iter_mut().zip(bias) {
                    *o += b;
                }
            }
        });
        Ok(())
    }

    fn silu_mul(&mut self, gate: &mut [f32], up: &[f32]) -> Result<()> {
        same_len("silu_mul", gate.len(), up.len())?;
        let k = &self.kernels;
        self.in_pieces(gate, |start, piece| {
            (k.silu_mul)(piece, &up[start..start + piece.len()])
        });
        Ok(())
    }

    fn gelu(&mut self, x: &mut [f32]) -> Result<()> {
        let k = &self.kernels;
        self.in_pieces(x, |_, piece| (k.gelu)(piece));
        Ok(())
    }

    fn gelu_mul(&mut self, gate: &mut [f32], up: &[f32]) -> Result<()> {
        same_len("gelu_mul", gate.len(), up.len())?;
        let k = &self.kernels;
        self.in_pieces(gate, |start, piece| {
            (k.gelu_mul)(piece, &up[start..start + piece.len()])
        });
        Ok(())
    }

    fn scale(&mut self, x: &mut [f32], c: f32) -> Result<()> {
        for v in x.iter_mut() {
            *v *= c;
        }
        Ok(())
    }

    fn tanh(&mut self, x: &mut [f32]) -> Result<()> {
        for v in x.iter_mut() {
            *v = v.tanh();
        }
        Ok(())
    }

    fn sigmoid(&mut self, x: &mut [f32]) -> Result<()> {
        rows::sigmoid(x);
        Ok(())
    }

    fn soft_max(&mut self, x: &mut [f32], width: usize) -> Result<()> {
        rows_of("soft_max", x.len(), width)?;
        x.chunks_exact_mut(width).for_each(rows::soft_max);
        Ok(())
    }

    fn causal_conv(
        &mut self,
        kernel: &[f32],
        len: usize,
        state: &mut [f32],
        x: &[f32],
        out: &mut [f32],
    ) -> Result<()> {
        let n = out.len();
        if len < 2
            || n == 0
            || Some(kernel.len()) != n.checked_mul(len)
            || Some(state.len()) != n.checked_mul(len - 1)
            || x.len() != n
        {
            return Err(Error::InvalidArgument(format!(
                "causal_conv: {} taps, a state of {}, {} inputs for {n} channels of a {len}-tap kernel",
                kernel.len(),
                state.len(),
                x.len()
            )));
        }
        rows::causal_conv(self.kernels.causal_conv, kernel, state, x, out);
        Ok(())
    }

    fn mul(&mut self, x: &mut [f32], y: &[f32]) -> Result<()> {
        same_len("mul", x.len(), y.len())?;
        for (a, &b) in x.iter_mut().zip(y) {
            *a *= b;
        }
        Ok(())
    }

    fn silu(&mut self, x: &mut [f32]) -> Result<()> {
        let k = &self.kernels;
        self.in_pieces(x, |_, piece| {
            for part in piece.chunks_mut(ONES.len()) {
                (k.silu_mul)(part, &ONES[..part.len()]);
            }
        });
        Ok(())
    }

    fn gated_delta_net(
        &mut self,
        args: &DeltaNetArgs,
        state: &mut [f32],
        out: &mut [f32],
    ) -> Result<()> {
        let n = args.check(state.len(), out.len())?;
        if n == 0 {
            return Ok(());
        }
        let (hk, hv, d) = (args.n_head_k, args.n_head_v, args.dim);
        let (width, kd) = (args.row_width(), hk * d);
        let need = n * hv * d;
        if self.delta_net.len() < need {
            self.delta_net.resize(need, 0.0);
        }
        let head_out = &mut self.delta_net[..need];
        // The heads are independent: one job each (its state and its
        // output), over the workers.
        let (qkv, g, beta) = (args.qkv, args.g, args.beta);
        let columns = self.kernels.delta_net_columns;
        self.workers
            .for_each_chunk_pair_mut(state, d * d, head_out, n * d, |h, st, o| {
                let kh = h % hk;
                rows::delta_net_head(
                    columns,
                    &qkv[kh * d..],
                    &qkv[kd + kh * d..],
                    &qkv[2 * kd + h * d..],
                    width,
                    &g[h..],
                    &beta[h..],
                    hv,
                    st,
                    o,
                    d,
                    d,
                    n,
                );
            });
        // Head-major to token-major.
        for (h, head) in head_out.chunks_exact(n * d).enumerate() {
            for (t, row) in head.chunks_exact(d).enumerate() {
                out[(t * hv + h) * d..(t * hv + h + 1) * d].copy_from_slice(row);
            }
        }
        Ok(())
    }

    fn set_row(&mut self, src: &[f32], dst: CacheRowsMut, row: usize) -> Result<()> {
        attention::set_row(&self.kernels, src, dst, row)
    }

    fn get_row(&mut self, src: CacheRows, row: usize, out: &mut [f32]) -> Result<()> {
        attention::get_row(src, row, out)
    }

    fn attention(&mut self, args: &AttentionArgs, out: &mut [f32]) -> Result<()> {
        attention::attention(
            &self.kernels,
            &self.workers,
            &mut self.attn,
            self.max_cells,
            args,
            out,
        )
    }
}

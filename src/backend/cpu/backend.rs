//! The CPU backend: every op of a forward pass with the selected variant's
//! kernels, spread over this backend's worker threads, with scratch space
//! kept between calls (nothing is allocated per token once a micro-batch of
//! each size has run).

use std::sync::Arc;

use super::attention::{self, AttnPiece};
use super::kernels::Kernels;
use super::matmul;
use crate::backend::matrix::Matrix;
use crate::backend::ops::{AttentionArgs, CacheRows, CacheRowsMut, Rope};
use crate::backend::Backend;
use crate::error::{Error, Result};
use crate::parallel::Workers;

pub struct CpuBackend {
    kernels: Kernels,
    workers: Arc<Workers>,
    products: matmul::Scratch,
    attn: Vec<AttnPiece>,
    /// Cached positions attention is sized for (`reserve`).
    max_cells: usize,
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
            attn: Vec::new(),
            max_cells: 0,
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

    fn get_rows(&mut self, table: &Matrix, ids: &[u32], out: &mut [f32]) -> Result<()> {
        matmul::get_rows(table, ids, out)
    }

    fn rms_norm(&mut self, x: &[f32], w: &[f32], eps: f32, out: &mut [f32]) -> Result<()> {
        same_len("rms_norm", x.len(), out.len())?;
        rows_of("rms_norm", x.len(), w.len())?;
        for (xr, or) in x.chunks_exact(w.len()).zip(out.chunks_exact_mut(w.len())) {
            (self.kernels.rms_norm)(xr, w, eps, or);
        }
        Ok(())
    }

    fn layer_norm(&mut self, x: &mut [f32], w: &[f32], b: &[f32], eps: f32) -> Result<()> {
        same_len("layer_norm", w.len(), b.len())?;
        rows_of("layer_norm", x.len(), w.len())?;
        for row in x.chunks_exact_mut(w.len()) {
            (self.kernels.layer_norm)(row, w, b, eps);
        }
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
        for (row, &p) in x.chunks_exact_mut(width).zip(pos) {
            (self.kernels.rope)(rope, row, p);
        }
        Ok(())
    }

    fn add(&mut self, x: &mut [f32], y: &[f32]) -> Result<()> {
        same_len("add", x.len(), y.len())?;
        for (a, b) in x.iter_mut().zip(y) {
            *a += b;
        }
        Ok(())
    }

    fn add_bias(&mut self, x: &mut [f32], bias: &[f32]) -> Result<()> {
        rows_of("add_bias", x.len(), bias.len())?;
        for row in x.chunks_exact_mut(bias.len()) {
            for (o, &b) in row.iter_mut().zip(bias) {
                *o += b;
            }
        }
        Ok(())
    }

    fn silu_mul(&mut self, gate: &mut [f32], up: &[f32]) -> Result<()> {
        same_len("silu_mul", gate.len(), up.len())?;
        (self.kernels.silu_mul)(gate, up);
        Ok(())
    }

    fn gelu(&mut self, x: &mut [f32]) -> Result<()> {
        (self.kernels.gelu)(x);
        Ok(())
    }

    fn gelu_mul(&mut self, gate: &mut [f32], up: &[f32]) -> Result<()> {
        same_len("gelu_mul", gate.len(), up.len())?;
        (self.kernels.gelu_mul)(gate, up);
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

//! The backend seen by a forward pass with adapters applied: every product
//! with a weight an adapter changes gains that adapter's low-rank term,
//! `W·x + scale · B·(A·x)`, as llama.cpp's `build_lora_mm` adds it (after
//! the product, before any bias), and the token look-up gains `B·A[token]`.
//! Everything else goes straight to the device's backend, so model code
//! needs no change to support adapters.

use super::ActiveLora;
use crate::backend::{AttentionArgs, Backend, CacheRows, CacheRowsMut, DeltaNetArgs, Matrix, Rope};
use crate::error::Result;

pub(crate) struct LoraBackend<'a> {
    pub inner: &'a mut dyn Backend,
    pub loras: &'a [ActiveLora],
    /// Scratch for `A·x` and `B·(A·x)`.
    low: Vec<f32>,
    high: Vec<f32>,
}

impl<'a> LoraBackend<'a> {
    pub fn new(inner: &'a mut dyn Backend, loras: &'a [ActiveLora]) -> LoraBackend<'a> {
        LoraBackend {
            inner,
            loras,
            low: Vec::new(),
            high: Vec::new(),
        }
    }

    /// `out += scale · high`.
    fn add_scaled(&mut self, out: &mut [f32], scale: f32) -> Result<()> {
        self.inner.scale(&mut self.high, scale)?;
        self.inner.add(out, &self.high)
    }
}

impl Backend for LoraBackend<'_> {
    fn name(&self) -> String {
        self.inner.name()
    }
    fn device_name(&self) -> &str {
        self.inner.device_name()
    }
    fn n_threads(&self) -> usize {
        self.inner.n_threads()
    }
    fn variant_name(&self) -> String {
        self.inner.variant_name()
    }
    fn reserve(&mut self, max_tokens: usize, max_cells: usize) -> Result<()> {
        self.inner.reserve(max_tokens, max_cells)
    }
    fn run(&mut self, f: &mut (dyn FnMut(&mut dyn Backend) -> Result<()> + Send)) -> Result<()> {
        f(self)
    }

    fn mul_mat(&mut self, w: &Matrix, x: &[f32], n: usize, out: &mut [f32]) -> Result<()> {
        self.inner.mul_mat(w, x, n, out)?;
        let loras = self.loras;
        for lora in loras {
            let Some(pair) = lora.adapter.pair(w.name()) else {
                continue;
            };
            self.low.resize(n * pair.a.rows(), 0.0);
            self.high.resize(n * pair.b.rows(), 0.0);
            self.inner.mul_mat(&pair.a, x, n, &mut self.low)?;
            self.inner.mul_mat(&pair.b, &self.low, n, &mut self.high)?;
            self.add_scaled(out, lora.adapter.scale_of(pair, lora.scale))?;
        }
        Ok(())
    }

    fn get_rows(&mut self, table: &Matrix, ids: &[u32], out: &mut [f32]) -> Result<()> {
        self.inner.get_rows(table, ids, out)?;
        let loras = self.loras;
        for lora in loras {
            let Some(pair) = lora.adapter.embedding(table.name()) else {
                continue;
            };
            let n = ids.len();
            // The token's row of A (rank values), then B: the embedding's
            // change for that token.
            self.low.resize(n * pair.a.cols(), 0.0);
            self.high.resize(n * pair.b.rows(), 0.0);
            self.inner.get_rows(&pair.a, ids, &mut self.low)?;
            self.inner.mul_mat(&pair.b, &self.low, n, &mut self.high)?;
            self.add_scaled(out, lora.adapter.scale_of(pair, lora.scale))?;
        }
        Ok(())
    }

    fn rms_norm(&mut self, x: &[f32], w: &[f32], eps: f32, out: &mut [f32]) -> Result<()> {
        self.inner.rms_norm(x, w, eps, out)
    }
    fn layer_norm(&mut self, x: &mut [f32], w: &[f32], b: &[f32], eps: f32) -> Result<()> {
        self.inner.layer_norm(x, w, b, eps)
    }
    fn rope(&mut self, rope: &Rope, x: &mut [f32], pos: &[i32]) -> Result<()> {
        self.inner.rope(rope, x, pos)
    }
    fn add(&mut self, x: &mut [f32], y: &[f32]) -> Result<()> {
        self.inner.add(x, y)
    }
    fn add_bias(&mut self, x: &mut [f32], bias: &[f32]) -> Result<()> {
        self.inner.add_bias(x, bias)
    }
    fn silu_mul(&mut self, gate: &mut [f32], up: &[f32]) -> Result<()> {
        self.inner.silu_mul(gate, up)
    }
    fn gelu(&mut self, x: &mut [f32]) -> Result<()> {
        self.inner.gelu(x)
    }
    fn gelu_mul(&mut self, gate: &mut [f32], up: &[f32]) -> Result<()> {
        self.inner.gelu_mul(gate, up)
    }
    fn scale(&mut self, x: &mut [f32], c: f32) -> Result<()> {
        self.inner.scale(x, c)
    }
    fn tanh(&mut self, x: &mut [f32]) -> Result<()> {
        self.inner.tanh(x)
    }
    fn sigmoid(&mut self, x: &mut [f32]) -> Result<()> {
        self.inner.sigmoid(x)
    }
    fn soft_max(&mut self, x: &mut [f32], width: usize) -> Result<()> {
        self.inner.soft_max(x, width)
    }
    fn causal_conv(
        &mut self,
        kernel: &[f32],
        len: usize,
        state: &mut [f32],
        x: &[f32],
        out: &mut [f32],
    ) -> Result<()> {
        self.inner.causal_conv(kernel, len, state, x, out)
    }
    fn mul(&mut self, x: &mut [f32], y: &[f32]) -> Result<()> {
        self.inner.mul(x, y)
    }
    fn silu(&mut self, x: &mut [f32]) -> Result<()> {
        self.inner.silu(x)
    }
    fn gated_delta_net(
        &mut self,
        args: &DeltaNetArgs,
        state: &mut [f32],
        out: &mut [f32],
    ) -> Result<()> {
        self.inner.gated_delta_net(args, state, out)
    }
    fn set_row(&mut self, src: &[f32], dst: CacheRowsMut, row: usize) -> Result<()> {
        self.inner.set_row(src, dst, row)
    }
    fn get_row(&mut self, src: CacheRows, row: usize, out: &mut [f32]) -> Result<()> {
        self.inner.get_row(src, row, out)
    }
    fn attention(&mut self, args: &AttentionArgs, out: &mut [f32]) -> Result<()> {
        self.inner.attention(args, out)
    }
}

//! The backend: ggml-backend's layers in Rust traits. A `Registry` enumerates
//! devices; a `Device` answers questions (memory, which ops and types it
//! supports), binds weights in its own storage and creates `BufferType`s and
//! `Backend`s; a `BufferType` allocates `Buffer`s; a `Backend` is an execution
//! stream on its device and runs every operation the model code asks for.
//!
//! The model code holds a `&mut dyn Backend` (a trait object: ops are coarse,
//! whole matrices and rows, so one indirect call per op costs nothing) and
//! never names a CPU, an instruction set or a target. Today there is one
//! device, the CPU, whose kernel variant is picked from the features of the
//! machine it runs on.

mod cache;
pub mod cpu;
mod matrix;
pub mod ops;

use std::sync::Arc;

pub use cache::CacheBuffer;
pub use matrix::{Matrix, WeightSource};
pub use ops::{AttentionArgs, CacheRows, CacheRowsMut, CacheType, DeltaNetArgs, Rope, RopeKind};

use crate::error::{Error, Result};
use crate::tensor::DType;

/// What kind of hardware a device is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum DeviceKind {
    Cpu,
    Gpu,
    Accelerator,
}

impl DeviceKind {
    pub fn name(self) -> &'static str {
        match self {
            DeviceKind::Cpu => "cpu",
            DeviceKind::Gpu => "gpu",
            DeviceKind::Accelerator => "accelerator",
        }
    }
}

/// An operation the model code may ask a device about (`Device::supports_op`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Op {
    /// Matrix times activations, with weights of this type.
    MulMat(DType),
    /// Rows of an embedding table of this type.
    GetRows(DType),
    RmsNorm,
    LayerNorm,
    Rope,
    /// Attention over a cache of this K (or V) type.
    Attention(CacheType),
    Add,
    Mul,
    Silu,
    Gelu,
    Tanh,
}

/// Enumerates the devices of one kind of backend.
pub trait Registry {
    /// The registry's name ("CPU").
    fn name(&self) -> &str;
    /// Its devices, best first.
    fn devices(&self) -> Vec<Arc<dyn Device>>;
}

/// One device.
pub trait Device: Send + Sync {
    /// Short name ("CPU").
    fn name(&self) -> &str;
    /// What it is and how it will run (for `lamina devices` and logs).
    fn description(&self) -> String;
    fn kind(&self) -> DeviceKind;
    /// (free, total) bytes of memory, where known. (optional) Default: unknown, (0, 0).
    fn memory(&self) -> (u64, u64) {
        (0, 0)
    }
    /// Where this device keeps tensors by default.
    fn buffer_type(&self) -> Arc<dyn BufferType>;
    /// An extra buffer type for weights in a layout of the device's own
    /// (ggml's "extra buffer types": repacked Q4_0 on the CPU). (optional)
    /// Default: none.
    fn extra_buffer_type(&self) -> Option<Arc<dyn BufferType>> {
        None
    }
    /// Whether the device can run `op`. The model code asks at load and
    /// refuses a model that needs an op the device lacks; it never guesses
    /// from the device's name.
    fn supports_op(&self, op: Op) -> bool;
    /// Binds a weight matrix for products (and row look-ups) on this device:
    /// read in place from the file, or copied into the extra buffer type's
    /// layout. An error names the tensor and its type when the device cannot
    /// multiply with it.
    fn bind_matrix(&self, source: WeightSource) -> Result<Matrix>;
    /// Binds a table read by rows (`get_rows`: token embeddings), kept as in
    /// the file; products with it work too (a tied output). An error names
    /// the tensor when its type cannot be read.
    fn bind_table(&self, source: WeightSource) -> Result<Matrix>;
    /// An execution stream on this device with `n_threads` threads.
    fn create_backend(&self, n_threads: usize) -> Result<Box<dyn Backend>>;
}

/// A kind of memory and how to allocate it.
pub trait BufferType: Send + Sync {
    fn name(&self) -> &str;
    /// Alignment of every allocation, in bytes.
    fn alignment(&self) -> usize;
    /// Whether the CPU can read the memory directly. (optional) Default: yes.
    fn is_host(&self) -> bool {
        true
    }
    /// A zeroed buffer of `size` bytes; an error when the memory is not there.
    fn alloc(&self, size: usize) -> Result<Box<dyn Buffer>>;
}

/// A block of device memory.
pub trait Buffer: Send + Sync {
    fn size(&self) -> usize;
    fn buffer_type_name(&self) -> &str;
    /// The contents, for host buffers.
    fn as_bytes(&self) -> &[u8];
    fn as_bytes_mut(&mut self) -> &mut [u8];
}

/// An execution stream on a device: every operation of a forward pass.
/// Shapes are checked by each op (an error names the mismatch); rows are
/// stored one after another (`n` rows of `width` values).
pub trait Backend: Send {
    /// "CPU (avx2)".
    fn name(&self) -> String;
    fn device_name(&self) -> &str;
    fn n_threads(&self) -> usize;
    /// The name of the kernel variant or implementation the backend runs.
    fn variant_name(&self) -> String;

    /// Sizes scratch space for micro-batches of up to `max_tokens` tokens
    /// attending to up to `max_cells` cached positions, so that forward
    /// passes allocate nothing (as ggml reserves a graph's memory once).
    /// (optional) Default: nothing to reserve.
    fn reserve(&mut self, _max_tokens: usize, _max_cells: usize) -> Result<()> {
        Ok(())
    }

    /// Runs `f` as one unit of work on the device: a whole forward pass goes
    /// through here once, so its many ops start where the device's threads
    /// are already awake. (optional) Default: runs `f` directly.
    fn run(&mut self, f: &mut (dyn FnMut(&mut dyn Backend) -> Result<()> + Send)) -> Result<()>;

    /// `out[i * rows + r] = W[r] · x[i]` for `n` activation rows of `cols` values.
    fn mul_mat(&mut self, w: &Matrix, x: &[f32], n: usize, out: &mut [f32]) -> Result<()>;
    /// `outs[j] = ws[j] · x` for weights of the same width (a layer's Q, K
    /// and V, or its gate and up), each as `mul_mat` gives it. A backend may
    /// prepare `x` once for all and run them in one parallel region.
    /// (optional) Default: `mul_mat` for each in turn.
    fn mul_mats(
        &mut self,
        ws: &[&Matrix],
        x: &[f32],
        n: usize,
        outs: &mut [&mut [f32]],
    ) -> Result<()> {
        same_count(ws, outs)?;
        for (w, out) in ws.iter().zip(outs.iter_mut()) {
            self.mul_mat(w, x, n, out)?;
        }
        Ok(())
    }
    /// `count` products of one row each: product `j` multiplies `weight(j)`
    /// by row `j` of `x` (`x_width` values apart; 0: every product takes
    /// the first row) into row `j` of `out` (`out_width` apart), each as
    /// `mul_mat` gives it. One token's experts: a backend may run them all
    /// in one parallel region, where `mul_mat` would take one per product.
    /// (optional) Default: `mul_mat` for each in turn.
    fn mul_mat_rows<'m>(
        &mut self,
        count: usize,
        weight: &(dyn Fn(usize) -> &'m Matrix + Sync),
        x: &[f32],
        x_width: usize,
        out: &mut [f32],
        out_width: usize,
    ) -> Result<()> {
        mul_mat_each(self, count, weight, x, x_width, out, out_width)
    }
    /// Rows `ids` of `table` as f32, one after another (embedding look-up).
    fn get_rows(&mut self, table: &Matrix, ids: &[u32], out: &mut [f32]) -> Result<()>;
    /// RMSNorm of each row of `x` (rows of `w.len()`), times `w`.
    fn rms_norm(&mut self, x: &[f32], w: &[f32], eps: f32, out: &mut [f32]) -> Result<()>;
    /// LayerNorm of each row of `x` in place, times `w` plus `b`.
    fn layer_norm(&mut self, x: &mut [f32], w: &[f32], b: &[f32], eps: f32) -> Result<()>;
    /// Rotates each row of `x` (`n_heads x head_dim` values) to its position.
    fn rope(&mut self, rope: &Rope, x: &mut [f32], pos: &[i32]) -> Result<()>;
    /// `x += y`, element by element.
    fn add(&mut self, x: &mut [f32], y: &[f32]) -> Result<()>;
    /// Adds `bias` to each row of `x` (rows of `bias.len()`).
    fn add_bias(&mut self, x: &mut [f32], bias: &[f32]) -> Result<()>;
    /// `gate = silu(gate) * up` (SwiGLU).
    fn silu_mul(&mut self, gate: &mut [f32], up: &[f32]) -> Result<()>;
    /// GELU (tanh approximation, ggml's f16 table) in place.
    fn gelu(&mut self, x: &mut [f32]) -> Result<()>;
    /// `gate = gelu(gate) * up` (GeGLU), GELU as `gelu` evaluates it.
    fn gelu_mul(&mut self, gate: &mut [f32], up: &[f32]) -> Result<()>;
    /// `x *= c`, element by element.
    fn scale(&mut self, x: &mut [f32], c: f32) -> Result<()>;
    /// tanh in place.
    fn tanh(&mut self, x: &mut [f32]) -> Result<()>;
    /// 1 / (1 + exp(-x)) in place.
    fn sigmoid(&mut self, x: &mut [f32]) -> Result<()>;
    /// Softmax of each row of `x` (rows of `width`) in place.
    fn soft_max(&mut self, x: &mut [f32], width: usize) -> Result<()>;
    /// One token of a causal depthwise convolution (LFM2's and Qwen3.5's
    /// short ones) over `n` channels: `kernel` holds `len` rows of `n` taps
    /// (tap-major, the oldest tap's row first: `tap_major` makes it from
    /// the file's rows of `len`), `state` the sequence's last `len - 1`
    /// inputs (`n` each, oldest first); `out` = the convolution of the
    /// state and `x` per channel, and the state then moves on by `x`.
    fn causal_conv(
        &mut self,
        kernel: &[f32],
        len: usize,
        state: &mut [f32],
        x: &[f32],
        out: &mut [f32],
    ) -> Result<()>;
    /// `x *= y`, element by element.
    fn mul(&mut self, x: &mut [f32], y: &[f32]) -> Result<()>;
    /// silu(x) = x / (1 + exp(-x)) in place, as `silu_mul` evaluates it.
    fn silu(&mut self, x: &mut [f32]) -> Result<()>;
    /// Gated DeltaNet over a run of one sequence's tokens (`DeltaNetArgs`),
    /// advancing `state` (`n_head_v` matrices of `dim x dim`); `out` takes
    /// `n_head_v x dim` values per token.
    fn gated_delta_net(
        &mut self,
        args: &DeltaNetArgs,
        state: &mut [f32],
        out: &mut [f32],
    ) -> Result<()>;
    /// Stores `src` (one row) as row `row` of a cache (converted to its type).
    fn set_row(&mut self, src: &[f32], dst: CacheRowsMut, row: usize) -> Result<()>;
    /// Reads row `row` of a cache as f32.
    fn get_row(&mut self, src: CacheRows, row: usize, out: &mut [f32]) -> Result<()>;
    /// `softmax(scale · q·Kᵀ + mask) · V` for every query token and head.
    fn attention(&mut self, args: &AttentionArgs, out: &mut [f32]) -> Result<()>;
}

/// An error unless a `mul_mats` call has one output per weight.
pub(crate) fn same_count(ws: &[&Matrix], outs: &[&mut [f32]]) -> Result<()> {
    if ws.len() == outs.len() {
        return Ok(());
    }
    Err(Error::InvalidArgument(format!(
        "{} products with {} outputs",
        ws.len(),
        outs.len()
    )))
}

/// Product `j`'s input and output rows in a `mul_mat_rows` call, or an
/// error naming the product that does not fit.
pub(crate) fn product_rows<'a, 'b>(
    w: &Matrix,
    j: usize,
    x: &'a [f32],
    x_width: usize,
    out: &'b mut [f32],
    out_width: usize,
) -> Result<(&'a [f32], &'b mut [f32])> {
    let (rows, cols) = (w.rows(), w.cols());
    let (x_at, out_at) = (j.saturating_mul(x_width), j.saturating_mul(out_width));
    let fits = (x_width == 0 || cols <= x_width) && rows <= out_width;
    let (x_len, out_len) = (x.len(), out.len());
    match (
        x.get(x_at..x_at.saturating_add(cols)),
        out.get_mut(out_at..out_at.saturating_add(rows)),
    ) {
        (Some(xj), Some(oj)) if fits => Ok((xj, oj)),
        _ => Err(Error::InvalidArgument(format!(
            "product {j} of '{}' ({rows}x{cols}) does not fit rows of {x_width} of {x_len} inputs and rows of {out_width} of {out_len} outputs",
            w.name()
        ))),
    }
}

/// `mul_mat_rows` as `mul_mat` for each product in turn (the trait's
/// default, and a backend's way when one region would not pay).
pub(crate) fn mul_mat_each<'m, B: Backend + ?Sized>(
    be: &mut B,
    count: usize,
    weight: &(dyn Fn(usize) -> &'m Matrix + Sync),
    x: &[f32],
    x_width: usize,
    out: &mut [f32],
    out_width: usize,
) -> Result<()> {
    for j in 0..count {
        let (xj, oj) = product_rows(weight(j), j, x, x_width, out, out_width)?;
        be.mul_mat(weight(j), xj, 1, oj)?;
    }
    Ok(())
}

/// A depthwise convolution's kernel as `causal_conv` takes it: the file's
/// `n` rows of `len` taps (one row per channel) as `len` rows of `n` (one
/// row per tap), so a step reads each tap's row along the channels.
pub fn tap_major(kernel: &[f32], n: usize, len: usize) -> Vec<f32> {
    debug_assert_eq!(kernel.len(), n * len);
    let mut taps = vec![0.0; kernel.len()];
    for (ch, row) in kernel.chunks_exact(len).enumerate() {
        for (k, &w) in row.iter().enumerate() {
            taps[k * n + ch] = w;
        }
    }
    taps
}

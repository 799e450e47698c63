//! Qwen3.5's gated DeltaNet block, linear attention in place of attention
//! in most layers. From the normed input, `attn_qkv` makes queries, keys and
//! values, which run through a causal depthwise convolution (`ssm_conv1d`,
//! over the sequence's recent tokens) and SiLU; queries and keys are then
//! L2-normalised per head. `ssm_alpha` and `ssm_beta` give each value head
//! a decay, exp(softplus(alpha + dt) · a) with `a` < 0, and a write
//! strength, sigmoid(beta). The recurrence (`Backend::gated_delta_net`)
//! keeps a `dim x dim` matrix per value head; its outputs are RMS-normed
//! per head (`ssm_norm`), gated by silu(`attn_gate`), and mapped back by
//! `ssm_out`.
//!
//! A sequence's recurrent state is the convolution's last `taps - 1`
//! inputs followed by the heads' matrices. The ops follow the reference's
//! graph (`delta-net-base.cpp`, `qwen35.cpp`) and its fused recurrence.

use std::sync::Arc;

use crate::backend::{tap_major, Backend, DeltaNetArgs, Device, Matrix};
use crate::error::{Error, Result};
use crate::gguf::GgufFile;
use crate::kv::RecurrentStates;
use crate::model::weights::{named_matrix, named_vector, shaped, tensor, vector};
use crate::model::MicroBatch;

/// The sizes of a model's DeltaNet layers (`{arch}.ssm.*`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct DeltaNetSpec {
    /// The convolution's taps (`ssm.conv_kernel`).
    pub taps: usize,
    /// Query and key heads (`ssm.group_count`).
    pub n_head_k: usize,
    /// Value heads (`ssm.time_step_rank`).
    pub n_head_v: usize,
    /// Values per head (`ssm.state_size`; `ssm.inner_size` over the value
    /// heads must agree).
    pub dim: usize,
}

impl DeltaNetSpec {
    /// Checks the sizes against each other: value heads in whole groups of
    /// the key heads, heads no larger than 1024 (the state is dim² each).
    pub fn checked(self, inner: usize) -> Result<DeltaNetSpec> {
        let DeltaNetSpec {
            taps,
            n_head_k,
            n_head_v,
            dim,
        } = self;
        super::short_conv::check_len(taps)?;
        if n_head_k == 0 || n_head_v % n_head_k != 0 || !(1..=1024).contains(&dim) {
            return Err(Error::InvalidArgument(format!(
                "gated DeltaNet of {n_head_v} value heads over {n_head_k} key heads of {dim}: \
                 the value heads must be whole groups of the key heads, and heads 1 to 1024 wide"
            )));
        }
        if Some(inner) != n_head_v.checked_mul(dim) {
            return Err(Error::InvalidArgument(format!(
                "an inner size of {inner} for {n_head_v} value heads of {dim}"
            )));
        }
        Ok(self)
    }

    fn key_width(&self) -> usize {
        self.n_head_k * self.dim
    }

    fn value_width(&self) -> usize {
        self.n_head_v * self.dim
    }

    /// Channels of the convolution: queries, keys and values.
    fn conv_width(&self) -> usize {
        2 * self.key_width() + self.value_width()
    }

    /// Values of the convolution's part of a state.
    fn conv_state(&self) -> usize {
        (self.taps - 1) * self.conv_width()
    }

    /// Values a layer keeps per sequence.
    pub fn state_width(&self) -> usize {
        self.conv_state() + self.n_head_v * self.dim * self.dim
    }
}

pub(super) struct DeltaNet {
    spec: DeltaNetSpec,
    qkv: Matrix,
    gate: Matrix,
    alpha: Matrix,
    beta: Matrix,
    /// `taps` rows of `conv_width` (`backend::tap_major`).
    kernel: Vec<f32>,
    dt_bias: Vec<f32>,
    /// Each value head's `a` (the file stores -exp(A_log)).
    a: Vec<f32>,
    norm: Vec<f32>,
    out: Matrix,
    /// This layer's number among the recurrent layers.
    state: usize,
}

/// softplus as the reference's CPU op evaluates it.
fn softplus(x: f32) -> f32 {
    if x > 20.0 {
        x
    } else {
        (1.0 + x.exp()).ln()
    }
}

impl DeltaNet {
    /// Layer `i`'s tensors, recurrent layer `state`.
    pub(super) fn load(
        device: &dyn Device,
        file: &Arc<GgufFile>,
        i: usize,
        n_embd: usize,
        spec: DeltaNetSpec,
        state: usize,
    ) -> Result<DeltaNet> {
        let w = |n: &str| format!("blk.{i}.{n}.weight");
        let bind =
            |name: &str, rows: usize, cols: usize| named_matrix(device, file, name, rows, cols);
        let vec_of = |name: &str, len: usize| named_vector(file, name, len);
        let (d, hv) = (n_embd, spec.n_head_v);
        let conv = shaped(
            tensor(file, &w("ssm_conv1d"))?,
            spec.conv_width(),
            spec.taps,
        )?;
        Ok(DeltaNet {
            spec,
            qkv: bind(&w("attn_qkv"), spec.conv_width(), d)?,
            gate: bind(&w("attn_gate"), spec.value_width(), d)?,
            alpha: bind(&w("ssm_alpha"), hv, d)?,
            beta: bind(&w("ssm_beta"), hv, d)?,
            kernel: tap_major(
                &vector(file, &conv, spec.conv_width() * spec.taps)?,
                spec.conv_width(),
                spec.taps,
            ),
            dt_bias: vec_of(&format!("blk.{i}.ssm_dt.bias"), hv)?,
            a: vec_of(&format!("blk.{i}.ssm_a"), hv)?,
            norm: vec_of(&w("ssm_norm"), spec.dim)?,
            out: bind(&w("ssm_out"), d, spec.value_width())?,
            state,
        })
    }

    pub(super) fn spec(&self) -> &DeltaNetSpec {
        &self.spec
    }

    pub(super) fn matrices(&self) -> [&Matrix; 5] {
        [&self.qkv, &self.gate, &self.alpha, &self.beta, &self.out]
    }

    /// `out` (n x n_embd) = the block's output for the normed rows `xn`;
    /// each sequence's tokens advance its state, in order.
    #[allow(clippy::too_many_arguments)]
    pub(super) fn forward(
        &self,
        be: &mut dyn Backend,
        xn: &[f32],
        ub: &MicroBatch,
        states: &mut RecurrentStates,
        eps: f32,
        s: &mut Scratch,
        out: &mut [f32],
    ) -> Result<()> {
        let sp = &self.spec;
        let n = ub.tokens.len();
        if n > s.max_tokens {
            return Err(Error::InvalidArgument(format!(
                "a micro-batch of {n} tokens for DeltaNet scratch of {}",
                s.max_tokens
            )));
        }
        let (cw, vw, kw, hv, dim) = (
            sp.conv_width(),
            sp.value_width(),
            sp.key_width(),
            sp.n_head_v,
            sp.dim,
        );
        let mixed = &mut s.mixed[..n * cw];
        let conv = &mut s.conv[..n * cw];
        let gate = &mut s.gate[..n * vw];
        let g = &mut s.g[..n * hv];
        let beta = &mut s.beta[..n * hv];
        let core = &mut s.core[..n * vw];
        let normed = &mut s.normed[..n * vw];
        be.mul_mats(
            &[&self.qkv, &self.gate, &self.beta, &self.alpha],
            xn,
            n,
            &mut [&mut *mixed, &mut *gate, &mut *beta, &mut *g],
        )?;
        be.sigmoid(beta)?;
        be.add_bias(g, &self.dt_bias)?;
        g.iter_mut().for_each(|v| *v = softplus(*v));
        for row in g.chunks_exact_mut(hv) {
            be.mul(row, &self.a)?;
        }
        // The convolution, token by token against each one's sequence.
        let conv_state = sp.conv_state();
        for (t, (x, y)) in mixed
            .chunks_exact(cw)
            .zip(conv.chunks_exact_mut(cw))
            .enumerate()
        {
            let state = &mut states.state_mut(self.state, ub.seq[t])?[..conv_state];
            be.causal_conv(&self.kernel, sp.taps, state, x, y)?;
        }
        be.silu(conv)?;
        // L2 norms of the query and key heads: an RMSNorm of eps / dim
        // times 1/sqrt(dim), as the reference builds it.
        let ones = &s.ones[..dim];
        for (row, tmp) in conv.chunks_exact_mut(cw).zip(mixed.chunks_exact_mut(cw)) {
            let qk = &mut row[..2 * kw];
            be.rms_norm(qk, ones, eps / dim as f32, &mut tmp[..2 * kw])?;
            qk.copy_from_slice(&tmp[..2 * kw]);
            be.scale(qk, 1.0 / (dim as f32).sqrt())?;
        }
        // The recurrence over each run of one sequence's tokens.
        let mut start = 0;
        while start < n {
            let seq = ub.seq[start];
            let end = (start..n).find(|&t| ub.seq[t] != seq).unwrap_or(n);
            let state = &mut states.state_mut(self.state, seq)?[conv_state..];
            let args = DeltaNetArgs {
                qkv: &conv[start * cw..end * cw],
                g: &g[start * hv..end * hv],
                beta: &beta[start * hv..end * hv],
                n_head_k: sp.n_head_k,
                n_head_v: hv,
                dim,
            };
            be.gated_delta_net(&args, state, &mut core[start * vw..end * vw])?;
            start = end;
        }
        // Per-head RMSNorm, gated by silu(gate).
        be.rms_norm(core, &self.norm, eps, normed)?;
        be.silu_mul(gate, normed)?;
        be.mul_mat(&self.out, gate, n, out)
    }
}

/// Scratch of a context's DeltaNet layers.
pub(super) struct Scratch {
    max_tokens: usize,
    /// The product's queries, keys and values; then the L2 norms' scratch.
    mixed: Vec<f32>,
    /// The convolution's output.
    conv: Vec<f32>,
    gate: Vec<f32>,
    g: Vec<f32>,
    beta: Vec<f32>,
    /// The recurrence's output, and its per-head norm.
    core: Vec<f32>,
    normed: Vec<f32>,
    ones: Vec<f32>,
}

impl Scratch {
    pub(super) fn new(spec: &DeltaNetSpec, max_tokens: usize) -> Result<Scratch> {
        let buf = |width: usize| crate::model::scratch(max_tokens, width);
        Ok(Scratch {
            max_tokens,
            mixed: buf(spec.conv_width())?,
            conv: buf(spec.conv_width())?,
            gate: buf(spec.value_width())?,
            g: buf(spec.n_head_v)?,
            beta: buf(spec.n_head_v)?,
            core: buf(spec.value_width())?,
            normed: buf(spec.value_width())?,
            ones: vec![1.0; spec.dim],
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    #[cfg(target_family = "wasm")]
    use wasm_bindgen_test::wasm_bindgen_test as test;

    #[test]
    fn sizes_are_checked_against_each_other() {
        let spec = DeltaNetSpec {
            taps: 4,
            n_head_k: 2,
            n_head_v: 4,
            dim: 16,
        };
        assert_eq!(spec.checked(64).unwrap(), spec);
        // State: 3 taps of 2·32 + 64 channels, then 4 heads of 16 x 16.
        assert_eq!(spec.state_width(), 3 * 128 + 4 * 256);
        assert!(spec.checked(63).is_err(), "inner size disagrees");
        let odd = DeltaNetSpec {
            n_head_v: 3,
            ..spec
        };
        assert!(odd.checked(48).is_err(), "3 value heads over 2 key heads");
        let wide = DeltaNetSpec { dim: 2048, ..spec };
        assert!(wide.checked(4 * 2048).is_err());
        let one_tap = DeltaNetSpec { taps: 1, ..spec };
        assert!(one_tap.checked(64).is_err());
    }

    #[test]
    fn softplus_is_the_reference_formula() {
        assert_eq!(softplus(0.0), 2f32.ln());
        assert_eq!(softplus(25.0), 25.0);
        // 1 + exp(-30) rounds to 1 in f32, as in the reference.
        assert_eq!(softplus(-30.0), 0.0);
        assert!((softplus(-5.0) - (-5f32).exp().ln_1p()).abs() < 1e-6);
    }
}

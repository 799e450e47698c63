//! LFM2's short-convolution block, in place of attention in some layers:
//! `in_proj` makes B, C and X from the normed input, B·X runs through a
//! causal depthwise convolution of `len` taps per channel over the
//! sequence's recent tokens, C gates the result, and `out_proj` maps it
//! back. What the convolution needs of earlier tokens (the last `len - 1`
//! values of B·X) is the sequence's recurrent state, so a sequence's
//! tokens are taken in order, each against its own sequence's state.

use crate::backend::{tap_major, Backend, Device, Matrix};
use crate::error::{Error, Result};
use crate::gguf::GgufFile;
use crate::kv::RecurrentStates;
use crate::model::weights::{named_matrix, shaped, tensor, vector};
use crate::model::MicroBatch;
use std::sync::Arc;

/// The most taps a kernel may have (LFM2's is 3).
const MAX_TAPS: usize = 64;

pub(super) struct ShortConv {
    in_proj: Matrix,
    /// `len` rows of `n_embd` taps (`backend::tap_major`).
    kernel: Vec<f32>,
    len: usize,
    out_proj: Matrix,
    /// This layer's number among the recurrent layers.
    state: usize,
}

/// Checks a kernel length from the file.
pub(crate) fn check_len(len: usize) -> Result<usize> {
    if (2..=MAX_TAPS).contains(&len) {
        Ok(len)
    } else {
        Err(Error::InvalidArgument(format!(
            "a short convolution of {len} taps: 2 to {MAX_TAPS} are supported"
        )))
    }
}

impl ShortConv {
    /// Layer `i`'s `shortconv.{in_proj,conv,out_proj}`, recurrent layer
    /// `state`.
    pub(super) fn load(
        device: &dyn Device,
        file: &Arc<GgufFile>,
        i: usize,
        n_embd: usize,
        len: usize,
        state: usize,
    ) -> Result<ShortConv> {
        let w = |n: &str| format!("blk.{i}.shortconv.{n}.weight");
        let d = n_embd;
        let bind =
            |name: &str, rows: usize, cols: usize| named_matrix(device, file, name, rows, cols);
        let kernel = shaped(tensor(file, &w("conv"))?, d, len)?;
        Ok(ShortConv {
            in_proj: bind(&w("in_proj"), 3 * d, d)?,
            kernel: tap_major(&vector(file, &kernel, d * len)?, d, len),
            len,
            out_proj: bind(&w("out_proj"), d, d)?,
            state,
        })
    }

    /// Values the layer keeps per sequence: the last `len - 1` of B·X.
    pub(super) fn state_width(&self) -> usize {
        (self.len - 1) * self.out_proj.rows()
    }

    pub(super) fn matrices(&self) -> [&Matrix; 2] {
        [&self.in_proj, &self.out_proj]
    }

    /// `out` (n x n_embd) = the block's output for the normed rows `xn`,
    /// `bcx` (n x 3·n_embd) as scratch; each token advances its sequence's
    /// state.
    #[allow(clippy::too_many_arguments)]
    pub(super) fn forward(
        &self,
        be: &mut dyn Backend,
        xn: &[f32],
        ub: &MicroBatch,
        states: &mut RecurrentStates,
        bcx: &mut [f32],
        y: &mut [f32],
        out: &mut [f32],
    ) -> Result<()> {
        let n = ub.tokens.len();
        let d = out.len() / n.max(1);
        be.mul_mat(&self.in_proj, xn, n, bcx)?;
        for (t, (row, y_row)) in bcx
            .chunks_exact_mut(3 * d)
            .zip(y.chunks_exact_mut(d))
            .enumerate()
        {
            let (b, rest) = row.split_at_mut(d);
            let (c, x) = rest.split_at(d);
            be.mul(b, x)?;
            let state = states.state_mut(self.state, ub.seq[t])?;
            be.causal_conv(&self.kernel, self.len, state, b, y_row)?;
            be.mul(y_row, c)?;
        }
        be.mul_mat(&self.out_proj, y, n, out)
    }
}

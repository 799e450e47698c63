//! A mixture-of-experts feed-forward, as llama.cpp's `build_moe_ffn` runs
//! it with softmax gating (Qwen3-MoE, Granite MoE) or sigmoid gating with a
//! selection bias (LFM2-MoE): a router product scores every expert for each
//! token, the softmax (or each sigmoid) of the scores, plus the bias where
//! there is one, picks the `n_used` best, each picked expert is a SwiGLU
//! feed-forward of its own, and the token's output is the picked experts'
//! outputs times their probabilities (unbiased; renormalised to sum to one
//! where the family says), added in the router's order. Some families add a shared
//! expert, a plain SwiGLU feed-forward every token takes, to the output;
//! Qwen3.5-MoE gates it per token by the sigmoid of one more product
//! (`ffn_gate_inp_shexp`).
//!
//! The file stores each of gate, up and down as one 3-D tensor, the experts
//! one after another; each expert is bound as a matrix of its own, so only
//! the picked experts' rows are read, and repacking works per expert. The
//! tokens of a micro-batch are grouped by expert: each expert multiplies all
//! of its tokens' rows in one product.

use super::Keys;
use crate::backend::{Backend, Device, Matrix};
use crate::error::{Error, Result};
use crate::gguf::GgufFile;
use crate::model::weights::{matrix, named_matrix, named_vector, shaped, tensor, Tensor};
use std::sync::Arc;

/// The most experts a layer may have (llama.cpp's `LLAMA_MAX_EXPERTS`).
const MAX_EXPERTS: usize = 512;

/// What turns the router's scores into the experts' probabilities.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Gating {
    /// Softmax over the experts.
    Softmax,
    /// Each score's sigmoid on its own.
    Sigmoid,
}

impl Gating {
    /// `expert_gating_func` as llama.cpp numbers it (1 softmax, 2 sigmoid).
    pub(crate) fn from_key(v: usize) -> Result<Gating> {
        match v {
            1 => Ok(Gating::Softmax),
            2 => Ok(Gating::Sigmoid),
            other => Err(Error::InvalidArgument(format!(
                "expert gating function {other} is not supported (1 softmax and 2 sigmoid are)"
            ))),
        }
    }
}

/// The experts' sizes and how their weights are made, from a family's keys.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct MoeSpec {
    pub n_expert: usize,
    pub n_used: usize,
    /// Each expert's feed-forward width.
    pub n_ff: usize,
    /// The picked probabilities divided by their sum.
    pub norm_weights: bool,
    /// Multiplies the weights (`expert_weights_scale`, in the families that
    /// read it).
    pub weights_scale: Option<f32>,
    /// The shared expert's feed-forward width (`ffn_{gate,up,down}_shexp`),
    /// where the family has one.
    pub shared_ff: Option<usize>,
    /// The shared expert's output times sigmoid(`ffn_gate_inp_shexp` · x).
    pub shared_gate: bool,
    pub gating: Gating,
    /// `exp_probs_b.bias`: added to the probabilities to pick experts (not
    /// to weight them).
    pub selection_bias: bool,
}

impl MoeSpec {
    /// `expert_count`, `expert_used_count` and the experts' width:
    /// `expert_feed_forward_length` or, without it, `default_ff(n_used)`.
    pub(crate) fn read(
        keys: &Keys,
        norm_weights: bool,
        default_ff: impl Fn(usize) -> usize,
    ) -> Result<MoeSpec> {
        let n_expert = keys.usize("expert_count")?;
        let n_used = keys.usize("expert_used_count")?;
        if n_expert == 0 || n_expert > MAX_EXPERTS || n_used == 0 || n_used > n_expert {
            return Err(Error::InvalidArgument(format!(
                "{n_used} experts used of {n_expert}: a layer has 1 to {MAX_EXPERTS} experts and uses 1 to all of them"
            )));
        }
        let n_ff = match keys.opt_usize("expert_feed_forward_length")? {
            Some(w) => w,
            None => default_ff(n_used),
        };
        Ok(MoeSpec {
            n_expert,
            n_used,
            n_ff,
            norm_weights,
            weights_scale: None,
            shared_ff: None,
            shared_gate: false,
            gating: Gating::Softmax,
            selection_bias: false,
        })
    }
}

/// One SwiGLU feed-forward.
struct Expert {
    gate: Matrix,
    up: Matrix,
    down: Matrix,
}

impl Expert {
    /// `down` (m x n_embd) from `rows` (m x n_embd), with `gate` and `up`
    /// (m x n_ff) as scratch.
    fn forward(
        &self,
        be: &mut dyn Backend,
        rows: &[f32],
        m: usize,
        gate: &mut [f32],
        up: &mut [f32],
        down: &mut [f32],
    ) -> Result<()> {
        be.mul_mats(
            &[&self.up, &self.gate],
            rows,
            m,
            &mut [&mut *up, &mut *gate],
        )?;
        be.silu_mul(gate, up)?;
        be.mul_mat(&self.down, gate, m, down)
    }
}

/// One layer's experts and their router.
pub(super) struct Experts {
    spec: MoeSpec,
    router: Matrix,
    selection_bias: Option<Vec<f32>>,
    experts: Vec<Expert>,
    shared: Option<Expert>,
    /// One row: the shared expert's gate.
    shared_gate: Option<Matrix>,
}

/// A 3-D tensor of `n` matrices of `rows` x `cols`, cut into them.
fn stacked(t: Tensor, n: usize, rows: usize, cols: usize) -> Result<Vec<Tensor>> {
    let t = shaped(t, n * rows, cols)?;
    let per = t.range.len() / n;
    Ok((0..n)
        .map(|e| Tensor {
            name: format!("{}[{e}]", t.name),
            dtype: t.dtype,
            rows,
            cols,
            part: t.part,
            range: t.range.start + e * per..t.range.start + (e + 1) * per,
        })
        .collect())
}

impl Experts {
    /// Layer `i`'s `ffn_gate_inp` (the router) and `ffn_{gate,up,down}_exps`.
    pub(super) fn load(
        device: &dyn Device,
        file: &Arc<GgufFile>,
        i: usize,
        n_embd: usize,
        spec: MoeSpec,
    ) -> Result<Experts> {
        let w = |n: &str| format!("blk.{i}.{n}.weight");
        let (ne, d, ff) = (spec.n_expert, n_embd, spec.n_ff);
        for width in std::iter::once(ff).chain(spec.shared_ff) {
            if width == 0 || width > 1 << 24 {
                return Err(Error::InvalidArgument(format!(
                    "an expert feed-forward of {width} is out of range"
                )));
            }
        }
        let router = matrix(
            device,
            file,
            &shaped(tensor(file, &w("ffn_gate_inp"))?, ne, d)?,
        )?;
        let gate = stacked(tensor(file, &w("ffn_gate_exps"))?, ne, ff, d)?;
        let up = stacked(tensor(file, &w("ffn_up_exps"))?, ne, ff, d)?;
        let down = stacked(tensor(file, &w("ffn_down_exps"))?, ne, d, ff)?;
        let experts = gate
            .iter()
            .zip(&up)
            .zip(&down)
            .map(|((g, u), dn)| {
                Ok(Expert {
                    gate: matrix(device, file, g)?,
                    up: matrix(device, file, u)?,
                    down: matrix(device, file, dn)?,
                })
            })
            .collect::<Result<Vec<_>>>()?;
        let shared = match spec.shared_ff {
            Some(sff) => {
                let bind = |name: &str, rows: usize, cols: usize| {
                    named_matrix(device, file, &w(name), rows, cols)
                };
                Some(Expert {
                    gate: bind("ffn_gate_shexp", sff, d)?,
                    up: bind("ffn_up_shexp", sff, d)?,
                    down: bind("ffn_down_shexp", d, sff)?,
                })
            }
            None => None,
        };
        let shared_gate = match (spec.shared_gate, spec.shared_ff) {
            (true, Some(_)) => Some(matrix(
                device,
                file,
                &shaped(tensor(file, &w("ffn_gate_inp_shexp"))?, 1, d)?,
            )?),
            (true, None) => {
                return Err(Error::InvalidArgument(
                    "a gate for a shared expert the layer does not have".into(),
                ))
            }
            (false, _) => None,
        };
        let selection_bias = if spec.selection_bias {
            let name = format!("blk.{i}.exp_probs_b.bias");
            Some(named_vector(file, &name, ne)?)
        } else {
            None
        };
        Ok(Experts {
            spec,
            router,
            selection_bias,
            experts,
            shared,
            shared_gate,
        })
    }

    pub(super) fn spec(&self) -> &MoeSpec {
        &self.spec
    }

    pub(super) fn matrices(&self) -> impl Iterator<Item = &Matrix> {
        std::iter::once(&self.router)
            .chain(
                self.experts
                    .iter()
                    .chain(&self.shared)
                    .flat_map(|e| [&e.gate, &e.up, &e.down]),
            )
            .chain(&self.shared_gate)
    }

    /// `out` (n x n_embd) = the mixture's output for each row of `x`.
    pub(super) fn forward(
        &self,
        be: &mut dyn Backend,
        x: &[f32],
        n: usize,
        out: &mut [f32],
        s: &mut Scratch,
    ) -> Result<()> {
        let MoeSpec {
            n_expert: ne,
            n_used: k,
            n_ff: ff,
            ..
        } = self.spec;
        let d = x.len() / n.max(1);
        if n > s.max_tokens || x.len() != n * d || out.len() != n * d || d != s.n_embd {
            return Err(Error::InvalidArgument(format!(
                "experts: {n} rows of {} values for scratch of {} rows of {}",
                x.len(),
                s.max_tokens,
                s.n_embd
            )));
        }
        let probs = &mut s.probs[..n * ne];
        be.mul_mat(&self.router, x, n, probs)?;
        match self.spec.gating {
            Gating::Softmax => be.soft_max(probs, ne)?,
            Gating::Sigmoid => be.sigmoid(probs)?,
        }
        for list in &mut s.tokens {
            list.clear();
        }
        for (t, (p, picks)) in probs
            .chunks_exact(ne)
            .zip(s.picks.chunks_exact_mut(k))
            .enumerate()
        {
            self.pick(p, picks);
            for (rank, &(e, _)) in picks.iter().enumerate() {
                s.tokens[e as usize].push((t as u32, rank as u32));
            }
        }
        if n == 1 {
            self.one_token(be, x, s)?;
        } else {
            for (expert, list) in self.experts.iter().zip(&s.tokens) {
                let m = list.len();
                if m == 0 {
                    continue;
                }
                let rows = &mut s.rows[..m * d];
                for (row, &(t, _)) in rows.chunks_exact_mut(d).zip(list) {
                    let t = t as usize;
                    row.copy_from_slice(&x[t * d..(t + 1) * d]);
                }
                let down = &mut s.down[..m * d];
                let (gate, up) = (&mut s.gate[..m * ff], &mut s.up[..m * ff]);
                expert.forward(be, rows, m, gate, up, down)?;
                for (row, &(t, rank)) in down.chunks_exact_mut(d).zip(list) {
                    let slot = t as usize * k + rank as usize;
                    be.scale(row, s.picks[slot].1)?;
                    s.ranked[slot * d..(slot + 1) * d].copy_from_slice(row);
                }
            }
        }
        // Each token's experts added in the router's order, as the reference.
        for (o, ranked) in out.chunks_exact_mut(d).zip(s.ranked.chunks_exact(k * d)) {
            o.copy_from_slice(&ranked[..d]);
            for r in ranked[d..].chunks_exact(d) {
                be.add(o, r)?;
            }
        }
        if let (Some(shared), Some(sff)) = (&self.shared, self.spec.shared_ff) {
            let down = &mut s.down[..n * d];
            let (gate, up) = (&mut s.gate[..n * sff], &mut s.up[..n * sff]);
            shared.forward(be, x, n, gate, up, down)?;
            if let Some(g) = &self.shared_gate {
                let gates = &mut s.shared_gates[..n];
                be.mul_mat(g, x, n, gates)?;
                be.sigmoid(gates)?;
                for (row, &c) in down.chunks_exact_mut(d).zip(gates.iter()) {
                    be.scale(row, c)?;
                }
            }
            be.add(out, down)?;
        }
        Ok(())
    }

    /// One token's picked experts (`s.picks`) on `x`, weighted, into
    /// `s.ranked` by rank: the same products as one expert at a time, in
    /// two calls instead of three per expert (every gate and up, then every
    /// down), which a backend may run each in one parallel region.
    fn one_token(&self, be: &mut dyn Backend, x: &[f32], s: &mut Scratch) -> Result<()> {
        let (k, ff, d) = (self.spec.n_used, self.spec.n_ff, x.len());
        let Scratch {
            picks,
            gate_up,
            ranked,
            ..
        } = s;
        let picks = &picks[..k];
        let expert = |r: usize| &self.experts[picks[r].0 as usize];
        // Products 0..k are the gates, k..2k the ups, all of the one row.
        let gate_or_up = |j: usize| {
            if j < k {
                &expert(j).gate
            } else {
                &expert(j - k).up
            }
        };
        let both = &mut gate_up[..2 * k * ff];
        be.mul_mat_rows(2 * k, &gate_or_up, x, 0, both, ff)?;
        let (gate, up) = both.split_at_mut(k * ff);
        be.silu_mul(gate, up)?;
        let ranked = &mut ranked[..k * d];
        be.mul_mat_rows(k, &|r| &expert(r).down, gate, ff, ranked, d)?;
        for (row, &(_, w)) in ranked.chunks_exact_mut(d).zip(picks) {
            be.scale(row, w)?;
        }
        Ok(())
    }

    /// The `picks.len()` best experts of `p` (plus the selection bias, if
    /// any), best first (ties: the lower index), each with its unbiased
    /// probability as its weight.
    fn pick(&self, p: &[f32], picks: &mut [(u32, f32)]) {
        let score = |e: usize| match &self.selection_bias {
            Some(b) => p[e] + b[e],
            None => p[e],
        };
        for r in 0..picks.len() {
            let mut best: Option<usize> = None;
            for e in 0..p.len() {
                let taken = picks[..r].iter().any(|&(c, _)| c as usize == e);
                if !taken && best.is_none_or(|b| score(e) > score(b)) {
                    best = Some(e);
                }
            }
            let e = best.expect("fewer experts used than there are");
            picks[r] = (e as u32, p[e]);
        }
        if self.spec.norm_weights {
            // f64 sum as ggml's sum_rows; floored at f16's smallest normal.
            let sum = picks.iter().map(|&(_, w)| w as f64).sum::<f64>() as f32;
            let sum = sum.max(6.103_515_6e-5);
            for (_, w) in picks.iter_mut() {
                *w /= sum;
            }
        }
        if let Some(c) = self.spec.weights_scale {
            for (_, w) in picks.iter_mut() {
                *w *= c;
            }
        }
    }
}

/// The mixture's scratch for micro-batches of up to `max_tokens` tokens.
pub(super) struct Scratch {
    max_tokens: usize,
    n_embd: usize,
    /// The router's probabilities, a row of `n_expert` per token.
    probs: Vec<f32>,
    /// Each token's picked experts and weights, in the router's order.
    picks: Vec<(u32, f32)>,
    /// For each expert, its (token, rank) pairs in this micro-batch.
    tokens: Vec<Vec<(u32, u32)>>,
    /// One expert's rows: its tokens' inputs, gate, up and down.
    rows: Vec<f32>,
    gate: Vec<f32>,
    up: Vec<f32>,
    down: Vec<f32>,
    /// Each token's weighted expert outputs, by rank.
    ranked: Vec<f32>,
    /// One token's picked experts' gates, then their ups (`one_token`).
    gate_up: Vec<f32>,
    /// Each token's shared-expert gate.
    shared_gates: Vec<f32>,
}

impl Scratch {
    pub(super) fn new(spec: &MoeSpec, max_tokens: usize, n_embd: usize) -> Result<Scratch> {
        let buf = |width: usize| crate::model::scratch(max_tokens, width);
        let mut tokens = Vec::new();
        tokens
            .try_reserve_exact(spec.n_expert)
            .map_err(|_| Error::InvalidArgument("too many experts".into()))?;
        for _ in 0..spec.n_expert {
            tokens.push(Vec::with_capacity(max_tokens));
        }
        Ok(Scratch {
            max_tokens,
            n_embd,
            probs: buf(spec.n_expert)?,
            picks: vec![(0, 0.0); max_tokens * spec.n_used],
            tokens,
            rows: buf(n_embd)?,
            gate: buf(spec.n_ff.max(spec.shared_ff.unwrap_or(0)))?,
            up: buf(spec.n_ff.max(spec.shared_ff.unwrap_or(0)))?,
            down: buf(n_embd)?,
            ranked: buf(spec.n_used.saturating_mul(n_embd))?,
            gate_up: crate::model::scratch(2 * spec.n_used, spec.n_ff)?,
            shared_gates: buf(1)?,
        })
    }
}

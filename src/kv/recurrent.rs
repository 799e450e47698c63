//! Recurrent states: what a recurrent layer (LFM2's short convolution) keeps
//! of a sequence instead of per-position keys and values: a fixed number of
//! values per layer and sequence, updated token by token. A state remembers
//! no single position, so a sequence can be cleared, copied whole, extended
//! by its next positions and moved, but not cut in its middle or at its end:
//! those edits are errors that say so, and change nothing.
//!
//! A decode checks its tokens first (each in one sequence, each sequence's
//! positions following on). A batch of several micro-batches keeps a copy of
//! the states it will change and puts it back if a later micro-batch fails
//! or is cancelled, so such a decode leaves the states as they were, as it
//! leaves the KV cells. A batch of one micro-batch keeps no copy (it would
//! be a copy of every state, ~5% of a generated token for Qwen3.5 0.8B):
//! nothing can cancel it once it runs, and if its forward pass fails after
//! all, its sequences are lost, and `rollback` says which, to be cleared.

use super::{in_range, SeqId, MAX_SEQUENCES};
use crate::error::{Error, Result};

/// What an architecture's recurrent layers keep per sequence.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RecurrentLayout {
    /// Recurrent layers (each numbered 0.. among them).
    pub n_layer: usize,
    /// Values each layer keeps per sequence.
    pub width: usize,
}

/// One sequence's states: every recurrent layer's values, and the first and
/// last positions they have taken in (`None`: the sequence is empty).
#[derive(Clone, Default)]
struct SeqState {
    span: Option<(i32, i32)>,
    /// `n_layer * width` values, allocated when the sequence first decodes.
    values: Vec<f32>,
}

pub struct RecurrentStates {
    layout: RecurrentLayout,
    seqs: Vec<SeqState>,
    /// The sequences a decode in progress changes, and (per sequence, their
    /// buffers reused from decode to decode) their states before it: the
    /// spans always, the values when `backed_up`.
    touched: Vec<usize>,
    saved: Vec<SeqState>,
    backed_up: bool,
    /// Where each sequence's next position must be during a decode's check.
    next: Vec<Option<i32>>,
}

/// Whether `[p0, p1)` (negative bounds open) covers the whole of `a..=b`.
fn covers(p0: i32, p1: i32, (a, b): (i32, i32)) -> bool {
    in_range(a, p0, p1) && in_range(b, p0, p1)
}

/// Whether `[p0, p1)` misses every position of `a..=b`.
fn misses(p0: i32, p1: i32, (a, b): (i32, i32)) -> bool {
    (p0 >= 0 && p0 > b) || (p1 >= 0 && p1 <= a)
}

fn cut_error(seq: SeqId, p0: i32, p1: i32, (a, b): (i32, i32)) -> Error {
    let bound = |p: i32| {
        if p < 0 {
            "open".to_string()
        } else {
            p.to_string()
        }
    };
    Error::InvalidArgument(format!(
        "sequence {seq} holds positions {a}..={b} in recurrent states, which keep no single position: \
         positions [{}, {}) cannot be taken out or moved apart (only the whole sequence can)",
        bound(p0),
        bound(p1)
    ))
}

impl RecurrentStates {
    /// States for `layout` (n_layer 0: a model without recurrent layers;
    /// every edit is then allowed and does nothing). One sequence's states
    /// must fit in memory; each sequence allocates its own on first use.
    pub fn new(layout: RecurrentLayout) -> Result<RecurrentStates> {
        let per_seq = (layout.n_layer as u64)
            .checked_mul(layout.width as u64)
            .and_then(|v| v.checked_mul(4))
            .unwrap_or(u64::MAX);
        crate::memory::check_fits(
            "one sequence's recurrent states",
            per_seq,
            "the model's recurrent layers set it",
        )?;
        Ok(RecurrentStates {
            layout,
            seqs: vec![SeqState::default(); MAX_SEQUENCES],
            touched: Vec::new(),
            saved: vec![SeqState::default(); MAX_SEQUENCES],
            backed_up: false,
            next: vec![None; MAX_SEQUENCES],
        })
    }

    /// Whether the model has recurrent layers at all.
    pub fn is_used(&self) -> bool {
        self.layout.n_layer > 0
    }

    pub fn layout(&self) -> RecurrentLayout {
        self.layout
    }

    /// The first and last positions `seq`'s states have taken in.
    pub fn span(&self, seq: SeqId) -> Option<(i32, i32)> {
        self.seqs.get(seq as usize).and_then(|s| s.span)
    }

    pub fn clear(&mut self) {
        for s in &mut self.seqs {
            s.span = None;
        }
    }

    /// The sequences `seq` names (`seq < 0`: all) with their spans.
    fn targets(&self, seq: i32) -> impl Iterator<Item = (SeqId, (i32, i32))> + '_ {
        self.seqs
            .iter()
            .enumerate()
            .filter(move |(i, _)| seq < 0 || *i == seq as usize)
            .filter_map(|(i, s)| s.span.map(|span| (i as SeqId, span)))
    }

    /// Checks that removing `[p0, p1)` from `seq` (`seq < 0`: from all)
    /// takes each sequence whole or not at all.
    pub fn check_rm(&self, seq: i32, p0: i32, p1: i32) -> Result<()> {
        if !self.is_used() {
            return Ok(());
        }
        match self
            .targets(seq)
            .find(|&(_, span)| !covers(p0, p1, span) && !misses(p0, p1, span))
        {
            Some((s, span)) => Err(cut_error(s, p0, p1, span)),
            None => Ok(()),
        }
    }

    /// Removes the sequences `[p0, p1)` covers (after `check_rm`).
    pub fn rm(&mut self, seq: i32, p0: i32, p1: i32) {
        for s in self
            .seqs
            .iter_mut()
            .enumerate()
            .filter(|(i, _)| seq < 0 || *i == seq as usize)
            .map(|(_, s)| s)
        {
            if s.span.is_some_and(|span| covers(p0, p1, span)) {
                s.span = None;
            }
        }
    }

    /// Checks that copying `src`'s `[p0, p1)` copies the whole of it.
    pub fn check_cp(&self, src: SeqId, p0: i32, p1: i32) -> Result<()> {
        match self.span(src) {
            Some(span) if self.is_used() && !covers(p0, p1, span) && !misses(p0, p1, span) => {
                Err(cut_error(src, p0, p1, span))
            }
            _ => Ok(()),
        }
    }

    /// `dst` takes `src`'s states (after `check_cp`; a range that misses
    /// `src` copies nothing).
    pub fn cp(&mut self, src: SeqId, dst: SeqId, p0: i32, p1: i32) {
        let (s, d) = (src as usize, dst as usize);
        if s == d || s >= self.seqs.len() || d >= self.seqs.len() {
            return;
        }
        let Some(span) = self.seqs[s].span.filter(|&span| covers(p0, p1, span)) else {
            return;
        };
        let mut values = std::mem::take(&mut self.seqs[d].values);
        values.clone_from(&self.seqs[s].values);
        self.seqs[d] = SeqState {
            span: Some(span),
            values,
        };
    }

    /// Forgets every sequence but `seq`.
    pub fn keep(&mut self, seq: SeqId) {
        for (i, s) in self.seqs.iter_mut().enumerate() {
            if i != seq as usize {
                s.span = None;
            }
        }
    }

    /// Checks that moving `seq`'s `[p0, p1)` moves all of it or none.
    pub fn check_add(&self, seq: SeqId, p0: i32, p1: i32) -> Result<()> {
        self.check_cp(seq, p0, p1)
    }

    /// Moves `seq`'s span by `delta` if `[p0, p1)` covers it (after
    /// `check_add`); a span pushed below 0 empties the sequence, as the KV
    /// cells pushed below 0 leave it.
    pub fn add(&mut self, seq: SeqId, p0: i32, p1: i32, delta: i32) {
        if let Some(s) = self.seqs.get_mut(seq as usize) {
            if let Some((a, b)) = s.span.filter(|&span| covers(p0, p1, span)) {
                s.span = (b + delta >= 0).then_some(((a + delta).max(0), b + delta));
            }
        }
    }

    /// Checks a batch before it runs: each token in exactly one sequence
    /// (`seq_mask` bits) and at the position after its sequence's last.
    /// Then keeps a copy of the states it will change if `back_up`, and
    /// gives each new sequence zeroed states. Call `commit` or `rollback`
    /// after the run, or `abandon` if it never started.
    pub fn begin(&mut self, pos: &[i32], seq_mask: &[u64], back_up: bool) -> Result<()> {
        self.touched.clear();
        self.backed_up = back_up;
        if !self.is_used() {
            return Ok(());
        }
        for (i, s) in self.seqs.iter().enumerate() {
            self.next[i] = s.span.map(|(_, b)| b + 1);
        }
        for (t, (&p, &mask)) in pos.iter().zip(seq_mask).enumerate() {
            if mask.count_ones() != 1 {
                return Err(Error::InvalidArgument(format!(
                    "token {t} of the batch belongs to {} sequences: with recurrent layers each token belongs to exactly one",
                    mask.count_ones()
                )));
            }
            let s = mask.trailing_zeros() as usize;
            if let Some(want) = self.next[s].filter(|&want| want != p) {
                return Err(Error::InvalidArgument(format!(
                    "token {t} of the batch is at position {p} of sequence {s}, whose recurrent states are at position {want}: \
                     with recurrent layers a sequence takes its positions in order"
                )));
            }
            self.next[s] = Some(p + 1);
        }
        let len = self.layout.n_layer * self.layout.width;
        for (i, s) in self.seqs.iter_mut().enumerate() {
            let was = s.span.map(|(_, b)| b + 1);
            if self.next[i] == was {
                continue; // not in this batch
            }
            self.touched.push(i);
            self.saved[i].span = s.span;
            if back_up {
                self.saved[i].values.clone_from(&s.values);
            }
            if s.span.is_none() {
                s.values.clear();
                s.values.try_reserve_exact(len).map_err(|_| {
                    Error::InvalidArgument(format!(
                        "recurrent states of {len} values cannot be allocated"
                    ))
                })?;
                s.values.resize(len, 0.0);
            }
        }
        Ok(())
    }

    /// The batch of `begin` ran: each of its sequences' spans reach its
    /// last token.
    pub fn commit(&mut self, pos: &[i32], seq_mask: &[u64]) {
        if !self.is_used() {
            return;
        }
        for (&p, &mask) in pos.iter().zip(seq_mask) {
            let s = &mut self.seqs[mask.trailing_zeros() as usize];
            s.span = Some((s.span.map_or(p, |(a, _)| a), p));
        }
        self.touched.clear();
    }

    /// The batch of `begin` never reached a forward pass: nothing changed
    /// but the spans, which are put back.
    pub fn abandon(&mut self) {
        for i in self.touched.drain(..) {
            self.seqs[i].span = self.saved[i].span;
        }
    }

    /// The batch of `begin` failed after its forward pass started: with a
    /// copy, its sequences' states are put back and this returns 0. Without
    /// one they are emptied, and this returns the mask of those that held
    /// positions before (lost: the caller clears their other memory).
    pub fn rollback(&mut self) -> u64 {
        let mut lost = 0;
        for i in self.touched.drain(..) {
            if self.backed_up {
                std::mem::swap(&mut self.seqs[i], &mut self.saved[i]);
            } else {
                self.seqs[i].span = None;
                if self.saved[i].span.is_some() {
                    lost |= 1 << i;
                }
            }
        }
        lost
    }

    /// `seq`'s values (every layer's, one after another) when its states
    /// have taken in exactly positions `0..n`, for a session; none without
    /// recurrent layers or with `n` 0. A sequence whose states took in
    /// other positions is an error naming them.
    pub fn snapshot(&self, seq: SeqId, n: usize) -> Result<Vec<f32>> {
        if !self.is_used() || n == 0 {
            return Ok(Vec::new());
        }
        let s = self.seqs.get(seq as usize);
        match s.and_then(|s| s.span) {
            Some((0, b)) if b as i64 == n as i64 - 1 => {
                Ok(s.map(|s| s.values.clone()).unwrap_or_default())
            }
            span => Err(Error::Session(format!(
                "sequence {seq}'s recurrent states hold positions {}, not the 0..{n} being saved: \
                 a state has taken in every token, so only the whole cache can be saved",
                span.map_or("none".to_string(), |(a, b)| format!("{a}..={b}"))
            ))),
        }
    }

    /// Checks that `values` are the states of `n` positions (`snapshot`'s)
    /// for this layout.
    pub fn check_restore(&self, n: usize, values: &[f32]) -> Result<()> {
        let want = if self.is_used() && n > 0 {
            self.layout.n_layer * self.layout.width
        } else {
            0
        };
        if values.len() != want {
            return Err(Error::Session(format!(
                "the session holds {} recurrent values for {n} tokens; this model's layers keep {want}",
                values.len()
            )));
        }
        Ok(())
    }

    /// Forgets every sequence, then gives `seq` the states `values` of
    /// positions `0..n` (after `check_restore`).
    pub fn restore(&mut self, seq: SeqId, n: usize, values: &[f32]) {
        self.clear();
        if let Some(s) = self.seqs.get_mut(seq as usize) {
            if !values.is_empty() {
                s.values.clear();
                s.values.extend_from_slice(values);
                s.span = Some((0, n as i32 - 1));
            }
        }
    }

    /// Gives `seq` alone the states `values` of positions `0..n` (a
    /// checkpoint `snapshot` took; checked by `check_restore`), leaving the
    /// other sequences as they are.
    pub fn rewind(&mut self, seq: SeqId, n: usize, values: &[f32]) {
        if let Some(s) = self.seqs.get_mut(seq as usize) {
            s.values.clear();
            s.values.extend_from_slice(values);
            s.span = (!values.is_empty() && n > 0).then_some((0, n as i32 - 1));
        }
    }

    /// Recurrent layer `layer`'s values for `seq`, as a decode changes them.
    pub fn state_mut(&mut self, layer: usize, seq: SeqId) -> Result<&mut [f32]> {
        let w = self.layout.width;
        let values = self
            .seqs
            .get_mut(seq as usize)
            .map(|s| &mut s.values)
            .filter(|v| v.len() >= (layer + 1) * w && layer < self.layout.n_layer)
            .ok_or_else(|| {
                Error::InvalidArgument(format!(
                    "sequence {seq} has no recurrent state for layer {layer} (the decode did not begin it)"
                ))
            })?;
        Ok(&mut values[layer * w..(layer + 1) * w])
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    #[cfg(target_family = "wasm")]
    use wasm_bindgen_test::wasm_bindgen_test as test;

    fn states() -> RecurrentStates {
        RecurrentStates::new(RecurrentLayout {
            n_layer: 2,
            width: 3,
        })
        .unwrap()
    }

    #[test]
    fn a_failed_decode_puts_the_states_back() {
        let mut s = states();
        s.begin(&[0, 1], &[1, 1], false).unwrap();
        s.state_mut(1, 0).unwrap().copy_from_slice(&[1.0, 2.0, 3.0]);
        s.commit(&[0, 1], &[1, 1]);
        assert_eq!(s.span(0), Some((0, 1)));
        // A batch for sequences 0 and 1 that fails after changing both.
        s.begin(&[2, 0], &[1, 2], true).unwrap();
        s.state_mut(1, 0).unwrap().fill(9.0);
        s.state_mut(0, 1).unwrap().fill(9.0);
        assert_eq!(s.rollback(), 0, "nothing lost");
        assert_eq!(s.span(0), Some((0, 1)));
        assert_eq!(s.span(1), None);
        assert_eq!(s.state_mut(1, 0).unwrap(), &[1.0, 2.0, 3.0]);
        // Sequence 1 starts from zeros when it next begins.
        s.begin(&[0], &[2], false).unwrap();
        assert_eq!(s.state_mut(0, 1).unwrap(), &[0.0; 3]);
    }

    #[test]
    fn without_a_copy_a_failed_decode_names_the_sequences_it_lost() {
        let mut s = states();
        s.begin(&[0, 1], &[1, 1], false).unwrap();
        s.commit(&[0, 1], &[1, 1]);
        // Never started: the spans are as they were.
        s.begin(&[2, 0], &[1, 4], false).unwrap();
        s.abandon();
        assert_eq!((s.span(0), s.span(2)), (Some((0, 1)), None));
        // Failed while running: sequence 0 held positions and is lost;
        // sequence 2 was new and is simply still empty.
        s.begin(&[2, 0], &[1, 4], false).unwrap();
        s.state_mut(0, 0).unwrap().fill(9.0);
        assert_eq!(s.rollback(), 1);
        assert_eq!((s.span(0), s.span(2)), (None, None));
        s.begin(&[0], &[1], false).unwrap();
        assert_eq!(
            s.state_mut(0, 0).unwrap(),
            &[0.0; 3],
            "begins again from zeros"
        );
    }

    #[test]
    fn only_whole_sequences_are_cut_copied_or_moved() {
        let mut s = states();
        s.begin(&[3, 4, 5], &[1, 1, 1], false).unwrap();
        s.commit(&[3, 4, 5], &[1, 1, 1]);
        for (p0, p1) in [(4, -1), (0, 5), (4, 5)] {
            assert!(s.check_rm(0, p0, p1).is_err(), "{p0}..{p1}");
            assert!(s.check_cp(0, p0, p1).is_err(), "{p0}..{p1}");
        }
        for (p0, p1) in [(-1, -1), (3, 6), (0, 3), (6, -1)] {
            assert!(s.check_rm(0, p0, p1).is_ok(), "{p0}..{p1}");
        }
        s.add(0, -1, -1, -4);
        assert_eq!(s.span(0), Some((0, 1)));
        s.add(0, -1, -1, -2);
        assert_eq!(s.span(0), None, "pushed below position 0");
    }
}

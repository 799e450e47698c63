//! A context's memory of its sequences: the KV cells of the attention layers
//! and the recurrent states of the recurrent layers (LFM2's short
//! convolutions), edited together. Every sequence edit checks both before
//! changing either, so an edit one of them cannot make (cutting a recurrent
//! sequence in its middle) is an error that changes nothing.

use super::recurrent::{RecurrentLayout, RecurrentStates};
use super::{KvCache, SeqId, ShiftKeys};
use crate::backend::Backend;
use crate::error::Result;

pub struct Memory {
    pub kv: KvCache,
    pub recurrent: RecurrentStates,
}

impl Memory {
    pub fn new(kv: KvCache, recurrent: Option<RecurrentLayout>) -> Result<Memory> {
        let layout = recurrent.unwrap_or(RecurrentLayout {
            n_layer: 0,
            width: 0,
        });
        Ok(Memory {
            kv,
            recurrent: RecurrentStates::new(layout)?,
        })
    }

    /// Whether a sequence can lose positions other than all of them (no
    /// recurrent layers): what prompt-cache reuse and the context shift need.
    pub fn can_cut(&self) -> bool {
        !self.recurrent.is_used()
    }

    pub fn clear(&mut self) {
        self.kv.clear();
        self.recurrent.clear();
    }

    /// Removes positions `[p0, p1)` of `seq` (`seq < 0`: of every sequence).
    pub fn seq_rm(&mut self, seq: i32, p0: i32, p1: i32) -> Result<()> {
        self.recurrent.check_rm(seq, p0, p1)?;
        self.kv.seq_rm(seq, p0, p1)?;
        self.recurrent.rm(seq, p0, p1);
        Ok(())
    }

    /// Puts `seq` back to positions `0..n`: its cells from `n` on go, and
    /// its recurrent states become `states` (a checkpoint of exactly those
    /// positions, from `RecurrentStates::snapshot`). Checked first: on an
    /// error nothing changes.
    pub fn rewind(&mut self, seq: SeqId, n: usize, states: &[f32]) -> Result<()> {
        self.recurrent.check_restore(n, states)?;
        let p0 = i32::try_from(n).map_err(|_| {
            crate::error::Error::InvalidArgument(format!("position {n} is out of range"))
        })?;
        self.kv.seq_rm(seq as i32, p0, -1)?;
        self.recurrent.rewind(seq, n, states);
        Ok(())
    }

    /// Makes `dst` hold `src`'s positions `[p0, p1)` too.
    pub fn seq_cp(&mut self, src: SeqId, dst: SeqId, p0: i32, p1: i32) -> Result<()> {
        self.recurrent.check_cp(src, p0, p1)?;
        self.kv.seq_cp(src, dst, p0, p1)?;
        self.recurrent.cp(src, dst, p0, p1);
        Ok(())
    }

    /// Removes every sequence but `seq`.
    pub fn seq_keep(&mut self, seq: SeqId) -> Result<()> {
        self.kv.seq_keep(seq)?;
        self.recurrent.keep(seq);
        Ok(())
    }

    /// The highest position of `seq`, or None when it has none.
    pub fn seq_pos_max(&self, seq: SeqId) -> Option<i32> {
        let kv = self.kv.seq_pos_max(seq);
        let rs = self.recurrent.span(seq).map(|(_, b)| b);
        kv.max(rs)
    }

    /// Adds `delta` to positions `[p0, p1)` of `seq` (keys re-rotated by
    /// `shift`).
    pub fn seq_add(
        &mut self,
        be: &mut dyn Backend,
        shift: ShiftKeys,
        seq: SeqId,
        p0: i32,
        p1: i32,
        delta: i32,
    ) -> Result<()> {
        self.recurrent.check_add(seq, p0, p1)?;
        self.kv.seq_add(be, shift, seq, p0, p1, delta)?;
        self.recurrent.add(seq, p0, p1, delta);
        Ok(())
    }
}

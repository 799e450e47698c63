//! A batch of tokens for one decode, with a capacity fixed at creation (like
//! `llama_batch_init`): each token carries its position, the sequences it
//! belongs to and whether its logits are wanted. Adding past the capacity is
//! an error; nothing is ever written beyond it.

use crate::error::{Error, Result};
use crate::kv::{SeqId, MAX_SEQUENCES};

#[derive(Clone, Debug)]
pub struct Batch {
    capacity: usize,
    pub(super) tokens: Vec<u32>,
    pub(super) pos: Vec<i32>,
    /// Each token's first sequence (the one whose cells it attends to).
    pub(super) seq: Vec<SeqId>,
    /// Each token's sequences, one bit each.
    pub(super) seq_mask: Vec<u64>,
    pub(super) logits: Vec<bool>,
}

impl Batch {
    pub fn new(capacity: usize) -> Batch {
        Batch {
            capacity,
            tokens: Vec::with_capacity(capacity),
            pos: Vec::with_capacity(capacity),
            seq: Vec::with_capacity(capacity),
            seq_mask: Vec::with_capacity(capacity),
            logits: Vec::with_capacity(capacity),
        }
    }

    /// A batch holding `tokens` of sequence 0 at positions `start..`, logits
    /// for the last one only (how a prompt is fed).
    pub fn for_sequence(tokens: &[u32], start: i32, seq: SeqId) -> Result<Batch> {
        let mut b = Batch::new(tokens.len());
        for (i, &t) in tokens.iter().enumerate() {
            b.add(t, start + i as i32, &[seq], i + 1 == tokens.len())?;
        }
        Ok(b)
    }

    pub fn capacity(&self) -> usize {
        self.capacity
    }

    pub fn len(&self) -> usize {
        self.tokens.len()
    }

    pub fn is_empty(&self) -> bool {
        self.tokens.is_empty()
    }

    pub fn clear(&mut self) {
        self.tokens.clear();
        self.pos.clear();
        self.seq.clear();
        self.seq_mask.clear();
        self.logits.clear();
    }

    /// Appends a token. Errors when the batch is full, the position is
    /// negative, or the sequence list is empty or out of range.
    pub fn add(&mut self, token: u32, pos: i32, seqs: &[SeqId], logits: bool) -> Result<()> {
        if self.tokens.len() >= self.capacity {
            return Err(Error::BatchFull {
                capacity: self.capacity,
            });
        }
        if pos < 0 {
            return Err(Error::InvalidArgument(format!(
                "token position {pos} is negative"
            )));
        }
        if seqs.is_empty() {
            return Err(Error::InvalidArgument(
                "a batch token needs at least one sequence id".into(),
            ));
        }
        if let Some(&s) = seqs.iter().find(|&&s| s as usize >= MAX_SEQUENCES) {
            return Err(Error::InvalidArgument(format!(
                "sequence id {s} is out of range (at most {MAX_SEQUENCES} sequences)"
            )));
        }
        self.tokens.push(token);
        self.pos.push(pos);
        self.seq.push(seqs[0]);
        self.seq_mask
            .push(seqs.iter().fold(0, |m, &s| m | 1u64 << s));
        self.logits.push(logits);
        Ok(())
    }

    /// Asks for (or stops asking for) the logits of token `i`.
    pub fn set_logits(&mut self, i: usize, wanted: bool) -> Result<()> {
        let n = self.len();
        let slot = self.logits.get_mut(i).ok_or_else(|| {
            Error::InvalidArgument(format!("batch index {i} is out of range ({n} tokens)"))
        })?;
        *slot = wanted;
        Ok(())
    }

    pub fn tokens(&self) -> &[u32] {
        &self.tokens
    }
}

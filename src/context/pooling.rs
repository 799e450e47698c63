//! Pooling of hidden states per sequence: what `Context::encode` leaves.

use serde::Serialize;

use crate::error::{Error, Result};
use crate::kv::SeqId;

/// How `encode` turns a sequence's hidden states into its embedding.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Pooling {
    /// Every token's hidden state.
    None,
    /// Average over the sequence's tokens (special tokens included).
    Mean,
    /// The token at position 0 ([CLS]), without a pooler layer.
    Cls,
    /// The token at the highest position.
    Last,
    /// The classifier head's scores on the cls token (rerankers).
    Rank,
}

impl Pooling {
    pub fn from_name(name: &str) -> Result<Pooling> {
        Ok(match name {
            "none" => Pooling::None,
            "mean" => Pooling::Mean,
            "cls" => Pooling::Cls,
            "last" => Pooling::Last,
            "rank" => Pooling::Rank,
            other => {
                return Err(Error::InvalidArgument(format!(
                    "unknown pooling '{other}' (none, mean, cls, last, rank)"
                )))
            }
        })
    }

    /// From llama.cpp's `pooling_type` number (GGUF `{arch}.pooling_type`).
    pub fn from_type(t: u32) -> Result<Pooling> {
        Ok(match t {
            0 => Pooling::None,
            1 => Pooling::Mean,
            2 => Pooling::Cls,
            3 => Pooling::Last,
            4 => Pooling::Rank,
            other => {
                return Err(Error::InvalidArgument(format!(
                    "unknown pooling type {other} in the model (0..4 are known)"
                )))
            }
        })
    }

    pub fn name(self) -> &'static str {
        match self {
            Pooling::None => "none",
            Pooling::Mean => "mean",
            Pooling::Cls => "cls",
            Pooling::Last => "last",
            Pooling::Rank => "rank",
        }
    }
}

/// Per sequence (in order of first appearance) its pooled row of `d`
/// values; rank pools the cls token (the head runs afterwards); none gives
/// nothing.
pub(crate) fn pool(
    pooling: Pooling,
    hidden: &[f32],
    d: usize,
    pos: &[i32],
    seq: &[SeqId],
) -> Result<Vec<(SeqId, Vec<f32>)>> {
    if pooling == Pooling::None {
        return Ok(Vec::new());
    }
    let mut seqs: Vec<SeqId> = Vec::new();
    for &s in seq {
        if !seqs.contains(&s) {
            seqs.push(s);
        }
    }
    let row = |i: usize| &hidden[i * d..(i + 1) * d];
    seqs.into_iter()
        .map(|s| {
            let members: Vec<usize> = (0..seq.len()).filter(|&i| seq[i] == s).collect();
            let v = match pooling {
                Pooling::Mean => {
                    let w = 1.0 / members.len() as f32;
                    let mut acc = vec![0.0f32; d];
                    for &i in &members {
                        for (a, &x) in acc.iter_mut().zip(row(i)) {
                            *a += x * w;
                        }
                    }
                    acc
                }
                Pooling::Cls | Pooling::Rank => {
                    let first = members.iter().find(|&&i| pos[i] == 0).ok_or_else(|| {
                        Error::InvalidArgument(format!(
                            "sequence {s} has no token at position 0 for {} pooling",
                            pooling.name()
                        ))
                    })?;
                    row(*first).to_vec()
                }
                Pooling::Last => {
                    let last = members
                        .iter()
                        .max_by_key(|&&i| pos[i])
                        .expect("a sequence has tokens");
                    row(*last).to_vec()
                }
                Pooling::None => unreachable!("pooling none returned above"),
            };
            Ok((s, v))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    #[cfg(target_family = "wasm")]
    use wasm_bindgen_test::wasm_bindgen_test as test;

    #[test]
    fn pooling_per_sequence() {
        // Two sequences interleaved: seq 1 = tokens 0, 2; seq 0 = tokens 1, 3.
        let hidden = [1.0, 10.0, 2.0, 20.0, 3.0, 30.0, 4.0, 40.0];
        let (pos, seq) = ([0, 0, 1, 1], [1, 0, 1, 0]);
        let mean = pool(Pooling::Mean, &hidden, 2, &pos, &seq).unwrap();
        assert_eq!(mean, vec![(1, vec![2.0, 20.0]), (0, vec![3.0, 30.0])]);
        let cls = pool(Pooling::Cls, &hidden, 2, &pos, &seq).unwrap();
        assert_eq!(cls, vec![(1, vec![1.0, 10.0]), (0, vec![2.0, 20.0])]);
        let last = pool(Pooling::Last, &hidden, 2, &pos, &seq).unwrap();
        assert_eq!(last, vec![(1, vec![3.0, 30.0]), (0, vec![4.0, 40.0])]);
        assert!(pool(Pooling::Cls, &hidden, 2, &[1, 1, 2, 2], &seq).is_err());
        assert_eq!(Pooling::from_name("rank").unwrap(), Pooling::Rank);
        assert!(Pooling::from_name("max").is_err());
    }
}

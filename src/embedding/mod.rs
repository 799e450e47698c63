//! Embeddings and reranking, as llama.cpp's embedding mode: a batch of whole
//! sequences is encoded (non-causal for BERT; for a llama model through its
//! causal forward pass, with the final norm's output instead of logits), then
//! pooled per sequence — none (every token), mean, cls (position 0), last
//! (highest position) or rank (the classifier head on the cls token).
//! `Context::encode` + `embeddings_seq` / `embeddings_ith` (in `context/`)
//! are llama.h's calls; `embed` and `rerank` here are llama.rn's, built on
//! that public API only, with llama-embedding's normalisation (`normalize`).

mod normalize;

pub use crate::context::Pooling;
pub use normalize::normalize;

use serde::Serialize;

use crate::context::{Batch, Context, SeqId};
use crate::error::{Error, Result};

/// Most sequences one batch of `embed` / `rerank` carries.
const MAX_SEQS: usize = 64;

#[derive(Clone, Debug)]
pub struct EmbedParams {
    /// llama-embedding's `--embd-normalize`: -1 none, 0 max-abs to int16
    /// range, 1 taxicab, 2 euclidean (default), > 2 p-norm.
    pub normalize: i32,
    /// Cut inputs longer than a batch (keeping a final EOS/SEP) instead of
    /// refusing them.
    pub truncate: bool,
}

impl Default for EmbedParams {
    fn default() -> Self {
        EmbedParams {
            normalize: 2,
            truncate: false,
        }
    }
}

/// One input's embedding: one vector, or one per token with pooling none.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Embedding {
    pub token_ids: Vec<u32>,
    pub truncated: bool,
    pub vectors: Vec<Vec<f32>>,
}

#[derive(Clone, Debug, Default)]
pub struct RerankParams {
    /// Scores through a sigmoid (0..1) instead of the raw logits.
    pub normalize: bool,
    pub truncate: bool,
}

#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct RerankResult {
    /// The document's index in the input list.
    pub index: usize,
    pub score: f32,
    pub document: String,
}

impl Context {
    /// Embeds each text (tokenized as llama-embedding does, with special
    /// tokens): several texts per batch, one sequence each, pooled and
    /// normalised. An empty list, an empty text, or a text longer than a
    /// batch (unless `truncate`) is an error.
    pub fn embed(&mut self, texts: &[&str], params: &EmbedParams) -> Result<Vec<Embedding>> {
        if texts.is_empty() {
            return Err(Error::InvalidArgument("there are no texts to embed".into()));
        }
        let mut inputs = Vec::with_capacity(texts.len());
        for (i, text) in texts.iter().enumerate() {
            if text.is_empty() {
                return Err(Error::InvalidArgument(format!("text {i} is empty")));
            }
            let ids = self.model().vocab.tokenize(text, true, true)?;
            inputs.push(self.fit(ids, params.truncate, &format!("text {i}"))?);
        }
        let vectors = self.encode_all(&inputs)?;
        Ok(inputs
            .into_iter()
            .zip(vectors)
            .map(|((token_ids, truncated), vs)| Embedding {
                token_ids,
                truncated,
                vectors: vs.iter().map(|v| normalize(v, params.normalize)).collect(),
            })
            .collect())
    }

    /// Scores each document against `query` with the model's classifier
    /// (rank pooling), input `[BOS] query [EOS] ([SEP]) document [EOS]` as
    /// llama.cpp builds it; results sorted by score, best first.
    pub fn rerank(
        &mut self,
        query: &str,
        documents: &[&str],
        params: &RerankParams,
    ) -> Result<Vec<RerankResult>> {
        if self.pooling() != Pooling::Rank {
            return Err(Error::InvalidArgument(format!(
                "reranking needs pooling type rank; this context pools {} (create it with pooling rank)",
                self.pooling().name()
            )));
        }
        if documents.is_empty() {
            return Err(Error::InvalidArgument(
                "there are no documents to rerank".into(),
            ));
        }
        if query.is_empty() {
            return Err(Error::InvalidArgument("the query is empty".into()));
        }
        let mut inputs = Vec::with_capacity(documents.len());
        for (i, doc) in documents.iter().enumerate() {
            if doc.is_empty() {
                return Err(Error::InvalidArgument(format!("document {i} is empty")));
            }
            let ids = self.rerank_tokens(query, doc)?;
            inputs.push(self.fit(ids, params.truncate, &format!("document {i}"))?);
        }
        let scores = self.encode_all(&inputs)?;
        let mut results: Vec<RerankResult> = scores
            .iter()
            .enumerate()
            .map(|(index, s)| {
                let raw = s[0][0];
                RerankResult {
                    index,
                    score: if params.normalize {
                        1.0 / (1.0 + (-raw).exp())
                    } else {
                        raw
                    },
                    document: documents[index].to_string(),
                }
            })
            .collect();
        results.sort_by(|a, b| b.score.total_cmp(&a.score));
        Ok(results)
    }

    /// The input of one (query, document) pair: `[BOS] query [EOS] ([SEP]
    /// when the vocabulary adds one) document [EOS]`, which is what
    /// llama.cpp tokenizes for rank pooling (`[CLS] q [SEP] d [SEP]` for
    /// BERT cross-encoders). The texts' own special-token look-alikes stay text.
    pub fn rerank_tokens(&self, query: &str, document: &str) -> Result<Vec<u32>> {
        let vocab = &self.model().vocab;
        let sep = vocab.add_sep.then_some(vocab.sep).flatten();
        let mut ids: Vec<u32> = vocab.bos.into_iter().collect();
        ids.extend(vocab.tokenize(query, false, false)?);
        ids.extend(vocab.eos.into_iter().chain(sep));
        ids.extend(vocab.tokenize(document, false, false)?);
        ids.extend(vocab.eos);
        Ok(ids)
    }

    /// `ids` cut to one batch when `truncate` (keeping a final EOS/SEP the
    /// tokenizer added), else an error naming `what` when too long.
    fn fit(&self, mut ids: Vec<u32>, truncate: bool, what: &str) -> Result<(Vec<u32>, bool)> {
        let limit = self.max_encode_tokens();
        if ids.len() <= limit {
            return Ok((ids, false));
        }
        if !truncate {
            return Err(Error::InvalidArgument(format!(
                "{what} has {} tokens, more than fit in one batch ({limit}); ask for truncation to cut it",
                ids.len()
            )));
        }
        let last = *ids.last().expect("a long input has tokens");
        let vocab = &self.model().vocab;
        let keep_last = Some(last) == vocab.eos || Some(last) == vocab.sep;
        ids.truncate(limit);
        if keep_last {
            ids[limit - 1] = last;
        }
        Ok((ids, true))
    }

    /// Encodes the inputs in batches of whole sequences; for each input its
    /// vectors (one pooled, or one per token).
    fn encode_all(&mut self, inputs: &[(Vec<u32>, bool)]) -> Result<Vec<Vec<Vec<f32>>>> {
        let limit = self.max_encode_tokens();
        let mut out = Vec::with_capacity(inputs.len());
        let mut start = 0;
        while start < inputs.len() {
            let mut end = start;
            let mut tokens = 0;
            while end < inputs.len()
                && end - start < MAX_SEQS
                && tokens + inputs[end].0.len() <= limit
            {
                tokens += inputs[end].0.len();
                end += 1;
            }
            let mut batch = Batch::new(tokens);
            for (s, (ids, _)) in inputs[start..end].iter().enumerate() {
                for (p, &t) in ids.iter().enumerate() {
                    batch.add(t, p as i32, &[s as SeqId], true)?;
                }
            }
            self.encode(&batch)?;
            let mut first = 0;
            for (s, (ids, _)) in inputs[start..end].iter().enumerate() {
                out.push(if self.pooling() == Pooling::None {
                    (first..first + ids.len())
                        .map(|i| self.embeddings_ith(i).map(<[f32]>::to_vec))
                        .collect::<Result<Vec<_>>>()?
                } else {
                    vec![self.embeddings_seq(s as SeqId)?.to_vec()]
                });
                first += ids.len();
            }
            start = end;
        }
        Ok(out)
    }
}

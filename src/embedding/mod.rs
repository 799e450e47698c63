//! Embeddings and reranking, as llama.cpp's embedding mode: a batch of whole
//! sequences is encoded (non-causal for BERT; for a llama model through its
//! causal forward pass, with the final norm's output instead of logits), then
//! pooled per sequence — none (every token), mean, cls (position 0), last
//! (highest position) or rank (the classifier head on the cls token).
//! `Context::encode` + `embeddings_seq` / `embeddings_ith` are llama.h's
//! calls; `embed` and `rerank` are llama.rn's, with llama-embedding's
//! normalisation (`normalize`).

mod pooling;

pub use pooling::{normalize, Pooling};

use serde::Serialize;

use crate::context::{Batch, Context, SeqId};
use crate::error::{Error, Result};
use crate::model::Net;

/// Most sequences one batch of `embed` / `rerank` carries.
const MAX_SEQS: usize = 64;

/// What the last `encode` left: pooled vectors per sequence, or (pooling
/// none) one vector per token.
#[derive(Default)]
pub(crate) struct EncodeOutput {
    pub pooled: Vec<(SeqId, Vec<f32>)>,
    pub per_token: Vec<f32>,
    pub n_tokens: usize,
}

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
    /// The pooling this context's `encode` applies.
    pub fn pooling(&self) -> Pooling {
        self.pooling
    }

    /// Encodes `batch` for embeddings: every sequence in it whole (its
    /// tokens attend to each other; a llama model's KV cache is cleared
    /// before and after). Read the result with `embeddings_seq` (pooled) or
    /// `embeddings_ith` (pooling none). An error (too many tokens, a
    /// sequence without a position 0 for cls/rank) changes nothing.
    pub fn encode(&mut self, batch: &Batch) -> Result<()> {
        let n = batch.len();
        if n == 0 {
            return Err(Error::InvalidArgument("the batch is empty".into()));
        }
        let limit = self.encode_limit();
        if n > limit {
            return Err(Error::InvalidArgument(format!(
                "the batch has {n} tokens, more than one encode takes ({limit}: n_ctx, n_batch{})",
                if matches!(self.model().net, Net::Bert(_)) {
                    ", n_ubatch and the model's positions"
                } else {
                    ""
                }
            )));
        }
        let seq: Vec<SeqId> = batch.seqs.iter().map(|s| s[0]).collect();
        let hidden = match &self.model().clone().net {
            Net::Bert(b) => {
                let workers = &self.workers;
                workers.install(|| b.encode(workers, &batch.tokens, &batch.pos, &seq))?
            }
            Net::Llama(_) => self.llama_hidden(batch)?,
        };
        let d = self.model().n_embd();
        let pooled = pooling::pool(self.pooling, &hidden, d, &batch.pos, &seq)?;
        let out = match self.pooling {
            Pooling::None => EncodeOutput {
                pooled: Vec::new(),
                per_token: hidden,
                n_tokens: n,
            },
            Pooling::Rank => {
                // Context::new refuses rank pooling without a classifier.
                let Net::Bert(b) = &self.model().net else {
                    return Err(Error::InvalidArgument(
                        "rank pooling needs a model with a classifier head".into(),
                    ));
                };
                let rows: Vec<f32> = pooled.iter().flat_map(|(_, v)| v.iter().copied()).collect();
                let workers = &self.workers;
                let scores = workers.install(|| b.classify(workers, &rows, pooled.len()))?;
                let per = b.n_labels();
                EncodeOutput {
                    pooled: pooled
                        .iter()
                        .zip(scores.chunks_exact(per))
                        .map(|((s, _), sc)| (*s, sc.to_vec()))
                        .collect(),
                    per_token: Vec::new(),
                    n_tokens: n,
                }
            }
            _ => EncodeOutput {
                pooled,
                per_token: Vec::new(),
                n_tokens: n,
            },
        };
        self.encoded = out;
        Ok(())
    }

    /// Most tokens one `encode` takes: the context, the batch, and for a
    /// non-causal model the micro-batch (a sequence is computed at once).
    fn encode_limit(&self) -> usize {
        let p = self.params();
        match &self.model().net {
            Net::Bert(b) => p
                .n_ctx
                .min(p.n_batch)
                .min(p.n_ubatch)
                .min(b.hparams.n_ctx_train),
            Net::Llama(_) => p.n_ctx.min(p.n_batch),
        }
    }

    /// The pooled embedding of sequence `seq` from the last `encode` (rank
    /// pooling: the classifier's scores).
    pub fn embeddings_seq(&self, seq: SeqId) -> Result<&[f32]> {
        self.encoded
            .pooled
            .iter()
            .find(|(s, _)| *s == seq)
            .map(|(_, v)| v.as_slice())
            .ok_or_else(|| {
                Error::InvalidArgument(format!(
                    "no pooled embedding for sequence {seq} (pooling {}; the last encode had {} sequences)",
                    self.pooling.name(),
                    self.encoded.pooled.len()
                ))
            })
    }

    /// Token `i`'s hidden state from the last `encode` (pooling none).
    pub fn embeddings_ith(&self, i: usize) -> Result<&[f32]> {
        let d = self.model().n_embd();
        if self.pooling != Pooling::None || i >= self.encoded.n_tokens {
            return Err(Error::InvalidArgument(format!(
                "no embedding for token {i} (pooling {}; the last encode had {} tokens)",
                self.pooling.name(),
                self.encoded.n_tokens
            )));
        }
        Ok(&self.encoded.per_token[i * d..(i + 1) * d])
    }

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
        if self.pooling != Pooling::Rank {
            return Err(Error::InvalidArgument(format!(
                "reranking needs pooling type rank; this context pools {} (create it with pooling rank)",
                self.pooling.name()
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
        let limit = self.encode_limit();
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
        let limit = self.encode_limit();
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
                out.push(if self.pooling == Pooling::None {
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

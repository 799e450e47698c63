//! `lamina embed` and `lamina rerank`: llama-embedding's pooled (or
//! per-token) vectors, and a cross-encoder's scores, as text or JSON.

use clap::Args;
use lamina::backend::cpu::CpuRegistry;
use lamina::embedding::{EmbedParams, Pooling, RerankParams};
use serde_json::json;

use crate::cli::write_stdout;
use crate::generate::ModelArgs;

#[derive(Args)]
pub struct EmbedArgs {
    #[command(flatten)]
    pub model: ModelArgs,
    /// A text to embed (repeat for several; they share batches).
    #[arg(short, long = "prompt", required = true)]
    pub prompts: Vec<String>,
    /// none, mean, cls, last or rank (default: the model's).
    #[arg(long)]
    pub pooling: Option<String>,
    /// -1 none, 0 max-abs to int16 range, 1 taxicab, 2 euclidean, >2 p-norm.
    #[arg(
        long = "embd-normalize",
        visible_alias = "normalize",
        default_value_t = 2,
        allow_negative_numbers = true
    )]
    pub normalize: i32,
    /// Cut texts longer than a batch instead of refusing them.
    #[arg(long)]
    pub truncate: bool,
    /// `{"embeddings": [[..], ..]}`: one per text, or one per token with pooling none.
    #[arg(long)]
    pub json: bool,
}

pub fn embed(registry: &CpuRegistry, threads: usize, a: EmbedArgs) -> lamina::Result<()> {
    let pooling = a.pooling.as_deref().map(Pooling::from_name).transpose()?;
    let mut ctx = a.model.open_pooled(registry, threads, pooling)?;
    let texts: Vec<&str> = a.prompts.iter().map(String::as_str).collect();
    let params = EmbedParams {
        normalize: a.normalize,
        truncate: a.truncate,
    };
    let out = ctx.embed(&texts, &params)?;
    let vectors: Vec<&Vec<f32>> = out.iter().flat_map(|e| &e.vectors).collect();
    if a.json {
        let v = json!({
            "embeddings": vectors,
            "pooling": ctx.pooling().name(),
            "n_embd": ctx.model().n_embd(),
            "inputs": out.iter().map(|e| json!({
                "token_ids": e.token_ids,
                "truncated": e.truncated,
            })).collect::<Vec<_>>(),
        });
        return write_stdout(&format!("{v}\n"));
    }
    let mut text = String::new();
    for (i, v) in vectors.iter().enumerate() {
        let shown: Vec<String> = v.iter().take(8).map(|x| format!("{x:9.6}")).collect();
        text.push_str(&format!(
            "embedding {i}: {} … ({} values)\n",
            shown.join(" "),
            v.len()
        ));
    }
    write_stdout(&text)
}

#[derive(Args)]
pub struct RerankArgs {
    #[command(flatten)]
    pub model: ModelArgs,
    /// The query.
    #[arg(short, long)]
    pub query: String,
    /// A document to score against the query (repeat for several).
    #[arg(short, long = "document", required = true)]
    pub documents: Vec<String>,
    /// Scores through a sigmoid (0..1) instead of raw logits.
    #[arg(long)]
    pub normalize: bool,
    /// Cut pairs longer than a batch instead of refusing them.
    #[arg(long)]
    pub truncate: bool,
    /// `{"results": [{"index", "score", "document"}, ..]}`, best first.
    #[arg(long)]
    pub json: bool,
}

pub fn rerank(registry: &CpuRegistry, threads: usize, a: RerankArgs) -> lamina::Result<()> {
    let mut ctx = a
        .model
        .open_pooled(registry, threads, Some(Pooling::Rank))?;
    let docs: Vec<&str> = a.documents.iter().map(String::as_str).collect();
    let params = RerankParams {
        normalize: a.normalize,
        truncate: a.truncate,
    };
    let results = ctx.rerank(&a.query, &docs, &params)?;
    if a.json {
        return write_stdout(&format!("{}\n", json!({ "results": results })));
    }
    let text: String = results
        .iter()
        .map(|r| format!("{:10.4}  [{}] {}\n", r.score, r.index, r.document))
        .collect();
    write_stdout(&text)
}

//! Embeddings and reranking against llama.cpp's (golden files, tolerances
//! from the golden README): MiniLM token ids, mean / cls / per-token vectors
//! and the cosine matrix; SmolLM2's mean embedding; the reranker's input
//! layout, scores and order; several sequences per batch; bad inputs.

mod common;

#[cfg(target_arch = "wasm32")]
use wasm_bindgen_test::wasm_bindgen_test as test;

use std::sync::{Arc, OnceLock};

use common::{golden_path, json_ids, model_path, read_file};
use lamina::backend::cpu::CpuDevice;
use lamina::context::{Batch, Context, ContextParams};
use lamina::embedding::{normalize, EmbedParams, Pooling, RerankParams};
use lamina::gguf::GgufFile;
use lamina::model::Model;

const MINILM: &str = "all-MiniLM-L6-v2-f16.gguf";
const RERANKER: &str = "ms-marco-MiniLM-L12-v2-reranker-withpooler-q8_0.gguf";
const SMOLLM2: &str = "SmolLM2-135M-Instruct.Q4_1.gguf";

fn load(name: &str) -> Arc<Model> {
    let file = GgufFile::from_bytes(read_file(&model_path(name))).unwrap();
    let device = CpuDevice::new(None).unwrap();
    Arc::new(Model::load(Arc::new(file), device.shared(), None).unwrap())
}

/// Each model loaded once for all the tests.
fn cached(name: &'static str) -> Arc<Model> {
    static LOADED: [OnceLock<Arc<Model>>; 3] = [OnceLock::new(), OnceLock::new(), OnceLock::new()];
    let slot = [MINILM, RERANKER, SMOLLM2]
        .iter()
        .position(|&n| n == name)
        .expect("one of the test models");
    LOADED[slot].get_or_init(|| load(name)).clone()
}

fn context(name: &'static str, pooling: Option<Pooling>) -> Context {
    Context::new(
        cached(name),
        ContextParams {
            n_ctx: 512,
            n_threads: if cfg!(target_arch = "wasm32") { 1 } else { 2 },
            pooling,
            ..ContextParams::default()
        },
    )
    .unwrap()
}

fn golden(rel: &str) -> serde_json::Value {
    serde_json::from_slice(&read_file(&golden_path(rel))).unwrap()
}

fn floats(v: &serde_json::Value) -> Vec<f32> {
    v.as_array()
        .unwrap()
        .iter()
        .map(|x| x.as_f64().unwrap() as f32)
        .collect()
}

fn cosine(a: &[f32], b: &[f32]) -> f64 {
    let dot: f64 = a.iter().zip(b).map(|(&x, &y)| x as f64 * y as f64).sum();
    let na: f64 = a.iter().map(|&x| x as f64 * x as f64).sum::<f64>().sqrt();
    let nb: f64 = b.iter().map(|&x| x as f64 * x as f64).sum::<f64>().sqrt();
    dot / (na * nb)
}

fn max_abs(a: &[f32], b: &[f32]) -> f32 {
    assert_eq!(a.len(), b.len());
    a.iter()
        .zip(b)
        .map(|(x, y)| (x - y).abs())
        .fold(0.0, f32::max)
}

/// Cosine and max-abs difference within the bounds, naming the case.
fn assert_close(what: &str, got: &[f32], want: &[f32], min_cos: f64, max_diff: f32) {
    let (c, d) = (cosine(got, want), max_abs(got, want));
    assert!(
        c >= min_cos && d <= max_diff,
        "{what}: cosine {c}, max abs {d}"
    );
}

fn texts(g: &serde_json::Value) -> Vec<String> {
    g["items"]
        .as_array()
        .unwrap()
        .iter()
        .map(|i| i["text"].as_str().unwrap().to_string())
        .collect()
}

#[test]
fn minilm_mean_and_cls_match_llama_cpp() {
    let g = golden("minilm/embedding.json");
    let texts = texts(&g);
    let refs: Vec<&str> = texts.iter().map(String::as_str).collect();
    let mut mean_ctx = context(MINILM, None);
    assert_eq!(
        mean_ctx.pooling(),
        Pooling::Mean,
        "MiniLM's metadata asks for mean pooling"
    );
    let mean = mean_ctx.embed(&refs, &EmbedParams::default()).unwrap();
    // Under emulation (every float operation a software call) CLS pooling is
    // checked on the short texts only; the long one's forward pass is the
    // mean-pooled check's.
    let cls_texts = if cfg!(target_arch = "aarch64") {
        &refs[..refs.len() - 1]
    } else {
        &refs[..]
    };
    let cls = context(MINILM, Some(Pooling::Cls))
        .embed(cls_texts, &EmbedParams::default())
        .unwrap();
    let items = g["items"].as_array().unwrap();
    assert!(
        items.last().unwrap()["token_ids"].as_array().unwrap().len() > 100,
        "the long text comes last"
    );
    for (i, (item, m)) in items.iter().zip(&mean).enumerate() {
        let text = item["text"].as_str().unwrap();
        assert_eq!(m.token_ids, json_ids(&item["token_ids"]), "{text}");
        assert!(!m.truncated);
        assert_eq!(m.vectors.len(), 1);
        assert_close(
            text,
            &m.vectors[0],
            &floats(&item["embedding_mean"]),
            0.9999,
            1e-3,
        );
        if let Some(c) = cls.get(i) {
            assert_close(
                text,
                &c.vectors[0],
                &floats(&item["embedding_cls"]),
                0.9999,
                1e-3,
            );
        }
    }
    assert!(cls.len() >= items.len() - 1);
    // The cosine matrix of the mean-pooled vectors.
    let matrix = g["cosine_similarity_mean_pooled"]["matrix"]
        .as_array()
        .unwrap();
    for (i, row) in matrix.iter().enumerate() {
        for (j, want) in row.as_array().unwrap().iter().enumerate() {
            let got = cosine(&mean[i].vectors[0], &mean[j].vectors[0]);
            let want = want.as_f64().unwrap();
            assert!(
                (got - want).abs() <= 1e-3,
                "cosine[{i}][{j}] = {got}, llama.cpp {want}"
            );
        }
    }
}

#[test]
fn minilm_per_token_vectors_match_llama_cpp() {
    let g = golden("minilm/embedding.json");
    let none = &g["pooling_none"];
    let mut ctx = context(MINILM, Some(Pooling::None));
    let raw = EmbedParams {
        normalize: -1,
        ..EmbedParams::default()
    };
    let out = ctx.embed(&[none["text"].as_str().unwrap()], &raw).unwrap();
    let want_ids = json_ids(&none["token_ids"]);
    assert_eq!(out[0].token_ids, want_ids);
    let rows = none["per_token_raw"].as_array().unwrap();
    assert_eq!(out[0].vectors.len(), want_ids.len());
    for (t, (got, want)) in out[0].vectors.iter().zip(rows).enumerate() {
        assert_close(&format!("token {t}"), got, &floats(want), 0.9999, 0.01);
    }
    // Per-token L2 normalisation, as llama-embedding's default.
    let l2 = ctx
        .embed(&[none["text"].as_str().unwrap()], &EmbedParams::default())
        .unwrap();
    for (got, want) in l2[0]
        .vectors
        .iter()
        .zip(none["per_token_l2"].as_array().unwrap())
    {
        assert_close("per-token l2", got, &floats(want), 0.9999, 1e-3);
    }
}

#[test]
fn sequences_in_one_batch_equal_separate_runs() {
    let g = golden("minilm/embedding.json");
    let texts = texts(&g);
    let refs: Vec<&str> = texts.iter().map(String::as_str).collect();
    let mut ctx = context(MINILM, None);
    let together = ctx.embed(&refs, &EmbedParams::default()).unwrap();
    for (text, t) in refs.iter().zip(&together) {
        let alone = ctx.embed(&[text], &EmbedParams::default()).unwrap();
        let d = max_abs(&alone[0].vectors[0], &t.vectors[0]);
        assert!(d <= 1e-6, "{text}: alone vs in a batch differ by {d}");
    }
    // The low-level calls: two sequences in one batch, pooled separately.
    let a = ctx.model().vocab.tokenize(refs[1], true, true).unwrap();
    let b = ctx.model().vocab.tokenize(refs[2], true, true).unwrap();
    let mut batch = Batch::new(a.len() + b.len());
    for (p, &t) in a.iter().enumerate() {
        batch.add(t, p as i32, &[3], true).unwrap();
    }
    for (p, &t) in b.iter().enumerate() {
        batch.add(t, p as i32, &[7], true).unwrap();
    }
    ctx.encode(&batch).unwrap();
    let seq3 = normalize(ctx.embeddings_seq(3).unwrap(), 2);
    let seq7 = normalize(ctx.embeddings_seq(7).unwrap(), 2);
    assert!(max_abs(&seq3, &together[1].vectors[0]) <= 1e-6);
    assert!(max_abs(&seq7, &together[2].vectors[0]) <= 1e-6);
    assert!(ctx.embeddings_seq(0).is_err(), "no sequence 0 in the batch");
    assert!(
        ctx.embeddings_ith(0).is_err(),
        "mean pooling has no per-token vectors"
    );
}

#[test]
fn smollm2_mean_embedding_matches_llama_cpp() {
    let g = golden("smollm2/embedding.json");
    let mut ctx = context(SMOLLM2, Some(Pooling::Mean));
    for item in g["items"].as_array().unwrap() {
        let text = item["text"].as_str().unwrap();
        let out = ctx.embed(&[text], &EmbedParams::default()).unwrap();
        assert_eq!(out[0].token_ids, json_ids(&item["token_ids"]), "{text}");
        assert_close(
            text,
            &out[0].vectors[0],
            &floats(&item["embedding"]),
            0.998,
            0.02,
        );
    }
    // The context still generates after embedding (its cache was left empty).
    assert_eq!(ctx.kv_seq_pos_max(0), None);
}

#[test]
fn reranker_scores_and_order_match_llama_cpp() {
    let g = golden("reranker/rerank.json");
    let mut ctx = context(RERANKER, Some(Pooling::Rank));
    let pairs = g["pairs"].as_array().unwrap();
    let mut queries: Vec<&str> = pairs.iter().map(|p| p["query"].as_str().unwrap()).collect();
    queries.dedup();
    assert_eq!(queries.len(), 2);
    for query in queries {
        let mine: Vec<&serde_json::Value> = pairs.iter().filter(|p| p["query"] == query).collect();
        let docs: Vec<&str> = mine
            .iter()
            .map(|p| p["document"].as_str().unwrap())
            .collect();
        // The exact input layout: [CLS] query [SEP] document [SEP].
        for (p, doc) in mine.iter().zip(&docs) {
            assert_eq!(
                ctx.rerank_tokens(query, doc).unwrap(),
                json_ids(&p["token_ids"])
            );
        }
        let results = ctx.rerank(query, &docs, &RerankParams::default()).unwrap();
        assert_eq!(results.len(), docs.len());
        for r in &results {
            let want = mine[r.index]["score"]["q8_0"].as_f64().unwrap() as f32;
            assert!(
                (r.score - want).abs() <= 0.1,
                "{}: {} vs llama.cpp {want}",
                r.document,
                r.score
            );
            assert_eq!(r.document, docs[r.index]);
        }
        let mut want_order: Vec<usize> = (0..docs.len()).collect();
        want_order.sort_by(|&a, &b| {
            let s = |i: usize| mine[i]["score"]["q8_0"].as_f64().unwrap();
            s(b).total_cmp(&s(a))
        });
        let order: Vec<usize> = results.iter().map(|r| r.index).collect();
        assert_eq!(order, want_order, "{query}");
        // normalize: the same order, scores through a sigmoid.
        let probs = ctx
            .rerank(
                query,
                &docs,
                &RerankParams {
                    normalize: true,
                    ..RerankParams::default()
                },
            )
            .unwrap();
        for (p, r) in probs.iter().zip(&results) {
            assert_eq!(p.index, r.index);
            assert!((p.score - 1.0 / (1.0 + (-r.score).exp())).abs() < 1e-6);
        }
    }
}

#[test]
fn bad_inputs_are_clear_errors() {
    let err = |r: lamina::Result<_>| -> String {
        match r {
            Ok(_) => panic!("expected an error"),
            Err(e) => e.to_string(),
        }
    };
    let mut rank = context(RERANKER, Some(Pooling::Rank));
    let no_params = RerankParams::default();
    assert!(err(rank.rerank("q", &[], &no_params).map(|_| ())).contains("no documents"));
    assert!(err(rank.rerank("", &["d"], &no_params).map(|_| ())).contains("query is empty"));
    assert!(
        err(rank.rerank("q", &["d", ""], &no_params).map(|_| ())).contains("document 1 is empty")
    );

    let mut mean = context(MINILM, None);
    let e = err(mean.rerank("q", &["d"], &no_params).map(|_| ()));
    assert!(e.contains("pooling type rank") && e.contains("mean"), "{e}");
    assert!(err(mean.embed(&[], &EmbedParams::default()).map(|_| ())).contains("no texts"));
    assert!(
        err(mean.embed(&["a", ""], &EmbedParams::default()).map(|_| ()))
            .contains("text 1 is empty")
    );

    // Too long: refused, or cut (keeping the final [SEP]) when asked.
    let long = "word ".repeat(600);
    let e = err(mean.embed(&[&long], &EmbedParams::default()).map(|_| ()));
    assert!(e.contains("602 tokens") && e.contains("512"), "{e}");
    let cut = mean
        .embed(
            &[&long],
            &EmbedParams {
                truncate: true,
                ..EmbedParams::default()
            },
        )
        .unwrap();
    assert!(cut[0].truncated);
    assert_eq!(cut[0].token_ids.len(), 512);
    assert_eq!(cut[0].token_ids[0], 101);
    assert_eq!(cut[0].token_ids[511], 102);

    // A batch over the context.
    let mut batch = Batch::new(600);
    for p in 0..600 {
        batch.add(1037, p, &[0], true).unwrap();
    }
    let e = err(mean.encode(&batch));
    assert!(e.contains("600 tokens"), "{e}");

    // An encoder keeps no cache rows, but its cells are still sized.
    let e = err(Context::new(
        cached(MINILM),
        ContextParams {
            n_ctx: usize::MAX,
            ..ContextParams::default()
        },
    )
    .map(|_| ()));
    assert!(e.contains("cannot be allocated"), "{e}");

    // A generation model cannot rerank; an encoder cannot generate.
    let e = err(Context::new(
        cached(SMOLLM2),
        ContextParams {
            pooling: Some(Pooling::Rank),
            ..ContextParams::default()
        },
    )
    .map(|_| ()));
    assert!(e.contains("classifier head") && e.contains("llama"), "{e}");
    let e = err(Context::new(
        cached(MINILM),
        ContextParams {
            pooling: Some(Pooling::Rank),
            ..ContextParams::default()
        },
    )
    .map(|_| ()));
    assert!(e.contains("classifier head") && e.contains("bert"), "{e}");
    let e = err(mean
        .completion(
            &lamina::completion::CompletionParams {
                prompt: "hi".into(),
                ..Default::default()
            },
            |_| {},
        )
        .map(|_| ()));
    assert!(e.contains("cannot generate"), "{e}");
}

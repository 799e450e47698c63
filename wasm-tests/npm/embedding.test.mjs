// Embeddings and reranking through the packed npm package in Node: MiniLM
// mean vectors and the reranker's scores and order against llama.cpp's
// (golden files, the golden README's tolerances), and bad inputs as Errors.
// Run by scripts/test-npm.sh with LAMINA_REPO set to the repository.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { readFile } from 'node:fs/promises';
import { existsSync } from 'node:fs';
import { loadModel } from 'lamina';

const repo = process.env.LAMINA_REPO;
const golden = (rel) => readFile(`${repo}/native-tests/golden/${rel}`, 'utf8').then(JSON.parse);

async function load(name, params) {
  const path = `${repo}/models/${name}`;
  if (!existsSync(path)) {
    throw new Error(`model missing at ${path}: run LAMINA_TEST_MODELS=../shared/models scripts/fetch-models.sh`);
  }
  return loadModel(new Uint8Array(await readFile(path)), params);
}

function cosine(a, b) {
  let dot = 0, na = 0, nb = 0;
  for (let i = 0; i < a.length; i++) {
    dot += a[i] * b[i];
    na += a[i] * a[i];
    nb += b[i] * b[i];
  }
  return dot / Math.sqrt(na * nb);
}

const maxAbs = (a, b) => Math.max(...a.map((x, i) => Math.abs(x - b[i])));

test('MiniLM embeddings follow llama.cpp', async () => {
  const ctx = await load('all-MiniLM-L6-v2-f16.gguf', { n_ctx: 512 });
  const info = await ctx.contextInfo();
  assert.equal(info.arch, 'bert');
  assert.equal(info.pooling, 'mean');
  assert.equal(info.n_embd, 384);
  const g = await golden('minilm/embedding.json');
  for (const item of g.items) {
    const r = await ctx.embedding(item.text);
    assert.deepEqual(r.token_ids, item.token_ids, item.text);
    assert.equal(r.pooling, 'mean');
    assert.equal(r.truncated, false);
    assert.equal(r.embedding.length, 384);
    const c = cosine(r.embedding, item.embedding_mean);
    const d = maxAbs(r.embedding, item.embedding_mean);
    assert.ok(c >= 0.9999 && d <= 1e-3, `${item.text}: cosine ${c}, max abs ${d}`);
  }
  // Per token, unnormalised.
  await ctx.release();
  const none = await load('all-MiniLM-L6-v2-f16.gguf', { n_ctx: 512, pooling_type: 'none' });
  const p = g.pooling_none;
  const r = await none.embedding(p.text, { embd_normalize: -1 });
  assert.equal(r.embedding.length, p.token_ids.length);
  r.embedding.forEach((v, t) => {
    const c = cosine(v, p.per_token_raw[t]);
    assert.ok(c >= 0.9999 && maxAbs(v, p.per_token_raw[t]) <= 0.01, `token ${t}: cosine ${c}`);
  });
  await assert.rejects(none.embedding(''), { message: 'invalid argument: text 0 is empty' });
  await assert.rejects(none.rerank('q', ['d']), /pooling type rank/);
  await none.release();
});

test('the reranker scores and orders as llama.cpp', async () => {
  const ctx = await load('ms-marco-MiniLM-L12-v2-reranker-withpooler-q8_0.gguf', { pooling_type: 'rank' });
  const g = await golden('reranker/rerank.json');
  const query = g.pairs[0].query;
  const pairs = g.pairs.filter((p) => p.query === query);
  const docs = pairs.map((p) => p.document);
  const results = await ctx.rerank(query, docs);
  assert.equal(results.length, docs.length);
  for (const r of results) {
    const want = pairs[r.index].score.q8_0;
    assert.ok(Math.abs(r.score - want) <= 0.1, `${r.document}: ${r.score} vs ${want}`);
    assert.equal(r.document, docs[r.index]);
  }
  const order = [...pairs.keys()].sort((a, b) => pairs[b].score.q8_0 - pairs[a].score.q8_0);
  assert.deepEqual(results.map((r) => r.index), order);
  const probs = await ctx.rerank(query, docs, { normalize: true });
  assert.ok(probs.every((p) => p.score > 0 && p.score < 1));
  await assert.rejects(ctx.rerank(query, []), /no documents/);
  await assert.rejects(ctx.completion({ prompt: 'hi' }), /cannot generate/);
  await ctx.release();
  await assert.rejects(
    load('SmolLM2-135M-Instruct.Q4_1.gguf', { pooling_type: 'rank' }),
    /rank pooling needs a classifier head .* llama model has none/,
  );
});

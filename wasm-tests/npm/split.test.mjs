// Models split across files and models read from a path, through the packed
// npm package in Node: SmolLM2 Q4_1 in three parts (scripts/test-npm.sh
// writes them with `lamina split --split-max-size 40M`, which native-tests/
// split.rs checks against llama-gguf-split byte for byte) loads from a list of
// paths, Blobs or bytes, or from its first part's path alone, and generates
// what the whole file does; parts missing, out of order or alone are Errors.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { readFile } from 'node:fs/promises';
import { existsSync } from 'node:fs';
import { loadModel, modelInfo } from 'lamina';

const repo = process.env.LAMINA_REPO;
const prefix = process.env.LAMINA_SPLIT_PREFIX;
const smollm2 = `${repo}/models/SmolLM2-135M-Instruct.Q4_1.gguf`;
const parts = [1, 2, 3].map((i) => `${prefix}-0000${i}-of-00003.gguf`);

function need(path) {
  if (!existsSync(path)) throw new Error(`missing ${path}: run scripts/test-npm.sh (and scripts/fetch-models.sh)`);
  return path;
}

const greedy = { prompt: 'The capital of France is', n_predict: 6, temperature: 0 };

async function generated(source) {
  const ctx = await loadModel(source, { n_ctx: 64 });
  try {
    return (await ctx.completion(greedy)).generated_ids;
  } finally {
    await ctx.release();
  }
}

let wholeIds;
async function whole() {
  // The unsplit file by its path: read in chunks in the worker.
  wholeIds ??= await generated(need(smollm2));
  return wholeIds;
}

test('the parts by path, in a list or by the first alone, generate what the whole file does', async () => {
  parts.forEach(need);
  const expected = await whole();
  assert.equal(expected.length, 6);
  assert.deepEqual(await generated(parts), expected);
  assert.deepEqual(await generated(parts[0]), expected);
});

test('the parts as Blobs or bytes; progress covers every part', async () => {
  const bytes = await Promise.all(parts.map((p) => readFile(p)));
  const fractions = [];
  const info = await modelInfo(
    bytes.map((b) => new Blob([b])),
    { onProgress: (f) => fractions.push(f) },
  );
  assert.deepEqual(
    info.parts.map((p) => [p.bytes, p.tensors]),
    bytes.map((b, i) => [b.length, [39, 162, 71][i]]),
  );
  assert.equal(info.tensors.length, 272);
  assert.equal(info.file_bytes, bytes.reduce((n, b) => n + b.length, 0));
  assert.deepEqual(info.tensors.at(-1).part, 2);
  assert.ok(fractions.some((f) => f > 0.5 && f < 1), `progress: ${fractions}`);
  assert.equal(fractions.at(-1), 1);
  assert.ok(fractions.every((f, i) => i === 0 || f >= fractions[i - 1]), `progress goes back: ${fractions}`);
  assert.deepEqual(await generated(bytes.map((b) => new Uint8Array(b))), await whole());
});

test('parts that do not make the model are Errors naming why', async () => {
  const blobs = await Promise.all(parts.map(async (p) => new Blob([await readFile(p)])));
  await assert.rejects(modelInfo([blobs[0]]), /the model is split in 3 files and 1 were given/);
  await assert.rejects(modelInfo([blobs[0], blobs[2], blobs[1]]), /part 2 of 3 is part 3/);
  await assert.rejects(modelInfo([blobs[1], blobs[0], blobs[2]]), /this is part 2 of a model in 3 files: load the model from its first part/);
  await assert.rejects(modelInfo([...blobs, blobs[2]]), /4 files were given, but the model is in 3/);
  // One part's bytes alone load as no model.
  await assert.rejects(
    loadModel(new Uint8Array(await readFile(parts[0])), { n_ctx: 64 }),
    /part 1 of a model in 3 files, and only it was given/,
  );
  await assert.rejects(modelInfo(`${prefix}-missing.gguf`), /cannot open .*-missing\.gguf/);
});

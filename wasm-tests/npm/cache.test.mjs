// The model cache through the packed npm package in Node (a directory: here
// a temporary one, LAMINA_CACHE_DIR): a model downloaded with `cache: true`
// loads again with the server stopped, an ETag change downloads it anew, a
// wrong sha256 is an Error and stores nothing, and list/delete/clear.
import { test, after } from 'node:test';
import assert from 'node:assert/strict';
import { readFile, mkdtemp, readdir, rm } from 'node:fs/promises';
import { createHash } from 'node:crypto';
import { createServer } from 'node:http';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

const dir = await mkdtemp(join(tmpdir(), 'lamina-cache-'));
process.env.LAMINA_CACHE_DIR = dir;
const { loadModel, modelInfo, cache } = await import('lamina');
after(() => rm(dir, { recursive: true, force: true }));

const repo = process.env.LAMINA_REPO;
const model = await readFile(`${repo}/models/SmolLM2-135M-Instruct.Q4_1.gguf`);
const digest = createHash('sha256').update(model).digest('hex');

let etag = '"one"';
let gets = 0;
function listen() {
  const server = createServer((req, res) => {
    if (req.method === 'GET') gets += 1;
    res.setHeader('etag', etag);
    if (req.method === 'HEAD') {
      res.writeHead(200, { 'content-length': model.length }).end();
      return;
    }
    res.writeHead(200, { 'content-length': model.length });
    res.end(model);
  });
  return new Promise((resolve) => server.listen(0, '127.0.0.1', () => resolve(server)));
}

const greedy = { prompt: 'The capital of France is', n_predict: 6, temperature: 0 };
async function generated(source, options) {
  const ctx = await loadModel(source, { n_ctx: 64 }, options);
  try {
    return (await ctx.completion(greedy)).generated_ids;
  } finally {
    await ctx.release();
  }
}

test('a cached model loads again offline; a new ETag downloads it anew; list, delete, clear', async () => {
  const expected = await generated(new Uint8Array(model));
  let server = await listen();
  const url = `http://127.0.0.1:${server.address().port}/model.gguf`;
  assert.equal(await cache.where(), dir);
  await cache.clear();
  gets = 0;
  assert.deepEqual(await generated(url, { cache: true }), expected);
  assert.equal(gets, 1);
  assert.deepEqual(await cache.list(), [
    { url, size: model.length, etag: '"one"', sha256: digest, stored: (await cache.list())[0].stored },
  ]);
  // Cached and current: no download.
  assert.deepEqual(await generated(url, { cache: true }), expected);
  assert.equal(gets, 1);
  // The server gone: the cached copy.
  await new Promise((resolve) => server.close(resolve));
  assert.deepEqual(await generated(url, { cache: true }), expected);
  // Without the cache, the server's absence is the error.
  await assert.rejects(modelInfo(url), (e) => e instanceof Error);
  // Back with another ETag: downloaded again, the record updated.
  server = await listen();
  const url2 = `http://127.0.0.1:${server.address().port}/model.gguf`;
  assert.deepEqual(await generated(url2, { cache: true }), expected);
  etag = '"two"';
  gets = 0;
  assert.deepEqual(await generated(url2, { cache: true }), expected);
  assert.equal(gets, 1);
  assert.equal((await cache.list()).find((e) => e.url === url2).etag, '"two"');
  assert.equal((await cache.list()).length, 2);
  await cache.delete(url);
  assert.deepEqual((await cache.list()).map((e) => e.url), [url2]);
  await cache.clear();
  assert.deepEqual(await cache.list(), []);
  assert.deepEqual(await readdir(dir), []);
  server.close();
});

test('a sha256 that does not match is an Error, and nothing is stored', async () => {
  const server = await listen();
  const url = `http://127.0.0.1:${server.address().port}/checked.gguf`;
  try {
    await cache.clear();
    const wrong = '0'.repeat(64);
    await assert.rejects(
      modelInfo(url, { cache: true, sha256: wrong }),
      new RegExp(`does not match its sha256: expected ${wrong}, got ${digest}`),
    );
    assert.deepEqual(await cache.list(), []);
    assert.deepEqual(await readdir(dir), []);
    // Without the cache too.
    await assert.rejects(modelInfo(url, { sha256: wrong }), /does not match its sha256/);
    // The right one: stored with it.
    const info = await modelInfo(url, { cache: true, sha256: digest.toUpperCase() });
    assert.equal(info.tensors.length, 272);
    assert.equal((await cache.list())[0].sha256, digest);
  } finally {
    server.close();
    await cache.clear();
  }
});

test("the browsers' SHA-256 (no streaming digest there) equals Node's, over any chunking", async () => {
  const { jsSha256Hex } = await import(`${repo}/npm/sha256.js`);
  let seed = 7;
  const next = () => (seed = (seed * 1103515245 + 12345) >>> 0);
  for (const n of [0, 1, 55, 56, 63, 64, 65, 119, 120, 4097, 100_003]) {
    const bytes = Uint8Array.from({ length: n }, () => next() >>> 24);
    const chunks = [];
    for (let i = 0; i < n; ) {
      const k = Math.min(n - i, 1 + (next() % 200));
      chunks.push(bytes.subarray(i, i + k));
      i += k;
    }
    assert.equal(jsSha256Hex(chunks), createHash('sha256').update(bytes).digest('hex'), `${n} bytes`);
  }
});

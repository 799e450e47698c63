// Models by URL through the packed npm package in Node, against a local HTTP
// server started here: ranged downloads several at a time (or one after
// another), a connection dropped mid-range and resumed from its byte, a
// server without ranges, a compressed transfer sized by its decoded bytes, a
// split model by its first part's URL, an abort during the download and one
// while the weights are bound, and progress by the byte and by the weights
// bound.
import { test, after } from 'node:test';
import assert from 'node:assert/strict';
import { readFile } from 'node:fs/promises';
import { createServer } from 'node:http';
import { gzipSync } from 'node:zlib';
import { loadModel, modelInfo } from 'lamina';

const repo = process.env.LAMINA_REPO;
const prefix = process.env.LAMINA_SPLIT_PREFIX;
const model = await readFile(`${repo}/models/SmolLM2-135M-Instruct.Q4_1.gguf`);
const parts = await Promise.all([1, 2, 3].map((i) => readFile(`${prefix}-0000${i}-of-00003.gguf`)));
const gzipped = gzipSync(model, { level: 1 });

/** What the server saw: every request's path and Range, and the most at once. */
const seen = { requests: [], open: 0, mostOpen: 0 };
/** Ranges whose first request the server cuts short (after half the bytes). */
const cut = new Set();
/** Paths the server answers slowly, a chunk at a time (for the abort). */
let slow = false;

const server = createServer((req, res) => {
  const range = req.headers.range ?? null;
  const [path, query = ''] = req.url.split('?');
  seen.requests.push({ method: req.method, path, query, range });
  seen.open += 1;
  seen.mostOpen = Math.max(seen.mostOpen, seen.open);
  res.on('close', () => {
    seen.open -= 1;
  });
  const file = {
    '/model.gguf': model,
    '/no-ranges/model.gguf': model,
    '/gzip/model.gguf': model,
    '/split/smollm2-00001-of-00003.gguf': parts[0],
    '/split/smollm2-00002-of-00003.gguf': parts[1],
    '/split/smollm2-00003-of-00003.gguf': parts[2],
  }[path];
  if (!file) {
    res.writeHead(404).end();
    return;
  }
  if (path.startsWith('/gzip/')) {
    // Content-Length is the compressed size; the body decodes to the model.
    res.writeHead(200, { 'content-encoding': 'gzip', 'content-length': gzipped.length });
    res.end(gzipped);
    return;
  }
  const match = /^bytes=(\d+)-(\d+)?$/.exec(range ?? '');
  if (!match || path.startsWith('/no-ranges/')) {
    res.writeHead(200, { 'content-length': file.length });
    res.end(file);
    return;
  }
  const start = Number(match[1]);
  const end = Math.min(match[2] === undefined ? file.length - 1 : Number(match[2]), file.length - 1);
  res.writeHead(206, {
    'content-range': `bytes ${start}-${end}/${file.length}`,
    'content-length': end - start + 1,
  });
  const body = file.subarray(start, end + 1);
  if (cut.delete(start)) {
    // Half the range, then the connection drops.
    res.write(body.subarray(0, body.length >> 1), () => res.destroy());
    return;
  }
  if (slow) {
    let offset = 0;
    const drip = () => {
      if (res.destroyed) return;
      if (offset >= body.length) return res.end();
      res.write(body.subarray(offset, offset + 65536));
      offset += 65536;
      setTimeout(drip, 20);
    };
    drip();
    return;
  }
  res.end(body);
});
await new Promise((resolve) => server.listen(0, '127.0.0.1', resolve));
const base = `http://127.0.0.1:${server.address().port}`;
after(() => server.close());

function reset() {
  seen.requests = [];
  seen.mostOpen = 0;
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

let wholeIds;
async function whole() {
  wholeIds ??= await generated(new Uint8Array(model));
  return wholeIds;
}

test('ranged downloads run `parallel` at a time and give the model', async () => {
  const expected = await whole();
  reset();
  const fractions = [];
  assert.deepEqual(await generated(`${base}/model.gguf`, { parallel: 4, onProgress: (f) => fractions.push(f) }), expected);
  // One HEAD first (the model's size picks the build), then the ranges.
  assert.deepEqual(seen.requests[0], { method: 'HEAD', path: '/model.gguf', query: '', range: null });
  const ranges = seen.requests.filter((r) => r.method === 'GET' && r.path === '/model.gguf').map((r) => r.range);
  assert.equal(ranges.length, Math.ceil(model.length / (16 << 20)), `${ranges}`);
  assert.equal(ranges[0], `bytes=0-${(16 << 20) - 1}`);
  assert.ok(seen.mostOpen >= 2 && seen.mostOpen <= 4, `at most ${seen.mostOpen} requests at once`);
  // Progress by the byte (the download is the first half, many more reports
  // than ranges), then by the weights bound (the second), never backwards.
  const downloading = fractions.filter((f) => f <= 0.5);
  assert.ok(downloading.length > 4 * ranges.length, `${downloading.length} download progress reports`);
  const binding = fractions.filter((f) => f > 0.5 && f < 1).length;
  assert.ok(binding >= 10, `${binding} weight binding reports`);
  assert.ok(fractions.every((f, i) => i === 0 || f >= fractions[i - 1]), 'progress went back');
  assert.equal(fractions.at(-1), 1);

  reset();
  assert.deepEqual(await generated(`${base}/model.gguf`, { parallel: 1 }), expected);
  assert.equal(seen.mostOpen, 1);
});

test('a connection dropped mid-range resumes from the byte it reached', async () => {
  const expected = await whole();
  reset();
  const second = 16 << 20;
  cut.add(second);
  assert.deepEqual(await generated(`${base}/model.gguf`, { parallel: 2 }), expected);
  assert.equal(cut.size, 0, 'the cut happened');
  // Asked again from where it stopped (about half way: what arrived before
  // the drop), not from the range's start.
  const starts = seen.requests.map((r) => Number(/^bytes=(\d+)-/.exec(r.range ?? '')?.[1]));
  const resumed = starts.filter((s) => s > second && s <= second + (16 << 19));
  assert.equal(resumed.length, 1, JSON.stringify(seen.requests));
  assert.equal(starts.filter((s) => s === second).length, 1);
  // With no retries, the drop is the error.
  cut.add(second);
  await assert.rejects(modelInfo(`${base}/model.gguf`, { parallel: 2, retries: 0 }), (e) => e instanceof Error);
  cut.clear();
});

test('a server without ranges, and a compressed transfer, give the model', async () => {
  reset();
  const info = await modelInfo(`${base}/no-ranges/model.gguf`);
  assert.equal(info.file_bytes, model.length);
  assert.equal(seen.requests.length, 1);
  const gz = await modelInfo(`${base}/gzip/model.gguf`);
  assert.equal(gz.file_bytes, model.length);
  assert.equal(gz.tensors.length, 272);
  await assert.rejects(modelInfo(`${base}/missing.gguf`), /HTTP 404/);
});

test('a split model by its first part URL', async () => {
  reset();
  assert.deepEqual(await generated(`${base}/split/smollm2-00001-of-00003.gguf?token=x`), await whole());
  // The other parts named after the first, its query kept.
  const urls = new Set(seen.requests.map((r) => `${r.path}?${r.query}`));
  assert.deepEqual([...urls].sort(), [1, 2, 3].map((i) => `/split/smollm2-0000${i}-of-00003.gguf?token=x`));
});

test('an abort during the download stops it and rejects', async () => {
  slow = true;
  try {
    const controller = new AbortController();
    const fractions = [];
    const loading = loadModel(`${base}/model.gguf`, { n_ctx: 64 }, {
      signal: controller.signal,
      onProgress: (f) => {
        fractions.push(f);
        if (f > 0.02) controller.abort(new Error('stopped by the test'));
      },
    });
    await assert.rejects(loading, /stopped by the test/);
    assert.ok(fractions.at(-1) < 0.5, `progress reached ${fractions.at(-1)}`);
    // The server's connections close: the worker and its requests are gone.
    for (let i = 0; i < 100 && seen.open > 0; i++) await new Promise((r) => setTimeout(r, 20));
    assert.equal(seen.open, 0);
  } finally {
    slow = false;
  }
});

test('an abort while the weights are bound stops the load and rejects', async () => {
  // Past half the progress the file is read and the engine binds the
  // weights, layer by layer; an abort there ends the model's worker.
  const controller = new AbortController();
  const fractions = [];
  const loading = loadModel(`${repo}/models/SmolLM2-135M-Instruct.Q4_1.gguf`, { n_ctx: 64 }, {
    signal: controller.signal,
    onProgress: (f) => {
      fractions.push(f);
      if (f > 0.6) controller.abort(new Error('stopped while binding'));
    },
  });
  await assert.rejects(loading, /stopped while binding/);
  const heard = fractions.length;
  assert.ok(fractions.at(-1) > 0.6 && fractions.at(-1) < 1, `progress reached ${fractions.at(-1)}`);
  // The worker is gone: nothing more is heard from it, and a new load works.
  await new Promise((r) => setTimeout(r, 300));
  assert.equal(fractions.length, heard);
  assert.deepEqual(await generated(`${repo}/models/SmolLM2-135M-Instruct.Q4_1.gguf`), await whole());
});

// The browser test of the chat page (scripts/test-web.sh): headless Chromium
// (Debian's, driven by playwright-core) opens web/ from the COOP/COEP server,
// loads SmolLM2 Q4_1 by URL with 2 threads, generates 16 greedy tokens for a
// golden prompt, and checks
//   - the threaded build ran, with 2 threads;
//   - the ids equal llama.cpp's (golden) up to its first near-tie, and all 16
//     equal the single-thread wasm engine's in Node (same kernels: threads
//     split rows, never a dot product, so the numbers are the same);
//   - the stop button ends a long generation at once and the page stays usable;
// then saves a screenshot. Served without COOP/COEP (/plain/), the page falls
// back to the single-thread build, says why, and still generates and stops.
// Gemma 3 270M (a browser-sized model of the new families) answers a chat
// turn in Gemma's format through the page: the reference's prompt ids and
// greedy ids. (Raw mode: the file carries no chat template, so chat mode
// would fall back to ChatML, as llama.cpp does.)
// One more case embeds a MiniLM golden sentence through the package's worker;
// another panics one of two models and checks the other keeps working; one
// saves a session to the origin private file system and loads it in another
// model (same ids, the prompt reused); one loads SmolLM2 split in three files
// by its first URL into the model cache (OPFS), then again with the URLs failing;
// one serves the npm README's browser quick start as the page; one loads a
// model over 4 GiB in the memory64 build; one caches a model in Cache
// Storage, as in a browser without OPFS, and loads it again offline; the
// last downloads through dropped connections (resumed) and aborts a download
// and a weight binding.
// Env: LAMINA_REPO, LAMINA_TOOLS, LAMINA_WEB_URL, LAMINA_SCREENSHOT.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { createRequire } from 'node:module';
import { readFile, mkdir, rm, writeFile, symlink } from 'node:fs/promises';
import { existsSync } from 'node:fs';
import { dirname } from 'node:path';

const repo = process.env.LAMINA_REPO;
const pageUrl = process.env.LAMINA_WEB_URL;
const screenshot = process.env.LAMINA_SCREENSHOT;
const { chromium } = createRequire(`${process.env.LAMINA_TOOLS}/`)('playwright-core');
const MODEL = 'SmolLM2-135M-Instruct.Q4_1.gguf';
const GEMMA = 'gemma-3-270m-q4_k_m.gguf';
const N_TOKENS = 16;

const golden = JSON.parse(
  await readFile(`${repo}/native-tests/golden/smollm2/generate/q4_1_france.json`, 'utf8'),
);

/** The same prompt through the npm package's engine in Node (single-thread build). */
async function nodeIds() {
  const path = `${repo}/models/${MODEL}`;
  if (!existsSync(path)) throw new Error(`model missing at ${path}: run scripts/fetch-models.sh`);
  const { loadModel } = await import(`${repo}/npm/index.js`);
  const ctx = await loadModel(new Uint8Array(await readFile(path)), { n_ctx: 2048, n_threads: 1 });
  const r = await ctx.completion({ prompt: golden.prompt, n_predict: N_TOKENS, temperature: 0 });
  await ctx.release();
  return r.generated_ids;
}

function launch() {
  return chromium.launch({
    executablePath: '/usr/bin/chromium',
    args: [
      '--no-sandbox', '--disable-gpu', '--disable-background-networking',
      '--disable-component-update', '--disable-sync', '--no-first-run',
    ],
  });
}

/** Opens the page at `url` and loads `model` (SmolLM2) with 2 threads; `{ info, engine }`. */
async function openAndLoad(page, url, model = MODEL) {
  await page.goto(url);
  await page.fill('#url', `/models/${model}`);
  await page.fill('#threads', '2');
  await page.click('#load-button');
  await page.waitForFunction(() => ['ready', 'error'].includes(document.body.dataset.state), null, { timeout: 120_000 });
  const engine = await page.textContent('#engine');
  assert.equal(await page.evaluate(() => document.body.dataset.state), 'ready', engine);
  return { info: await page.evaluate(() => window.laminaPage.info), engine };
}

/** Starts a long generation, clicks Stop, checks it ended as an abort. */
async function stopLongGeneration(page) {
  const answers = await page.locator('.msg.assistant').count();
  await page.selectOption('#mode', 'raw');
  await page.fill('#n_predict', '4000');
  await page.fill('#temperature', '0');
  await page.fill('#prompt', 'Once upon a time');
  await page.click('#send');
  await page.waitForFunction(
    (i) => document.querySelectorAll('.msg.assistant')[i]?.textContent.length > 20, answers);
  await page.click('#stop');
  await page.waitForFunction(() => document.body.dataset.state === 'ready', null, { timeout: 30_000 });
  const stopped = await page.evaluate(() => window.laminaPage.last);
  assert.equal(stopped.stop_reason, 'abort');
  assert.ok(stopped.tokens_predicted < 4000);
}

test('the chat page generates golden tokens with the threaded build', async () => {
  const expected = await nodeIds();
  const browser = await launch();
  try {
    const page = await browser.newPage({ viewport: { width: 1000, height: 760 } });
    const errors = [];
    page.on('pageerror', (e) => errors.push(e.message));
    const { info, engine } = await openAndLoad(page, pageUrl);
    assert.equal(await page.evaluate(() => self.crossOriginIsolated), true, 'the server sends COOP/COEP');
    assert.equal(info.build, 'threaded', engine);
    assert.equal(info.n_threads, 2, engine);
    // Chromium runs relaxed SIMD: the relaxed threaded build, whose ids must
    // equal those of Node's single-thread SIMD128 build (checked below).
    assert.equal(info.simd, 'relaxed-simd', engine);
    assert.equal(info.cpu_variant, 'relaxed-simd');
    assert.match(engine, /threaded build .* 2 threads/);

    await page.selectOption('#mode', 'raw');
    await page.fill('#n_predict', String(N_TOKENS));
    await page.fill('#temperature', '0');
    await page.fill('#prompt', golden.prompt);
    await page.click('#send');
    await page.waitForFunction(() => document.body.dataset.state === 'generating');
    await page.waitForFunction(() => document.body.dataset.state === 'ready', null, { timeout: 120_000 });
    const result = await page.evaluate(() => window.laminaPage.last);
    assert.ok(result, await page.textContent('#chat'));

    let sure = golden.top1_top2_gap_per_step.findIndex((gap) => gap < 0.5);
    if (sure < 0) sure = golden.generated_ids.length;
    assert.deepEqual(result.prompt_ids, golden.prompt_ids);
    assert.equal(result.generated_ids.length, N_TOKENS);
    assert.deepEqual(result.generated_ids.slice(0, sure), golden.generated_ids.slice(0, sure));
    assert.deepEqual(result.generated_ids, expected, 'the browser and Node give the same 16 ids');
    const shown = await page.textContent('.msg.assistant');
    assert.equal(shown, result.text, 'the streamed text is on the page');
    assert.match(await page.textContent('#stats'), /prompt: \d+ tokens, [\d.]+ t\/s · generation: 16 tokens/);
    await mkdir(dirname(screenshot), { recursive: true });
    await page.screenshot({ path: screenshot, fullPage: true });

    // Stop: a long generation ends at the click, reported as an abort.
    await stopLongGeneration(page);
    assert.deepEqual(errors, []);
  } finally {
    await browser.close();
  }
});

test('Gemma 3 270M answers a chat turn in the page', async () => {
  const g = JSON.parse(
    await readFile(`${repo}/native-tests/golden/families/gemma3-270m-chat.json`, 'utf8'),
  );
  const browser = await launch();
  try {
    const page = await browser.newPage();
    const errors = [];
    page.on('pageerror', (e) => errors.push(e.message));
    const { info, engine } = await openAndLoad(page, pageUrl, GEMMA);
    assert.equal(info.build, 'threaded', engine);
    await page.selectOption('#mode', 'raw');
    await page.fill('#n_predict', '8');
    await page.fill('#temperature', '0');
    await page.fill('#prompt', g.prompt);
    await page.click('#send');
    await page.waitForFunction(() => document.body.dataset.state === 'generating');
    await page.waitForFunction(() => document.body.dataset.state === 'ready', null, { timeout: 180_000 });
    const result = await page.evaluate(() => window.laminaPage.last);
    assert.ok(result, await page.textContent('#chat'));
    assert.deepEqual(result.prompt_ids, g.prompt_ids, 'the turn markers are special tokens');
    // Greedy ids equal the reference's up to its first near-tie.
    let sure = g.step_top5.findIndex((s) => s[0][1] - s[1][1] < 0.5);
    if (sure < 0) sure = g.generated_ids.length;
    const n = Math.min(sure, 8);
    assert.equal(result.generated_ids.length, 8);
    assert.deepEqual(result.generated_ids.slice(0, n), g.generated_ids.slice(0, n));
    assert.equal(await page.textContent('.msg.assistant'), result.text);
    assert.deepEqual(errors, []);
  } finally {
    await browser.close();
  }
});

test('without cross-origin isolation the page falls back to the single-thread build', async () => {
  const browser = await launch();
  try {
    const page = await browser.newPage();
    const errors = [];
    page.on('pageerror', (e) => errors.push(e.message));
    const plain = new URL(pageUrl);
    plain.pathname = `/plain${plain.pathname}`;
    const { info, engine } = await openAndLoad(page, plain.href);
    assert.equal(await page.evaluate(() => self.crossOriginIsolated), false);
    assert.equal(info.build, 'single-thread', engine);
    assert.equal(info.n_threads, 1);
    assert.equal(info.cpu_variant, 'relaxed-simd');
    assert.match(engine, /single-thread build \(the page is not cross-origin isolated/);
    // The single-thread worker still hears the stop between tokens.
    await stopLongGeneration(page);
    assert.deepEqual(errors, []);
  } finally {
    await browser.close();
  }
});

test('embeddings in the browser follow llama.cpp (threaded SIMD128 build in a worker)', async () => {
  const g = JSON.parse(await readFile(`${repo}/native-tests/golden/minilm/embedding.json`, 'utf8'));
  const item = g.items[1];
  const browser = await launch();
  try {
    const page = await browser.newPage();
    await page.goto(pageUrl);
    const got = await page.evaluate(async (text) => {
      const { loadModel } = await import('/npm/index.js');
      // The SIMD128 threaded build, asked for where relaxed SIMD would run.
      const ctx = await loadModel('/models/all-MiniLM-L6-v2-f16.gguf', { n_threads: 2, simd: 'simd128' });
      const r = await ctx.embedding(text);
      const build = ctx.build;
      await ctx.release();
      return { ...r, build };
    }, item.text);
    assert.equal(got.build.build, 'threaded');
    assert.equal(got.build.simd, 'simd128');
    assert.equal(got.build.cpu_variant, 'simd128');
    assert.equal(got.build.arch, 'bert');
    assert.deepEqual(got.token_ids, item.token_ids);
    let dot = 0, na = 0, nb = 0, diff = 0;
    got.embedding.forEach((x, i) => {
      const y = item.embedding_mean[i];
      dot += x * y; na += x * x; nb += y * y;
      diff = Math.max(diff, Math.abs(x - y));
    });
    const cos = dot / Math.sqrt(na * nb);
    assert.ok(cos >= 0.9999 && diff <= 1e-3, `cosine ${cos}, max abs ${diff}`);
  } finally {
    await browser.close();
  }
});

test("one model's panic in the browser leaves the other model running", async () => {
  const browser = await launch();
  try {
    const page = await browser.newPage();
    await page.goto(pageUrl);
    const got = await page.evaluate(async () => {
      const { loadModel } = await import('/npm/index.js');
      const load = () => loadModel('/models/all-MiniLM-L6-v2-f16.gguf', { n_threads: 2 });
      const [hurt, other] = await Promise.all([load(), load()]);
      const message = (promise) => promise.then(() => 'resolved', (e) => `${e.constructor.name}: ${e.message}`);
      const before = (await other.embedding('a sentence to embed')).embedding;
      const panic = await message(hurt._testPanic('checked failure 42'));
      const after = await message(hurt.tokenize('hello'));
      const still = (await other.embedding('a sentence to embed')).embedding;
      await Promise.all([hurt.release(), other.release()]);
      return { build: other.build.build, panic, after, same: JSON.stringify(before) === JSON.stringify(still) };
    });
    assert.equal(got.build, 'threaded');
    assert.match(got.panic, /^Error: lamina panicked: checked failure 42 \(at src\/wasm\/mod.rs:\d+\)$/);
    assert.match(got.after, /^Error: the lamina engine stopped after a panic: checked failure 42/);
    assert.ok(got.same, 'the other model embeds as before');
  } finally {
    await browser.close();
  }
});

test('a session saved to the origin private file system continues in another model with the same ids', async () => {
  const browser = await launch();
  try {
    const page = await browser.newPage();
    await page.goto(pageUrl);
    const got = await page.evaluate(async (model) => {
      const { loadModel } = await import('/npm/index.js');
      const load = () => loadModel(`/models/${model}`, { n_threads: 2, n_ctx: 256 });
      const [a, b] = await Promise.all([load(), load()]);
      const p = { prompt: 'The capital of France is Paris. The capital of Italy is', n_predict: 8, temperature: 0 };
      await a.completion({ ...p, n_predict: 3 });
      const saved = await a.saveSession('sessions/chat.session');
      const root = await navigator.storage.getDirectory();
      const dir = await root.getDirectoryHandle('sessions');
      const size = (await (await dir.getFileHandle('chat.session')).getFile()).size;
      const loaded = await b.loadSession('sessions/chat.session');
      const fromA = await a.completion(p);
      const fromB = await b.completion(p);
      const missing = await b.loadSession('sessions/none.session').then(() => 'loaded', (e) => e.message);
      await root.removeEntry('sessions', { recursive: true });
      await Promise.all([a.release(), b.release()]);
      return { saved, size, loaded, fromA: fromA.generated_ids, fromB: fromB.generated_ids, cached: fromB.tokens_cached, n: fromA.prompt_ids.length, missing };
    }, MODEL);
    assert.ok(got.saved > 10 && got.size > 100_000, `${got.saved} tokens, ${got.size} bytes`);
    assert.equal(got.loaded.tokens_loaded, got.saved);
    assert.deepEqual(got.fromB, got.fromA);
    assert.equal(got.cached, got.n - 1);
    assert.equal(got.missing, 'no session sessions/none.session in the origin private file system');
  } finally {
    await browser.close();
  }
});

test('a split model by its first URL, cached in the origin private file system, loads again offline', async () => {
  const browser = await launch();
  try {
    const page = await browser.newPage();
    await page.goto(pageUrl);
    const first = '/target/web-split/smollm2-00001-of-00003.gguf';
    const load = (options, url = first) =>
      page.evaluate(async ({ url, options }) => {
        const { loadModel, cache } = await import('/npm/index.js');
        const fractions = [];
        const ctx = await loadModel(url, { n_threads: 2, n_ctx: 128 }, { ...options, onProgress: (f) => fractions.push(f) });
        const r = await ctx.completion({ prompt: 'The capital of France is', n_predict: 6, temperature: 0 });
        await ctx.release();
        const entries = (await cache.list()).map((e) => [new URL(e.url).pathname, e.size]);
        return { ids: r.generated_ids, entries, fractions: [fractions.length, fractions.at(-1)] };
      }, { url, options });
    await page.evaluate(async () => (await import('/npm/index.js')).cache.clear());
    const requested = [];
    page.on('request', (r) => requested.push(`${r.method()} ${new URL(r.url()).pathname}`));
    const whole = await load({}, `/models/${MODEL}`);
    const online = await load({ cache: true });
    assert.deepEqual(online.ids, whole.ids);
    assert.deepEqual(
      online.entries.map(([path]) => path),
      [1, 2, 3].map((i) => `/target/web-split/smollm2-0000${i}-of-00003.gguf`),
    );
    assert.equal(online.fractions[1], 1);
    assert.ok(requested.some((r) => r.startsWith('GET /target/web-split/')), requested.join('\n'));
    // The parts' URLs now fail: the cached copies load.
    requested.length = 0;
    await page.route('**/target/web-split/**', (route) => route.abort());
    const offline = await load({ cache: true });
    assert.deepEqual(offline.ids, online.ids);
    assert.ok(!requested.some((r) => r.startsWith('GET /target/web-split/')), requested.join('\n'));
    // Without the cache they cannot load.
    const failed = await page
      .evaluate(async (first) => (await import('/npm/index.js')).loadModel(first).then(() => 'loaded', (e) => e.message), first);
    assert.match(failed, /fetch/i);
    await page.evaluate(async () => (await import('/npm/index.js')).cache.clear());
  } finally {
    await browser.close();
  }
});

test("the README's browser quick start runs as pasted", async () => {
  // The page is the README's code block, served with the package installed
  // beside it (node_modules/lamina) and the model; it must stream the text
  // Node's engine gives for the same chat.
  const readme = await readFile(`${repo}/npm/README.md`, 'utf8');
  const section = readme.slice(readme.indexOf('## Quick start: browser\n'));
  const start = section.indexOf('```html\n') + '```html\n'.length;
  const dir = `${repo}/target/web-quickstart`;
  await rm(dir, { recursive: true, force: true });
  await mkdir(`${dir}/node_modules`, { recursive: true });
  await writeFile(`${dir}/index.html`, section.slice(start, section.indexOf('\n```', start)));
  await symlink(`${repo}/npm`, `${dir}/node_modules/lamina`);
  await symlink(`${repo}/models/${MODEL}`, `${dir}/${MODEL}`);

  const { loadModel } = await import(`${repo}/npm/index.js`);
  const ctx = await loadModel(`${repo}/models/${MODEL}`, { n_ctx: 2048, n_threads: 1 });
  const messages = [{ role: 'user', content: 'What is the capital of France?' }];
  const expected = (await ctx.completion({ messages, n_predict: 32, temperature: 0 })).text;
  await ctx.release();

  const browser = await launch();
  try {
    const page = await browser.newPage();
    const errors = [];
    page.on('pageerror', (e) => errors.push(e.message));
    await page.goto(new URL('/target/web-quickstart/', pageUrl).href);
    await page.waitForFunction((text) => document.getElementById('out').textContent === text, expected, {
      timeout: 120_000,
    });
    assert.deepEqual(errors, []);
  } finally {
    await browser.close();
  }
});

test('a model over 4 GiB loads by URL in the memory64 build and reads its last bytes', async () => {
  // scripts/test-web.sh writes it (native-tests/common/big_model.rs): every
  // greedy token is 49151 when bytes past 4.6 GB are read where they are.
  const path = `${repo}/target/web-big/over-4-gib.gguf`;
  if (!existsSync(path)) throw new Error(`the model over 4 GiB is missing at ${path}: scripts/test-web.sh writes it`);
  const browser = await launch();
  try {
    const page = await browser.newPage();
    await page.goto(pageUrl);
    const run = (url, params, prompt, n_predict) =>
      page.evaluate(async ({ url, params, prompt, n_predict }) => {
        const { loadModel } = await import('/npm/index.js');
        const ctx = await loadModel(url, params);
        const r = await ctx.completion({ prompt, n_predict, temperature: 0 });
        await ctx.release();
        return { build: ctx.build, ids: r.generated_ids };
      }, { url, params, prompt, n_predict });
    const got = await run('/target/web-big/over-4-gib.gguf', { n_ctx: 64 }, 'Hello', 2);
    assert.equal(got.build.build, 'memory64', got.build.reason);
    assert.match(got.build.reason, /^the model is 4\.\d GiB: 64-bit memory/);
    assert.ok(got.build.model_size > 4 * 2 ** 30);
    assert.deepEqual(got.ids, [49151, 49151]);
    // SmolLM2 in the same build, asked for: the ids of Node's wasm32 build.
    const small = await run(`/models/${MODEL}`, { n_ctx: 2048, memory64: true }, golden.prompt, N_TOKENS);
    assert.equal(small.build.build, 'memory64');
    assert.deepEqual(small.ids, await nodeIds());
  } finally {
    await browser.close();
  }
});

test('without OPFS the model cache is Cache Storage, and loads offline from it', async () => {
  const browser = await launch();
  try {
    const page = await browser.newPage();
    await page.goto(pageUrl);
    // The engine in the page's own thread, the origin private file system
    // hidden from it, as in a browser that has none.
    const load = (options) =>
      page.evaluate(async ({ url, options }) => {
        delete StorageManager.prototype.getDirectory;
        const engine = await import('/npm/engine.js');
        const { cache } = await import('/npm/cache.js');
        const ctx = await engine.loadModel(url, { n_ctx: 128, n_threads: 1 }, options);
        const r = await ctx.completion({ prompt: 'The capital of France is', n_predict: 6, temperature: 0 });
        await ctx.release();
        const entries = (await cache.list()).map((e) => [new URL(e.url, location.href).pathname, e.size]);
        return { ids: r.generated_ids, entries, where: await cache.where() };
      }, { url: `/models/${MODEL}`, options });
    const requested = [];
    page.on('request', (r) => requested.push(`${r.method()} ${new URL(r.url()).pathname}`));
    const plain = await load({});
    const online = await load({ cache: true });
    assert.equal(online.where, 'Cache Storage (lamina-models)');
    assert.deepEqual(online.entries, [[`/models/${MODEL}`, (await readFile(`${repo}/models/${MODEL}`)).length]]);
    assert.deepEqual(online.ids, plain.ids);
    // The model's URL now fails: the cached copy loads.
    requested.length = 0;
    await page.route(`**/models/${MODEL}`, (route) => route.abort());
    const offline = await load({ cache: true });
    assert.deepEqual(offline.ids, plain.ids);
    assert.ok(!requested.includes(`GET /models/${MODEL}`), requested.join('\n'));
    // The file and its record are the two keys of lamina's cache; clear() empties it.
    const keys = await page.evaluate(async () => {
      const { cache } = await import('/npm/cache.js');
      const count = async () => (await (await caches.open('lamina-models')).keys()).length;
      const before = await count();
      await cache.clear();
      return [before, (await cache.list()).length, await count()];
    });
    assert.deepEqual(keys, [2, 0, 0]);
  } finally {
    await browser.close();
  }
});

test('in the page a dropped connection resumes, and an abort stops a download or the weight binding', async () => {
  const browser = await launch();
  try {
    const page = await browser.newPage();
    await page.goto(pageUrl);
    // The Range of every request for the flaky copy (web/server.py cuts the
    // first request of each range after the first, halfway through).
    const ranges = [];
    page.on('request', (r) => {
      if (r.url().includes('/flaky/') && r.method() === 'GET') ranges.push(r.headers().range);
    });
    const run = (url, abortAt = null) =>
      page.evaluate(async ({ url, abortAt }) => {
        const { loadModel } = await import('/npm/index.js');
        const controller = new AbortController();
        const fractions = [];
        const onProgress = (f) => {
          fractions.push(f);
          if (abortAt !== null && f > abortAt) controller.abort(new Error('stopped by the test'));
        };
        try {
          const ctx = await loadModel(url, { n_ctx: 128, n_threads: 2 }, { parallel: 2, signal: controller.signal, onProgress });
          const r = await ctx.completion({ prompt: 'The capital of France is', n_predict: 6, temperature: 0 });
          await ctx.release();
          return { ids: r.generated_ids, last: fractions.at(-1) };
        } catch (e) {
          return { error: e.message, last: fractions.at(-1) };
        }
      }, { url, abortAt });
    const whole = await run(`/models/${MODEL}`);
    assert.equal(whole.error, undefined, whole.error);

    // A query of its own: the server cuts each URL's ranges once.
    const resumed = await run(`/flaky/models/${MODEL}?run=${Date.now()}`);
    assert.deepEqual(resumed.ids, whole.ids, resumed.error);
    const starts = ranges.map((r) => Number(/^bytes=(\d+)-/.exec(r)[1]));
    const rangeStarts = starts.filter((s) => s % (16 << 20) === 0);
    const resumes = starts.filter((s) => s % (16 << 20) !== 0);
    assert.equal(rangeStarts.length, Math.ceil((await readFile(`${repo}/models/${MODEL}`)).length / (16 << 20)));
    // Every range but the first was cut once, and asked again from the byte it reached.
    assert.equal(resumes.length, rangeStarts.length - 1, ranges.join(' '));

    const downloadAborted = await run(`/slow/models/${MODEL}`, 0.02);
    assert.equal(downloadAborted.error, 'stopped by the test');
    assert.ok(downloadAborted.last < 0.5, `progress reached ${downloadAborted.last}`);
    const bindingAborted = await run(`/models/${MODEL}`, 0.6);
    assert.equal(bindingAborted.error, 'stopped by the test');
    assert.ok(bindingAborted.last > 0.6 && bindingAborted.last < 1, `progress reached ${bindingAborted.last}`);
    // Nothing is left behind that stops the next load.
    assert.deepEqual((await run(`/models/${MODEL}`)).ids, whole.ids);
  } finally {
    await browser.close();
  }
});

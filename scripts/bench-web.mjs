// Drives the chat page's Bench button and wllama's bench page in headless
// Chromium, alternating per model and thread count, with the npm package in
// Node and lamina native from the same run; see bench-web.sh.
import { execFileSync } from 'node:child_process';
import { createRequire } from 'node:module';

const { chromium } = createRequire(`${process.env.LAMINA_TOOLS}/`)('playwright-core');
const browser = await chromium.launch({
  executablePath: '/usr/bin/chromium',
  args: ['--no-sandbox', '--disable-gpu', '--disable-background-networking', '--no-first-run'],
});
const threadCounts = (process.env.THREADS ?? '1 2').split(' ').map(Number);
const reps = 3;

/** pp128 and tg64 rows ({avg_ts, stddev_ts}) of lamina's chat page. */
async function laminaWeb(model, threads) {
  const page = await browser.newPage();
  try {
    await page.goto(process.env.LAMINA_WEB_URL);
    await page.fill('#url', `/${model}`);
    await page.fill('#threads', String(threads));
    await page.fill('#n_ctx', '1024');
    await page.click('#load-button');
    await page.waitForFunction(() => ['ready', 'error'].includes(document.body.dataset.state), null, { timeout: 300_000 });
    const info = await page.evaluate(() => window.laminaPage.info);
    if (!info) throw new Error(await page.textContent('#engine'));
    await page.click('#bench');
    // Polled once a second: Playwright's default polls on every animation
    // frame, which took CPU from the bench's threads on this 2-core machine
    // (Q8_0 at 2 threads: 6% more prompt tokens a second polled so;
    // wllama's bench is awaited as one promise, with no polling).
    await page.waitForFunction(() => window.laminaPage.bench, null, { timeout: 600_000, polling: 1000 });
    return { rows: await page.evaluate(() => window.laminaPage.bench), info };
  } finally {
    await page.close();
  }
}

/** The same rows from wllama's benchmark action (scripts/bench-wllama.html). */
async function wllamaWeb(model, threads) {
  const page = await browser.newPage();
  try {
    await page.goto(process.env.WLLAMA_URL);
    await page.waitForFunction(() => document.body.dataset.ready === '1');
    return await page.evaluate(([m, t, r]) => window.runBench(m, t, r), [`./${model}`, threads, reps]);
  } finally {
    await page.close();
  }
}

/** The same rows from the npm package in Node (its worker, and at more than one thread its worker_threads pool). */
async function laminaNode(model, threads) {
  const { loadModel } = await import('../npm/index.js');
  const ctx = await loadModel(model, { n_threads: threads, n_ctx: 1024 });
  try {
    return { rows: (await ctx.bench(128, 64, 1, reps)).rows, build: ctx.build };
  } finally {
    await ctx.release();
  }
}

/** lamina's CLI on the same model (the native build, best CPU variant). */
function laminaNative(model, threads) {
  const out = execFileSync(process.env.LAMINA_BIN, ['bench', '-m', model, '-p', '128', '-n', '64',
    '-r', String(reps), '-t', String(threads), '-c', '1024', '--json'], { encoding: 'utf8' });
  return JSON.parse(out);
}

const cell = (r) => `${r.avg_ts.toFixed(1)} ± ${r.stddev_ts.toFixed(1)}`;
const ratio = (a, b) => (a.avg_ts / b.avg_ts).toFixed(2);
console.log('| model | t | lamina web build | test | lamina web t/s | wllama 2.3.7 t/s | web / wllama | lamina native t/s | web / native | lamina Node t/s | Node / web |');
console.log('|---|---|---|---|---|---|---|---|---|---|---|');
try {
  for (const model of process.argv.slice(2)) {
    for (const threads of threadCounts) {
      const ours = await laminaWeb(model, threads);
      const theirs = await wllamaWeb(model, threads);
      const native = laminaNative(model, threads);
      const node = await laminaNode(model, threads);
      if (node.build.n_threads !== threads) throw new Error(`Node ran ${node.build.n_threads} threads, not ${threads}`);
      const name = model.split('/').pop();
      const build = `${ours.info.build} ${ours.info.simd} (${ours.info.cpu_variant})`;
      ['pp128', 'tg64'].forEach((test, i) => {
        const [w, l, n, j] = [ours.rows[i], theirs.rows[i], native[i], node.rows[i]];
        console.log(`| ${name} | ${ours.info.n_threads}/${theirs.threads} | ${build} | ${test} | ${cell(w)} | ${cell(l)} | ${ratio(w, l)} | ${cell(n)} | ${ratio(w, n)} | ${cell(j)} | ${ratio(j, w)} |`);
      });
    }
  }
} finally {
  await browser.close();
}

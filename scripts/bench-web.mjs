// Drives the chat page's Bench button in headless Chromium; see bench-web.sh.
import { createRequire } from 'node:module';

const { chromium } = createRequire(`${process.env.LAMINA_TOOLS}/`)('playwright-core');
const browser = await chromium.launch({
  executablePath: '/usr/bin/chromium',
  args: ['--no-sandbox', '--disable-gpu', '--disable-background-networking', '--no-first-run'],
});
const threadCounts = (process.env.THREADS ?? '1 2').split(' ').map(Number);
console.log('| model | threads | build | pp128 t/s | tg64 t/s |\n|---|---|---|---|---|');
try {
  for (const model of process.argv.slice(2)) {
    for (const threads of threadCounts) {
      const page = await browser.newPage();
      await page.goto(process.env.LAMINA_WEB_URL);
      await page.fill('#url', `/${model}`);
      await page.fill('#threads', String(threads));
      await page.fill('#n_ctx', '1024');
      await page.click('#load-button');
      await page.waitForFunction(() => ['ready', 'error'].includes(document.body.dataset.state), null, { timeout: 300_000 });
      const info = await page.evaluate(() => window.laminaPage.info);
      if (!info) throw new Error(await page.textContent('#engine'));
      await page.click('#bench');
      await page.waitForFunction(() => window.laminaPage.bench, null, { timeout: 600_000 });
      const rows = await page.evaluate(() => window.laminaPage.bench);
      const cell = (r) => `${r.avg_ts.toFixed(1)} ± ${r.stddev_ts.toFixed(1)}`;
      const name = model.split('/').pop();
      console.log(`| ${name} | ${info.n_threads} | ${info.build} | ${cell(rows[0])} | ${cell(rows[1])} |`);
      await page.close();
    }
  }
} finally {
  await browser.close();
}

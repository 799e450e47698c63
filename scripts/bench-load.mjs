// Loading a model through the npm package in Node: download throughput from
// a local server with 1 and 4 connections (unthrottled, and with each
// connection held to a fixed rate, as CDNs do), and the peak memory while
// loading (resident set over the baseline, sampled every 20 ms, each case in
// a fresh process: the model's worker is in that process) against the
// file's size.
// Not part of the test command.
//
//   node scripts/bench-load.mjs [MODEL.gguf] [MB_PER_S_PER_CONNECTION]
// (after scripts/build-wasm.sh; default SmolLM2 Q4_1 and 25 MB/s)
import { readFile, stat } from 'node:fs/promises';
import { createServer } from 'node:http';
import { fileURLToPath } from 'node:url';

const repo = fileURLToPath(new URL('..', import.meta.url));
const { loadModel, modelInfo } = await import(`${repo}/npm/index.js`);

if (process.argv[2] === '--peak') {
  // One case in this fresh process: prints the peak RSS over the baseline.
  const baseline = process.memoryUsage().rss;
  let peak = baseline;
  const timer = setInterval(() => {
    peak = Math.max(peak, process.memoryUsage().rss);
  }, 20);
  const ctx = await loadModel(process.argv[3], { n_ctx: 512 });
  peak = Math.max(peak, process.memoryUsage().rss);
  clearInterval(timer);
  await ctx.release();
  console.log(peak - baseline);
  process.exit(0);
}

const modelPath = process.argv[2] ?? `${repo}/models/SmolLM2-135M-Instruct.Q4_1.gguf`;
const rate = Number(process.argv[3] ?? 25) * 1e6;
const model = await readFile(modelPath);

let throttled = false;
const server = createServer((req, res) => {
  const match = /^bytes=(\d+)-(\d+)?$/.exec(req.headers.range ?? '');
  const start = match ? Number(match[1]) : 0;
  const end = match && match[2] !== undefined ? Math.min(Number(match[2]), model.length - 1) : model.length - 1;
  const headers = { 'content-length': end - start + 1 };
  if (match) headers['content-range'] = `bytes ${start}-${end}/${model.length}`;
  res.writeHead(match ? 206 : 200, headers);
  const body = model.subarray(start, end + 1);
  if (!throttled) return res.end(body);
  // A fixed rate per connection: 64 KiB at a time, paced.
  const began = Date.now();
  let sent = 0;
  const next = () => {
    if (res.destroyed) return;
    if (sent >= body.length) return res.end();
    res.write(body.subarray(sent, sent + 65536));
    sent += 65536;
    setTimeout(next, Math.max(0, began + (sent / rate) * 1000 - Date.now()));
  };
  next();
});
await new Promise((resolve) => server.listen(0, '127.0.0.1', resolve));
const url = `http://127.0.0.1:${server.address().port}/model.gguf`;

async function download(parallel) {
  const t = performance.now();
  await modelInfo(url, { parallel });
  return model.length / 1e6 / ((performance.now() - t) / 1000);
}

const rows = [];
for (const [label, limit] of [['unthrottled', false], [`${rate / 1e6} MB/s per connection`, true]]) {
  throttled = limit;
  for (const parallel of [1, 4]) {
    const runs = [];
    for (let i = 0; i < 3; i++) runs.push(await download(parallel));
    runs.sort((a, b) => a - b);
    rows.push(`| ${label} | ${parallel} | ${runs[1].toFixed(0)} MB/s |`);
  }
}
throttled = false;

async function peakWhileLoading(source, label) {
  const run = () =>
    new Promise((resolve, reject) => {
      // Asynchronously: the server answering the URL runs in this process.
      import('node:child_process').then(({ execFile }) =>
        execFile(process.execPath, [fileURLToPath(import.meta.url), '--peak', source], (e, out) =>
          e ? reject(e) : resolve(Number(out.trim())),
        ),
      );
    });
  const peaks = [await run(), await run(), await run()].sort((a, b) => a - b);
  const mb = (n) => (n / 1e6).toFixed(0);
  return `| ${label} | ${mb(peaks[1])} MB | ${(peaks[1] / model.length).toFixed(2)}x |`;
}

const size = (await stat(modelPath)).size;
const memory = [
  await peakWhileLoading(modelPath, 'a path (read in chunks)'),
  await peakWhileLoading(url, 'a URL (4 connections)'),
];
server.close();
console.log(`model: ${modelPath} (${(size / 1e6).toFixed(0)} MB)\n`);
console.log('| server | connections | throughput (median of 3) |\n|---|---|---|');
console.log(rows.join('\n'));
console.log('\n| source | peak RSS over baseline (n_ctx 512, median of 3) | / file size |\n|---|---|---|');
console.log(memory.join('\n'));
process.exit(0);

// Smoke test of the packed npm package, installed into an empty directory:
// `import` works in Node, real models are described, bad input is an Error.
// Run by scripts/test-npm.sh with LAMINA_REPO set to the repository.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { readFile } from 'node:fs/promises';
import { existsSync, readFileSync, mkdtempSync, mkdirSync, symlinkSync, writeFileSync, rmSync } from 'node:fs';
import { resolve } from 'node:path';
import { spawnSync } from 'node:child_process';
import { availableParallelism } from 'node:os';
import { modelInfo, buildInfo } from 'lamina';

const repo = process.env.LAMINA_REPO;
const smollm2 = `${repo}/models/SmolLM2-135M-Instruct.Q4_1.gguf`;

function requireModel(path) {
  if (!existsSync(path)) {
    throw new Error(`model missing at ${path}: run scripts/fetch-models.sh`);
  }
  return path;
}

test('reports which build runs', async () => {
  // By default as many threads as the machine has, up to 4; in Node more
  // than one is the threaded build.
  const threads = Math.min(availableParallelism(), 4);
  const build = threads > 1
    ? { build: 'threaded', threads, reason: 'Node (a worker_threads pool)' }
    : { build: 'single-thread', threads: 1, reason: 'one thread was asked for' };
  assert.deepEqual(await buildInfo(), {
    ...build, simd: 'simd128', simd_reason: 'this engine has no relaxed SIMD',
  });
});

test('describes SmolLM2 from a Uint8Array', async () => {
  const bytes = await readFile(requireModel(smollm2));
  const info = await modelInfo(new Uint8Array(bytes));
  assert.equal(info.version, 3);
  assert.equal(info.tensors.length, 272);
  assert.equal(Object.keys(info.metadata).length, 33);
  assert.equal(info.metadata['general.architecture'], 'llama');
  assert.deepEqual(info.totals.by_type, { F32: 61, Q4_1: 210, Q8_0: 1 });
  assert.deepEqual(info.tensors[0], {
    name: 'token_embd.weight', type: 'Q8_0', shape: [576, 49152], offset: 0, bytes: 30081024, part: 0,
  });
  assert.deepEqual(info.parts, [{ path: null, bytes: bytes.length, tensors: 272 }]);
});

test('streams a Blob in chunks with progress, same result', async () => {
  const bytes = await readFile(requireModel(smollm2));
  const fractions = [];
  const info = await modelInfo(new Blob([bytes]), { onProgress: (f) => fractions.push(f) });
  assert.equal(info.tensors.length, 272);
  assert.ok(fractions.length >= 2, `progress called ${fractions.length} times`);
  assert.equal(fractions.at(-1), 1);
  assert.deepEqual(info, await modelInfo(bytes.buffer.slice(bytes.byteOffset, bytes.byteOffset + bytes.length)));
});

test('bad input rejects with an Error carrying the engine message', async () => {
  await assert.rejects(modelInfo(new Uint8Array([0x50, 0x4b, 3, 4, 0, 0])), (e) => {
    assert.ok(e instanceof Error);
    assert.equal(e.message, 'not a GGUF file: starts with 50 4b 03 04');
    return true;
  });
  await assert.rejects(modelInfo(new Blob([new Uint8Array([0x47, 0x47, 0x55, 0x46, 1, 0, 0, 0])])), /unsupported GGUF version 1/);
  await assert.rejects(modelInfo(42), TypeError);
});

test('a loaded model does not keep Node running, and its worker answers while a call is pending', () => {
  // Each model has a worker thread; it holds the process only while a call
  // waits for it, as a model in the calling thread would. The script below
  // never releases its model: it must still end by itself, after printing.
  const script = `
    import { readFile } from 'node:fs/promises';
    import { loadModel } from 'lamina';
    const ctx = await loadModel(new Uint8Array(await readFile(${JSON.stringify(requireModel(smollm2))})), { n_ctx: 64 });
    setTimeout(async () => console.log(JSON.stringify(await ctx.tokenize('Hello'))), 50);
  `;
  const run = spawnSync(process.execPath, ['--input-type=module', '-e', script], {
    encoding: 'utf8',
    timeout: 120_000,
  });
  assert.equal(run.signal, null, `the script was killed after 120 s: ${run.stderr}`);
  assert.equal(run.status, 0, run.stderr);
  assert.deepEqual(JSON.parse(run.stdout), { tokens: [19556] });
});

/** The first code block of `lang` under the README heading `heading`. */
function readmeBlock(readme, heading, lang) {
  const section = readme.slice(readme.indexOf(`## ${heading}\n`));
  const start = section.indexOf('```' + lang + '\n') + lang.length + 4;
  return section.slice(start, section.indexOf('\n```', start));
}

test("the README's Node quick start runs as pasted", () => {
  // The installed package's README, saved as the quick start says, run beside
  // the model in a directory with the package installed (this one).
  const readme = readFileSync('node_modules/lamina/README.md', 'utf8');
  const dir = mkdtempSync('quickstart-');
  try {
    mkdirSync(`${dir}/node_modules`);
    symlinkSync(resolve('node_modules/lamina'), `${dir}/node_modules/lamina`);
    symlinkSync(requireModel(smollm2), `${dir}/SmolLM2-135M-Instruct.Q4_1.gguf`);
    writeFileSync(`${dir}/generate.mjs`, readmeBlock(readme, 'Quick start: Node', 'js'));
    const run = spawnSync(process.execPath, ['generate.mjs'], { cwd: dir, encoding: 'utf8', timeout: 120_000 });
    assert.equal(run.status, 0, run.stderr);
    const threads = Math.min(availableParallelism(), 4);
    assert.equal(run.stderr.trim(), `${threads > 1 ? 'threaded' : 'single-thread'} build, ${threads} threads`);
    assert.match(run.stdout, /Paris/);
    assert.match(run.stdout, /\n\d+\.\d tokens\/s\n$/);
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});

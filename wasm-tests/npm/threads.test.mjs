// Threads in Node: a model asked for more than one thread runs the threaded
// build, its rayon pool on worker_threads (npm/node-pool.js), and computes
// what one thread computes. Run by scripts/test-npm.sh with LAMINA_REPO set
// to the repository.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { existsSync } from 'node:fs';
import { spawnSync } from 'node:child_process';
import { availableParallelism } from 'node:os';
import { loadModel } from 'lamina';

const repo = process.env.LAMINA_REPO;
const smollm2 = `${repo}/models/SmolLM2-135M-Instruct.Q4_1.gguf`;

function requireModel(path) {
  if (!existsSync(path)) {
    throw new Error(`model missing at ${path}: run scripts/fetch-models.sh`);
  }
  return path;
}

// A prompt of about a hundred tokens, so the prompt goes through the batched
// (matrix-matrix) kernels split across the threads, then generation through
// the matrix-vector ones.
const longPrompt =
  'The history of the printing press begins in the fifteenth century, when movable type made books ' +
  'cheaper to produce than ever before. Within fifty years presses had spread across Europe, and the ' +
  'number of books in circulation grew from thousands to millions. Scholars, merchants and clergy all ' +
  'found new uses for print. In short, the printing press';
const greedy = (prompt) => ({ prompt, n_predict: 24, temperature: 0, n_probs: 3, cache_prompt: false });

test('2 threads in Node run the threaded build and compute what 1 thread does', async () => {
  const path = requireModel(smollm2);
  const one = await loadModel(path, { n_ctx: 512, n_threads: 1 });
  const two = await loadModel(path, { n_ctx: 512, n_threads: 2 });
  try {
    assert.equal(one.build.build, 'single-thread');
    assert.equal(one.build.reason, 'one thread was asked for');
    assert.equal(two.build.build, 'threaded');
    assert.equal(two.build.n_threads, 2);
    assert.equal(two.build.reason, 'Node (a worker_threads pool)');
    assert.equal((await two.contextInfo()).n_threads, 2);
    for (const prompt of ['The capital of France is', longPrompt]) {
      const a = await one.completion(greedy(prompt));
      const b = await two.completion(greedy(prompt));
      assert.ok(a.prompt_ids.length > (prompt === longPrompt ? 60 : 4), `${a.prompt_ids.length} prompt tokens`);
      assert.equal(b.generated_ids.length, 24);
      // The threads split rows between them; each row's sum is the same
      // computation, so the results are the same bit for bit.
      assert.deepEqual(b.generated_ids, a.generated_ids, prompt);
      assert.deepEqual(b.completion_probabilities, a.completion_probabilities, prompt);
    }
  } finally {
    await Promise.all([one.release(), two.release()]);
  }
});

test('threaded models side by side each have their own pool', async () => {
  const path = requireModel(smollm2);
  const [a, b] = await Promise.all([
    loadModel(path, { n_ctx: 256, n_threads: 2 }),
    loadModel(path, { n_ctx: 256, n_threads: 2 }),
  ]);
  try {
    const [ra, rb] = await Promise.all([a.completion(greedy(longPrompt)), b.completion(greedy(longPrompt))]);
    assert.deepEqual(ra.generated_ids, rb.generated_ids);
    // One model released, the other still runs on its own pool.
    await a.release();
    const again = await b.completion(greedy(longPrompt));
    assert.deepEqual(again.generated_ids, rb.generated_ids);
  } finally {
    await Promise.all([a.release(), b.release()]);
  }
});

test('a threaded model does not keep Node running', () => {
  // The pool's threads run for as long as the model's worker does; the
  // script never releases its model and must still end by itself.
  const script = `
    import { loadModel } from 'lamina';
    const ctx = await loadModel(${JSON.stringify(requireModel(smollm2))}, { n_ctx: 64, n_threads: 2 });
    const r = await ctx.completion({ prompt: 'Hello', n_predict: 2, temperature: 0 });
    console.log(JSON.stringify({ build: ctx.build.build, ids: r.generated_ids.length }));
  `;
  const run = spawnSync(process.execPath, ['--input-type=module', '-e', script], {
    encoding: 'utf8',
    timeout: 120_000,
  });
  assert.equal(run.signal, null, `the script was killed after 120 s: ${run.stderr}`);
  assert.equal(run.status, 0, run.stderr);
  assert.deepEqual(JSON.parse(run.stdout), { build: 'threaded', ids: 2 });
});

test('more than 8 threads per core is a RangeError, as natively', async () => {
  const most = 8 * availableParallelism();
  await assert.rejects(loadModel(requireModel(smollm2), { n_threads: most + 1 }), {
    name: 'RangeError',
    message: `${most + 1} threads is too many: at most ${most} (8 per core, ${availableParallelism()} cores here)`,
  });
});

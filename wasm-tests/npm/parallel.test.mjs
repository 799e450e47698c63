// llama.rn's parallel mode through the packed npm package in Node: four
// requests at once on one context follow their solo runs, tokens reach the
// right request, stop() ends one request, status reports the slots, and the
// plain completion is refused while the mode is on and works after
// disable(). Run by scripts/test-npm.sh with LAMINA_REPO set.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { readFile } from 'node:fs/promises';
import { loadModel } from 'lamina';

const repo = process.env.LAMINA_REPO;
const smollm2 = `${repo}/models/SmolLM2-135M-Instruct.Q4_1.gguf`;
const prompts = [
  'The capital of France is',
  'Once upon a time, in a small village,',
  'def fibonacci(n):',
  'The three primary colors are',
];
const greedy = (prompt, n_predict) => ({ prompt, n_predict, temperature: 0, n_probs: 2, cache_prompt: false });

/** Parallel ids follow the solo run up to its first near tie (two best within 0.05). */
function assertFollows(what, ids, alone) {
  for (let step = 0; step < Math.min(ids.length, alone.generated_ids.length); step++) {
    if (ids[step] !== alone.generated_ids[step]) {
      const [a, b] = alone.completion_probabilities[step];
      assert.ok(a.prob - b.prob < 0.05, `${what}: step ${step} differs with a gap of ${a.prob - b.prob}`);
      return;
    }
  }
  assert.equal(ids.length, alone.generated_ids.length, what);
}

test('parallel requests on one context follow their solo runs', async () => {
  const ctx = await loadModel(new Uint8Array(await readFile(smollm2)), { n_ctx: 512 });
  try {
    const alone = [];
    for (const p of prompts) alone.push(await ctx.completion(greedy(p, 12)));

    assert.equal(await ctx.parallel.enable({ n_parallel: 4 }), true);
    await assert.rejects(ctx.completion(greedy(prompts[0], 2)), /parallel mode is enabled/);
    const streamed = new Map();
    const queued = await Promise.all(
      prompts.map((p) =>
        ctx.parallel.completion(greedy(p, 12), (requestId, data) => {
          streamed.set(requestId, (streamed.get(requestId) ?? '') + data.token);
        }),
      ),
    );
    const status = await ctx.parallel.getStatus();
    assert.equal(status.n_parallel, 4);
    assert.equal(status.requests.length, 4);
    const results = await Promise.all(queued.map((q) => q.promise));
    results.forEach((r, i) => {
      assertFollows(prompts[i], r.generated_ids, alone[i]);
      assert.equal(streamed.get(queued[i].requestId), r.text, prompts[i]);
      assert.equal(r.content, r.text);
      assert.equal(r.tokens_predicted, 12);
    });

    // stop() ends one request with what it has; the other runs on.
    const long = { prompt: prompts[1], n_predict: 200, temperature: 0, ignore_eos: true };
    let seen = 0;
    const a = await ctx.parallel.completion(long, () => {
      seen += 1;
      if (seen === 3) a.stop();
    });
    const b = await ctx.parallel.completion({ ...long, n_predict: 20 });
    const [ra, rb] = await Promise.all([a.promise, b.promise]);
    assert.equal(ra.interrupted, true);
    assert.ok(ra.tokens_predicted >= 3 && ra.tokens_predicted < 200, `${ra.tokens_predicted}`);
    assert.equal(rb.tokens_predicted, 20);
    const empty = await ctx.parallel.completion({ prompt: '', n_predict: 2 });
    await assert.rejects(empty.promise, /the prompt is empty/);
    await assert.rejects(ctx.parallel.enable({ n_parallel: 0 }), /n_parallel must be between 1 and 63/);

    await ctx.parallel.disable();
    const after = await ctx.completion(greedy(prompts[0], 12));
    assert.deepEqual(after.generated_ids, alone[0].generated_ids);
  } finally {
    await ctx.release();
  }
});

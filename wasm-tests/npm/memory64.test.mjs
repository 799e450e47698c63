// Models over 4 GiB in Node: a sparse model file of 4.4 GiB (written by
// native-tests/common/big_model.rs, path in LAMINA_BIG_MODEL) loads in the
// memory64 build where Node's V8 compiles it (Node 24), and predicts the
// token its last bytes (past 4.6 GB) name; where it does not (Node 20:
// 64-bit memories behind a flag, no 64-bit tables) the load is an Error
// naming the model's size. The wasm32 builds refuse it with its size either way. Run by
// scripts/test-npm.sh with LAMINA_REPO set to the repository.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { existsSync, statSync } from 'node:fs';
import { setFlagsFromString } from 'node:v8';
import { loadModel } from 'lamina';

const big = process.env.LAMINA_BIG_MODEL;
const small = `${process.env.LAMINA_REPO}/models/SmolLM2-135M-Instruct.Q4_1.gguf`;
// The token the model's output matrix predicts (its last row: big_model.rs).
const TOKEN = 49151;
const none = 'this JavaScript engine has no 64-bit WebAssembly memory (Memory64)';

/**
 * Whether this Node compiles a 64-bit table and a 64-bit memory, as LLVM's
 * wasm64 output has: Node 24 does; Node 20 does not, even with V8's flag
 * (which later versions no longer have).
 */
function nodeRunsMemory64() {
  const probe = new Uint8Array([0, 0x61, 0x73, 0x6d, 1, 0, 0, 0, 4, 4, 1, 0x70, 4, 1, 5, 3, 1, 4, 1]);
  if (WebAssembly.validate(probe)) return true;
  setFlagsFromString('--experimental-wasm-memory64');
  return WebAssembly.validate(probe);
}

function requireBig() {
  if (!big || !existsSync(big)) throw new Error(`the model over 4 GiB is missing at ${big}: scripts/test-npm.sh writes it`);
  return big;
}

test('a model over 4 GiB: the memory64 build where Node runs it, else an Error with its size', async () => {
  const path = requireBig();
  const bytes = statSync(path).size;
  assert.ok(bytes > 4 * 2 ** 30, `${bytes} bytes`);
  const gib = (bytes / 2 ** 30).toFixed(1);
  if (!nodeRunsMemory64()) {
    await assert.rejects(loadModel(path, { n_ctx: 64 }), {
      message: `the model is ${gib} GiB, more than a wasm32 build can hold (4 GiB with its context), and ${none}`,
    });
    await assert.rejects(loadModel(small, { memory64: true }), { message: `memory64 was asked for, and ${none}` });
    return;
  }
  const ctx = await loadModel(path, { n_ctx: 64, n_threads: 2 });
  try {
    assert.equal(ctx.build.build, 'memory64');
    assert.equal(ctx.build.n_threads, 1);
    assert.equal(ctx.build.reason, `the model is ${gib} GiB: 64-bit memory (it runs one thread)`);
    assert.ok(ctx.build.model_size > 4 * 2 ** 30, `${ctx.build.model_size} bytes of weights`);
    const r = await ctx.completion({ prompt: 'Hello', n_predict: 2, temperature: 0 });
    assert.deepEqual(r.generated_ids, [TOKEN, TOKEN]);
  } finally {
    await ctx.release();
  }
  // A small model too, when asked: the ids of the wasm32 build.
  const asked = await loadModel(small, { n_ctx: 64, memory64: true });
  const plain = await loadModel(small, { n_ctx: 64, n_threads: 1 });
  try {
    assert.equal(asked.build.build, 'memory64');
    const prompt = { prompt: 'The capital of France is', n_predict: 8, temperature: 0 };
    assert.deepEqual((await asked.completion(prompt)).generated_ids, (await plain.completion(prompt)).generated_ids);
  } finally {
    await Promise.all([asked.release(), plain.release()]);
  }
});

test('with memory64 turned off a model over 4 GiB is an Error with its size', async () => {
  const path = requireBig();
  const gib = (statSync(path).size / 2 ** 30).toFixed(1);
  await assert.rejects(loadModel(path, { memory64: false }), {
    message: `the model is ${gib} GiB, more than a wasm32 build can hold (4 GiB with its context); memory64: false turned off the build that could`,
  });
  // The error comes from the size alone: the other models keep working.
  const ctx = await loadModel(small, { n_ctx: 64, memory64: false });
  try {
    assert.equal((await ctx.completion({ prompt: 'Hello', n_predict: 1, temperature: 0 })).generated_ids.length, 1);
  } finally {
    await ctx.release();
  }
});

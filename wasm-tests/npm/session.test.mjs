// llama.rn's saveSession / loadSession through the packed npm package in
// Node: a session saved to a path by one model's context and loaded by
// another's continues with the same ids, reusing the cached prompt; bytes
// work as well as paths; tokenSize keeps a prefix; a corrupt file, a GGUF
// model as the target and bad arguments are Errors, and the context keeps
// working. Run by scripts/test-npm.sh with LAMINA_REPO set.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtemp, readFile, rm, writeFile, stat, readdir } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { loadModel } from 'lamina';

const repo = process.env.LAMINA_REPO;
const smollm2 = `${repo}/models/SmolLM2-135M-Instruct.Q4_1.gguf`;
const prompt = 'The capital of France is Paris. The capital of Italy is';

async function context() {
  return loadModel(new Uint8Array(await readFile(smollm2)), { n_ctx: 256 });
}

const greedy = (n_predict) => ({ prompt, n_predict, temperature: 0 });

test('a session saved to a file continues in another context with the same ids', async () => {
  const dir = await mkdtemp(join(tmpdir(), 'lamina-session-'));
  const [a, b] = await Promise.all([context(), context()]);
  try {
    await a.completion(greedy(4));
    const path = join(dir, 'chat.session');
    const saved = await a.saveSession(path);
    assert.ok(saved > 10, `saved ${saved} tokens`);
    const loaded = await b.loadSession(path);
    assert.equal(loaded.tokens_loaded, saved);
    assert.ok(loaded.prompt.startsWith(prompt), loaded.prompt);
    const fromA = await a.completion(greedy(10));
    const fromB = await b.completion(greedy(10));
    assert.deepEqual(fromB.generated_ids, fromA.generated_ids);
    assert.equal(fromB.tokens_cached, fromA.prompt_ids.length - 1);
    assert.equal(fromB.timings.prompt_n, 1);
    // Only the session file is left: the temporary was renamed over it.
    assert.deepEqual(await readdir(dir), ['chat.session']);

    // Bytes, and llama.rn's tokenSize.
    const bytes = await a.sessionBytes({ tokenSize: 5 });
    assert.ok(bytes instanceof Uint8Array);
    assert.equal((await b.loadSession(bytes)).tokens_loaded, 5);
    assert.equal((await b.completion(greedy(2))).tokens_cached, 5);
    // As llama.rn: 0 or less saves everything.
    const all = await a.saveSession(path);
    assert.ok(all > saved);
    assert.equal(await a.saveSession(path, { tokenSize: 0 }), all);
    assert.equal(await a.saveSession(path, { tokenSize: 3 }), 3);
  } finally {
    await Promise.all([a.release(), b.release()]);
    await rm(dir, { recursive: true, force: true });
  }
});

test('bad sessions are Errors and the context keeps working', async () => {
  const dir = await mkdtemp(join(tmpdir(), 'lamina-session-'));
  const ctx = await context();
  try {
    const first = await ctx.completion(greedy(4));
    const good = await ctx.sessionBytes();
    const flipped = good.slice();
    flipped[flipped.length >> 1] ^= 1;
    await assert.rejects(ctx.loadSession(flipped), /checksum does not match/);
    await assert.rejects(ctx.loadSession(new Uint8Array([1, 2, 3])), /not a lamina session/);
    await assert.rejects(ctx.loadSession(join(dir, 'missing.session')), /cannot read the session .*missing\.session/);
    await assert.rejects(ctx.loadSession(42), TypeError);
    await assert.rejects(ctx.saveSession(join(dir, 'x'), { tokenSize: 1.5 }), RangeError);
    // A GGUF model is never overwritten by a session.
    const model = join(dir, 'model.gguf');
    await writeFile(model, new Uint8Array([0x47, 0x47, 0x55, 0x46, 3, 0, 0, 0]));
    await assert.rejects(ctx.saveSession(model), /is a GGUF model/);
    assert.equal((await stat(model)).size, 8);
    const again = await ctx.completion(greedy(4));
    assert.deepEqual(again.generated_ids, first.generated_ids);
    assert.equal(again.tokens_cached, first.prompt_ids.length - 1);
  } finally {
    await ctx.release();
    await rm(dir, { recursive: true, force: true });
  }
});

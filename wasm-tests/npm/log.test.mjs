// llama.rn's toggleNativeLog / addNativeLogListener through the packed npm
// package in Node: with the log on, loading a model sends the engine's
// lines (the model, the context) to every listener; removed listeners and
// a log turned off hear nothing. Run by scripts/test-npm.sh.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { readFile } from 'node:fs/promises';
import { addNativeLogListener, loadModel, toggleNativeLog } from 'lamina';

const repo = process.env.LAMINA_REPO;
const smollm2 = `${repo}/models/SmolLM2-135M-Instruct.Q4_1.gguf`;

test('the native log reaches its listeners while it is on', async () => {
  const bytes = new Uint8Array(await readFile(smollm2));
  const lines = [];
  const other = [];
  const listener = addNativeLogListener((level, text) => lines.push({ level, text }));
  const second = addNativeLogListener((level, text) => other.push(text));
  addNativeLogListener(() => {
    throw new Error('a listener that throws');
  });
  await toggleNativeLog(true);
  const ctx = await loadModel(bytes, { n_ctx: 256 });
  assert.ok(
    lines.some((l) => l.level === 'info' && l.text.startsWith('model: llama (30 layers, 576 embd')),
    JSON.stringify(lines),
  );
  assert.ok(lines.some((l) => l.text.startsWith('context: n_ctx = 256')), JSON.stringify(lines));
  assert.deepEqual(other, lines.map((l) => l.text));

  second.remove();
  await ctx.parallel.enable({ n_parallel: 2 });
  assert.ok(lines.some((l) => l.text === 'parallel: 2 slots of 128 positions'), JSON.stringify(lines));
  assert.equal(other.length, lines.length - 1, 'a removed listener hears nothing more');

  await toggleNativeLog(false);
  const before = lines.length;
  const ctx2 = await loadModel(bytes, { n_ctx: 128 });
  await ctx.parallel.enable({ n_parallel: 4 });
  assert.equal(lines.length, before, 'the log is off');
  listener.remove();
  await Promise.all([ctx.release(), ctx2.release()]);
  assert.throws(() => addNativeLogListener('not a function'), TypeError);
});

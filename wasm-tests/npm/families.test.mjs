// The decoder families through the packed npm package in Node: the real
// Gemma 3 270M Q4_K_M file (a browser-sized model) generates the 2026
// reference's greedy ids (native-tests/golden/families/, made by
// scripts/reference/make-goldens.sh) up to the first near-tie, and its
// architecture shows in contextInfo().
// Run by scripts/test-npm.sh with LAMINA_REPO set to the repository.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { readFile } from 'node:fs/promises';
import { existsSync } from 'node:fs';
import { loadModel } from 'lamina';

const repo = process.env.LAMINA_REPO;
const gemma = `${repo}/models/gemma-3-270m-q4_k_m.gguf`;
const golden = (rel) => readFile(`${repo}/native-tests/golden/${rel}`, 'utf8').then(JSON.parse);

test('Gemma 3 270M generates the reference greedy ids', async () => {
  if (!existsSync(gemma)) {
    throw new Error(`model missing at ${gemma}: run scripts/fetch-models.sh`);
  }
  const ctx = await loadModel(new Uint8Array(await readFile(gemma)), { n_ctx: 512 });
  const info = await ctx.contextInfo();
  assert.equal(info.arch, 'gemma3');
  assert.equal(info.n_embd, 640);
  for (const name of ['gemma3-270m-story', 'gemma3-270m-chat']) {
    const g = await golden(`families/${name}.json`);
    // Ids are compared up to the first step whose reference gap is < 0.5.
    const gaps = g.step_top5.map((top) => top[0][1] - top[1][1]);
    let sure = gaps.findIndex((gap) => gap < 0.5);
    if (sure < 0) sure = g.generated_ids.length;
    sure = Math.min(sure, 12);
    const r = await ctx.completion({ prompt: g.prompt, n_predict: 12, temperature: 0 });
    assert.deepEqual(r.prompt_ids, g.prompt_ids, name);
    assert.deepEqual(r.generated_ids.slice(0, sure), g.generated_ids.slice(0, sure), name);
  }
  await ctx.release();
});

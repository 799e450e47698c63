#!/usr/bin/env node
// Streams a completion to stdout:  node examples/generate.mjs MODEL.gguf "prompt" [n_predict]
import { readFile } from 'node:fs/promises';
import { loadModel } from 'lamina';

const [model, prompt, nPredict = '64'] = process.argv.slice(2);
if (!model || prompt === undefined) {
  console.error('usage: generate.mjs MODEL.gguf "prompt" [n_predict]');
  process.exit(2);
}
try {
  const ctx = await loadModel(new Uint8Array(await readFile(model)), { n_ctx: 2048 });
  process.stdout.write(prompt);
  const result = await ctx.completion(
    { prompt, n_predict: Number(nPredict), temperature: 0 },
    ({ token }) => process.stdout.write(token),
  );
  const t = result.timings;
  process.stdout.write('\n');
  console.error(
    `lamina: ${t.prompt_n} prompt tokens at ${t.prompt_per_second.toFixed(1)} t/s, ` +
      `${t.predicted_n} generated at ${t.predicted_per_second.toFixed(1)} t/s (${result.stop_reason}, ${result.cpu_variant})`,
  );
  await ctx.release();
} catch (e) {
  console.error(`lamina: ${e.message}`);
  process.exit(1);
}

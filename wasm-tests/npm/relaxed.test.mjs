// The relaxed-SIMD builds in Node: V8's flag turns relaxed SIMD on or off in
// a child process, and the package must load the build the engine runs
// correctly, say why, and generate exactly the ids the SIMD128 build
// generates (the relaxed kernels are bit-equal to SIMD128's; the kernel
// tests check each one, and the chat page test whole models, in Chromium).
// Run by scripts/test-npm.sh with LAMINA_REPO set to the repository.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { existsSync } from 'node:fs';
import { spawnSync } from 'node:child_process';

const repo = process.env.LAMINA_REPO;
const models = {
  smollm2: `${repo}/models/SmolLM2-135M-Instruct.Q4_1.gguf`,
  gemma3: `${repo}/models/gemma-3-270m-q4_k_m.gguf`,
};
for (const path of Object.values(models)) {
  if (!existsSync(path)) throw new Error(`model missing at ${path}: run scripts/fetch-models.sh`);
}

// Loads each model with `simd` (unless empty), generates twelve greedy
// tokens, and prints `{ model: { build, ids } | { error, name } }`.
const child = `
import { readFile } from 'node:fs/promises';
import { loadModel } from 'lamina';
const out = {};
for (const [name, path] of Object.entries(JSON.parse(process.env.MODELS))) {
  try {
    const params = { n_ctx: 256 };
    if (process.env.SIMD) params.simd = process.env.SIMD;
    const ctx = await loadModel(new Uint8Array(await readFile(path)), params);
    const r = await ctx.completion({ prompt: 'The capital of France is', n_predict: 12, temperature: 0 });
    out[name] = { build: ctx.build, ids: r.generated_ids };
  } catch (e) {
    out[name] = { error: e.message, name: e.name };
  }
}
console.log(JSON.stringify(out));
process.exit(0);
`;

function run(v8Flag, simd = '', only = models) {
  const r = spawnSync(process.execPath, [v8Flag, '--input-type=module', '-e', child], {
    encoding: 'utf8',
    env: { ...process.env, MODELS: JSON.stringify(only), SIMD: simd },
    timeout: 240_000,
  });
  assert.equal(r.status, 0, r.stderr);
  return JSON.parse(r.stdout.trim().split('\n').at(-1));
}

const on = '--experimental-wasm-relaxed-simd';
const off = '--no-experimental-wasm-relaxed-simd';
// Node 20's V8 has relaxed SIMD only behind the flag, and its relaxed dot
// product sums wrongly (lane 0 of the probe in npm/simd.js gives -1016 for
// -508): the package must notice and stay on SIMD128. Later Node versions
// run relaxed SIMD as Chromium does.
const node20 = process.versions.node.split('.')[0] === '20';
const wrongSums = "this engine's relaxed SIMD dot product gives wrong sums";

test('relaxed SIMD where the engine runs it correctly, with simd128 ids', () => {
  const relaxed = run(on);
  const plain = run(off, 'simd128');
  for (const name of Object.keys(models)) {
    assert.equal(relaxed[name].error, undefined, `${name}: ${relaxed[name].error}`);
    assert.equal(plain[name].error, undefined, `${name}: ${plain[name].error}`);
    assert.equal(plain[name].build.simd, 'simd128', name);
    assert.equal(plain[name].build.cpu_variant, 'simd128', name);
    if (node20) {
      assert.equal(relaxed[name].build.simd, 'simd128', name);
      assert.equal(relaxed[name].build.simd_reason, wrongSums, name);
      assert.equal(relaxed[name].build.cpu_variant, 'simd128', name);
    } else {
      assert.equal(relaxed[name].build.simd, 'relaxed-simd', name);
      assert.equal(relaxed[name].build.simd_reason, 'this engine runs relaxed SIMD', name);
      assert.equal(relaxed[name].build.cpu_variant, 'relaxed-simd', name);
    }
    assert.equal(relaxed[name].ids.length, 12, name);
    assert.deepEqual(relaxed[name].ids, plain[name].ids, name);
  }
});

test('the simd parameter picks the build, or is an Error naming why not', () => {
  const smollm2 = { smollm2: models.smollm2 };
  const asked = run(on, 'simd128', smollm2).smollm2;
  assert.equal(asked.build.simd, 'simd128');
  assert.equal(asked.build.simd_reason, 'simd128 was asked for');
  assert.equal(asked.build.cpu_variant, 'simd128');
  const without = run(off, '', smollm2).smollm2;
  assert.equal(without.build.simd, 'simd128');
  assert.equal(without.build.simd_reason, 'this engine has no relaxed SIMD');
  assert.deepEqual(run(off, 'relaxed-simd', smollm2).smollm2, {
    error: 'relaxed-simd was asked for, and this engine has no relaxed SIMD', name: 'Error',
  });
  if (node20) {
    assert.deepEqual(run(on, 'relaxed-simd', smollm2).smollm2, {
      error: `relaxed-simd was asked for, and ${wrongSums}`, name: 'Error',
    });
  }
  assert.deepEqual(run(on, 'avx512', smollm2).smollm2, {
    error: `simd must be 'simd128' or 'relaxed-simd', got "avx512"`, name: 'RangeError',
  });
});

// LoRA adapters through the packed npm package in Node, as llama.rn takes
// them: a small adapter on SmolLM2's first layer (written here as GGUF)
// changes the greedy text, scale 0 and removing it give the plain model's
// text back, getLoadedLoraAdapters lists what is applied, and a bad adapter
// is an Error that leaves the applied ones as they were.
// Run by scripts/test-npm.sh with LAMINA_REPO set to the repository.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { readFile, writeFile, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { loadModel } from 'lamina';

const repo = process.env.LAMINA_REPO;
const smollm2 = `${repo}/models/SmolLM2-135M-Instruct.Q4_1.gguf`;

/** A GGUF v3 file: string and f32 metadata, F32 tensors (shape in ggml order). */
function gguf(metadata, tensors) {
  const parts = [];
  const u32 = (v) => { const b = Buffer.alloc(4); b.writeUInt32LE(v); parts.push(b); };
  const u64 = (v) => { const b = Buffer.alloc(8); b.writeBigUInt64LE(BigInt(v)); parts.push(b); };
  const str = (s) => { const b = Buffer.from(s, 'utf8'); u64(b.length); parts.push(b); };
  parts.push(Buffer.from('GGUF'));
  u32(3);
  u64(tensors.length);
  u64(Object.keys(metadata).length);
  for (const [k, v] of Object.entries(metadata)) {
    str(k);
    if (typeof v === 'string') { u32(8); str(v); } else { u32(6); const b = Buffer.alloc(4); b.writeFloatLE(v); parts.push(b); }
  }
  let offset = 0;
  for (const t of tensors) {
    str(t.name);
    u32(t.shape.length);
    for (const d of t.shape) u64(d);
    u32(0); // F32
    u64(offset);
    offset += Math.ceil((t.values.length * 4) / 32) * 32;
  }
  let header = Buffer.concat(parts);
  header = Buffer.concat([header, Buffer.alloc((32 - (header.length % 32)) % 32)]);
  const data = tensors.map((t) => {
    const b = Buffer.alloc(Math.ceil((t.values.length * 4) / 32) * 32);
    t.values.forEach((v, i) => b.writeFloatLE(v, i * 4));
    return b;
  });
  return new Uint8Array(Buffer.concat([header, ...data]));
}

/** The adapter native-tests/cli.rs writes: blk.0 attn_v and ffn_down, rank 4. */
function adapter() {
  const values = (n, k) => Array.from({ length: n }, (_, i) => ((i * k) % 17) / 17 - 0.5);
  const rank = 4;
  const tensors = [];
  for (const [name, cols, rows] of [['blk.0.attn_v.weight', 576, 192], ['blk.0.ffn_down.weight', 1536, 576]]) {
    tensors.push({ name: `${name}.lora_a`, shape: [cols, rank], values: values(cols * rank, 7) });
    tensors.push({ name: `${name}.lora_b`, shape: [rank, rows], values: values(rank * rows, 5) });
  }
  return gguf({ 'general.architecture': 'llama', 'general.type': 'adapter', 'adapter.type': 'lora', 'adapter.lora.alpha': 4 }, tensors);
}

test('applyLoraAdapters, getLoadedLoraAdapters and removeLoraAdapters as llama.rn', async () => {
  const ctx = await loadModel(new Uint8Array(await readFile(smollm2)), { n_ctx: 256 });
  const text = async () => (await ctx.completion({ prompt: 'The capital of France is', n_predict: 8, temperature: 0 })).text;
  const plain = await text();
  const bytes = adapter();

  await ctx.applyLoraAdapters([{ bytes, scaled: 2.5 }]);
  assert.deepEqual(await ctx.getLoadedLoraAdapters(), [{ path: 'adapter 0', scaled: 2.5 }]);
  const adapted = await text();
  assert.notEqual(adapted, plain);

  // From a path, at scale 0: the plain model's text.
  const file = join(tmpdir(), `lamina-lora-${process.pid}.gguf`);
  await writeFile(file, bytes);
  try {
    await ctx.applyLoraAdapters([{ path: file, scaled: 0 }]);
    assert.deepEqual(await ctx.getLoadedLoraAdapters(), [{ path: file, scaled: 0 }]);
    assert.equal(await text(), plain);
  } finally {
    await rm(file);
  }

  // A bad adapter changes nothing.
  await ctx.applyLoraAdapters([{ bytes, scaled: 2.5 }]);
  await assert.rejects(
    ctx.applyLoraAdapters([{ bytes: new Uint8Array(await readFile(smollm2)) }]),
    (e) => e instanceof Error && /general\.type/.test(e.message),
  );
  await assert.rejects(ctx.applyLoraAdapters([{ bytes, scaled: NaN }]), TypeError);
  assert.deepEqual(await ctx.getLoadedLoraAdapters(), [{ path: 'adapter 0', scaled: 2.5 }]);
  assert.equal(await text(), adapted);

  await ctx.removeLoraAdapters();
  assert.deepEqual(await ctx.getLoadedLoraAdapters(), []);
  assert.equal(await text(), plain);
  await ctx.release();
});

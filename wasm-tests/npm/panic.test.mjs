// A Rust panic reaches JS as an Error carrying the panic's message, not as an
// opaque `RuntimeError: unreachable`, and it stops only the model whose
// engine panicked: each model has a worker of its own, which is ended after
// the panic (later calls on that model say why it stopped), while another
// model keeps answering and a new one loads in a fresh engine.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { readFile } from 'node:fs/promises';
import { existsSync } from 'node:fs';
import { loadModel, _testPanic } from 'lamina';

const minilm = `${process.env.LAMINA_REPO}/models/all-MiniLM-L6-v2-f16.gguf`;

async function load() {
  if (!existsSync(minilm)) {
    throw new Error(`model missing at ${minilm}: run LAMINA_TEST_MODELS=../shared/models scripts/fetch-models.sh`);
  }
  return loadModel(new Uint8Array(await readFile(minilm)), { n_ctx: 128 });
}

const PANIC = /^lamina panicked: checked failure 42 \(at src\/wasm\/mod.rs:\d+\)$/;

test('a panic becomes an Error with its message', async () => {
  await assert.rejects(_testPanic('checked failure 42'), (e) => {
    assert.equal(e.constructor, Error);
    assert.match(e.message, PANIC);
    return true;
  });
  // Each top-level call has a fresh engine: the next one panics anew.
  await assert.rejects(_testPanic('again'), { message: /^lamina panicked: again \(at / });
});

test("one model's panic leaves the other models running", async () => {
  const [hurt, other] = await Promise.all([load(), load()]);
  const expected = await other.embedding('a sentence to embed');
  assert.deepEqual(await hurt.tokenize('hello world'), await other.tokenize('hello world'));

  await assert.rejects(hurt._testPanic('checked failure 42'), (e) => {
    assert.equal(e.constructor, Error);
    assert.match(e.message, PANIC);
    return true;
  });
  await assert.rejects(hurt.tokenize('hello'), {
    message: /^the lamina engine stopped after a panic: checked failure 42 \(at /,
  });

  assert.deepEqual(await other.embedding('a sentence to embed'), expected);
  const fresh = await load();
  assert.deepEqual(await fresh.embedding('a sentence to embed'), expected);
  await Promise.all([hurt.release(), other.release(), fresh.release()]);
});

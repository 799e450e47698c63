// Running out of memory in wasm32 is a trap without a panic message; it
// reaches JS as an Error saying so, with the memory the engine holds, not
// as an opaque `RuntimeError: unreachable`. It stops only the model whose
// engine ran out: its worker is ended, and another model keeps answering.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { readFile } from 'node:fs/promises';
import { existsSync } from 'node:fs';
import { loadModel, _testOutOfMemory } from 'lamina';

const minilm = `${process.env.LAMINA_REPO}/models/all-MiniLM-L6-v2-f16.gguf`;
const OUT_OF_MEMORY =
  /^lamina ran out of memory \(unreachable\): the engine holds \d+ MiB of the 4096 MiB a wasm32 build can address$/;

async function load() {
  if (!existsSync(minilm)) {
    throw new Error(`model missing at ${minilm}: run LAMINA_TEST_MODELS=../shared/models scripts/fetch-models.sh`);
  }
  return loadModel(new Uint8Array(await readFile(minilm)), { n_ctx: 128 });
}

test('out of memory becomes an Error that says so', async () => {
  await assert.rejects(_testOutOfMemory(), (e) => {
    assert.equal(e.constructor, Error);
    assert.match(e.message, OUT_OF_MEMORY);
    return true;
  });
});

test("one model's out-of-memory leaves the other models running", async () => {
  const [hurt, other] = await Promise.all([load(), load()]);
  const expected = await other.embedding('a sentence to embed');
  await assert.rejects(hurt._testOutOfMemory(), { message: OUT_OF_MEMORY });
  await assert.rejects(hurt.embedding('a sentence to embed'), {
    message: /^the lamina engine stopped after running out of memory \(unreachable\): the engine holds \d+ MiB/,
  });
  assert.deepEqual(await other.embedding('a sentence to embed'), expected);
  await Promise.all([hurt.release(), other.release()]);
});

// Running out of memory in wasm32 is a trap without a panic message; it
// reaches JS as an Error saying so, with the memory the engine holds, not
// as an opaque `RuntimeError: unreachable`. (Its own file: the instance is
// unusable afterwards, and node --test runs each file in its own process.)
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { _testOutOfMemory } from 'lamina';

test('out of memory becomes an Error that says so', async () => {
  await assert.rejects(_testOutOfMemory(), (e) => {
    assert.equal(e.constructor, Error);
    assert.match(
      e.message,
      /^lamina ran out of memory \(unreachable\): the engine holds \d+ MiB of the 4096 MiB a wasm32 build can address$/,
    );
    return true;
  });
  await assert.rejects(_testOutOfMemory(), /the lamina engine stopped after running out of memory/);
});

// A Rust panic reaches JS as an Error carrying the panic's message, not as an
// opaque `RuntimeError: unreachable`. (Its own file: the engine instance is
// unusable after a panic, and node --test runs each file in its own process.)
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { _testPanic } from 'lamina';

test('a panic becomes an Error with its message', async () => {
  await assert.rejects(_testPanic('checked failure 42'), (e) => {
    assert.equal(e.constructor, Error);
    assert.match(e.message, /^lamina panicked: checked failure 42 \(at src\/wasm\/mod.rs:\d+\)$/);
    return true;
  });
  await assert.rejects(_testPanic('again'), /stopped after a panic: .*checked failure 42/);
});

// One thread of the threaded build's pool in Node (a worker_threads Worker
// started by node-pool.js): what wasm-bindgen-rayon's worker script does in a
// browser. It instantiates the engine's module on the shared memory it is
// sent, says it is ready, then runs rayon's worker loop until the pool ends.
import { parentPort } from 'node:worker_threads';

// The rayon helper module imported with the engine waits for its start
// message on `self`; here the start comes through `parentPort` instead.
globalThis.self ??= new EventTarget();

parentPort.once('message', async ({ mainJS, module, memory, receiver }) => {
  const engine = await import(mainJS);
  await engine.default({ module_or_path: module, memory });
  parentPort.postMessage({ type: 'wasm_bindgen_worker_ready' });
  engine.wbg_rayon_start_worker(receiver);
});

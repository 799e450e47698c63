// Lets wasm-bindgen-rayon start the threaded build's pool in Node. Its helper
// is written for browsers: it fetches its own script, makes a Blob URL of it
// and starts module Web Workers from that, listening on `self`. In Node,
// inside the model's worker (never the caller's thread), this gives it those
// names: `Worker` starts node-pool-thread.js as a worker_threads Worker
// whatever URL it is given, `fetch` answers the `file:` URL of the helper's
// own script, and `self` is an EventTarget that nothing posts to.
import { Worker as NodeWorker } from 'node:worker_threads';
import { readFile } from 'node:fs/promises';
import { setFlagsFromString } from 'node:v8';

const POOL_THREAD_URL = new URL('./node-pool-thread.js', import.meta.url);

/** A worker_threads Worker with the Web Worker calls the helper uses. */
class PoolWorker {
  #worker;
  #listeners = new Map();

  constructor() {
    this.#worker = new NodeWorker(POOL_THREAD_URL, { name: 'lamina-pool' });
    // The pool's threads never end on their own, so once one has started
    // it must not keep the model's worker alive. Not before: until the
    // last one says it is ready, nothing else keeps that worker's event
    // loop running to hear it.
    this.#worker.once('message', () => this.#worker.unref());
    // The helper waits for "ready" with no way to hear a failure; raised
    // here, it ends the model's worker, and the load rejects with it.
    this.#worker.on('error', (e) => {
      throw new Error(`a thread of lamina's pool failed: ${e?.message ?? e}`);
    });
  }

  postMessage(message) {
    this.#worker.postMessage(message);
  }

  addEventListener(type, listener) {
    const wrapped = (data) => listener({ data });
    this.#listeners.set(listener, wrapped);
    this.#worker.on(type, wrapped);
  }

  removeEventListener(type, listener) {
    this.#worker.off(type, this.#listeners.get(listener));
    this.#listeners.delete(listener);
  }
}

/**
 * Gives this thread the browser names the pool's helper needs, and turns off
 * V8's baseline wasm compiler (Liftoff), for the whole process from here on:
 * in Node 20 (V8 11.3), with Liftoff's code the pool never starts (rayon
 * waits for threads that never see their start; 5 runs in 5 here), with the
 * optimizing compiler's it starts every time (10 in 10). Chromium's newer
 * V8 runs the same build with Liftoff. Call it before the module compiles.
 */
export function preparePool() {
  setFlagsFromString('--no-liftoff');
  globalThis.self ??= new EventTarget();
  globalThis.Worker = PoolWorker;
  const fetchUrl = globalThis.fetch;
  globalThis.fetch = async (url, init) =>
    String(url).startsWith('file:') ? new Response(await readFile(new URL(url))) : fetchUrl(url, init);
}

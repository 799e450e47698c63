// lamina's JavaScript entry point. Every model runs in a worker of its own
// (proxy.js -> worker.js): a Web Worker in browsers (threaded when the page is
// cross-origin isolated), a worker_threads Worker in Node. So loading and
// generation never block the caller, and one model's panic or out-of-memory
// ends only its own worker. Where neither kind of worker exists the engine
// runs in the calling thread (engine.js) with the same API.
import * as direct from './engine.js';
import * as proxy from './proxy.js';

const isNode = typeof process !== 'undefined' && process.versions?.node != null;
const api = isNode || typeof Worker === 'function' ? proxy : direct;

export const init = api.init;
export const buildInfo = api.buildInfo;
export const modelInfo = api.modelInfo;
export const loadModel = api.loadModel;
export const LlamaContext = api.LlamaContext;
export const _testPanic = api._testPanic;
export const toggleNativeLog = api.toggleNativeLog;
export const addNativeLogListener = api.addNativeLogListener;

/**
 * llama.rn's `initLlama({ model, ...params }, onProgress)`: `loadModel(model,
 * params)` with `onProgress` hearing whole percents (0 to 100), as llama.rn's.
 */
export async function initLlama({ model, ...params } = {}, onProgress) {
  if (model === undefined || model === null) {
    throw new TypeError('initLlama: params.model (a URL, Blob, ArrayBuffer or Uint8Array) is required');
  }
  const percent = onProgress && ((fraction) => onProgress(Math.round(fraction * 100)));
  return api.loadModel(model, params, { onProgress: percent });
}
export const _testOutOfMemory = api._testOutOfMemory;
/** The model cache (`loadModel(url, params, { cache: true })`): `list()`, `delete(url)`, `clear()`, `where()`. */
export { cache } from './cache.js';

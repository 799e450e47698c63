// lamina's JavaScript entry point. In Node the engine runs in the calling
// thread (engine.js; completions still give the event loop a turn between
// tokens). In browsers every model runs in a Web Worker (proxy.js ->
// worker.js), threaded when the page is cross-origin isolated, so the page
// never freezes. Both sides have the same API.
import * as direct from './engine.js';
import * as proxy from './proxy.js';

const isNode = typeof process !== 'undefined' && process.versions?.node != null;
const api = !isNode && typeof Worker === 'function' ? proxy : direct;

export const init = api.init;
export const buildInfo = api.buildInfo;
export const modelInfo = api.modelInfo;
export const loadModel = api.loadModel;
export const LlamaContext = api.LlamaContext;
export const _testPanic = api._testPanic;
export const _testOutOfMemory = api._testOutOfMemory;

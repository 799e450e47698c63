// lamina's engine, called directly: loads one of the WebAssembly builds
// (single-thread, or threaded with a pool of workers; each with SIMD128 or
// with relaxed SIMD, see simd.js; or memory64, SIMD128 only) and exposes the
// API over the usual model sources: ArrayBuffer, Uint8Array, Blob/File (read
// in chunks) or a URL. worker.js runs it for one model per worker (a Web
// Worker in browsers, a worker_threads Worker in Node), so a panic, which
// leaves this instance unusable, stops only that model; index.js uses it
// directly only where no kind of worker exists.

import { pickSimd } from './simd.js';
import { readSessionFile, writeSessionFile } from './session-files.js';
import { openUrl } from './download.js';
import { cachedOpen, verified } from './cache.js';
import { blobChunks, nodeFileChunks } from './chunks.js';

/** Each build's directory, by threading and instruction set. */
const BUILDS = {
  'single-thread': { simd128: './dist/', 'relaxed-simd': './dist-relaxed/' },
  threaded: { simd128: './dist-threads/', 'relaxed-simd': './dist-threads-relaxed/' },
  memory64: { simd128: './dist-memory64/' },
};
const isNode = typeof process !== 'undefined' && process.versions?.node != null;

let ready = null;
/** The wasm-bindgen module of the build that runs (set by `init`). */
let wasm = null;
/** The instance's exports (its memory, for out-of-memory reports). */
let exports = null;
/** Whether the memory64 build runs (16 GiB of address space, not 4). */
let memory64 = false;

/**
 * Loads and instantiates the engine once; later calls return the same
 * promise. `build` is 'single-thread' (the default), 'threaded' (starts a
 * pool of `threads`: Web Workers, which need cross-origin isolation, or
 * worker_threads in Node, see node-pool.js) or 'memory64' (64-bit memory,
 * see builds.js);
 * `simd` is 'simd128', 'relaxed-simd' or undefined (the best this engine
 * runs; see simd.js). Resolves to `{ build, simd, simd_reason, threads,
 * reason }`.
 */
export function init({
  build = 'single-thread',
  threads = 1,
  reason = 'the single-thread build was asked for',
  simd,
} = {}) {
  if (!ready) {
    ready = (async () => {
      const dirs = BUILDS[build];
      if (!dirs) throw new Error(`unknown build ${JSON.stringify(build)}`);
      let isa = pickSimd(simd);
      if (!dirs[isa.simd]) isa = { simd: 'simd128', simd_reason: `the ${build} build has SIMD128 only` };
      const dir = dirs[isa.simd];
      const url = new URL(`${dir}lamina_bg.wasm`, import.meta.url);
      // Before the module is imported and compiled (see node-pool.js).
      if (build === 'threaded' && isNode) (await import('./node-pool.js')).preparePool();
      const module = await import(`${dir}lamina.js`);
      if (isNode) {
        const { readFile } = await import('node:fs/promises');
        exports = module.initSync({ module: await readFile(url) });
      } else {
        exports = await module.default({ module_or_path: url });
      }
      let poolThreads = 1;
      if (build === 'threaded') {
        await module.initThreadPool(threads);
        poolThreads = module.threadPoolStarted();
      }
      wasm = module;
      memory64 = build === 'memory64';
      wasm.setLogCallback(logCallback ?? undefined);
      return { build: module.buildKind(), ...isa, threads: poolThreads, reason };
    })();
    ready.catch(() => { ready = null; });
  }
  return ready;
}

/** The function that hears the engine's log lines, or null. */
let logCallback = null;
const logListeners = new Set();

/**
 * Sends the engine's log lines to `callback(level, text)` (null: none).
 * Before the engine is loaded the choice waits for it, so a worker can set
 * it before it knows which build to load.
 */
export function setLogCallback(callback) {
  logCallback = callback;
  wasm?.setLogCallback(callback ?? undefined);
}

/** llama.rn's `toggleNativeLog(enabled)`: the engine's log to the listeners, or off. */
export async function toggleNativeLog(enabled) {
  const hear = (level, text) => {
    for (const listener of logListeners) {
      try {
        listener(level, text);
      } catch {
        // A listener's error is its own; the other listeners still hear.
      }
    }
  };
  setLogCallback(enabled ? hear : null);
}

/** llama.rn's `addNativeLogListener(listener)`: `listener(level, text)` per log line; `{ remove }`. */
export function addNativeLogListener(listener) {
  if (typeof listener !== 'function') throw new TypeError('addNativeLogListener: listener must be a function');
  logListeners.add(listener);
  return { remove: () => logListeners.delete(listener) };
}

/** Which build runs: `{ build: 'single-thread' | 'threaded', simd, simd_reason, threads, reason }`. */
export async function buildInfo() {
  return init();
}

let poisoned = null;

/** Why the engine can no longer be used ("after a panic: ..."), or null. */
export function stoppedReason() {
  return poisoned;
}

/** Resolves after one turn of the event loop (a macrotask, not clamped). */
const nextTurn =
  typeof setImmediate === 'function'
    ? () => new Promise((resolve) => setImmediate(resolve))
    : (() => {
        const channel = new MessageChannel();
        const waiting = [];
        channel.port1.onmessage = () => waiting.shift()?.();
        return () =>
          new Promise((resolve) => {
            waiting.push(resolve);
            channel.port2.postMessage(null);
          });
      })();

/**
 * Runs an engine call. A Rust panic aborts the wasm instance (a
 * `RuntimeError`); it becomes an `Error` with the panic's message, and later
 * calls fail with it too (the instance's state can no longer be trusted).
 */
function guard(call) {
  if (poisoned) throw new Error(`the lamina engine stopped ${poisoned}`);
  try {
    return call();
  } catch (e) {
    if (typeof WebAssembly !== 'undefined' && e instanceof WebAssembly.RuntimeError) {
      const panic = wasm.takeLastPanic();
      if (panic != null) {
        poisoned = `after a panic: ${panic}`;
        throw new Error(`lamina panicked: ${panic}`);
      }
      if (!/unreachable/.test(e.message)) {
        // Any other trap (an access out of bounds, ...): nothing to explain it.
        poisoned = `after a trap: ${e.message}`;
        throw new Error(`lamina trapped: ${e.message}`);
      }
      // A trap without a panic message: Rust aborts this way when an
      // allocation fails, which in WebAssembly means memory ran out.
      const mib = (bytes) => `${Math.round(bytes / 2 ** 20)} MiB`;
      const used = exports?.memory?.buffer?.byteLength ?? 0;
      const [space, kind] = memory64 ? [2 ** 34, 'the memory64'] : [2 ** 32, 'a wasm32'];
      const reason = `out of memory (${e.message}): the engine holds ${mib(used)} of the ${mib(space)} ${kind} build can address`;
      poisoned = `after running ${reason}`;
      throw new Error(`lamina ran ${reason}`);
    }
    throw e;
  }
}

/** Test-only: makes the engine run out of memory. */
export async function _testOutOfMemory() {
  await init();
  return guard(() => wasm.__testOutOfMemory());
}

/** Test-only: makes the engine panic with `message`. */
export async function _testPanic(message) {
  await init();
  return guard(() => wasm.__testPanic(message));
}

function checkAborted(signal) {
  if (signal?.aborted) throw signal.reason ?? new Error('aborted');
}

/**
 * Streams a model into a fresh loader, then `use(loader, info)` once it is
 * complete; the loader is freed afterwards. `source` is one file (Blob, URL,
 * a path in Node, bytes) or an array of them: the parts of a split model in
 * order. A split model's first part given alone by URL or path
 * (`NAME-00001-of-0000N.gguf`) brings the others, named the same way.
 */
async function streamSource(source, options = {}, use = (_, info) => info) {
  const { onProgress, signal } = options;
  const given = Array.isArray(source) ? source : [source];
  if (given.length === 0) throw new TypeError('no model parts were given');
  let loader = null;
  try {
    let expected = given.length;
    for (let i = 0; ; i++) {
      checkAborted(signal);
      // Progress by the bytes downloaded (ranges arrive ahead of their
      // turn) or handed to the engine, whichever is further.
      let size = 0;
      let downloaded = 0;
      let pushed = 0;
      const report = () => onProgress?.((i + (size ? Math.min(1, Math.max(downloaded, pushed) / size) : 0)) / expected);
      const onBytes = (n) => {
        downloaded += n;
        if (size) report();
      };
      // One sha256 per part (an array), or one for an unsplit model.
      const sha256 = Array.isArray(options.sha256) ? options.sha256[i] : i === 0 ? options.sha256 : undefined;
      const part = await openPart(partSource(given, i, expected), { ...options, onBytes, sha256 });
      size = part.size;
      if (loader) guard(() => loader.beginPart(part.size));
      else loader = guard(() => new wasm.GgufStreamLoader(part.size));
      for await (const chunk of part.chunks) {
        checkAborted(signal);
        guard(() => loader.push(chunk));
        pushed += chunk.length;
        report();
      }
      const info = guard(() => loader.finish());
      expected = loader.partsExpected;
      if (info !== null) {
        if (given.length > expected) {
          throw new Error(`${given.length} files were given, but the model is in ${expected}`);
        }
        return use(loader, info);
      }
    }
  } finally {
    // After a panic the instance is gone; there is nothing left to free.
    if (loader && !poisoned) loader.free();
  }
}

/** Part `i` of a model in `count` files: given, or named after the first. */
function partSource(given, i, count) {
  if (i < given.length) return given[i];
  const first = given[0];
  const name = typeof first === 'string' || first instanceof URL ? partName(String(first), i, count) : null;
  if (name === null) {
    throw new Error(
      `the model is split in ${count} files and ${given.length} were given: give every part, in order` +
        ' (or the first by a URL or path named NAME-00001-of-0000N.gguf)',
    );
  }
  return name;
}

/**
 * The name of part `i` (from 0) of `count` after the first part's:
 * `NAME-00001-of-0000N.gguf` becomes `NAME-0000I-of-0000N.gguf` (a query or
 * fragment of a URL is kept). Null when the first is not named that way.
 */
export function partName(first, i, count) {
  const pad = (n) => String(n).padStart(5, '0');
  const match = new RegExp(`-00001-of-${pad(count)}\\.gguf(?=$|[?#])`).exec(first);
  if (!match) return null;
  return `${first.slice(0, match.index)}-${pad(i + 1)}-of-${pad(count)}.gguf${first.slice(match.index + match[0].length)}`;
}

/**
 * A source's size and its bytes as a stream of chunks. A URL downloads in
 * ranges (`parallel` at once, `retries` per range; see download.js).
 */
async function openPart(source, { signal, parallel, retries, onBytes, cache, sha256 }) {
  const name = typeof source === 'string' || source instanceof URL ? String(source) : 'the model file';
  const part = await openSource(source, { signal, parallel, retries, onBytes, cache, sha256 });
  return part.checked ? part : verified(name, part, sha256);
}

async function openSource(source, { signal, parallel, retries, onBytes, cache, sha256 }) {
  if (source instanceof Uint8Array) return { size: source.length, chunks: [source] };
  if (source instanceof ArrayBuffer) return { size: source.byteLength, chunks: [new Uint8Array(source)] };
  if (typeof Blob !== 'undefined' && source instanceof Blob) {
    return { size: source.size, chunks: blobChunks(source) };
  }
  if (typeof source !== 'string' && !(source instanceof URL)) {
    throw new TypeError('a model source must be an ArrayBuffer, Uint8Array, Blob, URL or string');
  }
  const path = nodePath(source);
  if (path !== null) return openFile(path);
  const download = () => openUrl(source, { signal, parallel, retries, onBytes });
  if (!cache) return download();
  // The cache checks the sha256 itself (before storing).
  return { ...(await cachedOpen(source, { signal, sha256 }, download)), checked: true };
}

const inNode = typeof process !== 'undefined' && typeof process.versions?.node === 'string';

/**
 * In Node, the file path a source names: a `file:` URL, or a string that is
 * not a URL (no scheme, or a Windows drive letter). Null elsewhere.
 */
export function nodePath(source) {
  if (!inNode) return null;
  const text = String(source);
  if (text.startsWith('file:')) return new URL(text);
  return /^[a-z][a-z0-9+.-]+:/i.test(text) ? null : text;
}

/** A file in Node, read a chunk at a time (never whole). */
async function openFile(path) {
  const fs = await import(/* webpackIgnore: true */ 'node:fs/promises');
  let size;
  try {
    ({ size } = await fs.stat(path));
  } catch (e) {
    throw new Error(`cannot open ${path}: ${e.message}`);
  }
  return { size, chunks: nodeFileChunks(path, size) };
}


/**
 * Parameters as JSON for the engine. JSON has no NaN or Infinity:
 * `JSON.stringify` writes them as null, which the engine would read as "not
 * given" and replace with the default, so they are refused here, by name.
 */
function paramsJson(what, params) {
  return JSON.stringify(params ?? {}, (key, value) => {
    if (typeof value === 'number' && !Number.isFinite(value)) {
      throw new Error(`${what}: ${key || 'a value'} must be a finite number, got ${value}`);
    }
    return value;
  });
}

/**
 * A string. wasm-bindgen's glue would read another value's length as a
 * string's and write past its buffer: a trap, not an error.
 */
function string(what, value) {
  if (typeof value !== 'string') throw new TypeError(`${what} must be a string, got ${typeof value}`);
  return value;
}

/** An array of strings (rerank's documents). */
function strings(what, value) {
  if (!Array.isArray(value)) throw new TypeError(`${what} must be an array of strings`);
  value.forEach((item, i) => string(`${what}[${i}]`, item));
  return value;
}

/** `call`'s array (or typed array) of token ids, each a count. */
function tokenIds(call, ids) {
  if (!Array.isArray(ids) && !ArrayBuffer.isView(ids)) throw new TypeError(`${call}: ids must be an array of token ids`);
  // Uint32Array.from would wrap -1 to 4294967295: each id is checked.
  return Uint32Array.from(ids, (id, i) => count(`${call}: id ${i}`, id));
}

/** A session's token count for the engine: as llama.rn, 0 or less means all (-1). */
function sessionSize(call, tokenSize) {
  if (!Number.isInteger(tokenSize)) {
    throw new RangeError(`${call}: tokenSize must be a whole number (-1: all), got ${tokenSize}`);
  }
  return tokenSize > 0 ? Math.min(tokenSize, 2 ** 31 - 1) : -1;
}

/** A whole number from 0 to 2^32 - 1 (what the engine takes as a count). */
function count(what, value) {
  if (!Number.isInteger(value) || value < 0 || value > 0xffffffff) {
    throw new RangeError(`${what} must be a whole number from 0 to 4294967295, got ${value}`);
  }
  return value;
}

/**
 * Describes a GGUF file: `{ version, metadata, tensors: [{name, type, shape,
 * offset, bytes}], totals, ... }`, as `lamina info --json` prints it.
 * Throws an `Error` with the engine's message for a file that is not valid GGUF.
 *
 * @param {ArrayBuffer | Uint8Array | Blob | string | URL} source
 * @param {{ onProgress?: (fraction: number) => void, signal?: AbortSignal }} [options]
 */
export async function modelInfo(source, options = {}) {
  await init();
  checkAborted(options.signal);
  if (source instanceof Uint8Array) return guard(() => wasm.modelInfo(source));
  if (source instanceof ArrayBuffer) return guard(() => wasm.modelInfo(new Uint8Array(source)));
  if (
    (typeof Blob !== 'undefined' && source instanceof Blob) ||
    typeof source === 'string' ||
    source instanceof URL ||
    Array.isArray(source)
  ) {
    return streamSource(source, options, (_, info) => info);
  }
  throw new TypeError('modelInfo: source must be an ArrayBuffer, Uint8Array, Blob, URL, string or an array of them');
}

/**
 * A loaded model and its context, with llama.rn's calls. Errors are `Error`s
 * carrying the engine's message.
 */
export class LlamaContext {
  #inner;
  #abort;
  /** Whether a completion runs (a stop request then applies to it). */
  #running = false;

  /** `{ build, reason, simd, cpu_variant, n_threads, n_ctx }`, set at load. */
  build = null;

  /** Parallel requests waiting for their results: id → { resolve, reject, onToken }. */
  #requests = new Map();
  /** Whether the step loop runs. */
  #pumping = false;

  /**
   * llama.rn's parallel mode: `enable({ n_parallel })` (the cache is
   * cleared; `n_batch` is the context's), `completion(params, onToken)` →
   * `{ requestId, promise, stop }` with `onToken(requestId, data)`,
   * `getStatus()`, `disable()`. Every step decodes one token of each
   * running request in a single batch.
   */
  parallel = {
    enable: async ({ n_parallel = 2 } = {}) => {
      count('parallel.enable: n_parallel', n_parallel);
      guard(() => this.#ctx().parallelEnable(n_parallel));
      return true;
    },
    configure: (config) => this.parallel.enable(config),
    disable: async () => {
      guard(() => this.#ctx().parallelDisable());
      const stopped = new Error('parallel mode was disabled');
      for (const request of this.#requests.values()) request.reject(stopped);
      this.#requests.clear();
      return true;
    },
    completion: async (params, onToken) => {
      const ctx = this.#ctx();
      const json = paramsJson('completion parameters', params);
      const requestId = guard(() => ctx.parallelQueue(json));
      const promise = new Promise((resolve, reject) => this.#requests.set(requestId, { resolve, reject, onToken }));
      this.#pump();
      return { requestId, promise, stop: async () => guard(() => ctx.parallelCancel(requestId)) };
    },
    getStatus: async () => guard(() => this.#ctx().parallelStatus()),
  };

  /** Runs parallel steps, a turn of the event loop between each, while requests remain. */
  async #pump() {
    if (this.#pumping) return;
    this.#pumping = true;
    try {
      while (this.#inner && guard(() => this.#inner.parallelBusy())) {
        await nextTurn();
        if (!this.#inner) break;
        for (const event of guard(() => this.#inner.parallelStep())) {
          const request = this.#requests.get(event.request_id);
          if (!request) continue;
          if (event.token) {
            try {
              request.onToken?.(event.request_id, event.token);
            } catch {
              // A callback that throws stops its own request only.
              guard(() => this.#inner.parallelCancel(event.request_id));
            }
            continue;
          }
          this.#requests.delete(event.request_id);
          if (event.error !== undefined) request.reject(new Error(event.error));
          else request.resolve(event.result);
        }
      }
    } catch (e) {
      for (const request of this.#requests.values()) request.reject(e);
      this.#requests.clear();
    } finally {
      this.#pumping = false;
    }
  }

  constructor(inner) {
    this.#inner = inner;
    this.#abort = inner.abortHandle();
  }

  #ctx() {
    if (!this.#inner) throw new Error('this LlamaContext was released');
    return this.#inner;
  }

  /**
   * Generates a completion. `params` takes llama.rn's names (prompt or
   * messages, n_predict, temperature, top_k, top_p, min_p, stop, seed,
   * ignore_eos, n_probs, ...); `onToken({ token, id, completion_probabilities })`
   * hears each piece of text as it is released. The prompt is evaluated a
   * micro-batch at a time and tokens come one at a time, with a turn of the
   * event loop between each, so `stopCompletion()` from a timer, a message
   * or a button stops it at the next micro-batch or token.
   */
  async completion(params, onToken) {
    const ctx = this.#ctx();
    const json = paramsJson('completion parameters', params);
    guard(() => ctx.completionStart(json));
    this.#running = true;
    try {
      do {
        await nextTurn();
      } while (guard(() => ctx.completionPrompt()));
      for (;;) {
        await nextTurn();
        const event = guard(() => ctx.completionNext());
        if (event === undefined) break;
        onToken?.(event);
      }
    } catch (e) {
      // Leave the context idle (its cache consistent) for the next call.
      if (!poisoned) ctx.completionFinish();
      throw e;
    } finally {
      this.#running = false;
    }
    return guard(() => ctx.completionFinish());
  }

  /** Stops the running completion at the next prompt micro-batch or token. */
  stopCompletion() {
    if (this.#running) this.#abort?.abort();
  }

  /**
   * llama.rn's `getFormattedChat(messages, template, { jinja, tools, ... })`:
   * the prompt the messages make with the model's chat template or
   * `template` (Jinja text or a built-in name), as `{ type: 'llama-chat',
   * prompt }`, or with `jinja` or `tools` `{ type: 'jinja', prompt,
   * chat_format, grammar, grammar_lazy, grammar_triggers, preserved_tokens,
   * additional_stops, thinking_forced_open, generation_prompt }`.
   */
  async getFormattedChat(messages, template, options = {}) {
    const json = paramsJson('getFormattedChat: messages', messages);
    if (template !== undefined && template !== null) string('getFormattedChat: template', template);
    const opts = paramsJson('getFormattedChat: options', options ?? {});
    return guard(() => this.#ctx().getFormattedChat(json, template ?? undefined, opts));
  }

  /** `{ tokens }` for `text` (`addSpecial`, `parseSpecial` default true). */
  async tokenize(text, { addSpecial = true, parseSpecial = true } = {}) {
    string('tokenize: text', text);
    return { tokens: Array.from(guard(() => this.#ctx().tokenize(text, addSpecial, parseSpecial))) };
  }

  /** The text of token ids. */
  async detokenize(ids, { special = false } = {}) {
    const checked = tokenIds('detokenize', ids);
    return guard(() => this.#ctx().detokenize(checked, special));
  }

  /**
   * llama.rn's `saveSession(path, { tokenSize })`: writes the prompt cache
   * (its first `tokenSize` tokens; 0 or less, the default -1: all) to `path` — a file
   * path in Node, a file of the origin private file system in browsers —
   * and returns the number of tokens saved. The file is versioned,
   * checksummed and tied to this model.
   */
  async saveSession(path, { tokenSize = -1 } = {}) {
    string('saveSession: path', path);
    const size = sessionSize('saveSession', tokenSize);
    const ctx = this.#ctx();
    const bytes = guard(() => ctx.saveSession(size));
    const tokens = guard(() => ctx.sessionTokens(size));
    await writeSessionFile(path, bytes);
    return tokens;
  }

  /** The session `saveSession` would write, as bytes (to store anywhere). */
  async sessionBytes({ tokenSize = -1 } = {}) {
    const size = sessionSize('sessionBytes', tokenSize);
    return guard(() => this.#ctx().saveSession(size));
  }

  /**
   * llama.rn's `loadSession(path)`: replaces the cache with a saved session
   * so the next completion reuses its tokens; `{ tokens_loaded, prompt }`.
   * `source`: a path (Node) or OPFS file name (browsers), or the bytes
   * (Uint8Array, ArrayBuffer, Blob). A corrupt file or another model's
   * session is an `Error` and the context is unchanged.
   */
  async loadSession(source) {
    let bytes;
    if (typeof source === 'string') bytes = await readSessionFile(source);
    else if (source instanceof Uint8Array) bytes = source;
    else if (source instanceof ArrayBuffer) bytes = new Uint8Array(source);
    else if (typeof Blob !== 'undefined' && source instanceof Blob) bytes = new Uint8Array(await source.arrayBuffer());
    else throw new TypeError('loadSession: source must be a path, a Uint8Array, an ArrayBuffer or a Blob');
    return guard(() => this.#ctx().loadSession(bytes));
  }

  /**
   * llama.rn's `applyLoraAdapters([{ path, scaled }])`: LoRA adapters (GGUF)
   * applied to every completion from now on, in place of the applied ones.
   * Each entry: `path` (a file path in Node, an OPFS file name in browsers)
   * or `bytes` (Uint8Array, ArrayBuffer, Blob); `scaled` (or `scale`,
   * default 1). A bad adapter is an `Error` and nothing changes.
   */
  async applyLoraAdapters(list) {
    if (!Array.isArray(list)) throw new TypeError('applyLoraAdapters: expected an array of { path | bytes, scaled }');
    const files = [];
    const meta = [];
    for (const [i, entry] of list.entries()) {
      const { path, bytes, scaled, scale } = entry ?? {};
      const s = scaled ?? scale ?? 1;
      if (typeof s !== 'number' || !Number.isFinite(s)) {
        throw new TypeError(`applyLoraAdapters: adapter ${i}: scale must be a finite number`);
      }
      let data;
      if (typeof path === 'string') data = await readSessionFile(path);
      else if (bytes instanceof Uint8Array) data = bytes;
      else if (bytes instanceof ArrayBuffer) data = new Uint8Array(bytes);
      else if (typeof Blob !== 'undefined' && bytes instanceof Blob) data = new Uint8Array(await bytes.arrayBuffer());
      else throw new TypeError(`applyLoraAdapters: adapter ${i} needs a path or bytes`);
      files.push(data);
      meta.push({ path: typeof path === 'string' ? path : `adapter ${i}`, scale: s });
    }
    return guard(() => this.#ctx().applyLoraAdapters(files, JSON.stringify(meta)));
  }

  /** llama.rn's `removeLoraAdapters()`: the model without adapters again. */
  async removeLoraAdapters() {
    return guard(() => this.#ctx().applyLoraAdapters([], '[]'));
  }

  /** llama.rn's `getLoadedLoraAdapters()`: `[{ path, scaled }]`. */
  async getLoadedLoraAdapters() {
    return guard(() => this.#ctx().loadedLoraAdapters());
  }

  /** `lamina info --json` of the loaded model. */
  async modelInfo() {
    return guard(() => this.#ctx().modelInfo());
  }

  /** `{ arch, pooling, n_embd, cpu_variant, n_threads, n_ctx, build }`. */
  async contextInfo() {
    const { build } = await init();
    return { ...guard(() => this.#ctx().contextInfo()), build };
  }

  /**
   * llama.rn's `embedding`: `{ embedding, token_ids, truncated, pooling }`;
   * `embedding` is one vector, or one per token with pooling 'none'.
   * `params`: `embd_normalize` (-1 none, 0 max-abs, 1 taxicab, 2 euclidean —
   * the default —, >2 p-norm), `truncate`.
   */
  async embedding(text, params = {}) {
    string('embedding: text', text);
    const json = paramsJson('embedding parameters', params);
    return guard(() => this.#ctx().embedding(text, json));
  }

  /**
   * llama.rn's `rerank`: `[{ index, score, document }]`, best first (needs a
   * reranker loaded with `pooling_type: 'rank'`). `params`: `normalize`
   * (scores through a sigmoid), `truncate`.
   */
  async rerank(query, documents, params = {}) {
    string('rerank: query', query);
    strings('rerank: documents', documents);
    const json = paramsJson('rerank parameters', params);
    return guard(() => this.#ctx().rerank(query, documents, json));
  }

  /**
   * llama.rn's `bench(pp, tg, pl, nr)`: `{ modelDesc, modelSize, modelNParams,
   * ppAvg, ppStd, tgAvg, tgStd }` in tokens/s over `nr` runs, and `rows`,
   * llama-bench's rows. `tg` runs in `pl` sequences at once (one decode per
   * step for all; `tgAvg` counts every sequence's tokens), as llama.rn's.
   */
  async bench(pp = 128, tg = 64, pl = 1, nr = 3) {
    // wasm-bindgen would wrap -1 to 4294967295: counts are checked here.
    const counts = [count('bench: pp', pp), count('bench: tg', tg), count('bench: nr', nr), count('bench: pl', pl)];
    const rows = guard(() => this.#ctx().bench(...counts));
    const info = guard(() => this.#ctx().contextInfo());
    const pp_row = rows.find((r) => r.n_prompt > 0);
    const tg_row = rows.find((r) => r.n_gen > 0);
    return {
      modelDesc: info.model_desc,
      modelSize: info.model_size,
      modelNParams: info.model_n_params,
      ppAvg: pp_row?.avg_ts ?? 0,
      ppStd: pp_row?.stddev_ts ?? 0,
      tgAvg: tg_row?.avg_ts ?? 0,
      tgStd: tg_row?.stddev_ts ?? 0,
      rows,
    };
  }

  /** Test-only: makes the engine panic (in this thread every model stops). */
  async _testPanic(message) {
    return _testPanic(message);
  }

  /** Test-only: makes the engine run out of memory. */
  async _testOutOfMemory() {
    return _testOutOfMemory();
  }

  /** Frees the model and its context. */
  async release() {
    const released = new Error('this LlamaContext was released');
    for (const request of this.#requests.values()) request.reject(released);
    this.#requests.clear();
    this.#inner?.free();
    this.#abort?.free();
    this.#inner = null;
    this.#abort = null;
  }
}

/**
 * Loads a GGUF model and makes a context. `params` takes llama.rn's initLlama
 * names: n_ctx, n_batch, n_ubatch, n_threads, cache_type_k, cache_type_v,
 * pooling_type ('none', 'mean', 'cls', 'last', 'rank'), cpu_variant; and
 * lamina's `simd` ('simd128' or 'relaxed-simd': which build the worker
 * loads; by default the best the engine runs). A Blob/File, URL or (in
 * Node) file path is read in chunks with progress. A model split in several
 * files (`NAME-00001-of-0000N.gguf`, ...) is given as an array of its parts
 * in order, or by the first part's URL or path alone.
 *
 * @param {ArrayBuffer | Uint8Array | Blob | string | URL | Array<ArrayBuffer | Uint8Array | Blob | string | URL>} source
 */
export async function loadModel(source, params = {}, options = {}) {
  await init();
  checkAborted(options.signal);
  const json = paramsJson('model parameters', params);
  let inner;
  if (source instanceof Uint8Array) {
    inner = guard(() => wasm.LlamaContext.fromBytes(source, json));
  } else if (source instanceof ArrayBuffer) {
    inner = guard(() => wasm.LlamaContext.fromBytes(new Uint8Array(source), json));
  } else if (
    (typeof Blob !== 'undefined' && source instanceof Blob) ||
    typeof source === 'string' ||
    source instanceof URL ||
    Array.isArray(source)
  ) {
    // Progress: reading the file is the first half, binding its weights
    // (repacking some) the second.
    const onProgress = options.onProgress;
    const reading = { ...options, onProgress: onProgress && ((f) => onProgress(f / 2)) };
    const binding = onProgress && ((f) => onProgress(0.5 + f / 2));
    inner = await streamSource(source, reading, (loader) =>
      guard(() => wasm.LlamaContext.fromLoader(loader, json, binding)),
    );
  } else {
    throw new TypeError('loadModel: source must be an ArrayBuffer, Uint8Array, Blob, URL, string or an array of them');
  }
  options.onProgress?.(1);
  const context = new LlamaContext(inner);
  // llama.rn's load-time adapters: `lora` (with `lora_scaled`) and `lora_list`.
  const loras = [...(params.lora_list ?? [])];
  if (typeof params.lora === 'string') loras.unshift({ path: params.lora, scaled: params.lora_scaled ?? 1 });
  if (loras.length > 0) await context.applyLoraAdapters(loras);
  const { simd, simd_reason, reason } = await init();
  context.build = { ...(await context.contextInfo()), simd, simd_reason, reason };
  return context;
}

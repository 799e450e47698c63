// lamina's API with every model in a worker of its own: a Web Worker in
// browsers, a worker_threads Worker in Node (worker.js runs the engine there).
// Loading and generation never block the caller's thread, and a model whose
// engine panics or runs out of memory takes only its own worker down: the
// worker is ended (its memory returned) and the other models keep running.
// Calls become messages; answers, progress and tokens come back as messages;
// errors are `Error`s (or `TypeError`/`RangeError`) with the engine's message.

import { pickSimd } from './simd.js';
import { pickBuild, defaultThreads } from './builds.js';

const WORKER_URL = new URL('./worker.js', import.meta.url);
const isNode = typeof process !== 'undefined' && process.versions?.node != null;
// Node's workers come from a built-in module; bundlers for browsers never see it.
const nodeThreads = isNode ? await import(/* webpackIgnore: true */ 'node:worker_threads') : null;

/**
 * The caller's Node options for the worker, less `--input-type`: a worker
 * runs a file, and Node refuses to start one with that option (which
 * `node --input-type=module -e ...` scripts carry).
 */
function workerExecArgv() {
  const argv = process.execArgv;
  return argv.filter((arg, i) => !arg.startsWith('--input-type') && argv[i - 1] !== '--input-type');
}

/**
 * A Node worker with the caller's options. Node refuses to start one with
 * V8's process-wide flags (such as `--experimental-wasm-relaxed-simd`; the
 * worker shares them anyway) and names them in its error, so those are
 * left out and the worker started again.
 */
function nodeWorker() {
  const options = { name: 'lamina', execArgv: workerExecArgv() };
  try {
    return new nodeThreads.Worker(WORKER_URL, options);
  } catch (e) {
    if (e?.code !== 'ERR_WORKER_INVALID_EXEC_ARGV') throw e;
    const refused = new Set(e.message.slice(e.message.indexOf(':') + 1).split(',').map((f) => f.trim()));
    options.execArgv = options.execArgv.filter((arg) => !refused.has(arg));
    return new nodeThreads.Worker(WORKER_URL, options);
  }
}

/** The error classes a worker's error keeps across the message. */
const ERROR_CLASSES = { TypeError, RangeError };

/**
 * Starts worker.js and wires its messages to `receive(data)` and a failure
 * of the worker itself to `fail(error)`. In Node the worker only keeps the
 * process alive while a request is outstanding (`busy(true)`), as a model
 * in the calling thread would.
 */
function startWorker(receive, fail) {
  if (nodeThreads) {
    const worker = nodeWorker();
    worker.on('message', receive);
    worker.on('error', (e) => fail(new Error(`the lamina worker failed: ${e?.message ?? e}`)));
    worker.on('exit', (code) => fail(new Error(`the lamina worker exited (code ${code})`)));
    worker.unref();
    return {
      post: (message) => worker.postMessage(message),
      busy: (yes) => (yes ? worker.ref() : worker.unref()),
      terminate: () => worker.terminate(),
    };
  }
  const worker = new Worker(WORKER_URL, { type: 'module', name: 'lamina' });
  worker.onmessage = ({ data }) => receive(data);
  worker.onerror = (e) => {
    e.preventDefault?.();
    fail(new Error(`the lamina worker failed: ${e.message ?? 'unknown error'}`));
  };
  return { post: (message) => worker.postMessage(message), busy: () => {}, terminate: () => worker.terminate() };
}

/** The engine's log (llama.rn's toggleNativeLog): on or off in every worker. */
let logEnabled = false;
const logListeners = new Set();
/** The live workers, told when the log is toggled. */
const connections = new Set();

/** llama.rn's `toggleNativeLog(enabled)`: every model's engine log to the listeners, or off. */
export async function toggleNativeLog(enabled) {
  logEnabled = Boolean(enabled);
  await Promise.all([...connections].map((c) => c.call('log', { enabled: logEnabled }).catch(() => {})));
}

/** llama.rn's `addNativeLogListener(listener)`: `listener(level, text)` per log line; `{ remove }`. */
export function addNativeLogListener(listener) {
  if (typeof listener !== 'function') throw new TypeError('addNativeLogListener: listener must be a function');
  logListeners.add(listener);
  return { remove: () => logListeners.delete(listener) };
}

/** One worker and its outstanding requests. */
class Connection {
  #worker;
  #next = 1;
  #pending = new Map();
  #closed = null;

  constructor() {
    this.#worker = startWorker(
      (data) => this.#receive(data),
      (error) => this.close(error),
    );
    connections.add(this);
    // Before any other request, so loading is logged too.
    if (logEnabled) this.call('log', { enabled: true }).catch(() => {});
  }

  #receive({ id, result, error, errorName, stopped, progress, token, log }) {
    if (log !== undefined) {
      for (const listener of logListeners) {
        try {
          listener(log.level, log.text);
        } catch {
          // A listener's error is its own; the other listeners still hear.
        }
      }
      return;
    }
    const request = this.#pending.get(id);
    if (!request) return;
    if (progress !== undefined) return request.onProgress?.(progress);
    if (token !== undefined) return request.onToken?.(token);
    this.#settled(id);
    if (error === undefined) return request.resolve(result);
    request.reject(new (ERROR_CLASSES[errorName] ?? Error)(error));
    // The engine in that worker can no longer be trusted: end it now, so its
    // memory is returned; later calls fail with why it stopped.
    if (stopped !== undefined) this.close(new Error(stopped));
  }

  #settled(id) {
    this.#pending.delete(id);
    if (this.#pending.size === 0) this.#worker.busy(false);
  }

  /** Sends `op(args)`; `handlers` hear progress and tokens. */
  call(op, args = {}, handlers = {}) {
    if (this.#closed) return Promise.reject(this.#closed);
    const id = this.#next++;
    return new Promise((resolve, reject) => {
      if (this.#pending.size === 0) this.#worker.busy(true);
      this.#pending.set(id, { resolve, reject, ...handlers });
      try {
        this.#worker.post({ id, op, args });
      } catch (e) {
        // Arguments that cannot be cloned (a function, ...): nothing was sent.
        this.#settled(id);
        reject(e);
      }
    });
  }

  /** Stops the worker (freeing its memory); pending calls fail with `reason`. */
  close(reason = new Error('this LlamaContext was released')) {
    if (this.#closed) return;
    this.#closed = reason;
    connections.delete(this);
    this.#worker.terminate();
    for (const request of this.#pending.values()) request.reject(reason);
    this.#pending.clear();
    this.#worker.busy(false);
  }
}

/**
 * Sources travel to the worker: URLs made absolute against the page (in Node
 * they stay as given), Blobs by reference, bytes copied.
 */
function portable(source) {
  if (Array.isArray(source)) return source.map(portable);
  if (typeof source === 'string' || source instanceof URL) {
    return globalThis.location ? new URL(source, location.href).href : String(source);
  }
  if (source instanceof Blob || source instanceof ArrayBuffer || source instanceof Uint8Array) return source;
  throw new TypeError('source must be an ArrayBuffer, Uint8Array, Blob, URL, string or an array of them (the parts of a split model)');
}

/** Runs one request in a worker that lives only for it. */
async function once(op, args, handlers, signal) {
  const connection = new Connection();
  const abort = () => connection.close(signal.reason ?? new Error('aborted'));
  signal?.addEventListener('abort', abort);
  try {
    return await connection.call(op, args, handlers);
  } finally {
    signal?.removeEventListener('abort', abort);
    connection.close();
  }
}

function checkAborted(signal) {
  if (signal?.aborted) throw signal.reason ?? new Error('aborted');
}

/**
 * What `loadModel` would run here with the default threads (builds.js), and
 * its instruction set: relaxed SIMD where the engine has it.
 */
export async function buildInfo() {
  return { ...pickBuild(defaultThreads()), ...pickSimd() };
}

export const init = buildInfo;

export async function modelInfo(source, { onProgress, signal, parallel, retries, cache, sha256 } = {}) {
  checkAborted(signal);
  const download = { parallel, retries, cache, sha256 };
  return once('info', { source: portable(source), download }, { onProgress }, signal);
}

export async function _testPanic(message) {
  return once('panic', { message });
}

export async function _testOutOfMemory() {
  return once('outOfMemory', {});
}

/** A model loaded in its worker; the same methods as engine.js's. */
export class LlamaContext {
  #connection;

  /** `{ build, reason, simd, cpu_variant, n_threads, n_ctx }`, set at load. */
  build;

  constructor(connection, info) {
    this.#connection = connection;
    this.build = info;
  }

  /**
   * An `onToken` that throws stops the completion; the promise rejects with
   * what it threw once the worker has finished (the context is then idle).
   */
  async completion(params, onToken) {
    let thrown = null;
    const hear = (token) => {
      if (thrown) return;
      try {
        onToken?.(token);
      } catch (error) {
        thrown = { error };
        this.stopCompletion();
      }
    };
    const result = await this.#connection.call('completion', { params: params ?? {} }, { onToken: hear });
    if (thrown) throw thrown.error;
    return result;
  }

  /** Stops the running completion at the next prompt micro-batch or token. */
  stopCompletion() {
    this.#connection.call('stop').catch(() => {});
  }

  tokenize(text, options = {}) {
    return this.#connection.call('tokenize', { text, options });
  }

  getFormattedChat(messages, template, options = {}) {
    return this.#connection.call('getFormattedChat', { messages, template, options });
  }

  detokenize(ids, options = {}) {
    // Checked by the engine in the worker (arrays and typed arrays clone as they are).
    return this.#connection.call('detokenize', { ids, options });
  }

  /**
   * llama.rn's parallel mode, run in the worker: `completion` resolves once
   * the request is queued, with `{ requestId, promise, stop }`; `onToken`
   * hears `(requestId, data)`. An `onToken` that throws stops its request.
   */
  parallel = {
    enable: (config = {}) => this.#connection.call('parallelEnable', { config }),
    configure: (config = {}) => this.#connection.call('parallelEnable', { config }),
    disable: () => this.#connection.call('parallelDisable'),
    getStatus: () => this.#connection.call('parallelStatus'),
    completion: (params, onToken) =>
      new Promise((resolve, reject) => {
        let requestId = null;
        const stop = () => this.#connection.call('parallelStop', { requestId });
        const hear = (token) => {
          try {
            onToken?.(requestId, token);
          } catch {
            stop().catch(() => {});
          }
        };
        const queued = (id) => {
          requestId = id;
          resolve({ requestId, promise, stop });
        };
        const promise = this.#connection.call('parallelCompletion', { params: params ?? {} }, { onProgress: queued, onToken: hear });
        // Before it is queued (bad parameters) the error is the call's own.
        promise.catch((e) => {
          if (requestId === null) reject(e);
        });
      }),
  };

  saveSession(path, options = {}) {
    return this.#connection.call('saveSession', { path, options });
  }

  sessionBytes(options = {}) {
    return this.#connection.call('sessionBytes', { options });
  }

  applyLoraAdapters(list) {
    return this.#connection.call('applyLoraAdapters', { list });
  }

  removeLoraAdapters() {
    return this.#connection.call('removeLoraAdapters', {});
  }

  getLoadedLoraAdapters() {
    return this.#connection.call('getLoadedLoraAdapters', {});
  }

  loadSession(source) {
    return this.#connection.call('loadSession', { source });
  }

  modelInfo() {
    return this.#connection.call('modelInfo');
  }

  contextInfo() {
    return this.#connection.call('contextInfo');
  }

  embedding(text, params = {}) {
    return this.#connection.call('embedding', { text, params });
  }

  rerank(query, documents, params = {}) {
    return this.#connection.call('rerank', { query, documents, params });
  }

  bench(pp = 128, tg = 64, pl = 1, nr = 3) {
    return this.#connection.call('bench', { pp, tg, pl, nr });
  }

  /** Test-only: makes this model's engine panic (its worker ends). */
  _testPanic(message) {
    return this.#connection.call('panic', { message });
  }

  /** Test-only: makes this model's engine run out of memory (its worker ends). */
  _testOutOfMemory() {
    return this.#connection.call('outOfMemory');
  }

  /** Ends the worker: the model's memory is returned at once. */
  async release() {
    this.#connection.close();
  }
}

export async function loadModel(source, params = {}, { onProgress, signal, parallel, retries, cache, sha256 } = {}) {
  checkAborted(signal);
  const connection = new Connection();
  const abort = () => connection.close(signal.reason ?? new Error('loading the model was aborted'));
  signal?.addEventListener('abort', abort);
  try {
    const download = { parallel, retries, cache, sha256 };
    const info = await connection.call('load', { source: portable(source), params: params ?? {}, download }, { onProgress });
    onProgress?.(1);
    return new LlamaContext(connection, info);
  } catch (e) {
    connection.close(e);
    throw e;
  } finally {
    signal?.removeEventListener('abort', abort);
  }
}

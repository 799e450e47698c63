// The browser side of lamina: the same API as engine.js, but every model
// lives in a Web Worker of its own (worker.js), so loading and generation
// never block the page. Calls become messages; answers, progress and tokens
// come back as messages; errors are `Error`s with the engine's message.

const WORKER_URL = new URL('./worker.js', import.meta.url);

/** One worker and its outstanding requests. */
class Connection {
  #worker;
  #next = 1;
  #pending = new Map();
  #closed = null;

  constructor() {
    this.#worker = new Worker(WORKER_URL, { type: 'module', name: 'lamina' });
    this.#worker.onmessage = ({ data }) => this.#receive(data);
    this.#worker.onerror = (e) => {
      e.preventDefault?.();
      this.close(new Error(`the lamina worker failed: ${e.message ?? 'unknown error'}`));
    };
  }

  #receive({ id, result, error, progress, token }) {
    const request = this.#pending.get(id);
    if (!request) return;
    if (progress !== undefined) return request.onProgress?.(progress);
    if (token !== undefined) return request.onToken?.(token);
    this.#pending.delete(id);
    if (error !== undefined) request.reject(new Error(error));
    else request.resolve(result);
  }

  /** Sends `op(args)`; `handlers` hear progress and tokens. */
  call(op, args = {}, handlers = {}) {
    if (this.#closed) return Promise.reject(this.#closed);
    const id = this.#next++;
    return new Promise((resolve, reject) => {
      this.#pending.set(id, { resolve, reject, ...handlers });
      this.#worker.postMessage({ id, op, args });
    });
  }

  /** Stops the worker (freeing its memory); pending calls fail with `reason`. */
  close(reason = new Error('this LlamaContext was released')) {
    if (this.#closed) return;
    this.#closed = reason;
    this.#worker.terminate();
    for (const request of this.#pending.values()) request.reject(reason);
    this.#pending.clear();
  }
}

/** Sources travel to the worker: URLs made absolute, Blobs by reference. */
function portable(source) {
  if (typeof source === 'string' || source instanceof URL) return new URL(source, location.href).href;
  if (source instanceof Blob || source instanceof ArrayBuffer || source instanceof Uint8Array) return source;
  throw new TypeError('source must be an ArrayBuffer, Uint8Array, Blob, URL or string');
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

/** What `loadModel` would run here: threaded when cross-origin isolated. */
export async function buildInfo() {
  const isolated = globalThis.crossOriginIsolated === true;
  return { build: isolated ? 'threaded' : 'single-thread', simd: 'simd128' };
}

export const init = buildInfo;

export async function modelInfo(source, { onProgress, signal } = {}) {
  checkAborted(signal);
  return once('info', { source: portable(source) }, { onProgress }, signal);
}

export async function _testPanic(message) {
  return once('panic', { message });
}

export async function _testOutOfMemory() {
  return once('outOfMemory', {});
}

/** A model loaded in its worker; the same methods as in Node. */
export class LlamaContext {
  #connection;

  /** `{ build, reason, simd, cpu_variant, n_threads, n_ctx }`, set at load. */
  build;

  constructor(connection, info) {
    this.#connection = connection;
    this.build = info;
  }

  completion(params, onToken) {
    return this.#connection.call('completion', { params: params ?? {} }, { onToken });
  }

  /** Stops the running completion at the next token. */
  stopCompletion() {
    this.#connection.call('stop').catch(() => {});
  }

  tokenize(text, options = {}) {
    return this.#connection.call('tokenize', { text, options });
  }

  detokenize(ids, options = {}) {
    return this.#connection.call('detokenize', { ids: Array.from(ids), options });
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
    return this.#connection.call('rerank', { query, documents: Array.from(documents), params });
  }

  bench(pp = 128, tg = 64, reps = 3) {
    return this.#connection.call('bench', { pp, tg, reps });
  }

  /** Ends the worker: the model's memory is returned at once. */
  async release() {
    this.#connection.close();
  }
}

export async function loadModel(source, params = {}, { onProgress, signal } = {}) {
  checkAborted(signal);
  const connection = new Connection();
  const abort = () => connection.close(signal.reason ?? new Error('loading the model was aborted'));
  signal?.addEventListener('abort', abort);
  try {
    const info = await connection.call('load', { source: portable(source), params: params ?? {} }, { onProgress });
    onProgress?.(1);
    return new LlamaContext(connection, info);
  } catch (e) {
    connection.close(e);
    throw e;
  } finally {
    signal?.removeEventListener('abort', abort);
  }
}

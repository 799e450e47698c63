// lamina's JavaScript entry point: loads the WebAssembly engine once (from disk
// in Node, by URL in browsers) and exposes an API that takes the usual model
// sources: ArrayBuffer, Uint8Array, Blob/File (read in chunks) or a URL.
import initWasm, { initSync, modelInfo as wasmModelInfo, GgufStreamLoader } from './dist/lamina.js';

const WASM_URL = new URL('./dist/lamina_bg.wasm', import.meta.url);
const CHUNK_BYTES = 8 << 20;
const isNode = typeof process !== 'undefined' && process.versions?.node != null;

let ready = null;

/** Loads and instantiates the engine (once); later calls return the same promise. */
export function init() {
  if (!ready) {
    ready = (async () => {
      if (isNode) {
        const { readFile } = await import('node:fs/promises');
        initSync({ module: await readFile(WASM_URL) });
      } else {
        await initWasm({ module_or_path: WASM_URL });
      }
      return { build: 'single-thread', simd: 'simd128' };
    })();
  }
  return ready;
}

/** Which build runs: `{ build: 'single-thread', simd: 'simd128' }`. */
export async function buildInfo() {
  return init();
}

function checkAborted(signal) {
  if (signal?.aborted) throw signal.reason ?? new Error('aborted');
}

/** Feeds a stream of Uint8Array chunks to a fresh loader; returns the model info. */
async function streamInto(totalBytes, chunks, { onProgress, signal } = {}) {
  const loader = new GgufStreamLoader(totalBytes);
  try {
    for await (const chunk of chunks) {
      checkAborted(signal);
      loader.push(chunk);
      onProgress?.(totalBytes ? loader.received / totalBytes : 1);
    }
    return loader.finish();
  } finally {
    loader.free();
  }
}

async function* blobChunks(blob) {
  for (let offset = 0; offset < blob.size; offset += CHUNK_BYTES) {
    const part = blob.slice(offset, offset + CHUNK_BYTES);
    yield new Uint8Array(await part.arrayBuffer());
  }
}

async function* responseChunks(response) {
  const reader = response.body.getReader();
  for (;;) {
    const { done, value } = await reader.read();
    if (done) return;
    yield value;
  }
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
  if (source instanceof Uint8Array) return wasmModelInfo(source);
  if (source instanceof ArrayBuffer) return wasmModelInfo(new Uint8Array(source));
  if (typeof Blob !== 'undefined' && source instanceof Blob) {
    return streamInto(source.size, blobChunks(source), options);
  }
  if (typeof source === 'string' || source instanceof URL) {
    const response = await fetch(source, { signal: options.signal });
    if (!response.ok) throw new Error(`cannot fetch ${source}: HTTP ${response.status}`);
    const length = Number(response.headers.get('content-length'));
    if (!Number.isFinite(length) || length <= 0) {
      return wasmModelInfo(new Uint8Array(await response.arrayBuffer()));
    }
    return streamInto(length, responseChunks(response), options);
  }
  throw new TypeError('modelInfo: source must be an ArrayBuffer, Uint8Array, Blob, URL or string');
}

export { GgufStreamLoader };

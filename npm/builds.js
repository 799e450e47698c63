// Which WebAssembly build runs a model, and why:
//   - memory64 when the model is too big for a 32-bit memory (over 3 GiB:
//     the 4 GiB of wasm32 must also hold the context and buffers) and the
//     JavaScript engine has 64-bit memories; single-thread, SIMD128;
//   - threaded when more than one thread is asked for and memory can be
//     shared between threads (always in Node's worker_threads; in a page
//     only when it is cross-origin isolated);
//   - single-thread otherwise.

const isNode = typeof process !== 'undefined' && process.versions?.node != null;
const nodeOs = isNode ? await import(/* webpackIgnore: true */ 'node:os') : null;
const nodeV8 = isNode ? await import(/* webpackIgnore: true */ 'node:v8') : null;

const GIB = 2 ** 30;
/** Models above this size go to the memory64 build where there is one. */
export const WASM32_MODEL_BYTES = 3 * GIB;

/**
 * A module with a 64-bit table and a 64-bit memory, one of each (limits flag
 * 0x04): LLVM's wasm64 output has both.
 */
const MEMORY64_PROBE = new Uint8Array([0, 0x61, 0x73, 0x6d, 1, 0, 0, 0, 4, 4, 1, 0x70, 4, 1, 5, 3, 1, 4, 1]);

/**
 * Whether this JavaScript engine compiles the memory64 build. V8 versions
 * that have 64-bit memories only behind `--experimental-wasm-memory64` get
 * it set here, in the model's worker, when a model needs it (it holds for
 * the whole process). Node 20's V8 then has the memories but not the 64-bit
 * tables, so there the probe still fails.
 */
export function hasMemory64() {
  if (WebAssembly.validate(MEMORY64_PROBE)) return true;
  if (!nodeV8) return false;
  nodeV8.setFlagsFromString('--experimental-wasm-memory64');
  return WebAssembly.validate(MEMORY64_PROBE);
}

const gib = (bytes) => `${(bytes / GIB).toFixed(1)} GiB`;

/**
 * `{ build, threads, reason }` for `nThreads` asked for and a model of
 * `modelBytes` (null: unknown). `memory64`: true asks for the memory64
 * build, false forbids it, undefined decides by the model's size.
 */
export function pickBuild(nThreads, { modelBytes = null, memory64 } = {}) {
  const big = modelBytes !== null && modelBytes > WASM32_MODEL_BYTES;
  if (memory64 === true || (memory64 !== false && big)) {
    const why = memory64 === true ? 'memory64 was asked for' : `the model is ${gib(modelBytes)}`;
    if (hasMemory64()) {
      const threads = nThreads > 1 ? ' (it runs one thread)' : '';
      return { build: 'memory64', threads: 1, reason: `${why}: 64-bit memory${threads}` };
    }
    const none = 'this JavaScript engine has no 64-bit WebAssembly memory (Memory64)';
    if (memory64 === true) throw new Error(`memory64 was asked for, and ${none}`);
    if (modelBytes > 4 * GIB) {
      throw new Error(`${why}, more than a wasm32 build can hold (4 GiB with its context), and ${none}`);
    }
    // Under 4 GiB it may still fit, with a small context.
  } else if (big && modelBytes > 4 * GIB) {
    throw new Error(
      `the model is ${gib(modelBytes)}, more than a wasm32 build can hold (4 GiB with its context); ` +
        'memory64: false turned off the build that could',
    );
  }
  if (nThreads <= 1) return { build: 'single-thread', threads: 1, reason: 'one thread was asked for' };
  if (isNode) return { build: 'threaded', threads: nThreads, reason: 'Node (a worker_threads pool)' };
  if (globalThis.crossOriginIsolated === true && typeof SharedArrayBuffer === 'function') {
    return { build: 'threaded', threads: nThreads, reason: 'cross-origin isolated' };
  }
  return { build: 'single-thread', threads: 1, reason: 'the page is not cross-origin isolated (COOP/COEP)' };
}

/** The machine's cores, as the JavaScript engine reports them (at least 1). */
function cores() {
  return Math.max(1, (isNode ? nodeOs.availableParallelism() : globalThis.navigator?.hardwareConcurrency) || 1);
}

/** The threads used when none are asked for: the machine's cores, at most 4. */
export function defaultThreads() {
  return Math.min(cores(), 4);
}

/** The most threads a model may ask for, as natively: 8 per core. */
const THREADS_PER_CORE = 8;

/**
 * `n_threads` checked: a whole number from 1 to 8 per core (far more, a
 * typo or a wrapped negative number, would start thousands of workers).
 */
export function checkThreads(n) {
  if (!Number.isInteger(n) || n < 1) throw new RangeError(`n_threads must be a whole number of at least 1, got ${n}`);
  const most = THREADS_PER_CORE * cores();
  if (n > most) {
    throw new RangeError(`${n} threads is too many: at most ${most} (${THREADS_PER_CORE} per core, ${cores()} cores here)`);
  }
  return n;
}

// The Web Worker that runs lamina's engine for a browser page (started by
// proxy.js, one per loaded model). It picks the build: threaded when the page
// is cross-origin isolated (SharedArrayBuffer) and more than one thread is
// asked for, single-thread otherwise, and says why. Requests arrive as
// `{ id, op, args }`; answers go back as `{ id, result }` or `{ id, error }`,
// with `{ id, progress }` and `{ id, token }` along the way.
import * as engine from './engine.js';

let ctx = null;

/** The build for `n_threads`, and why it was chosen. */
function pickBuild(nThreads) {
  const isolated = self.crossOriginIsolated === true && typeof SharedArrayBuffer === 'function';
  if (nThreads > 1 && isolated) {
    return { build: 'threaded', threads: nThreads, reason: 'cross-origin isolated' };
  }
  const reason =
    nThreads <= 1 ? 'one thread was asked for' : 'the page is not cross-origin isolated (COOP/COEP)';
  return { build: 'single-thread', threads: 1, reason };
}

function defaultThreads() {
  return Math.max(1, Math.min(navigator.hardwareConcurrency || 1, 4));
}

function loaded() {
  if (!ctx) throw new Error('no model is loaded in this worker');
  return ctx;
}

const ops = {
  async load({ source, params }, reply) {
    const pick = pickBuild(params.n_threads ?? defaultThreads());
    const build = await engine.init(pick);
    ctx = await engine.loadModel(source, { ...params, n_threads: build.threads }, {
      onProgress: (progress) => reply({ progress }),
    });
    return ctx.build;
  },
  info: ({ source }, reply) => engine.modelInfo(source, { onProgress: (progress) => reply({ progress }) }),
  completion: ({ params }, reply) => loaded().completion(params, (token) => reply({ token })),
  stop: () => loaded().stopCompletion(),
  tokenize: ({ text, options }) => loaded().tokenize(text, options),
  detokenize: ({ ids, options }) => loaded().detokenize(ids, options),
  modelInfo: () => loaded().modelInfo(),
  contextInfo: () => loaded().contextInfo(),
  bench: ({ pp, tg, reps }) => loaded().bench(pp, tg, reps),
  embedding: ({ text, params }) => loaded().embedding(text, params),
  rerank: ({ query, documents, params }) => loaded().rerank(query, documents, params),
  panic: ({ message }) => engine._testPanic(message),
  outOfMemory: () => engine._testOutOfMemory(),
};

self.onmessage = async ({ data: { id, op, args } }) => {
  const reply = (message) => self.postMessage({ id, ...message });
  try {
    const run = ops[op];
    if (!run) throw new Error(`unknown request ${JSON.stringify(op)}`);
    reply({ result: await run(args ?? {}, reply) });
  } catch (e) {
    reply({ error: e?.message ?? String(e) });
  }
};

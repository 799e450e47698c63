// The worker that runs lamina's engine for one loaded model (started by
// proxy.js): a Web Worker in browsers, a worker_threads Worker in Node. It
// picks the build (builds.js) for the threads asked for. Requests arrive as
// `{ id, op, args }`; answers go back as `{ id, result }` or
// `{ id, error, errorName }`, with `{ id, progress }` and `{ id, token }`
// along the way. An error after which the engine is unusable (a panic, out of
// memory) also carries `stopped`, and proxy.js then ends this worker.
import * as engine from './engine.js';
import { pickBuild, defaultThreads, checkThreads } from './builds.js';
import { modelBytes } from './model-size.js';

const isNode = typeof process !== 'undefined' && process.versions?.node != null;
const nodePort = isNode ? (await import(/* webpackIgnore: true */ 'node:worker_threads')).parentPort : null;

let ctx = null;
/** The stop functions of running parallel requests, by request id. */
const stops = new Map();

/** The threads asked for (checked), or the default. */
function threadsAsked({ n_threads: n = defaultThreads() }) {
  return checkThreads(n);
}

function loaded() {
  if (!ctx) throw new Error('no model is loaded in this worker');
  return ctx;
}

const ops = {
  async load({ source, params, download }, reply) {
    const threads = threadsAsked(params);
    const pick = pickBuild(threads, { modelBytes: await modelBytes(source), memory64: params.memory64 });
    const build = await engine.init({ ...pick, simd: params.simd });
    ctx = await engine.loadModel(source, { ...params, n_threads: build.threads }, {
      ...download,
      onProgress: (progress) => reply({ progress }),
    });
    return ctx.build;
  },
  info: ({ source, download }, reply) =>
    engine.modelInfo(source, { ...download, onProgress: (progress) => reply({ progress }) }),
  completion: ({ params }, reply) => loaded().completion(params, (token) => reply({ token })),
  stop: () => loaded().stopCompletion(),
  tokenize: ({ text, options }) => loaded().tokenize(text, options),
  getFormattedChat: ({ messages, template, options }) => loaded().getFormattedChat(messages, template, options),
  detokenize: ({ ids, options }) => loaded().detokenize(ids, options),
  parallelEnable: ({ config }) => loaded().parallel.enable(config),
  parallelDisable: () => loaded().parallel.disable(),
  parallelStatus: () => loaded().parallel.getStatus(),
  async parallelCompletion({ params }, reply) {
    const { requestId, promise, stop } = await loaded().parallel.completion(params, (_, token) => reply({ token }));
    stops.set(requestId, stop);
    reply({ progress: requestId });
    try {
      return await promise;
    } finally {
      stops.delete(requestId);
    }
  },
  parallelStop: ({ requestId }) => stops.get(requestId)?.() ?? false,
  saveSession: ({ path, options }) => loaded().saveSession(path, options),
  sessionBytes: ({ options }) => loaded().sessionBytes(options),
  loadSession: ({ source }) => loaded().loadSession(source),
  applyLoraAdapters: ({ list }) => loaded().applyLoraAdapters(list),
  removeLoraAdapters: () => loaded().removeLoraAdapters(),
  getLoadedLoraAdapters: () => loaded().getLoadedLoraAdapters(),
  modelInfo: () => loaded().modelInfo(),
  contextInfo: () => loaded().contextInfo(),
  bench: ({ pp, tg, pl, nr }) => loaded().bench(pp, tg, pl, nr),
  embedding: ({ text, params }) => loaded().embedding(text, params),
  rerank: ({ query, documents, params }) => loaded().rerank(query, documents, params),
  log: ({ enabled }) => engine.setLogCallback(enabled ? (level, text) => post({ log: { level, text } }) : null),
  panic: ({ message }) => engine._testPanic(message),
  outOfMemory: () => engine._testOutOfMemory(),
};

async function handle({ id, op, args }) {
  const reply = (message) => post({ id, ...message });
  try {
    const run = ops[op];
    if (!run) throw new Error(`unknown request ${JSON.stringify(op)}`);
    reply({ result: await run(args ?? {}, reply) });
  } catch (e) {
    const stopped = engine.stoppedReason();
    reply({
      error: e?.message ?? String(e),
      errorName: e?.name,
      ...(stopped ? { stopped: `the lamina engine stopped ${stopped}` } : {}),
    });
  }
}

const post = nodePort ? (message) => nodePort.postMessage(message) : (message) => self.postMessage(message);
if (nodePort) nodePort.on('message', handle);
else self.onmessage = ({ data }) => handle(data);

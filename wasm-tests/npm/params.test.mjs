// Random parameter objects through the packed npm package, for a fixed time
// (LAMINA_PARAMS_SECONDS, 60 by default: a minute, as each fuzz target)
// from a seed (LAMINA_PARAMS_SEED, or one drawn and printed): llama.rn's
// names with values of every JS type (NaN, infinities, negatives,
// fractions, huge numbers, strings, arrays, objects, null) and unknown keys,
// to loadModel, completion, embedding, rerank, tokenize, detokenize and
// bench. Every call must resolve or reject with an Error carrying a
// message; none may panic the engine or run it out of memory; and
// afterwards the model still gives llama.cpp's greedy ids.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { readFile } from 'node:fs/promises';
import { existsSync } from 'node:fs';
import { loadModel } from 'lamina';

const repo = process.env.LAMINA_REPO;
const SECONDS = Number(process.env.LAMINA_PARAMS_SECONDS ?? 60);
const SEED = Number(process.env.LAMINA_PARAMS_SEED ?? Math.floor(Math.random() * 2 ** 32));

async function bytesOf(name) {
  const path = `${repo}/models/${name}`;
  if (!existsSync(path)) {
    throw new Error(`model missing at ${path}: run LAMINA_TEST_MODELS=../shared/models scripts/fetch-models.sh`);
  }
  return new Uint8Array(await readFile(path));
}

/** mulberry32: a small seeded generator, so a failing run can be repeated. */
function generator(seed) {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = Math.imul(a ^ (a >>> 15), 1 | a);
    t = (t + Math.imul(t ^ (t >>> 7), 61 | t)) ^ t;
    return ((t ^ (t >>> 14)) >>> 0) / 2 ** 32;
  };
}

const SPECIAL_NUMBERS = [
  NaN, Infinity, -Infinity, -1, 0, 1, 2, 0.5, 1.5, -0.5, 7, 64, 255, 256, 1e9, -1e9,
  2 ** 31, 2 ** 32, 2 ** 53, -(2 ** 31), Number.MIN_VALUE, Number.MAX_VALUE, -0,
];
const OTHER_VALUES = [
  '', 'x', 'q8_0', 'f16', 'mean', 'rank', 'none', '1', true, false, null, [], {}, [1, 2.5], ['a'],
  { a: 1 }, '<|im_start|>', 'Hello', '\u0000', '\ud800',
];
const NOT_COUNTS = [-1, 0.5, NaN, Infinity, 2 ** 32, 2 ** 53, '3', null, {}, true];
const COMPLETION_KEYS = [
  'prompt', 'messages', 'n_predict', 'temperature', 'top_k', 'top_p', 'min_p', 'typical_p',
  'penalty_last_n', 'penalty_repeat', 'penalty_freq', 'penalty_present', 'mirostat',
  'mirostat_tau', 'mirostat_eta', 'seed', 'stop', 'ignore_eos', 'n_probs', 'logit_bias',
  'cache_prompt', 'not_a_parameter',
];
const LOAD_KEYS = [
  'n_ctx', 'n_batch', 'n_ubatch', 'n_threads', 'cache_type_k', 'cache_type_v', 'cpu_variant',
  'pooling_type', 'n_gpu_layers', 'not_a_parameter',
];
const EMBED_KEYS = ['embd_normalize', 'truncate', 'normalize', 'not_a_parameter'];

/** Draws values, parameter objects and calls from `random`. */
class Draw {
  constructor(random) {
    this.random = random;
  }
  chance(p) {
    return this.random() < p;
  }
  pick(list) {
    return list[Math.floor(this.random() * list.length)];
  }
  number() {
    if (this.chance(0.5)) return this.pick(SPECIAL_NUMBERS);
    const magnitude = 10 ** Math.floor(this.random() * 12 - 3);
    const x = (this.random() * 2 - 1) * magnitude;
    return this.chance(0.5) ? Math.round(x) : x;
  }
  value(depth = 0) {
    if (this.chance(0.55)) return this.number();
    if (depth < 2 && this.chance(0.15)) return Array.from({ length: this.pick([0, 1, 2, 3]) }, () => this.value(depth + 1));
    return this.pick(OTHER_VALUES);
  }
  /** Text a caller might pass: short prompts, special tokens, odd code points. */
  text() {
    return this.pick(['Hello', 'Once upon a time', '<|im_start|>user\nHi<|im_end|>', ' ', 'é\u0000\ud83d', 'a'.repeat(300)]);
  }
  params(keys, special = {}) {
    const out = {};
    for (const key of keys) {
      if (!this.chance(0.35)) continue;
      out[key] = key in special && this.chance(0.5) ? special[key]() : this.value();
    }
    return out;
  }
  completionParams() {
    return this.params(COMPLETION_KEYS, {
      prompt: () => this.text(),
      messages: () =>
        Array.from({ length: this.pick([0, 1, 2]) }, () => ({
          role: this.pick(['user', 'assistant', 'system', 'tool', '', 7]),
          content: this.chance(0.8) ? this.text() : this.value(),
        })),
      stop: () => [this.text()],
      logit_bias: () => [[this.pick([0, 1, 49151, 49152, 2 ** 32 - 1]), this.number()]],
    });
  }
}

/** Tallies what calls did; an Error that says the engine broke fails the test. */
class Outcomes {
  resolved = 0;
  rejected = 0;
  async of(what, call) {
    try {
      await call();
      this.resolved += 1;
    } catch (e) {
      assert.ok(e instanceof Error, `${what}: rejected with ${e} (not an Error)`);
      assert.ok(e.message.length > 0, `${what}: an Error without a message`);
      assert.doesNotMatch(e.message, /panicked|engine stopped|out of memory|trapped|unreachable|RuntimeError/, what);
      this.rejected += 1;
    }
  }
}

test('random parameter objects give results or Errors, never a broken engine', async (t) => {
  t.diagnostic(`seed ${SEED} (LAMINA_PARAMS_SEED repeats this run), ${SECONDS} s`);
  const draw = new Draw(generator(SEED));
  const outcomes = new Outcomes();
  const smollm2 = await bytesOf('SmolLM2-135M-Instruct.Q4_1.gguf');
  const minilm = await bytesOf('all-MiniLM-L6-v2-f16.gguf');
  const g = JSON.parse(await readFile(`${repo}/native-tests/golden/smollm2/generate/q4_1_france.json`, 'utf8'));
  const greedy = { prompt: g.prompt, n_predict: 4, temperature: 0 };

  const llm = await loadModel(smollm2, { n_ctx: 512 });
  const embedder = await loadModel(minilm, { n_ctx: 128 });
  const before = (await llm.completion(greedy)).generated_ids;
  const deadline = Date.now() + SECONDS * 1000;
  let calls = 0;
  const slowest = { ms: 0, what: '' };
  while (Date.now() < deadline) {
    const started = Date.now();
    calls += 1;
    const kind = draw.pick(['completion', 'completion', 'completion', 'embedding', 'rerank', 'tokenize', 'detokenize', 'bench', 'load']);
    const textOrNot = () => (draw.chance(0.8) ? draw.text() : draw.value());
    const args = {
      completion: () => [draw.completionParams()],
      embedding: () => [textOrNot(), draw.params(EMBED_KEYS)],
      rerank: () => [draw.text(), draw.chance(0.8) ? [draw.text()] : draw.value(), draw.params(EMBED_KEYS)],
      tokenize: () => [textOrNot(), draw.params(['addSpecial', 'parseSpecial'])],
      detokenize: () => [Array.from({ length: draw.pick([0, 1, 3]) }, () => draw.number()), draw.params(['special'])],
      // Each count small or not a count at all, so a bench that runs is short.
      bench: () => [0, 1, 2].map(() => draw.pick(draw.chance(0.7) ? [0, 1, 2] : NOT_COUNTS)),
      load: () => [draw.params(LOAD_KEYS)],
    }[kind]();
    const what = `${kind} ${JSON.stringify(args)} (seed ${SEED}, call ${calls})`;
    await outcomes.of(what, async () => {
      switch (kind) {
        case 'completion':
          // Any completion ends after its first token: the point is the
          // parameters, not the length (n_predict may be a billion).
          return llm.completion(args[0], () => llm.stopCompletion());
        case 'embedding':
        case 'rerank':
          return embedder[kind](...args);
        case 'tokenize':
        case 'detokenize':
        case 'bench':
          return llm[kind](...args);
        case 'load': {
          const ctx = await loadModel(minilm, args[0]);
          await ctx.embedding('Hello');
          return ctx.release();
        }
      }
    });
    if (Date.now() - started > slowest.ms) Object.assign(slowest, { ms: Date.now() - started, what });
  }
  t.diagnostic(`slowest call: ${slowest.ms} ms, ${slowest.what}`);
  t.diagnostic(`${calls} calls: ${outcomes.resolved} resolved, ${outcomes.rejected} rejected with an Error`);
  assert.ok(outcomes.resolved >= 20 && outcomes.rejected >= 20, 'both outcomes are exercised');
  assert.deepEqual((await llm.completion(greedy)).generated_ids, before, 'the model answers as before');
  // Up to the reference's first near-tie (the golden README's rule).
  const sure = g.top1_top2_gap_per_step.slice(0, 4).findIndex((gap) => gap < 0.5);
  const n = sure < 0 ? 4 : sure;
  assert.deepEqual(before.slice(0, n), g.generated_ids.slice(0, n));
  await Promise.all([llm.release(), embedder.release()]);
});

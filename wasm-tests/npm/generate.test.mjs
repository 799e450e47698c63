// Generation through the packed npm package in Node: SmolLM2 Q4_1 greedy ids
// equal llama.cpp's (golden files) up to the first near-tie, tokenize equals
// the golden ids, chat messages, stopCompletion within one token, errors.
// Run by scripts/test-npm.sh with LAMINA_REPO set to the repository.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { readFile } from 'node:fs/promises';
import { existsSync } from 'node:fs';
import { initLlama, loadModel } from 'lamina';

const repo = process.env.LAMINA_REPO;
const smollm2 = `${repo}/models/SmolLM2-135M-Instruct.Q4_1.gguf`;
const golden = (rel) => readFile(`${repo}/native-tests/golden/${rel}`, 'utf8').then(JSON.parse);

function requireModel(path) {
  if (!existsSync(path)) {
    throw new Error(`model missing at ${path}: run scripts/fetch-models.sh`);
  }
  return path;
}

let ctxPromise;
function context() {
  ctxPromise ??= readFile(requireModel(smollm2)).then((bytes) =>
    // llama.rn's other initLlama fields are accepted and ignored.
    loadModel(new Uint8Array(bytes), { n_ctx: 512, n_threads: 1, n_gpu_layers: 99, use_mlock: true }),
  );
  return ctxPromise;
}

test('greedy completions follow llama.cpp', async () => {
  const ctx = await context();
  for (const name of ['france', 'chat', 'code_fibonacci']) {
    const g = await golden(`smollm2/generate/q4_1_${name}.json`);
    const gaps = g.top1_top2_gap_per_step;
    let sure = gaps.findIndex((gap) => gap < 0.5);
    if (sure < 0) sure = g.generated_ids.length;
    sure = Math.min(sure, 8);
    let streamed = '';
    const r = await ctx.completion(
      { prompt: g.prompt, n_predict: 8, temperature: 0 },
      (data) => {
        streamed += data.token;
      },
    );
    assert.deepEqual(r.prompt_ids, g.prompt_ids, name);
    assert.deepEqual(r.generated_ids.slice(0, sure), g.generated_ids.slice(0, sure), name);
    assert.equal(streamed, r.text, `${name}: the streamed text is the text`);
    assert.equal(r.content, r.text);
    assert.ok(r.timings.predicted_per_second > 0);
    assert.equal(r.cpu_variant, 'simd128');
  }
  const info = {
    model_desc: 'llama 30 layers, 576 embd, Q4_1', model_size: 96576768, model_n_params: 134515008,
    arch: 'llama', pooling: 'none', n_embd: 576,
    cpu_variant: 'simd128', n_threads: 1, n_ctx: 512, build: 'single-thread',
    // No recurrent layers: every prompt-cache reuse, the shift and sessions.
    recurrent_layers: 0, prompt_cache: 'any common prefix is reused', context_shift: true,
    sessions: true,
  };
  assert.deepEqual(await ctx.contextInfo(), info);
  assert.deepEqual(ctx.build, {
    ...info, simd: 'simd128', simd_reason: 'this engine has no relaxed SIMD', reason: 'one thread was asked for',
  });
});

test('tokenize equals the golden ids; detokenize inverts it', async () => {
  const ctx = await context();
  const cases = (await golden('smollm2/tokenize.json')).cases;
  for (const c of cases) {
    const { tokens } = await ctx.tokenize(c.text);
    assert.deepEqual(tokens, c.ids_parse_special, c.text);
    const plain = await ctx.tokenize(c.text, { parseSpecial: false });
    assert.deepEqual(plain.tokens, c.ids_no_parse_special, c.text);
  }
  const { tokens } = await ctx.tokenize('Hello world');
  assert.equal(await ctx.detokenize(tokens), 'Hello world');
});

test('getFormattedChat and chat_template as llama.rn', async () => {
  const ctx = await context();
  const messages = [{ role: 'system', content: 'Be brief.' }, { role: 'user', content: 'Hi' }];
  const own = await ctx.getFormattedChat(messages);
  assert.equal(own.type, 'llama-chat');
  const r = await ctx.completion({ messages, n_predict: 1, temperature: 0 });
  assert.equal(r.prompt, own.prompt);
  // SmolLM2's own Jinja renders the same prompt as the built-in format.
  const viaJinja = await ctx.getFormattedChat(messages, null, { jinja: true });
  assert.equal(viaJinja.type, 'jinja');
  assert.equal(viaJinja.prompt, own.prompt);
  assert.equal(viaJinja.chat_format, 'content');
  assert.equal(viaJinja.grammar, '');
  assert.match((await ctx.getFormattedChat(messages, 'llama2')).prompt, /\[INST\]/);
  const custom = '{% for m in messages %}<{{ m.role }}>{{ m.content }}{% endfor %}<assistant>';
  assert.equal((await ctx.getFormattedChat(messages, custom)).prompt, '<system>Be brief.<user>Hi<assistant>');
  const viaCompletion = await ctx.completion({ messages, chat_template: custom, n_predict: 1, temperature: 0 });
  assert.equal(viaCompletion.prompt, '<system>Be brief.<user>Hi<assistant>');
  await assert.rejects(ctx.getFormattedChat(messages, '{% for %}'), (e) => e instanceof Error && /does not parse/.test(e.message));
});

test('tools: calls parsed into tool_calls, streamed, and held to the tools by their grammar', async () => {
  const ctx = await context();
  const template = await readFile(`${repo}/native-tests/golden/chat/templates/Qwen-Qwen2.5-7B-Instruct.jinja`, 'utf8');
  const tools = [{
    type: 'function',
    function: {
      name: 'get_weather',
      description: 'The weather in a city',
      parameters: { type: 'object', properties: { city: { type: 'string' } }, required: ['city'] },
    },
  }];
  const messages = [{ role: 'user', content: 'What is the weather in Paris?' }];
  const formatted = await ctx.getFormattedChat(messages, template, { tools, tool_choice: 'required' });
  assert.equal(formatted.type, 'jinja');
  assert.equal(formatted.chat_format, 'hermes');
  assert.match(formatted.prompt, /<tools>\n\{"type": "function", "function": \{"name": "get_weather"/);
  assert.equal(formatted.grammar_lazy, false);
  assert.match(formatted.grammar, /get_weather/);
  assert.deepEqual(formatted.preserved_tokens, ['<tool_call>', '</tool_call>']);

  const events = [];
  const r = await ctx.completion(
    { messages, chat_template: template, tools, tool_choice: 'required', n_predict: 64, temperature: 0 },
    (data) => events.push(data),
  );
  assert.equal(r.chat_format, 'hermes');
  assert.equal(r.tool_calls.length, 1, r.text);
  assert.equal(r.tool_calls[0].type, 'function');
  assert.equal(r.tool_calls[0].function.name, 'get_weather');
  assert.equal(typeof JSON.parse(r.tool_calls[0].function.arguments).city, 'string');
  assert.equal(r.content, '');
  // The stream reports the call once it is complete, and the parsed content
  // never shows the markup.
  assert.ok(events.every((e) => Array.isArray(e.tool_calls) && !e.content.includes('<tool')));
  assert.deepEqual(events.at(-1).tool_calls, r.tool_calls);
  assert.equal(events[0].tool_calls.length, 0);

  // The results go back in as llama.rn passes them.
  const follow = await ctx.getFormattedChat([
    ...messages,
    { role: 'assistant', content: '', tool_calls: r.tool_calls },
    { role: 'tool', tool_call_id: 'c1', content: '18 degrees' },
  ], template, { tools });
  assert.match(follow.prompt, /<tool_response>\n18 degrees\n<\/tool_response>/);
  await assert.rejects(
    ctx.completion({ messages, chat_template: template, tools, tool_choice: 'sometimes', n_predict: 1 }),
    (e) => e instanceof Error && /tool_choice "sometimes"/.test(e.message),
  );
  // The context keeps working after the error.
  assert.equal((await ctx.completion({ prompt: 'Hi', n_predict: 1, temperature: 0 })).tokens_predicted, 1);
});

test('chat messages use the model template', async () => {
  const ctx = await context();
  const g = await golden('smollm2/generate/q4_1_chat.json');
  const r = await ctx.completion({
    messages: [{ role: 'user', content: 'What is 2+2?' }],
    n_predict: 3,
    temperature: 0,
  });
  assert.equal(r.prompt, g.prompt);
  assert.deepEqual(r.prompt_ids, g.prompt_ids);
});

test('stopCompletion stops within one token', async () => {
  const ctx = await context();
  const ids = [];
  const r = await ctx.completion(
    { prompt: 'Once upon a time', n_predict: 40, temperature: 0, ignore_eos: true },
    (t) => {
      ids.push(t.id);
      if (ids.length === 2) ctx.stopCompletion();
    },
  );
  // The request reaches the model's worker as a message, which may already
  // be computing the next token: that one still comes, and no other.
  assert.ok([2, 3].includes(r.tokens_predicted), `${r.tokens_predicted} tokens`);
  assert.deepEqual(r.generated_ids, ids);
  assert.equal(r.stopped_aborted, true);
  assert.equal(r.stop_reason, 'abort');
});

test('errors are Errors with the engine message', async () => {
  await assert.rejects(loadModel(new Uint8Array([80, 75, 3, 4, 0, 0])), {
    name: 'Error',
    message: 'not a GGUF file: starts with 50 4b 03 04',
  });
  const ctx = await context();
  await assert.rejects(ctx.completion({ prompt: '' }), {
    message: 'invalid argument: the prompt is empty',
  });
  await assert.rejects(ctx.completion({ prompt: 'hi', mirostat: 7 }), /mirostat/);
  // A value of the wrong type is named with what it must be.
  await assert.rejects(ctx.completion({ prompt: 'hi', mirostat: 0.5 }), {
    message: 'completion parameters: mirostat must be a whole number from 0 to 255, got floating point `0.5`',
  });
  await assert.rejects(ctx.completion({ prompt: 'hi', top_k: 'x' }), {
    message: 'completion parameters: top_k must be a whole number from -2147483648 to 2147483647, got string "x"',
  });
  // Numbers JSON cannot carry are refused by name, not read as "not given".
  await assert.rejects(ctx.completion({ prompt: 'hi', temperature: NaN }), {
    name: 'Error',
    message: 'completion parameters: temperature must be a finite number, got NaN',
  });
  await assert.rejects(ctx.completion({ prompt: 'hi', top_p: Infinity }), /top_p must be a finite number/);
  // Out-of-range values are the engine's errors, naming the parameter.
  await assert.rejects(ctx.completion({ prompt: 'hi', min_p: 2 }), /min_p must be between 0 and 1, got 2/);
  await assert.rejects(ctx.completion({ prompt: 'hi', penalty_repeat: 0 }), /penalty_repeat must be above 0/);
  // Counts are not wrapped: -1 is not 4294967295 repetitions.
  await assert.rejects(ctx.bench(8, 0, 1, -1), { name: 'RangeError', message: /bench: nr must be a whole number/ });
  await assert.rejects(ctx.bench(8.5, 4, 1, 1), /bench: pp must be a whole number/);
  await assert.rejects(ctx.bench(8, 4, 0, 1), /pl \(parallel sequences\) must be between 1 and 64, got 0/);
  await assert.rejects(ctx.detokenize([1, -1]), { name: 'RangeError', message: /detokenize: id 1 must be a whole number/ });
  await assert.rejects(ctx.detokenize(7), { name: 'TypeError', message: 'detokenize: ids must be an array of token ids' });
  // Strings are checked too: the glue would read a number's length as a string's.
  await assert.rejects(ctx.tokenize(42), { name: 'TypeError', message: 'tokenize: text must be a string, got number' });
  await assert.rejects(loadModel(new Uint8Array(await readFile(smollm2)), { n_threads: 0 }), {
    name: 'RangeError',
    message: 'n_threads must be a whole number of at least 1, got 0',
  });
  const boom = new Error('boom');
  await assert.rejects(
    ctx.completion({ prompt: 'hi', n_predict: 2 }, () => {
      throw boom;
    }),
    (e) => e === boom,
  );
  // The failed completion left the context idle: the next one runs.
  const r = await ctx.completion({ prompt: 'hi', n_predict: 2, temperature: 0 });
  assert.equal(r.tokens_predicted, 2);
});

test('stopCompletion from a timer stops a running completion', async () => {
  const ctx = await context();
  const ids = [];
  setTimeout(() => ctx.stopCompletion(), 50);
  const r = await ctx.completion(
    { prompt: 'Once upon a time', n_predict: 2000, temperature: 0, ignore_eos: true },
    (t) => ids.push(t.id),
  );
  assert.equal(r.stop_reason, 'abort');
  assert.ok(r.tokens_predicted < 2000, `${r.tokens_predicted} tokens`);
  assert.deepEqual(r.generated_ids, ids);
});

test('bench(pp, tg, pl, nr) reports as llama.rn, with llama-bench rows', async () => {
  const ctx = await context();
  const b = await ctx.bench(8, 4, 1, 1);
  const { rows } = b;
  assert.equal(rows.length, 2);
  assert.equal(rows[0].n_prompt, 8);
  assert.equal(rows[1].n_gen, 4);
  assert.ok(rows[0].avg_ts > 0 && rows[1].avg_ts > 0);
  assert.equal(b.ppAvg, rows[0].avg_ts);
  assert.equal(b.tgStd, rows[1].stddev_ts);
  assert.match(b.modelDesc, /^llama 30 layers, 576 embd, Q4_1/);
  // SmolLM2-135M: 134.5 M parameters, about 85 MB as Q4_1.
  assert.ok(b.modelNParams > 130e6 && b.modelNParams < 140e6, `${b.modelNParams}`);
  assert.ok(b.modelSize > 70e6 && b.modelSize < 100e6, `${b.modelSize}`);
  // tg in 4 sequences at once: 16 tokens a run, counted in tgAvg.
  const p = await ctx.bench(0, 4, 4, 1);
  assert.equal(p.rows.length, 1);
  assert.equal(p.rows[0].n_parallel, 4);
  assert.ok(Math.abs(p.tgAvg - 16e9 / p.rows[0].avg_ns) < 1e-6 * p.tgAvg, `${p.tgAvg}`);
});

test('initLlama, result fields and n_keep/ctx_shift as llama.rn has them', async () => {
  const bytes = new Uint8Array(await readFile(smollm2));
  const percents = [];
  const ctx = await initLlama({ model: bytes, n_ctx: 32, ctx_shift: false }, (p) => percents.push(p));
  assert.equal(percents.at(-1), 100);
  assert.ok(percents.every((p) => Number.isInteger(p) && p >= 0 && p <= 100), `${percents}`);
  const prompt = 'The capital of France is';
  const { tokens } = await ctx.tokenize(prompt);
  // A stop word: stopped_word is the word, stopped_limit a number.
  const word = await ctx.completion({ prompt, n_predict: 8, temperature: 0, stop: [' Paris'] });
  assert.equal(word.stopped_word, ' Paris');
  assert.equal(word.stopped_limit, 0);
  assert.equal(word.interrupted, false);
  assert.equal(word.tokens_evaluated, tokens.length);
  const limit = await ctx.completion({ prompt, n_predict: 2, temperature: 0 });
  assert.equal(limit.stopped_word, '');
  assert.equal(limit.stopped_limit, 1);
  // Cached prompt tokens still count, as llama.rn counts them.
  assert.equal(limit.tokens_evaluated, tokens.length);
  // ctx_shift false (from initLlama): a full context ends the completion.
  const full = await ctx.completion({ prompt, n_predict: 100, temperature: 0, ignore_eos: true });
  assert.equal(full.stopped_limit, 1);
  assert.equal(full.context_full, true);
  assert.equal(limit.context_full, false);
  // Every position filled, plus the token sampled from the last one.
  assert.equal(full.tokens_predicted, 32 - tokens.length + 1);
  // A completion's own ctx_shift wins: the context slides, keeping n_keep.
  const shifted = await ctx.completion({
    prompt, n_predict: 40, temperature: 0, ignore_eos: true, ctx_shift: true, n_keep: 2,
  });
  assert.equal(shifted.tokens_predicted, 40);
  assert.equal(shifted.truncated, true);
  await ctx.release();
  await assert.rejects(initLlama({ n_ctx: 64 }), { name: 'TypeError', message: /params.model .* is required/ });
});

test('stopCompletion during a long prompt stops between micro-batches', async () => {
  const bytes = new Uint8Array(await readFile(smollm2));
  const ctx = await loadModel(bytes, { n_ctx: 512, n_batch: 64, n_ubatch: 8 });
  const prompt = 'one two three four five six seven eight nine ten '.repeat(8);
  const running = ctx.completion({ prompt, n_predict: 4, temperature: 0 });
  ctx.stopCompletion();
  const r = await running;
  assert.equal(r.interrupted, true);
  assert.equal(r.tokens_predicted, 0);
  assert.ok(r.timings.prompt_n < r.tokens_evaluated, `${r.timings.prompt_n} of ${r.tokens_evaluated}`);
  assert.equal(r.timings.prompt_n % 8, 0, 'whole micro-batches');
  // The context goes on: the next completion reuses what was evaluated.
  const again = await ctx.completion({ prompt, n_predict: 2, temperature: 0 });
  assert.equal(again.tokens_cached, r.timings.prompt_n);
  assert.equal(again.tokens_predicted, 2);
  await ctx.release();
});

test('grammar-constrained completions follow llama.cpp; grammar errors are Errors', async () => {
  const ctx = await context();
  const g = await golden('grammar/person_json.json');
  const r = await ctx.completion({
    prompt: g.prompt, n_predict: g.n_predict, temperature: 0, grammar: g.grammar,
  });
  assert.equal(r.text, g.text);
  assert.equal(r.stopped_eos, true);
  // A lazy grammar: free text until the trigger word, then the grammar.
  const lazy = await ctx.completion({
    prompt: 'Answer with a number. 2 + 2 =', n_predict: 6, temperature: 0,
    grammar: 'root ::= " four" [0-9]', grammar_lazy: true,
    grammar_triggers: [{ type: 1, value: ' four' }],
  });
  assert.equal(typeof lazy.text, 'string');
  await assert.rejects(
    ctx.completion({ prompt: 'x', grammar: 'root ::= (' }),
    (e) => e instanceof Error && /grammar line 1, column 11/.test(e.message),
  );
  await assert.rejects(
    ctx.completion({ prompt: 'x', grammar: 'root ::= "a"', grammar_lazy: true, grammar_triggers: [{ type: 7 }] }),
    (e) => e instanceof Error && /grammar_triggers\[0\]\.type/.test(e.message),
  );
  // The context still works after the errors.
  const again = await ctx.completion({ prompt: g.prompt, n_predict: 4, temperature: 0, grammar: g.grammar });
  assert.ok(g.text.startsWith(again.text));
});

test('logit_bias takes texts and false, as llama.rn', async () => {
  const ctx = await context();
  const prompt = 'The capital of France is';
  const plain = await ctx.completion({ prompt, n_predict: 4, temperature: 0 });
  assert.ok(plain.text.startsWith(' Paris'), plain.text);
  const banned = await ctx.completion({ prompt, n_predict: 4, temperature: 0, logit_bias: [[' Paris', false]] });
  assert.equal(banned.text, ' the capital of the');
  const byId = await ctx.completion({ prompt, n_predict: 4, temperature: 0, logit_bias: { 7042: false } });
  assert.equal(byId.text, banned.text);
  await assert.rejects(
    ctx.completion({ prompt, logit_bias: [[7042, true]] }),
    (e) => e instanceof Error && /logit_bias\[0\]: the bias must be a number or false/.test(e.message),
  );
});

test('DRY takes llama.rn\'s parameters', async () => {
  const ctx = await context();
  const prompt = 'List the days of the week: Monday, Tuesday, Wednesday, Thursday, Friday, '
    + 'Saturday, Sunday. Again: Monday, Tuesday,';
  const plain = await ctx.completion({ prompt, n_predict: 2, temperature: 0 });
  assert.equal(plain.text, ' Wednesday,');
  // The "," would extend a repeat of the prompt: DRY makes it ".", as llama.cpp's
  // (same flags). A small multiplier with a steep base leaves " Wednesday"'s lead
  // (~2.4; it pays 0.1 * 4^2) and takes 6.4 from the "," (which leads by 3.6):
  // no rounding of the kernels can decide either token.
  const dry = await ctx.completion({ prompt, n_predict: 2, temperature: 0, dry_multiplier: 0.1, dry_base: 4 });
  assert.equal(dry.text, ' Wednesday.');
  const broken = await ctx.completion({
    prompt, n_predict: 2, temperature: 0, dry_multiplier: 0.1, dry_base: 4, dry_sequence_breakers: [','],
  });
  assert.equal(broken.text, ' Wednesday,');
  await assert.rejects(
    ctx.completion({ prompt, dry_multiplier: -1 }),
    (e) => e instanceof Error && /dry_multiplier must be 0 \(off\) or above/.test(e.message),
  );
});

test('response_format holds the output to a JSON schema; bad schemas are Errors', async () => {
  const ctx = await context();
  const schema = {
    type: 'object',
    properties: { name: { type: 'string', maxLength: 10 }, age: { type: 'integer', minimum: 0, maximum: 120 } },
    required: ['name', 'age'],
    additionalProperties: false,
  };
  const prompt = 'Describe a person named Tom who is 32 years old, as JSON:';
  const r = await ctx.completion({
    prompt, n_predict: 64, temperature: 0,
    response_format: { type: 'json_schema', json_schema: { name: 'person', strict: true, schema } },
  });
  assert.equal(r.stopped_eos, true, r.text);
  assert.deepEqual(JSON.parse(r.text), { name: 'Tom', age: 32 });
  // llama.rn's native form: the schema as JSON text.
  const text = await ctx.completion({ prompt, n_predict: 64, temperature: 0, json_schema: JSON.stringify(schema) });
  assert.equal(text.text, r.text);
  await assert.rejects(
    ctx.completion({ prompt: 'x', response_format: { type: 'json_schema', json_schema: { schema: { properties: { a: { type: 'strin' } } } } } }),
    (e) => e instanceof Error && /#\/properties\/a: unrecognized type strin/.test(e.message),
  );
  await assert.rejects(
    ctx.completion({ prompt: 'x', response_format: { type: 'yaml' } }),
    (e) => e instanceof Error && /response_format\.type/.test(e.message),
  );
});

// The chat page: loads a GGUF model (a picked file or a URL) through the lamina
// npm package, which runs it in a Web Worker, then streams answers into the
// conversation. Served by scripts/serve-web.sh (COOP/COEP, so the threaded
// build runs), which maps /npm/ to the package and /models/ to the models.
//
// For the browser test the page keeps its state in `document.body.dataset.state`
// (empty, loading, ready, generating, error) and the last result in
// `window.laminaPage.last`.
import { loadModel } from '../npm/index.js';

const $ = (id) => document.getElementById(id);
const page = { ctx: null, info: null, messages: [], last: null };
window.laminaPage = page;

function setState(state) {
  document.body.dataset.state = state;
  const ready = state === 'ready';
  $('prompt').disabled = !ready;
  $('send').disabled = !ready;
  $('bench').disabled = !ready;
  $('clear').disabled = !ready;
  $('stop').disabled = state !== 'generating';
  $('load-button').disabled = state === 'loading' || state === 'generating';
}

function bubble(role, text = '') {
  const div = document.createElement('div');
  div.className = `msg ${role}`;
  div.textContent = text;
  $('chat').append(div);
  div.scrollIntoView({ block: 'end' });
  return div;
}

function describeEngine(info) {
  const threads = `${info.n_threads} thread${info.n_threads === 1 ? '' : 's'}`;
  return `${info.build} build (${info.reason}) · ${threads} · CPU variant ${info.cpu_variant} · n_ctx ${info.n_ctx}`;
}

async function load(source, label) {
  await page.ctx?.release();
  page.ctx = null;
  page.messages = [];
  $('chat').replaceChildren();
  $('stats').textContent = '';
  setState('loading');
  const engine = $('engine');
  engine.className = '';
  engine.textContent = `loading ${label} …`;
  const progress = $('progress');
  progress.hidden = false;
  progress.value = 0;
  const params = { n_ctx: Number($('n_ctx').value) || 2048 };
  if ($('threads').value) params.n_threads = Number($('threads').value);
  const t0 = performance.now();
  try {
    page.ctx = await loadModel(source, params, { onProgress: (f) => { progress.value = f; } });
    page.info = page.ctx.build;
    const seconds = ((performance.now() - t0) / 1000).toFixed(1);
    engine.textContent = `${label} loaded in ${seconds} s · ${describeEngine(page.info)}`;
    setState('ready');
    $('prompt').focus();
  } catch (e) {
    engine.className = 'error';
    engine.textContent = e.message;
    setState('error');
  } finally {
    progress.hidden = true;
  }
}

function rate(n, perSecond) {
  return `${n} tokens, ${perSecond.toFixed(1)} t/s`;
}

async function ask(text) {
  const raw = $('mode').value === 'raw';
  const params = {
    n_predict: Number($('n_predict').value) || 256,
    temperature: Number($('temperature').value),
  };
  if (raw) {
    params.prompt = text;
  } else {
    page.messages.push({ role: 'user', content: text });
    params.messages = page.messages;
    bubble('user', text);
  }
  const answer = bubble('assistant');
  if (raw) {
    answer.classList.add('raw');
    answer.dataset.prompt = text;
  }
  setState('generating');
  try {
    const result = await page.ctx.completion(params, ({ token }) => {
      answer.textContent += token;
    });
    page.last = result;
    if (!raw) page.messages.push({ role: 'assistant', content: result.text });
    const t = result.timings;
    $('stats').textContent = `prompt: ${rate(t.prompt_n, t.prompt_per_second)} · ` +
      `generation: ${rate(t.predicted_n, t.predicted_per_second)} · stopped: ${result.stop_reason}`;
    $('ids').textContent = JSON.stringify(result.generated_ids);
  } catch (e) {
    answer.classList.add('error');
    answer.textContent = e.message;
  } finally {
    setState('ready');
  }
}

async function bench() {
  setState('generating');
  $('stats').textContent = 'benchmarking pp128 and tg64 …';
  try {
    const { rows } = await page.ctx.bench(128, 64, 1, 3);
    page.bench = rows;
    $('stats').textContent = rows
      .map((r) => `${r.n_prompt ? `pp${r.n_prompt}` : `tg${r.n_gen}`}: ${r.avg_ts.toFixed(1)} ± ${r.stddev_ts.toFixed(1)} t/s`)
      .join(' · ') + ` (${page.info.n_threads} thread${page.info.n_threads === 1 ? '' : 's'})`;
  } catch (e) {
    $('stats').textContent = e.message;
  } finally {
    setState('ready');
  }
}

$('threads').value = Math.max(1, Math.min(navigator.hardwareConcurrency || 1, 4));
$('file').addEventListener('change', (e) => {
  const file = e.target.files[0];
  if (file) load(file, file.name);
});
$('load').addEventListener('submit', (e) => {
  e.preventDefault();
  const url = $('url').value.trim();
  if (url) load(url, url.split('/').pop());
});
$('ask').addEventListener('submit', (e) => {
  e.preventDefault();
  const text = $('prompt').value;
  if (!text.trim() || document.body.dataset.state !== 'ready') return;
  $('prompt').value = '';
  ask(text);
});
$('prompt').addEventListener('keydown', (e) => {
  if (e.key === 'Enter' && !e.shiftKey) {
    e.preventDefault();
    $('ask').requestSubmit();
  }
});
$('stop').addEventListener('click', () => page.ctx?.stopCompletion());
$('bench').addEventListener('click', bench);
$('clear').addEventListener('click', () => {
  page.messages = [];
  $('chat').replaceChildren();
  $('stats').textContent = '';
});
setState('empty');

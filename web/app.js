// The inspector page: loads a GGUF file through the lamina npm package and shows
// its metadata and tensor table. Served by scripts/serve-web.sh, which maps
// /npm/ to the package and /models/ to the local model directory.
import { modelInfo, buildInfo } from '../npm/index.js';

const $ = (id) => document.getElementById(id);
const progress = $('progress');
const status = $('status');

function formatValue(v) {
  if (v && typeof v === 'object' && !Array.isArray(v) && v.type === 'array') {
    return `[${v.element_type}; ${v.len}] ${JSON.stringify(v.head)} …`;
  }
  return JSON.stringify(v);
}

function row(cells, numeric = []) {
  const tr = document.createElement('tr');
  cells.forEach((text, i) => {
    const td = document.createElement('td');
    td.textContent = text;
    if (numeric.includes(i)) td.className = 'num';
    tr.append(td);
  });
  return tr;
}

async function show(source, label) {
  status.className = '';
  status.textContent = `reading ${label} …`;
  progress.hidden = false;
  progress.value = 0;
  $('result').hidden = true;
  try {
    const t0 = performance.now();
    const info = await modelInfo(source, { onProgress: (f) => { progress.value = f; } });
    const ms = performance.now() - t0;
    const build = await buildInfo();
    const types = Object.entries(info.totals.by_type).map(([t, n]) => `${n} ${t}`).join(', ');
    $('summary').textContent = `${label}: GGUF v${info.version}, ${info.tensors.length} tensors (${types}), ` +
      `${Object.keys(info.metadata).length} metadata keys`;
    const meta = $('metadata').tBodies[0];
    meta.replaceChildren(...Object.entries(info.metadata).map(([k, v]) => row([k, formatValue(v)])));
    const tensors = $('tensors').tBodies[0];
    tensors.replaceChildren(...info.tensors.map((t, i) =>
      row([i, t.name, t.type, JSON.stringify(t.shape), t.offset, t.bytes], [0, 4, 5])));
    $('result').hidden = false;
    status.textContent = `read ${(info.file_bytes / 2 ** 20).toFixed(1)} MiB in ${ms.toFixed(0)} ms ` +
      `(${build.build} build, ${build.simd})`;
  } catch (e) {
    status.className = 'error';
    status.textContent = e.message;
  } finally {
    progress.hidden = true;
  }
}

$('file').addEventListener('change', (e) => {
  const file = e.target.files[0];
  if (file) show(file, file.name);
});
$('source').addEventListener('submit', (e) => {
  e.preventDefault();
  const url = $('url').value || $('url').placeholder;
  show(url, url.split('/').pop());
});

// Downloading a model file: in ranges, several at a time, resumed where a
// dropped connection left off, handed on in order as chunks. A server that
// does not answer ranges gives its body as one stream; a compressed transfer
// (Content-Encoding) is sized by the decoded bytes, never by Content-Length.

/** Bytes per ranged request. */
const RANGE_BYTES = 16 << 20;

/**
 * Opens `url` for reading: `{ size, chunks }`, the chunks an async iterable
 * of Uint8Array in file order. `parallel` ranged requests run at once (1: one
 * after another); each is retried `retries` times after a network failure,
 * from the byte it had reached. `onBytes(n)` hears every n bytes received.
 */
export async function openUrl(url, { signal, parallel = 4, retries = 3, rangeBytes = RANGE_BYTES, onBytes } = {}) {
  if (!Number.isInteger(parallel) || parallel < 1) {
    throw new RangeError(`parallel must be a whole number of at least 1, got ${parallel}`);
  }
  if (!Number.isInteger(retries) || retries < 0) {
    throw new RangeError(`retries must be a whole number of at least 0, got ${retries}`);
  }
  // Our own controller: requests still running when the reader stops (an
  // error, an abort) are cancelled with it.
  const controller = new AbortController();
  const stop = () => controller.abort(signal.reason);
  signal?.addEventListener('abort', stop);
  const done = () => {
    signal?.removeEventListener('abort', stop);
    controller.abort(new Error('the download was stopped'));
  };
  try {
    const probe = await withRetries(retries, controller.signal, () =>
      fetchChecked(url, controller.signal, { Range: `bytes=0-${rangeBytes - 1}` }),
    );
    const total = probe.status === 206 && !encoded(probe) ? rangeTotal(probe.headers.get('content-range')) : null;
    if (total !== null) {
      const options = { signal: controller.signal, parallel, retries, rangeBytes, onBytes };
      const etag = probe.headers.get('etag');
      return { size: total, etag, chunks: finishing(rangedChunks(url, probe, total, options), done) };
    }
    if (probe.status === 206) {
      // Ranges of an encoded body, or without a total: ask for the whole.
      await probe.body?.cancel();
      return await wholeBody(await fetchChecked(url, controller.signal, {}), onBytes, done);
    }
    return await wholeBody(probe, onBytes, done);
  } catch (e) {
    done();
    throw e;
  }
}

/** A response body as `{ size, chunks }`. */
async function wholeBody(response, onBytes, done) {
  const length = Number(response.headers.get('content-length'));
  const etag = response.headers.get('etag');
  if (!encoded(response) && Number.isFinite(length) && length > 0) {
    return { size: length, etag, chunks: finishing(bodyChunks(response, onBytes), done) };
  }
  // The size is that of the decoded stream: read it all first.
  const parts = [];
  let size = 0;
  for await (const chunk of bodyChunks(response, onBytes)) {
    parts.push(chunk);
    size += chunk.length;
  }
  done();
  return { size, etag, chunks: parts };
}

/** Runs `done` once `chunks` ends, fails or is left. */
async function* finishing(chunks, done) {
  try {
    yield* chunks;
  } finally {
    done();
  }
}

function encoded(response) {
  const encoding = response.headers.get('content-encoding');
  return encoding !== null && encoding.trim().toLowerCase() !== 'identity';
}

/** The total of `bytes START-END/TOTAL`, or null. */
function rangeTotal(contentRange) {
  const match = /^bytes \d+-\d+\/(\d+)$/.exec(contentRange?.trim() ?? '');
  return match ? Number(match[1]) : null;
}

/** The first byte of a 206's `Content-Range`, or null. */
function rangeStart(contentRange) {
  const match = /^bytes (\d+)-\d+\/\d+$/.exec(contentRange?.trim() ?? '');
  return match ? Number(match[1]) : null;
}

class HttpError extends Error {}

async function fetchChecked(url, signal, headers) {
  const response = await fetch(url, { signal, headers });
  if (!response.ok) {
    await response.body?.cancel();
    throw new HttpError(`cannot fetch ${url}: HTTP ${response.status}`);
  }
  return response;
}

/** `attempt()`, again after a network failure (not an HTTP error or an abort). */
async function withRetries(retries, signal, attempt) {
  for (let tries = 0; ; tries++) {
    try {
      return await attempt(tries);
    } catch (e) {
      if (e instanceof HttpError || signal.aborted || tries >= retries) throw e;
      await new Promise((resolve) => setTimeout(resolve, 100 * 2 ** tries));
    }
  }
}

async function* bodyChunks(response, onBytes) {
  const reader = response.body.getReader();
  try {
    for (;;) {
      const { done, value } = await reader.read();
      if (done) return;
      onBytes?.(value.length);
      yield value;
    }
  } finally {
    reader.releaseLock();
  }
}

/**
 * The file in ranges: the first from the probe's body, the others fetched
 * up to `parallel` at a time (at most that many held in memory) and handed
 * on in order.
 */
async function* rangedChunks(url, probe, total, { signal, parallel, retries, rangeBytes, onBytes }) {
  const ranges = [];
  for (let start = 0; start < total; start += rangeBytes) ranges.push([start, Math.min(start + rangeBytes, total)]);
  const pending = new Map();
  let next = 1;
  const launch = () => {
    // The range being handed on counts among the `parallel`.
    while (next < ranges.length && pending.size < parallel - 1) {
      const request = readRange(url, ranges[next], null, { signal, retries, onBytes });
      request.catch(() => {}); // awaited in its turn; not an unhandled rejection meanwhile
      pending.set(next, request);
      next += 1;
    }
  };
  launch();
  yield await readRange(url, ranges[0], probe, { signal, retries, onBytes });
  for (let i = 1; i < ranges.length; i++) {
    if (!pending.has(i)) {
      // parallel 1: nothing runs ahead.
      pending.set(i, readRange(url, ranges[i], null, { signal, retries, onBytes }));
      next = i + 1;
    }
    const bytes = await pending.get(i);
    pending.delete(i);
    launch();
    yield bytes;
  }
}

/**
 * Bytes [start, end) into one buffer: from `response` if given, else a new
 * request; after a dropped connection, a request for the rest.
 */
async function readRange(url, [start, end], response, { signal, retries, onBytes }) {
  const bytes = new Uint8Array(end - start);
  let filled = 0;
  await withRetries(retries, signal, async (tries) => {
    const from = start + filled;
    const r =
      tries === 0 && response
        ? response
        : await fetchChecked(url, signal, { Range: `bytes=${from}-${end - 1}` });
    if (r.status !== 206 || rangeStart(r.headers.get('content-range')) !== from) {
      await r.body?.cancel();
      throw new HttpError(`cannot fetch ${url}: bytes ${from}-${end - 1} came back as HTTP ${r.status} ${r.headers.get('content-range') ?? ''}`);
    }
    for await (const chunk of bodyChunks(r, onBytes)) {
      const room = bytes.length - filled;
      bytes.set(chunk.subarray(0, room), filled);
      filled += Math.min(chunk.length, room);
    }
    if (filled < bytes.length) throw new TypeError(`the connection ended ${bytes.length - filled} bytes early`);
  });
  return bytes;
}

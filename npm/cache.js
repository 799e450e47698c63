// The model cache: models downloaded by URL kept for the next load, and for
// loading offline. In Node a directory (LAMINA_CACHE_DIR, else
// $XDG_CACHE_HOME/lamina/models, else ~/.cache/lamina/models); in browsers
// the origin private file system (OPFS), or Cache Storage where there is no
// OPFS. Each entry is the file's bytes and a record `{ url, size, etag,
// sha256, stored }`, keyed by the URL. A cached entry is checked against the
// server (a HEAD request: the ETag and size) when the server answers, and
// used as it is when it does not (offline). A file is stored only once all
// of it has arrived (and matched its sha256 when one is given): written to a
// temporary, then put in place.

import { sha256 } from './sha256.js';
import { blobChunks, nodeFileChunks } from './chunks.js';

const isNode = typeof process !== 'undefined' && process.versions?.node != null;

/** The entry's file name: a hash of the URL (any URL makes a safe name). */
async function entryName(url) {
  const h = await sha256();
  h.update(new TextEncoder().encode(url));
  return h.hex().slice(0, 32);
}

function quotaError(e, size) {
  const full = e?.name === 'QuotaExceededError' || e?.code === 'ENOSPC' || e?.code === 'EDQUOT';
  if (!full) return e;
  return new Error(`the model cache is full: no room for ${size} more bytes (${e.message})`);
}

// --- Node: a directory ---------------------------------------------------

async function nodeStore() {
  const fs = await import(/* webpackIgnore: true */ 'node:fs/promises');
  const path = await import(/* webpackIgnore: true */ 'node:path');
  const os = await import(/* webpackIgnore: true */ 'node:os');
  const dir =
    process.env.LAMINA_CACHE_DIR ||
    path.join(process.env.XDG_CACHE_HOME || path.join(os.homedir(), '.cache'), 'lamina', 'models');
  let nextTemp = 0;
  const records = async () => {
    let names;
    try {
      names = await fs.readdir(dir);
    } catch (e) {
      if (e.code === 'ENOENT') return [];
      throw e;
    }
    const out = [];
    for (const n of names.filter((n) => n.endsWith('.json')).sort()) {
      try {
        out.push(JSON.parse(await fs.readFile(path.join(dir, n), 'utf8')));
      } catch {
        // A record being replaced, or not ours: not an entry.
      }
    }
    return out;
  };
  return {
    where: dir,
    records,
    async get(url) {
      const name = await entryName(url);
      try {
        const record = JSON.parse(await fs.readFile(path.join(dir, `${name}.json`), 'utf8'));
        const { size } = await fs.stat(path.join(dir, `${name}.gguf`));
        return record.url === url && size === record.size ? record : null;
      } catch {
        return null;
      }
    },
    async read(url, size) {
      return nodeFileChunks(path.join(dir, `${await entryName(url)}.gguf`), size);
    },
    async writer(url) {
      await fs.mkdir(dir, { recursive: true });
      const name = await entryName(url);
      const temp = path.join(dir, `.${name}.${process.pid}-${nextTemp++}.tmp`);
      const handle = await fs.open(temp, 'wx');
      return {
        write: (chunk) => handle.write(chunk),
        async commit(record) {
          await handle.sync();
          await handle.close();
          await fs.rename(temp, path.join(dir, `${name}.gguf`));
          const recordTemp = `${temp}.json`;
          await fs.writeFile(recordTemp, JSON.stringify(record));
          await fs.rename(recordTemp, path.join(dir, `${name}.json`));
        },
        async abandon() {
          await handle.close().catch(() => {});
          await fs.rm(temp, { force: true });
        },
      };
    },
    async remove(url) {
      const name = await entryName(url);
      await fs.rm(path.join(dir, `${name}.json`), { force: true });
      await fs.rm(path.join(dir, `${name}.gguf`), { force: true });
    },
  };
}

// --- Browsers: the origin private file system ----------------------------

async function opfsStore() {
  const root = await navigator.storage.getDirectory();
  const dir = await root.getDirectoryHandle('lamina-models', { create: true });
  const fileOf = async (name, create = false) => dir.getFileHandle(name, { create });
  const readRecord = async (name) => JSON.parse(await (await (await fileOf(name)).getFile()).text());
  return {
    where: 'the origin private file system (lamina-models)',
    async records() {
      const out = [];
      for await (const [name] of dir.entries()) {
        if (!name.endsWith('.json')) continue;
        try {
          out.push(await readRecord(name));
        } catch {
          // Being replaced: not an entry.
        }
      }
      return out.sort((a, b) => a.url.localeCompare(b.url));
    },
    async get(url) {
      const name = await entryName(url);
      try {
        const record = await readRecord(`${name}.json`);
        const file = await (await fileOf(`${name}.gguf`)).getFile();
        return record.url === url && file.size === record.size ? record : null;
      } catch {
        return null;
      }
    },
    async read(url) {
      return blobChunks(await (await fileOf(`${await entryName(url)}.gguf`)).getFile());
    },
    async writer(url) {
      const name = await entryName(url);
      // createWritable writes a swap file the browser puts in place on
      // close; an aborted write leaves what was there.
      const writable = await (await fileOf(`${name}.gguf`, true)).createWritable();
      return {
        write: (chunk) => writable.write(chunk),
        async commit(record) {
          await writable.close();
          const out = await (await fileOf(`${name}.json`, true)).createWritable();
          await out.write(JSON.stringify(record));
          await out.close();
        },
        async abandon() {
          await writable.abort().catch(() => {});
        },
      };
    },
    async remove(url) {
      const name = await entryName(url);
      for (const n of [`${name}.json`, `${name}.gguf`]) await dir.removeEntry(n).catch(() => {});
    },
  };
}

// --- Browsers without OPFS: Cache Storage ---------------------------------

async function cacheStorageStore() {
  if (typeof caches === 'undefined') {
    throw new Error('no model cache here: this browser has neither the origin private file system (OPFS) nor Cache Storage');
  }
  const box = await caches.open('lamina-models');
  // Keys of our own on this origin (never fetched): the entry's file and
  // its record.
  const keyOf = (name) => new URL(`/lamina-models/${name}`, globalThis.location.href).href;
  const readRecord = async (key) => (await box.match(key))?.json() ?? null;
  return {
    where: 'Cache Storage (lamina-models)',
    async records() {
      const keys = (await box.keys()).filter((k) => k.url.endsWith('.json'));
      const out = [];
      for (const k of keys) {
        const record = await readRecord(k.url).catch(() => null);
        if (record) out.push(record);
      }
      return out.sort((a, b) => a.url.localeCompare(b.url));
    },
    async get(url) {
      const name = await entryName(url);
      const record = await readRecord(keyOf(`${name}.json`)).catch(() => null);
      // put() stores a file whole or not at all: present means complete.
      const file = await box.match(keyOf(`${name}.gguf`));
      return record?.url === url && file ? record : null;
    },
    async read(url) {
      const response = await box.match(keyOf(`${await entryName(url)}.gguf`));
      if (!response) throw new Error(`${url} left the model cache while it was being read`);
      return blobChunks(await response.blob());
    },
    async writer(url) {
      const name = await entryName(url);
      // The body streams into put(), which stores it once it ends; an
      // aborted stream stores nothing.
      const { readable, writable } = new TransformStream();
      const putting = box.put(keyOf(`${name}.gguf`), new Response(readable));
      putting.catch(() => {}); // awaited by commit; after abandon, nothing to hear
      const writer = writable.getWriter();
      return {
        write: (chunk) => writer.write(chunk),
        async commit(record) {
          await writer.close();
          await putting;
          await box.put(keyOf(`${name}.json`), new Response(JSON.stringify(record)));
        },
        async abandon() {
          await writer.abort(new Error('the download did not complete')).catch(() => {});
        },
      };
    },
    async remove(url) {
      const name = await entryName(url);
      for (const n of [`${name}.json`, `${name}.gguf`]) await box.delete(keyOf(n));
    },
  };
}

let storePromise = null;
function store() {
  const hasOpfs = typeof navigator !== 'undefined' && navigator.storage?.getDirectory;
  storePromise ??= isNode ? nodeStore() : hasOpfs ? opfsStore() : cacheStorageStore();
  return storePromise;
}

/**
 * Whether the server still has what `record` holds: false when it answers
 * with another ETag or size; true when it agrees or cannot be asked.
 */
async function stillCurrent(url, record, signal) {
  let response;
  try {
    response = await fetch(url, { method: 'HEAD', signal });
  } catch (e) {
    if (signal?.aborted) throw e;
    return true; // offline: the cached copy is what there is
  }
  if (!response.ok) return true;
  const etag = response.headers.get('etag');
  const length = response.headers.get('content-encoding') ? null : response.headers.get('content-length');
  if (etag !== null && record.etag !== null && etag !== record.etag) return false;
  if (length !== null && Number(length) !== record.size) return false;
  return true;
}

/**
 * `{ size, chunks }` for `url` from the cache when it holds it (and the
 * server, if it answers, agrees), else from `download()`, whose chunks are
 * stored as they pass and committed once the last arrives (and `sha256`, if
 * given, matches; a mismatch is an error and nothing is stored).
 */
export async function cachedOpen(url, { signal, sha256: expected }, download) {
  const s = await store();
  const key = String(url);
  const record = await s.get(key);
  if (record && (expected === undefined || record.sha256 === expected.toLowerCase())) {
    if (await stillCurrent(key, record, signal)) {
      return { size: record.size, chunks: await s.read(key, record.size) };
    }
  }
  const part = await download();
  const writer = await s.writer(key);
  // Hashed when asked to check, and in Node (fast there) for the record.
  const hash = expected !== undefined || isNode ? await sha256() : null;
  async function* storing() {
    let done = false;
    try {
      let size = 0;
      for await (const chunk of part.chunks) {
        await writer.write(chunk).catch((e) => {
          throw quotaError(e, part.size);
        });
        hash?.update(chunk);
        size += chunk.length;
        yield chunk;
      }
      const digest = hash?.hex() ?? null;
      checkDigest(key, expected, digest);
      const record = { url: key, size, etag: part.etag ?? null, sha256: digest, stored: new Date().toISOString() };
      await writer.commit(record).catch((e) => {
        throw quotaError(e, part.size);
      });
      done = true;
    } finally {
      if (!done) await writer.abandon();
    }
  }
  return { size: part.size, chunks: storing() };
}

function checkDigest(name, expected, digest) {
  if (expected !== undefined && digest !== expected.toLowerCase()) {
    throw new Error(`${name} does not match its sha256: expected ${expected.toLowerCase()}, got ${digest}`);
  }
}

/** `part` with its chunks checked against `expected` (a sha256) at the end. */
export async function verified(name, part, expected) {
  if (expected === undefined) return part;
  const hash = await sha256();
  async function* checking() {
    for await (const chunk of part.chunks) {
      hash.update(chunk);
      yield chunk;
    }
    checkDigest(name, expected, hash.hex());
  }
  return { ...part, chunks: checking() };
}

/** The cache's entries and their removal (`lamina`'s `cache`). */
export const cache = {
  /** Where the cache lives. */
  async where() {
    return (await store()).where;
  },
  /** Every entry: `{ url, size, etag, sha256, stored }`, by URL. */
  async list() {
    return (await store()).records();
  },
  /** Removes the entry of `url` (nothing if there is none). */
  async delete(url) {
    return (await store()).remove(String(url));
  },
  /** Removes every entry. */
  async clear() {
    const s = await store();
    for (const r of await s.records()) await s.remove(r.url);
  },
};

// A model's size in bytes before it is read, where that is cheap to learn:
// bytes and Blobs by their length, Node paths by `stat`, URLs by a HEAD
// request (offline: the model cache's record), a split model by the sum of
// its parts (a first part given alone brings the others by name). The build
// that runs the model depends on it (builds.js). Null when some part's size
// cannot be known this way.
import { partName, nodePath } from './engine.js';
import { cache } from './cache.js';

export async function modelBytes(source, { signal } = {}) {
  const given = Array.isArray(source) ? source : [source];
  let parts = given;
  const count = given.length === 1 ? splitCount(given[0]) : 1;
  if (count > 1) parts = Array.from({ length: count }, (_, i) => (i === 0 ? given[0] : partName(String(given[0]), i, count)));
  const sizes = await Promise.all(parts.map((part) => partBytes(part, signal)));
  return sizes.includes(null) ? null : sizes.reduce((sum, size) => sum + size, 0);
}

/** N of a first part named `NAME-00001-of-0000N.gguf`, else 1. */
function splitCount(source) {
  if (typeof source !== 'string' && !(source instanceof URL)) return 1;
  const match = /-00001-of-(\d{5})\.gguf(?=$|[?#])/.exec(String(source));
  return match ? Number(match[1]) : 1;
}

async function partBytes(source, signal) {
  if (source instanceof Uint8Array) return source.length;
  if (source instanceof ArrayBuffer) return source.byteLength;
  if (typeof Blob !== 'undefined' && source instanceof Blob) return source.size;
  if (typeof source !== 'string' && !(source instanceof URL)) return null;
  try {
    const path = nodePath(source);
    if (path !== null) {
      const fs = await import(/* webpackIgnore: true */ 'node:fs/promises');
      return (await fs.stat(path)).size;
    }
    const response = await fetch(source, { method: 'HEAD', signal }).catch(() => null);
    if (response === null) return await cachedBytes(String(source));
    const length = response.headers.get('content-length');
    // A compressed transfer's length is not the file's.
    return response.ok && length !== null && !response.headers.get('content-encoding') ? Number(length) : null;
  } catch {
    // Unknown here; loading the source reports what is wrong with it.
    return null;
  }
}

/** The size the model cache recorded for `url`, or null. */
async function cachedBytes(url) {
  const entry = (await cache.list()).find((e) => e.url === url);
  return entry?.size ?? null;
}

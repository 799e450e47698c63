// A file's bytes as a stream of chunks, never the whole file at once: a
// Blob (a user's File, an OPFS file) and, in Node, a file on disk.

/** Bytes per chunk. */
export const CHUNK_BYTES = 8 << 20;

export async function* blobChunks(blob) {
  for (let offset = 0; offset < blob.size; offset += CHUNK_BYTES) {
    yield new Uint8Array(await blob.slice(offset, offset + CHUNK_BYTES).arrayBuffer());
  }
}

/**
 * The `size` bytes of the file at `path` (Node). The file is opened when
 * the first chunk is asked for, so a stream never read holds no descriptor.
 */
export async function* nodeFileChunks(path, size) {
  const fs = await import(/* webpackIgnore: true */ 'node:fs/promises');
  const handle = await fs.open(path, 'r');
  try {
    for (let offset = 0; offset < size; ) {
      const buffer = new Uint8Array(Math.min(CHUNK_BYTES, size - offset));
      const { bytesRead } = await handle.read(buffer, 0, buffer.length, offset);
      if (bytesRead === 0) throw new Error(`${path} ended at ${offset} of ${size} bytes`);
      offset += bytesRead;
      yield buffer.subarray(0, bytesRead);
    }
  } finally {
    await handle.close();
  }
}

// Where session files live (saveSession / loadSession with a name): a path
// in Node, a file of the origin private file system (OPFS) in browsers.
// Writes never leave a half-written file: Node writes a temporary beside the
// target, syncs it and renames it over the target; OPFS's `createWritable`
// writes a swap file that the browser puts in place on `close` (an aborted
// write leaves the old file). Neither writes over a GGUF model.

const isNode = typeof process !== 'undefined' && process.versions?.node != null;
const fs = isNode ? await import(/* webpackIgnore: true */ 'node:fs/promises') : null;
const paths = isNode ? await import(/* webpackIgnore: true */ 'node:path') : null;

let nextTemp = 0;

/** Whether `bytes` start as a GGUF file does. */
function isGguf(bytes) {
  return bytes.length >= 4 && bytes[0] === 0x47 && bytes[1] === 0x47 && bytes[2] === 0x55 && bytes[3] === 0x46;
}

function refuseModel(name) {
  return new Error(`${name} is a GGUF model: lamina does not write a session over it`);
}

async function nodeStartsWithGguf(path) {
  let handle;
  try {
    handle = await fs.open(path, 'r');
  } catch {
    return false;
  }
  try {
    const head = new Uint8Array(4);
    const { bytesRead } = await handle.read(head, 0, 4, 0);
    return isGguf(head.subarray(0, bytesRead));
  } finally {
    await handle.close();
  }
}

async function nodeWrite(path, bytes) {
  if (await nodeStartsWithGguf(path)) throw refuseModel(path);
  const temp = paths.join(paths.dirname(path), `.${paths.basename(path)}.lamina-${process.pid}-${nextTemp++}.tmp`);
  let handle;
  try {
    handle = await fs.open(temp, 'wx');
    await handle.writeFile(bytes);
    await handle.sync();
    await handle.close();
    handle = null;
    await fs.rename(temp, path);
  } catch (e) {
    await handle?.close().catch(() => {});
    await fs.unlink(temp).catch(() => {});
    throw new Error(`cannot write the session ${path}: ${e.message}`);
  }
}

async function nodeRead(path) {
  try {
    return new Uint8Array(await fs.readFile(path));
  } catch (e) {
    throw new Error(`cannot read the session ${path}: ${e.message}`);
  }
}

/** The OPFS directory holding `name` ("dir/file" walks directories) and the file's own name. */
async function opfsPlace(name, create) {
  if (!globalThis.navigator?.storage?.getDirectory) {
    throw new Error('this browser has no origin private file system: save the session as bytes (sessionBytes)');
  }
  const parts = name.split('/').filter((p) => p !== '');
  if (parts.length === 0) throw new TypeError(`session name ${JSON.stringify(name)} names no file`);
  let dir = await navigator.storage.getDirectory();
  for (const part of parts.slice(0, -1)) dir = await dir.getDirectoryHandle(part, { create });
  return { dir, file: parts[parts.length - 1] };
}

async function opfsWrite(name, bytes) {
  const { dir, file } = await opfsPlace(name, true);
  const handle = await dir.getFileHandle(file, { create: true });
  const existing = await handle.getFile();
  if (isGguf(new Uint8Array(await existing.slice(0, 4).arrayBuffer()))) throw refuseModel(name);
  const writable = await handle.createWritable();
  try {
    await writable.write(bytes);
    await writable.close();
  } catch (e) {
    await writable.abort().catch(() => {});
    throw new Error(`cannot write the session ${name}: ${e.message}`);
  }
}

async function opfsRead(name) {
  try {
    const { dir, file } = await opfsPlace(name, false);
    const handle = await dir.getFileHandle(file);
    return new Uint8Array(await (await handle.getFile()).arrayBuffer());
  } catch (e) {
    if (e?.name === 'NotFoundError') throw new Error(`no session ${name} in the origin private file system`);
    throw e;
  }
}

/** Writes session bytes to `name` (a Node path, or an OPFS file in browsers). */
export function writeSessionFile(name, bytes) {
  return isNode ? nodeWrite(name, bytes) : opfsWrite(name, bytes);
}

/** Reads the session file `name` (a Node path, or an OPFS file in browsers). */
export function readSessionFile(name) {
  return isNode ? nodeRead(name) : opfsRead(name);
}

// SHA-256 over a stream of chunks (FIPS 180-4), for checking a downloaded
// model against the hash its publisher gives. Node's crypto does it where it
// exists; browsers have no streaming digest (SubtleCrypto wants the whole
// input at once), so this one runs there, a 64-byte block at a time.

const K = new Uint32Array([
  0x428a2f98, 0x71374491, 0xb5c0fbcf, 0xe9b5dba5, 0x3956c25b, 0x59f111f1, 0x923f82a4, 0xab1c5ed5,
  0xd807aa98, 0x12835b01, 0x243185be, 0x550c7dc3, 0x72be5d74, 0x80deb1fe, 0x9bdc06a7, 0xc19bf174,
  0xe49b69c1, 0xefbe4786, 0x0fc19dc6, 0x240ca1cc, 0x2de92c6f, 0x4a7484aa, 0x5cb0a9dc, 0x76f988da,
  0x983e5152, 0xa831c66d, 0xb00327c8, 0xbf597fc7, 0xc6e00bf3, 0xd5a79147, 0x06ca6351, 0x14292967,
  0x27b70a85, 0x2e1b2138, 0x4d2c6dfc, 0x53380d13, 0x650a7354, 0x766a0abb, 0x81c2c92e, 0x92722c85,
  0xa2bfe8a1, 0xa81a664b, 0xc24b8b70, 0xc76c51a3, 0xd192e819, 0xd6990624, 0xf40e3585, 0x106aa070,
  0x19a4c116, 0x1e376c08, 0x2748774c, 0x34b0bcb5, 0x391c0cb3, 0x4ed8aa4a, 0x5b9cca4f, 0x682e6ff3,
  0x748f82ee, 0x78a5636f, 0x84c87814, 0x8cc70208, 0x90befffa, 0xa4506ceb, 0xbef9a3f7, 0xc67178f2,
]);


/** A running SHA-256: `update(bytes)` as they come, `hex()` at the end. */
class JsSha256 {
  #h = new Uint32Array([0x6a09e667, 0xbb67ae85, 0x3c6ef372, 0xa54ff53a, 0x510e527f, 0x9b05688c, 0x1f83d9ab, 0x5be0cd19]);
  #block = new Uint8Array(64);
  #filled = 0;
  #length = 0;
  #w = new Uint32Array(64);

  update(bytes) {
    this.#length += bytes.length;
    let i = 0;
    if (this.#filled > 0) {
      const take = Math.min(64 - this.#filled, bytes.length);
      this.#block.set(bytes.subarray(0, take), this.#filled);
      this.#filled += take;
      i = take;
      if (this.#filled < 64) return;
      this.#compress(this.#block, 0);
      this.#filled = 0;
    }
    for (; i + 64 <= bytes.length; i += 64) this.#compress(bytes, i);
    this.#block.set(bytes.subarray(i), 0);
    this.#filled = bytes.length - i;
  }

  hex() {
    const bits = this.#length * 8;
    const tail = new Uint8Array(this.#filled < 56 ? 64 : 128);
    tail.set(this.#block.subarray(0, this.#filled));
    tail[this.#filled] = 0x80;
    const view = new DataView(tail.buffer);
    view.setUint32(tail.length - 8, Math.floor(bits / 2 ** 32));
    view.setUint32(tail.length - 4, bits >>> 0);
    for (let i = 0; i < tail.length; i += 64) this.#compress(tail, i);
    return [...this.#h].map((x) => x.toString(16).padStart(8, '0')).join('');
  }

  #compress(bytes, at) {
    const w = this.#w;
    for (let t = 0; t < 16; t++) {
      const j = at + t * 4;
      w[t] = (bytes[j] << 24) | (bytes[j + 1] << 16) | (bytes[j + 2] << 8) | bytes[j + 3];
    }
    for (let t = 16; t < 64; t++) {
      const x15 = w[t - 15];
      const x2 = w[t - 2];
      const s0 = ((x15 >>> 7) | (x15 << 25)) ^ ((x15 >>> 18) | (x15 << 14)) ^ (x15 >>> 3);
      const s1 = ((x2 >>> 17) | (x2 << 15)) ^ ((x2 >>> 19) | (x2 << 13)) ^ (x2 >>> 10);
      w[t] = (w[t - 16] + s0 + w[t - 7] + s1) | 0;
    }
    const h = this.#h;
    let a = h[0];
    let b = h[1];
    let c = h[2];
    let d = h[3];
    let e = h[4];
    let f = h[5];
    let g = h[6];
    let k = h[7];
    for (let t = 0; t < 64; t++) {
      const t1 = (k + (((e >>> 6) | (e << 26)) ^ ((e >>> 11) | (e << 21)) ^ ((e >>> 25) | (e << 7))) + ((e & f) ^ (~e & g)) + K[t] + w[t]) | 0;
      const t2 = ((((a >>> 2) | (a << 30)) ^ ((a >>> 13) | (a << 19)) ^ ((a >>> 22) | (a << 10))) + ((a & b) ^ (a & c) ^ (b & c))) | 0;
      k = g;
      g = f;
      f = e;
      e = (d + t1) | 0;
      d = c;
      c = b;
      b = a;
      a = (t1 + t2) | 0;
    }
    h[0] += a;
    h[1] += b;
    h[2] += c;
    h[3] += d;
    h[4] += e;
    h[5] += f;
    h[6] += g;
    h[7] += k;
  }
}

const isNode = typeof process !== 'undefined' && process.versions?.node != null;

/** A running SHA-256: Node's where it exists, else this file's. */
export async function sha256() {
  if (isNode) {
    const crypto = await import(/* webpackIgnore: true */ 'node:crypto');
    const hash = crypto.createHash('sha256');
    return { update: (bytes) => hash.update(bytes), hex: () => hash.digest('hex') };
  }
  return new JsSha256();
}

/** This file's SHA-256 of `chunks` (for tests: the browsers' path in Node). */
export function jsSha256Hex(chunks) {
  const h = new JsSha256();
  for (const c of chunks) h.update(c);
  return h.hex();
}

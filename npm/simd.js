// Which of the engine's instruction sets to load: 'relaxed-simd' (the
// builds in dist-relaxed/ and dist-threads-relaxed/, whose integer dot
// products use i32x4.relaxed_dot_i8x16_i7x16_add_s) where this JavaScript
// engine runs relaxed SIMD correctly, else 'simd128' (every engine lamina
// runs in). Both give the same numbers bit for bit.

// A module whose one function returns lane 0 of
// i32x4.relaxed_dot_i8x16_i7x16_add_s(-1 × 16, 127 × 16, 0): 4 · -127 =
// -508. Engines without relaxed SIMD reject the module; one engine that has
// it behind a flag (Node 20's V8) returns another number, and is treated as
// having none.
const splat = (byte) => [0xfd, 0x0c, ...new Array(16).fill(byte)];
const body = [0x00, ...splat(0xff), ...splat(0x7f), ...splat(0x00), 0xfd, 0x93, 0x02, 0xfd, 0x1b, 0x00, 0x0b];
const probe = new Uint8Array([
  0x00, 0x61, 0x73, 0x6d, 0x01, 0x00, 0x00, 0x00, // magic, version
  0x01, 0x05, 0x01, 0x60, 0x00, 0x01, 0x7f, // types: () -> i32
  0x03, 0x02, 0x01, 0x00, // functions: one of type 0
  0x07, 0x05, 0x01, 0x01, 0x66, 0x00, 0x00, // exports: "f"
  0x0a, body.length + 2, 0x01, body.length, ...body, // code
]);

let checked = null;

/** 'runs', 'missing' or 'wrong': this engine's relaxed SIMD (checked once). */
function relaxedSimd() {
  if (checked) return checked;
  if (typeof WebAssembly !== 'object' || !WebAssembly.validate(probe)) return (checked = 'missing');
  const { exports } = new WebAssembly.Instance(new WebAssembly.Module(probe));
  return (checked = exports.f() === -508 ? 'runs' : 'wrong');
}

/** Whether this JavaScript engine runs relaxed SIMD correctly. */
export function hasRelaxedSimd() {
  return relaxedSimd() === 'runs';
}

const WITHOUT = {
  missing: 'this engine has no relaxed SIMD',
  wrong: "this engine's relaxed SIMD dot product gives wrong sums",
};

/**
 * The instruction set to load and why: `asked` is loadModel's `simd`
 * parameter ('simd128', 'relaxed-simd', or undefined for the best this
 * engine runs).
 */
export function pickSimd(asked) {
  const relaxed = relaxedSimd();
  switch (asked) {
    case undefined:
    case null:
      return relaxed === 'runs'
        ? { simd: 'relaxed-simd', simd_reason: 'this engine runs relaxed SIMD' }
        : { simd: 'simd128', simd_reason: WITHOUT[relaxed] };
    case 'simd128':
      return { simd: 'simd128', simd_reason: 'simd128 was asked for' };
    case 'relaxed-simd':
      if (relaxed !== 'runs') throw new Error(`relaxed-simd was asked for, and ${WITHOUT[relaxed]}`);
      return { simd: 'relaxed-simd', simd_reason: 'relaxed-simd was asked for' };
    default:
      throw new RangeError(`simd must be 'simd128' or 'relaxed-simd', got ${JSON.stringify(asked)}`);
  }
}

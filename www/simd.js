// What this browser's WebAssembly validates, probed with tiny modules (as
// wasm-feature-detect does): SIMD, and relaxed SIMD's multiply-add, the one relaxed
// instruction the relaxed build's kernels use.

// (module (func (result v128) i32.const 0 i8x16.splat i8x16.popcnt))
const SIMD_PROBE = new Uint8Array([
  0, 97, 115, 109, 1, 0, 0, 0, 1, 5, 1, 96, 0, 1, 123, 3, 2, 1, 0, 10, 10, 1, 8, 0, 65, 0, 253, 15, 253, 98, 11,
]);

// (module (func (result v128) i32.const 0 i8x16.splat i32.const 0 i8x16.splat
//   i32.const 0 i8x16.splat f32x4.relaxed_madd))
const RELAXED_SIMD_PROBE = new Uint8Array([
  0, 97, 115, 109, 1, 0, 0, 0, 1, 5, 1, 96, 0, 1, 123, 3, 2, 1, 0, 10, 19, 1, 17, 0, 65, 0, 253, 15, 65, 0, 253, 15,
  65, 0, 253, 15, 253, 133, 2, 11,
]);

function validates(bytes) {
  try {
    return WebAssembly.validate(bytes);
  } catch {
    return false;
  }
}

export function simdSupported() {
  return validates(SIMD_PROBE);
}

export function relaxedSimdSupported() {
  return validates(RELAXED_SIMD_PROBE);
}

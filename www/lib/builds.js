// The WebAssembly builds (`pkg/<build>/`) and which one a browser should run: one table
// for the worker, which loads a build, and the page, which names the backend to continue
// on after a GPU failure.

/** The build each named WASM backend loads. */
export const BUILDS = {
  wasm: 'scalar',
  'wasm-simd': 'simd',
  'wasm-relaxed-simd': 'relaxed-simd',
  'wasm-simd-threads': 'simd-threads',
  'wasm-relaxed-simd-threads': 'relaxed-simd-threads',
};

/**
 * The best build for a browser: the SIMD + threads build when the page is cross-origin
 * isolated (its workers share memory through SharedArrayBuffer), else the SIMD build, else
 * `scalar`; each SIMD build has a relaxed twin (`relaxed-…`: the kernels' multiply-add is
 * relaxed SIMD's, fused) taken first where the browser validates relaxed SIMD.
 */
export function bestBuild({ simd, relaxed, isolated }) {
  if (!simd) return 'scalar';
  return `${relaxed ? 'relaxed-' : ''}${isolated ? 'simd-threads' : 'simd'}`;
}

/** The backend name that loads `build`. */
export function backendOf(build) {
  return Object.keys(BUILDS).find((backend) => BUILDS[backend] === build);
}

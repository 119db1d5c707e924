// Runs a wasm32-wasip1 test binary under Node's WASI, so the simd128 kernel variant's
// conformance runs outside a browser (cargo uses this file as the test runner):
//
//   rustup target add wasm32-wasip1
//   RUSTFLAGS="-C target-feature=+simd128" \
//   CARGO_TARGET_WASM32_WASIP1_RUNNER="node $PWD/kernels-cpu/tests/wasi/run.mjs" \
//   cargo test -p tinygpt-kernels-cpu --target wasm32-wasip1 --target-dir target/wasi-simd \
//     --test conformance -- one_thread --skip copy_misuse_panics
//
// Only the one-thread tests run: wasip1 has no threads, and wasm panics abort, so the
// misuse check (which catches a panic) cannot run there. With
// RUSTFLAGS="-C target-feature=+simd128,+relaxed-simd" the same runs the relaxed variant
// too: Node 20's V8 has relaxed SIMD behind a flag, set here before compiling (a V8 that
// ships it ignores the flag).
import { readFile } from 'node:fs/promises';
import { setFlagsFromString } from 'node:v8';
import { WASI } from 'node:wasi';

setFlagsFromString('--experimental-wasm-relaxed-simd');

const [file, ...args] = process.argv.slice(2);
const wasi = new WASI({ version: 'preview1', args: [file, ...args], env: process.env, preopens: { '/': '/' } });
const { instance } = await WebAssembly.instantiate(await readFile(file), wasi.getImportObject());
process.exitCode = wasi.start(instance);

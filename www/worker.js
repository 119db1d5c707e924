// The module worker: loads the wasm build the page asked for and runs the training loop
// in time-budgeted slices. All math happens in wasm (WorkerApp); this file only owns the
// event loop. Protocol: worker/PROTOCOL.md, www/protocol.d.ts.
//
// Messages and ticks go through one promise queue, so the wasm side never runs two calls
// at once. Between ticks the worker yields to its event loop through a MessageChannel (no
// 4 ms setTimeout clamp), which is when `pause` and `stop` get in: a command waits for at
// most one slice (about SLICE_MS, or one part of a step when a part takes longer; see
// worker/PROTOCOL.md, "Timing").

import { simdSupported } from './simd.js';

const SLICE_MS = 50;

let app = null;
let queue = Promise.resolve();
let tickScheduled = false;
const yieldChannel = new MessageChannel();
yieldChannel.port1.onmessage = () => enqueue(tick);

function enqueue(task) {
  queue = queue.then(task).catch((e) => {
    post({ type: 'error', code: 'internal', message: `Internal error: ${e && e.message ? e.message : e}` });
  });
}

function post(message) {
  if (message.type === 'exported') {
    self.postMessage(message, [message.bytes.buffer]);
  } else {
    self.postMessage(message);
  }
}

function scheduleTick() {
  if (!tickScheduled && app) {
    tickScheduled = true;
    yieldChannel.port2.postMessage(null);
  }
}

async function tick() {
  tickScheduled = false;
  const busy = await app.tick(SLICE_MS);
  if (busy) scheduleTick();
}

/** Loads `pkg/simd` or `pkg/scalar` as the page asked (`auto`: SIMD when it validates). */
async function load(backend) {
  const simd = simdSupported();
  const useSimd = backend === 'wasm-simd' || (backend !== 'wasm' && simd);
  if (useSimd && !simd) {
    throw new Error('This browser does not support WebAssembly SIMD; choose the "wasm" backend.');
  }
  const url = new URL(useSimd ? './pkg/simd/tinygpt_worker.js' : './pkg/scalar/tinygpt_worker.js', import.meta.url);
  const pkg = await import(url.href);
  await pkg.default();
  const env = {
    simd,
    crossOriginIsolated: self.crossOriginIsolated === true,
    hardwareThreads: navigator.hardwareConcurrency || 1,
  };
  return new pkg.WorkerApp(post, env);
}

self.onmessage = (event) => {
  const message = event.data;
  enqueue(async () => {
    if (message.type === 'init') {
      if (!app) app = await load(message.backend || 'auto');
    } else if (!app) {
      post({ type: 'error', code: 'badMessage', message: 'The worker was not initialised (send init first).' });
      return;
    }
    await app.handle(message);
    scheduleTick();
  });
};

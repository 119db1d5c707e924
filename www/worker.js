// The module worker: loads the wasm build the page asked for and runs the training loop
// in time-budgeted slices. All math happens in wasm (WorkerApp); this file only owns the
// event loop. Protocol: worker/PROTOCOL.md, www/protocol.d.ts.
//
// Messages and ticks go through one promise queue, so the wasm side never runs two calls
// at once. Between ticks the worker yields to its event loop through a MessageChannel (no
// 4 ms setTimeout clamp), which is when `pause` and `stop` get in: a command waits for at
// most one slice (about SLICE_MS, or one part of a step when a part takes longer; see
// worker/PROTOCOL.md, "Timing").
//
// A wasm call blocks this event loop, so a message cannot say "I am waiting" here while a
// step runs. The page can: `init.pendingMessages` is an Int32Array over a SharedArrayBuffer
// that the page adds 1 to before posting each message, and this file subtracts 1 from as
// it begins handling each (element 1 counts `pause` and `stop` alone). The wasm side reads
// it between ops and gives a whole CPU step up while it is above zero (worker/src/abandon.rs),
// so with it the CPU builds take whole steps and still answer within a few ms.

import { BUILDS, bestBuild } from './lib/builds.js';
import { relaxedSimdSupported, simdSupported } from './simd.js';

const SLICE_MS = 50;

let app = null;
/** The page's pending-message counter (`init.pendingMessages`), once `init` brought one. */
let pending = null;
let queue = Promise.resolve();
let tickScheduled = false;
const yieldChannel = new MessageChannel();
yieldChannel.port1.onmessage = () => enqueue(tick);

function enqueue(task) {
  queue = queue.then(task).catch((e) => {
    if (e instanceof WebAssembly.RuntimeError) {
      // A trap (out of memory, `unreachable`) leaves the wasm module unusable: rethrow it
      // outside the queue so the page's `onerror` sees the worker die and offers a restart.
      app = null;
      setTimeout(() => {
        throw e;
      });
      return;
    }
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

// Web Locks for the wasm side, which keeps which locks it holds (worker/src/locks.rs):
// `requestLock(name, wait)` resolves to a function that lets the lock go once it is granted,
// or to null when `wait` is false and another tab holds it. The browser releases them all
// when this worker ends. Without Web Locks the wasm side grants every lock itself.
function requestLock(name, wait) {
  return new Promise((resolve, reject) => {
    navigator.locks
      .request(name, { ifAvailable: !wait }, (lock) => {
        if (!lock) {
          resolve(null);
          return undefined;
        }
        return new Promise((release) => resolve(() => release()));
      })
      .catch(reject);
  });
}

/**
 * What WebGPU this worker can use: `{webgpu}` (the adapter's name, whether it is a fallback
 * adapter, key limits, features) or `{webgpuNote}`, one line saying why there is none.
 */
async function probeWebgpu() {
  if (!self.isSecureContext) return { webgpuNote: 'WebGPU needs a secure context (https or localhost)' };
  if (!navigator.gpu) return { webgpuNote: 'This browser does not offer WebGPU' };
  let adapter;
  try {
    adapter = await navigator.gpu.requestAdapter();
  } catch (e) {
    return { webgpuNote: `The WebGPU adapter request failed (${e && e.message ? e.message : e})` };
  }
  if (!adapter) return { webgpuNote: 'No WebGPU adapter (WebGPU is disabled, or no GPU is usable)' };
  const info = adapter.info || {};
  const name = [info.vendor, info.architecture, info.device, info.description].filter(Boolean).join(' ');
  const l = adapter.limits;
  return {
    webgpu: {
      adapter: name || 'unnamed adapter',
      fallbackAdapter: Boolean(info.isFallbackAdapter ?? adapter.isFallbackAdapter),
      limits: {
        maxStorageBufferBindingSize: l.maxStorageBufferBindingSize,
        maxBufferSize: l.maxBufferSize,
        maxComputeWorkgroupSizeX: l.maxComputeWorkgroupSizeX,
        maxComputeInvocationsPerWorkgroup: l.maxComputeInvocationsPerWorkgroup,
        maxComputeWorkgroupStorageSize: l.maxComputeWorkgroupStorageSize,
        maxComputeWorkgroupsPerDimension: l.maxComputeWorkgroupsPerDimension,
        maxStorageBuffersPerShaderStage: l.maxStorageBuffersPerShaderStage,
      },
      features: [...adapter.features].sort(),
    },
  };
}

/**
 * The build `backend` asks for (`BUILDS`); `auto` and `webgpu` take the best one here
 * (`bestBuild`). Every build carries the WebGPU backend.
 */
function chooseBuild(backend, simd, relaxed) {
  const isolated = self.crossOriginIsolated === true;
  const named = BUILDS[backend];
  if (named?.endsWith('-threads') && !isolated) {
    throw new Error('The threads builds need a cross-origin isolated page (COOP/COEP headers); choose "wasm-simd".');
  }
  if (named && named !== 'scalar' && !simd) {
    throw new Error('This browser does not support WebAssembly SIMD; choose the "wasm" backend.');
  }
  if (named?.startsWith('relaxed-') && !relaxed) {
    throw new Error(`This browser does not support WebAssembly relaxed SIMD; choose "${backend.replace('relaxed-', '')}".`);
  }
  return named ?? bestBuild({ simd, relaxed, isolated });
}

/** Loads the build `backend` asks for (see `chooseBuild`) and starts its threads. */
async function load(backend) {
  const simd = simdSupported();
  const relaxedSimd = simd && relaxedSimdSupported();
  const build = chooseBuild(backend, simd, relaxedSimd);
  const url = new URL(`./pkg/${build}/tinygpt_worker.js`, import.meta.url);
  const pkg = await import(url.href);
  await pkg.default();
  // rayon's global pool, one thread per core (the kernels split work by size, so the
  // count changes speed, never results).
  if (build.endsWith('-threads')) await pkg.initThreadPool(navigator.hardwareConcurrency || 1);
  const env = {
    simd,
    relaxedSimd,
    crossOriginIsolated: self.crossOriginIsolated === true,
    hardwareThreads: navigator.hardwareConcurrency || 1,
    ...(await probeWebgpu()),
  };
  return new pkg.WorkerApp(post, env, navigator.locks ? requestLock : undefined, pending ?? undefined);
}

/** The bundled pretrained base (`dist/assets`, copied from cli/assets by build-web); fetched once. */
let builtinBase;
async function fetchBuiltinBase() {
  if (!builtinBase) {
    const response = await fetch(new URL('./assets/base-medium-shakespeare.safetensors', import.meta.url));
    if (!response.ok) throw new Error(`The bundled base model could not be fetched (HTTP ${response.status}).`);
    builtinBase = new Uint8Array(await response.arrayBuffer());
  }
  return builtinBase;
}

/** Whether `value` can be the page's counter: an Int32Array over shared memory. */
function sharedCounter(value) {
  return typeof SharedArrayBuffer === 'function' && value instanceof Int32Array && value.buffer instanceof SharedArrayBuffer;
}

self.onmessage = (event) => {
  const message = event.data;
  // Anything may arrive (null, a number): only an object has a type; the wasm side says
  // what is wrong with everything else.
  const type = message !== null && typeof message === 'object' ? message.type : undefined;
  if (type === 'init') {
    if (!pending && sharedCounter(message.pendingMessages)) pending = message.pendingMessages;
    // The counter is this file's business; the wasm side's `init` has no such field.
    delete message.pendingMessages;
  }
  // Messages from here on were counted by the page (it counts every one, `init` included).
  const counter = pending;
  // A tick waiting for the GPU stops waiting, so this message is next (worker/src/interrupt.rs).
  if (app) app.interrupt();
  enqueue(async () => {
    if (counter) {
      Atomics.sub(counter, 0, 1);
      if (counter.length > 1 && (type === 'pause' || type === 'stop')) Atomics.sub(counter, 1, 1);
    }
    if (type === 'init') {
      if (!app) app = await load(message.backend || 'auto');
    } else if (!app) {
      post({
        type: 'error',
        code: 'badMessage',
        message: 'The worker is not started yet: send {type: "init"} first, then this message again.',
      });
      return;
    }
    // The bundled LoRA base is a file beside the page; the wasm side takes its bytes.
    if (type === 'loadBase' && message.source === 'builtin' && !message.bytes) {
      message.bytes = await fetchBuiltinBase();
    }
    await app.handle(message);
    scheduleTick();
  });
};

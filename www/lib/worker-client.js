// The page's side of the worker protocol (worker/PROTOCOL.md): starts the module worker,
// sends typed messages and routes replies by `type`.

export class WorkerClient {
  /** @param {{backend: string, storage: string}} options */
  constructor({ backend, storage, checked = false }) {
    this.handlers = new Map();
    this.worker = new Worker(new URL('../worker.js', import.meta.url), { type: 'module' });
    this.worker.onmessage = (event) => this.emit(event.data.type, event.data);
    // An uncaught error ends the worker's usefulness (a wasm trap such as running out of
    // memory leaves its module unusable): report it once as `crashed` (a page-side event,
    // not a protocol message) and stop the worker; the page offers a restart.
    this.crashed = false;
    this.worker.onerror = (event) => {
      event.preventDefault();
      if (this.crashed) return;
      this.crashed = true;
      this.worker.terminate();
      this.emit('crashed', { type: 'crashed', reason: event.message || 'unknown error' });
    };
    // The worker gives a whole training step up while this counter is above zero (a message
    // waits: worker/src/abandon.rs). Shared memory needs a cross-origin isolated page;
    // without it the worker takes steps in row parts instead.
    // Element 1 counts the waiting `pause` and `stop` messages alone: those cut a step short
    // even when the worker takes one in full after several given up in a row.
    this.pending = typeof SharedArrayBuffer === 'function' && crossOriginIsolated ? new Int32Array(new SharedArrayBuffer(8)) : null;
    this.send({ type: 'init', backend, storage, checked, ...(this.pending ? { pendingMessages: this.pending } : {}) });
  }

  on(type, handler) {
    if (!this.handlers.has(type)) this.handlers.set(type, []);
    this.handlers.get(type).push(handler);
  }

  emit(type, message) {
    for (const handler of this.handlers.get(type) || []) handler(message);
    for (const handler of this.handlers.get('*') || []) handler(message);
  }

  /** @param {import('../protocol').InMessage} message */
  send(message, transfer = []) {
    // Counted before it is posted, so the worker sees it waiting even before it arrives.
    if (this.pending) {
      Atomics.add(this.pending, 0, 1);
      if (isCommand(message)) Atomics.add(this.pending, 1, 1);
    }
    this.worker.postMessage(message, transfer);
  }

  terminate() {
    this.worker.terminate();
  }
}

/** `pause` and `stop`: the messages counted in element 1 of the pending counter as well. */
function isCommand(message) {
  return message?.type === 'pause' || message?.type === 'stop';
}

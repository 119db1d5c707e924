// @ts-check
// The message-level client of the worker protocol (worker/PROTOCOL.md): starts the module
// worker, sends typed messages and routes replies by `type`. `TinyGPT` (index.js) wraps it
// in promises; the page in www/ uses it directly.

/** @typedef {import('./protocol.js').InMessage} InMessage */
/** @typedef {import('./protocol.js').OutMessage | CrashedEvent} ClientEvent */
/** @typedef {{type: 'crashed', reason: string}} CrashedEvent */

export class WorkerClient {
  /**
   * @param {object} options
   * @param {import('./protocol.js').BackendChoice} [options.backend]
   * @param {import('./protocol.js').StoreChoice} [options.storage]
   * @param {boolean} [options.checked] developer mode: every op checked (worker/PROTOCOL.md, `init`)
   * @param {string | URL} [options.workerUrl] the worker script; by default the package's
   *   `worker.js`, beside this file
   */
  constructor({ backend = 'auto', storage = 'auto', checked = false, workerUrl = new URL('./worker.js', import.meta.url) } = {}) {
    /** @type {Map<string, Array<(message: any) => void>>} */
    this.handlers = new Map();
    this.worker = new Worker(workerUrl, { type: 'module' });
    this.worker.onmessage = (event) => this.emit(event.data.type, event.data);
    // An uncaught error ends the worker's usefulness (a wasm trap such as running out of
    // memory leaves its module unusable): report it once as `crashed` (a client-side event,
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
    // `pendingMessages` is read by worker.js, not the wasm side, so InitMessage lacks it.
    const init = { type: 'init', backend, storage, checked, ...(this.pending ? { pendingMessages: this.pending } : {}) };
    this.send(/** @type {InMessage} */ (init));
  }

  /**
   * Calls `handler` with every message of `type` (`'*'`: every message); returns a function
   * that removes it.
   * @param {string} type
   * @param {(message: any) => void} handler
   */
  on(type, handler) {
    if (!this.handlers.has(type)) this.handlers.set(type, []);
    this.handlers.get(type)?.push(handler);
    return () => {
      const list = this.handlers.get(type) || [];
      const i = list.indexOf(handler);
      if (i >= 0) list.splice(i, 1);
    };
  }

  /**
   * @param {string} type
   * @param {ClientEvent} message
   */
  emit(type, message) {
    // Copies: a handler may remove itself (or another) while the list is walked.
    for (const handler of [...(this.handlers.get(type) || [])]) handler(message);
    for (const handler of [...(this.handlers.get('*') || [])]) handler(message);
  }

  /**
   * @param {InMessage} message
   * @param {Transferable[]} [transfer]
   */
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

/**
 * `pause` and `stop`: the messages counted in element 1 of the pending counter as well.
 * @param {InMessage} message
 */
function isCommand(message) {
  return message?.type === 'pause' || message?.type === 'stop';
}

// @ts-check
// tinygpt-web: train and sample a tiny GPT in a Web Worker, with promises.
//
// `TinyGPT` wraps the message-level `WorkerClient` (worker-client.js): each method sends
// one protocol message (worker/PROTOCOL.md; types in protocol.d.ts) and resolves with its
// answer, or rejects with a `TinyGPTError` when the worker answers `error` first. The
// protocol has no request ids, so an error that arrives while a call waits (say, a run that
// diverged) rejects that call too; `on('error', …)` sees every error.

import { WorkerClient } from './worker-client.js';

export { WorkerClient };

/** @typedef {import('./protocol.js').DatasetInput | {name: string, text: string}} Dataset */

/** The worker answered `error` (`code` is the protocol's ErrorCode), or crashed (`crashed`). */
export class TinyGPTError extends Error {
  /** @param {{code: string, message: string}} error */
  constructor({ code, message }) {
    super(message);
    this.name = 'TinyGPTError';
    this.code = code;
  }
}

/** Errors after which the run trains no more (worker/PROTOCOL.md, error codes). */
const RUN_ENDING = ['diverged', 'deviceLost', 'crashed'];

export class TinyGPT {
  /**
   * Starts the worker and resolves once it is ready (its `ready` message).
   * @param {ConstructorParameters<typeof WorkerClient>[0]} [options]
   */
  static async create(options = {}) {
    const client = new WorkerClient(options);
    try {
      const ready = await request(client, null, (m) => (m.type === 'ready' ? m : undefined));
      return new TinyGPT(client, ready);
    } catch (e) {
      client.terminate();
      throw e;
    }
  }

  /**
   * @param {WorkerClient} client
   * @param {import('./protocol.js').ReadyMessage} ready
   */
  constructor(client, ready) {
    this.client = client;
    this.capabilities = ready.capabilities;
    this.presets = ready.presets;
    this.defaultTrainingConfig = ready.defaultTrainingConfig;
    /** Samples sent and not yet answered by `sampleDone`: a newer one waits for theirs. */
    this.samplesInFlight = 0;
    client.on('sampleDone', () => (this.samplesInFlight = Math.max(0, this.samplesInFlight - 1)));
  }

  /**
   * Every message of `type` (`'*'`: all, `'crashed'`: the worker died); returns `off()`.
   * @param {string} type
   * @param {(message: any) => void} handler
   */
  on(type, handler) {
    return this.client.on(type, handler);
  }

  /**
   * Starts a new run (replacing the current one); resolves with it once it trains.
   * @param {{dataset: Dataset, preset?: string, modelConfig?: import('./protocol.js').ModelConfig,
   *   trainingConfig?: Partial<import('./protocol.js').TrainingConfig>}} options
   */
  train({ dataset, ...config }) {
    return this.#run({ type: 'train', ...config, dataset: datasetInput(dataset) });
  }

  /**
   * The run's `progress` messages (TrainingProgress), until it is done. A `stop` sends one
   * more after `done` (the last steps' losses): `on('progress')` sees that one too.
   * @returns {AsyncGenerator<import('./protocol.js').ProgressMessage>}
   */
  async *progress() {
    const messages = queue(this.client);
    try {
      for (;;) {
        const m = await messages.next();
        if (m.type === 'progress') yield m;
        else if (m.type === 'done') return;
        else if (m.type === 'crashed' || (m.type === 'error' && RUN_ENDING.includes(m.code))) throw failure(m);
      }
    } finally {
      messages.close();
    }
  }

  /** Resolves with the next `done` ({reason, step}): the run finished, stopped or stopped early. */
  finished() {
    return request(this.client, null, (m) => (m.type === 'done' ? m : undefined));
  }

  /** Resolves with the `status` once the run no longer trains. */
  pause() {
    return this.#command('pause', (state) => state !== 'training');
  }

  /** Continues a paused or stopped run; resolves with the `status` once it trains. */
  resume() {
    return this.#command('resume', (state) => state === 'training');
  }

  /** Ends the run (it saves a checkpoint of steps since the last); resolves with the `status`. */
  stop() {
    return this.#command('stop', (state) => state === 'stopped' || state === 'finished');
  }

  /**
   * Generates text from the current model, also while it trains. The result streams:
   * `for await (const text of sample)` gives the chunks; `await sample.done` the
   * `sampleDone` ({text, tokensPerSecond, cancelled}). A newer sample, `train` or `load`
   * cancels this one.
   * @param {Partial<Omit<import('./protocol.js').SampleMessage, 'type'>>} [options]
   */
  sample(options = {}) {
    const defaults = { prompt: '', maxTokens: 200, temperature: 0.8, topK: 40, seed: Math.floor(Math.random() * 2 ** 32) };
    const message = /** @type {import('./protocol.js').SampleMessage} */ ({ type: 'sample', ...defaults, ...options });
    // Answers of the samples still in flight come first (each ends with a cancelled
    // `sampleDone`); this one's come after them.
    let earlier = this.samplesInFlight;
    this.samplesInFlight += 1;
    /** @type {string[]} */
    const chunks = [];
    let settled = false;
    /** @type {(() => void) | null} */
    let wake = null;
    /** @type {Promise<import('./protocol.js').SampleDoneMessage>} */
    const done = new Promise((resolve, reject) => {
      const off = this.client.on('*', (m) => {
        if (m.type === 'sampleChunk' && earlier === 0) chunks.push(m.text);
        else if (m.type === 'sampleDone' && earlier > 0) earlier -= 1;
        else if (m.type === 'sampleDone' || m.type === 'error' || m.type === 'crashed') {
          off();
          settled = true;
          if (m.type === 'sampleDone') resolve(m);
          else reject(failure(m));
        }
        wake?.();
      });
    });
    done.catch(() => {}); // an iterating caller sees the error in its loop
    this.client.send(message);
    return {
      /** Resolves with `sampleDone` ({text, tokensPerSecond, cancelled}). */
      done,
      /** The text in chunks as it streams (each call starts from the first chunk). */
      async *[Symbol.asyncIterator]() {
        for (let i = 0; ; i += 1) {
          while (i === chunks.length && !settled) await new Promise((resolve) => (wake = () => resolve(undefined)));
          if (i === chunks.length) {
            await done; // throws the error that ended it
            return;
          }
          yield chunks[i];
        }
      },
    };
  }

  /** Saves a checkpoint of the run now; resolves with `checkpointSaved` ({id, step, bytes}). */
  save() {
    return request(this.client, { type: 'save' }, (m) => (m.type === 'checkpointSaved' ? m : undefined));
  }

  /**
   * The checkpoints in this origin's store, newest first.
   * @returns {Promise<import('./protocol.js').CheckpointInfo[]>}
   */
  listCheckpoints() {
    return request(this.client, { type: 'listCheckpoints' }, (m) => (m.type === 'checkpoints' ? m.items : undefined));
  }

  /**
   * Makes checkpoint `id` the current run, paused (`resume()` continues it); `dataset` is
   * the text it trained on.
   * @param {string} id
   * @param {Dataset} dataset
   */
  load(id, dataset) {
    return this.#run({ type: 'load', id, dataset: datasetInput(dataset) });
  }

  /** @param {string} id */
  delete(id) {
    return request(this.client, { type: 'delete', id }, (m) => (m.type === 'deleted' ? m : undefined));
  }

  /**
   * One `.safetensors` file of checkpoint `id` (the latest without one): {fileName, bytes}.
   * @param {string} [id]
   */
  export(id) {
    return request(this.client, { type: 'export', ...(id ? { id } : {}) }, (m) => (m.type === 'exported' ? m : undefined));
  }

  /**
   * LoRA: loads the frozen base adapters train on: `'builtin'` (the bundled Shakespeare
   * model), `{checkpoint: id}`, `{bytes, name?}` (a `.safetensors` file), `{url, name?,
   * onProgress?}` (a Hugging Face GPT-2 folder the worker downloads, reporting each
   * `baseDownload` to `onProgress`, and keeps in browser storage for the next time), or
   * `{files, name?}` (that folder's four files as bytes: `configJson`, `modelSafetensors`,
   * `vocabJson`, `mergesTxt`).
   * @param {import('./index.js').BaseChoice} [base]
   * @returns {Promise<import('./protocol.js').BaseInfo>}
   */
  loadBase(base = 'builtin') {
    let message;
    let offProgress = () => {};
    if (base === 'builtin') {
      message = { type: 'loadBase', source: 'builtin' };
    } else if ('checkpoint' in base) {
      message = { type: 'loadBase', source: 'checkpoint', id: base.checkpoint };
    } else if ('url' in base) {
      // The worker resolves a relative address against its own script, not this page.
      const url = typeof location === 'undefined' ? base.url : new URL(base.url, location.href).href;
      message = { type: 'loadBase', source: 'url', url, ...(base.name ? { name: base.name } : {}) };
      if (base.onProgress) offProgress = this.client.on('baseDownload', base.onProgress);
    } else if ('files' in base) {
      message = { type: 'loadBase', source: 'files', files: base.files, ...(base.name ? { name: base.name } : {}) };
    } else {
      message = { type: 'loadBase', source: 'upload', bytes: base.bytes, name: base.name };
    }
    const loadBase = /** @type {import('./protocol.js').LoadBaseMessage} */ (message);
    const loaded = request(this.client, loadBase, (m) => (m.type === 'baseLoaded' ? m.base : undefined));
    loaded.then(offProgress, offProgress);
    return loaded;
  }

  /**
   * LoRA: trains adapter `name` on the loaded base (a new run); resolves with the run.
   * `context` is the window it trains on, in tokens (1 to the base's context; by default 256
   * or the base's context when shorter); it is saved with the adapter.
   * @param {{name: string, dataset: Dataset, preset?: string, rank?: number, alpha?: number,
   *   targets?: string[], trainingConfig?: Partial<import('./protocol.js').TrainingConfig>,
   *   context?: number}} options
   */
  trainAdapter({ dataset, ...options }) {
    return this.#run({ type: 'trainAdapter', ...options, dataset: datasetInput(dataset) });
  }

  /**
   * LoRA: the adapters in this origin's store (`fitsBase`: trained on the loaded base).
   * @returns {Promise<import('./protocol.js').AdapterInfo[]>}
   */
  listAdapters() {
    return request(this.client, { type: 'listAdapters' }, (m) => (m.type === 'adapters' ? m.items : undefined));
  }

  /**
   * LoRA: selects adapter `name` for `sample({adapter: true})`; with `dataset` (the text it
   * trained on) it becomes the current run, paused, on the window it was trained on
   * (`context`, if given, must be that one: else `contextMismatch`).
   * @param {string} name
   * @param {Dataset} [dataset]
   * @param {{context?: number}} [options]
   */
  loadAdapter(name, dataset, { context } = {}) {
    const message = {
      type: 'loadAdapter',
      name,
      ...(dataset ? { dataset: datasetInput(dataset) } : {}),
      ...(context !== undefined ? { context } : {}),
    };
    return request(this.client, /** @type {import('./protocol.js').LoadAdapterMessage} */ (message), (m) =>
      m.type === 'adapterLoaded' ? m : undefined,
    );
  }

  /**
   * LoRA: the GPT-2 folders `loadBase({url})` kept in this origin's storage: `{url, bytes,
   * fetchedMs, complete}` each (`complete: false`: a write cut short, never read, listed so
   * that `deleteBase(url)` can free its space).
   * @returns {Promise<import('./protocol.js').CachedBase[]>}
   */
  listBases() {
    return request(this.client, { type: 'listBases' }, (m) => (m.type === 'bases' ? m.items : undefined));
  }

  /**
   * LoRA: deletes the kept copy of the folder at `url` (as `listBases` gives it); the next
   * `loadBase({url})` downloads it again. A loaded base stays loaded.
   * @param {string} url
   */
  deleteBase(url) {
    return request(this.client, { type: 'deleteBase', url }, (m) => (m.type === 'baseDeleted' ? m : undefined));
  }

  /** Ends the worker (its Web Locks go with it); this object is unusable after. */
  terminate() {
    this.client.terminate();
  }

  /**
   * Sends a message that starts or loads a run; resolves with `runStarted.run`.
   * @param {any} message
   * @returns {Promise<import('./protocol.js').RunInfo>}
   */
  #run(message) {
    return request(this.client, message, (m) => (m.type === 'runStarted' ? m.run : undefined));
  }

  /**
   * Sends `type` and resolves with the first `status` whose state `until` accepts.
   * @param {'pause' | 'resume' | 'stop'} type
   * @param {(state: import('./protocol.js').RunState) => boolean} until
   * @returns {Promise<import('./protocol.js').StatusMessage>}
   */
  #command(type, until) {
    return request(this.client, { type }, (m) => (m.type === 'status' && until(m.state) ? m : undefined));
  }
}

/**
 * Sends `message` (unless null) and resolves with the first non-undefined `answer(m)` of
 * the messages that follow; rejects on an `error` or a crash first.
 * @template T
 * @param {WorkerClient} client
 * @param {import('./protocol.js').InMessage | null} message
 * @param {(m: any) => T | undefined} answer
 * @returns {Promise<T>}
 */
function request(client, message, answer) {
  return new Promise((resolve, reject) => {
    const off = client.on('*', (m) => {
      if (m.type === 'error' || m.type === 'crashed') {
        off();
        reject(failure(m));
        return;
      }
      const value = answer(m);
      if (value !== undefined) {
        off();
        resolve(value);
      }
    });
    if (message) client.send(message);
  });
}

/**
 * Every message from now on, in order, one `await next()` at a time; `close()` stops it.
 * @param {WorkerClient} client
 */
function queue(client) {
  /** @type {any[]} */
  const waiting = [];
  /** @type {((m: any) => void) | null} */
  let wake = null;
  const off = client.on('*', (m) => {
    if (wake) {
      wake(m);
      wake = null;
    } else {
      waiting.push(m);
    }
  });
  return {
    /** @returns {Promise<any>} */
    next: () => (waiting.length ? Promise.resolve(waiting.shift()) : new Promise((resolve) => (wake = resolve))),
    close: off,
  };
}

/** @param {{type: string, code?: string, message?: string, reason?: string}} m */
function failure(m) {
  return m.type === 'crashed'
    ? new TinyGPTError({ code: 'crashed', message: `The worker stopped: ${m.reason}` })
    : new TinyGPTError({ code: m.code || 'internal', message: m.message || 'unknown error' });
}

/**
 * The protocol's `{name, bytes}`, from text or bytes.
 * @param {Dataset} dataset
 * @returns {import('./protocol.js').DatasetInput}
 */
function datasetInput(dataset) {
  if ('text' in dataset) return { name: dataset.name, bytes: new TextEncoder().encode(dataset.text) };
  return dataset;
}

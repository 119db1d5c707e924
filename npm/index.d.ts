// tinygpt-web's client. The message types are the worker protocol's (protocol.d.ts,
// documented in the repository's worker/PROTOCOL.md).

import type {
  AdapterInfo,
  AdapterLoadedMessage,
  BackendChoice,
  BaseDeletedMessage,
  BaseDownloadMessage,
  BaseInfo,
  CachedBase,
  Capabilities,
  CheckpointInfo,
  CheckpointSavedMessage,
  DatasetInput,
  DeletedMessage,
  DoneMessage,
  ExportedMessage,
  HfFiles,
  InMessage,
  ModelConfig,
  OutMessage,
  PresetInfo,
  ProgressMessage,
  RunInfo,
  SampleMessage,
  SampleDoneMessage,
  StatusMessage,
  StoreChoice,
  TrainingConfig,
} from './protocol.js';

export type * from './protocol.js';

export interface ClientOptions {
  /** Which build trains: `auto` (WebGPU, else the best WebAssembly build) or one by name. */
  backend?: BackendChoice;
  /** Where checkpoints and adapters go: `auto` is OPFS, else IndexedDB. */
  storage?: StoreChoice;
  /** Developer mode: every op checked on the CPU kernels (several times slower). */
  checked?: boolean;
  /** The worker script; by default the package's `worker.js`. */
  workerUrl?: string | URL;
}

/** The worker died (a wasm trap such as running out of memory): a client-side event. */
export interface CrashedEvent {
  type: 'crashed';
  reason: string;
}

/** Training text: the protocol's `{name, bytes}`, or `{name, text}` (encoded as UTF-8). */
export type Dataset = DatasetInput | { name: string; text: string };

/** The message-level client: one protocol message at a time, answers by `type`. */
export class WorkerClient {
  constructor(options?: ClientOptions);
  readonly worker: Worker;
  /** Set once the worker died (`crashed` was emitted). */
  crashed: boolean;
  on<T extends (OutMessage | CrashedEvent)['type']>(
    type: T,
    handler: (message: Extract<OutMessage | CrashedEvent, { type: T }>) => void,
  ): () => void;
  on(type: '*', handler: (message: OutMessage | CrashedEvent) => void): () => void;
  send(message: InMessage, transfer?: Transferable[]): void;
  terminate(): void;
}

/** The worker answered `error` (`code` is its ErrorCode), or died (`code` is `crashed`). */
export class TinyGPTError extends Error {
  readonly code: string;
}

/** A sample as it streams: iterate it for the chunks, await `done` for the end. */
export interface SampleStream extends AsyncIterable<string> {
  readonly done: Promise<SampleDoneMessage>;
}

export interface TrainOptions {
  dataset: Dataset;
  /** `tiny`, `small`, `medium`, … (`TinyGPT.presets`); or give `modelConfig`. */
  preset?: string;
  modelConfig?: ModelConfig;
  /** training_config.json fields; missing ones take the defaults. */
  trainingConfig?: Partial<TrainingConfig>;
}

export interface TrainAdapterOptions {
  name: string;
  dataset: Dataset;
  /** `qv-r4` or `qvo-r8` (the default); or give rank, alpha and targets. */
  preset?: string;
  rank?: number;
  alpha?: number;
  targets?: string[];
  trainingConfig?: Partial<TrainingConfig>;
  /** The window it trains on, in tokens: 1 to the base's context (default 256, or the base's
   * context when shorter). Saved with the adapter, which continues on it. */
  context?: number;
}

export type BaseChoice =
  | 'builtin'
  | { checkpoint: string }
  | { bytes: Uint8Array; name?: string }
  /** A Hugging Face GPT-2 folder (config.json, model.safetensors, vocab.json, merges.txt) by
   * address, downloaded by the worker and kept in browser storage; `onProgress` sees each file's progress. */
  | { url: string; name?: string; onProgress?: (progress: BaseDownloadMessage) => void }
  /** The same folder's four files, as the user picked them. */
  | { files: HfFiles; name?: string };

/** A model in a Web Worker, with promises. Errors reject as `TinyGPTError`. */
export class TinyGPT {
  /** Starts the worker; resolves once it is ready. */
  static create(options?: ClientOptions): Promise<TinyGPT>;
  readonly client: WorkerClient;
  readonly capabilities: Capabilities;
  readonly presets: PresetInfo[];
  readonly defaultTrainingConfig: TrainingConfig;

  on: WorkerClient['on'];

  /** Starts a new run (replacing the current one); resolves once it trains. */
  train(options: TrainOptions): Promise<RunInfo>;
  /** The run's progress until it is done. */
  progress(): AsyncGenerator<ProgressMessage, void, void>;
  /** The next `done`: the run finished, stopped or stopped early. */
  finished(): Promise<DoneMessage>;
  pause(): Promise<StatusMessage>;
  resume(): Promise<StatusMessage>;
  stop(): Promise<StatusMessage>;

  /** Generates from the current model; `prompt` '', 200 tokens, temperature 0.8, top-k 40 by default. */
  sample(options?: Partial<Omit<SampleMessage, 'type'>>): SampleStream;

  save(): Promise<CheckpointSavedMessage>;
  /** Newest first. */
  listCheckpoints(): Promise<CheckpointInfo[]>;
  /** The checkpoint becomes the current run, paused; `dataset` is the text it trained on. */
  load(id: string, dataset: Dataset): Promise<RunInfo>;
  delete(id: string): Promise<DeletedMessage>;
  /** One `.safetensors` file of the checkpoint (the latest without an id). */
  export(id?: string): Promise<ExportedMessage>;

  /** LoRA: the frozen base adapters train on (the bundled one by default, or a GPT-2 folder by URL or files). */
  loadBase(base?: BaseChoice): Promise<BaseInfo>;
  /** LoRA: trains an adapter on the loaded base (a new run). */
  trainAdapter(options: TrainAdapterOptions): Promise<RunInfo>;
  listAdapters(): Promise<AdapterInfo[]>;
  /** LoRA: selects an adapter for `sample({adapter: true})`; with `dataset`, it becomes the paused run,
   * on the window it was trained on (a `context` other than that one rejects with `contextMismatch`). */
  loadAdapter(name: string, dataset?: Dataset, options?: { context?: number }): Promise<AdapterLoadedMessage>;
  /** LoRA: the GPT-2 folders `loadBase({url})` kept in browser storage, and downloads cut short while they were
   * being written (`complete: false`: never read, they only take space until deleted or downloaded again). */
  listBases(): Promise<CachedBase[]>;
  /** LoRA: deletes a kept GPT-2 folder, complete or cut short (the next `loadBase({url})` downloads it again; a
   * loaded base stays loaded). */
  deleteBase(url: string): Promise<BaseDeletedMessage>;

  /** Ends the worker. */
  terminate(): void;
}

// The worker protocol's types, generated from worker/src/protocol.rs (and the config files'
// types in run/) by `cargo xtask gen-types`: do not edit. `cargo test -p tinygpt-worker`
// fails when this file differs from a fresh generation. What the messages mean and when
// they come: worker/PROTOCOL.md.
//
// `init` may also carry `pendingMessages`, which worker.js takes before the message reaches
// the Rust side (so it has no field here): the page's pending-message counter, an
// Int32Array over a SharedArrayBuffer (so only on a cross-origin isolated page). The page
// adds 1 to element 0 before posting every message (`init` included) and the worker
// subtracts 1 as it begins handling each; an optional element 1 counts the waiting `pause`
// and `stop` messages the same way (worker/PROTOCOL.md, "Timing"; npm/worker-client.js).

// ---- page → worker ----------------------------------------------------------

/**
 * Each InMessage by name.
 */
export type InitMessage = Extract<InMessage, { "type": "init" }>;
export type TrainMessage = Extract<InMessage, { "type": "train" }>;
export type PauseMessage = Extract<InMessage, { "type": "pause" }>;
export type ResumeMessage = Extract<InMessage, { "type": "resume" }>;
export type StopMessage = Extract<InMessage, { "type": "stop" }>;
export type SampleMessage = Extract<InMessage, { "type": "sample" }>;
export type SaveMessage = Extract<InMessage, { "type": "save" }>;
export type ListCheckpointsMessage = Extract<InMessage, { "type": "listCheckpoints" }>;
export type LoadMessage = Extract<InMessage, { "type": "load" }>;
export type DeleteMessage = Extract<InMessage, { "type": "delete" }>;
export type ExportMessage = Extract<InMessage, { "type": "export" }>;
export type ImportMessage = Extract<InMessage, { "type": "import" }>;
export type LoadBaseMessage = Extract<InMessage, { "type": "loadBase" }>;
export type TrainAdapterMessage = Extract<InMessage, { "type": "trainAdapter" }>;
export type ListAdaptersMessage = Extract<InMessage, { "type": "listAdapters" }>;
export type LoadAdapterMessage = Extract<InMessage, { "type": "loadAdapter" }>;
export type ListBasesMessage = Extract<InMessage, { "type": "listBases" }>;
export type DeleteBaseMessage = Extract<InMessage, { "type": "deleteBase" }>;

/**
 * Page → worker.
 */
export type InMessage = {
  "type": "init",
  backend?: BackendChoice,
  storage?: StoreChoice,
  /**
   * Developer mode: every op's inputs and outputs are checked (`tinygpt-kernels-checked`),
   * and the first op that makes a NaN, an infinity or an out-of-range value is named in
   * the error. Checking reads every result back synchronously, which WebGPU in a tab
   * cannot do, so checked runs use this build's CPU kernels; several times slower.
   */
  checked?: boolean,
} | {
  "type": "train",
  modelConfig?: ModelConfig,
  preset?: string,
  trainingConfig?: Partial<TrainingConfig>,
  dataset: DatasetInput,
} | {
  "type": "pause"
} | {
  "type": "resume"
} | {
  "type": "stop"
} | {
  "type": "sample",
  prompt: string,
  maxTokens: number,
  temperature: number,
  topK: number,
  seed: number,
  /**
   * Nucleus sampling, above 0 and at most 1 (default 1: every token).
   */
  topP?: number,
  /**
   * The sample ends right after any of these (their UTF-8 bytes); none by default.
   */
  stop?: Array<string>,
  /**
   * LoRA: `false` samples the frozen base alone, `true` the base with the adapter
   * (the adapter run's, else the one `loadAdapter` selected); absent: the current run
   * as it trains (base + adapter for an adapter run), else the loaded base.
   */
  adapter?: boolean,
} | {
  "type": "save"
} | {
  "type": "listCheckpoints"
} | {
  "type": "load",
  id: string,
  dataset: DatasetInput,
} | {
  "type": "delete",
  id: string,
} | {
  "type": "export",
  id?: string,
} | {
  "type": "import",
  bytes: Uint8Array,
} | {
  "type": "loadBase",
  source: BaseSource,
  id?: string,
  bytes?: Uint8Array,
  name?: string,
  url?: string,
  files?: HfFiles,
} | {
  "type": "trainAdapter",
  name: string,
  preset?: string,
  rank?: number,
  alpha?: number,
  targets?: Array<string>,
  trainingConfig?: Partial<TrainingConfig>,
  context?: number,
  dataset: DatasetInput,
} | {
  "type": "listAdapters"
} | {
  "type": "loadAdapter",
  name: string,
  dataset?: DatasetInput,
  context?: number,
} | {
  "type": "listBases"
} | {
  "type": "deleteBase",
  url: string,
};

// ---- what page messages carry -----------------------------------------------

/**
 * A text to train on: a display name and its raw bytes (the byte-v1 tokens).
 */
export type DatasetInput = {
  name: string,
  bytes: Uint8Array,
};

/**
 * Where `loadBase` takes the base from.
 */
export type BaseSource = "builtin" | "checkpoint" | "upload" | "url" | "files";

/**
 * A Hugging Face GPT-2 folder's four files (`loadBase {source: "files"}`): the tokenizer
 * comes with the weights, so a base of another vocabulary reads and writes its own tokens.
 */
export type HfFiles = {
  configJson: Uint8Array,
  modelSafetensors: Uint8Array,
  vocabJson: Uint8Array,
  mergesTxt: Uint8Array,
};

/**
 * Which backend the page asks for. `auto`: WebGPU when an adapter exists and the
 * worker's self-test passes on it (`worker/src/self_test.rs`), else the SIMD + threads
 * build when the page is cross-origin isolated, else the SIMD build when the browser
 * validates SIMD (either one's relaxed-SIMD twin when the browser validates relaxed SIMD),
 * else scalar wasm. `webgpu` is the same as `auto` except that the page asked for the GPU
 * explicitly (it still falls back, saying why). The `wasm…` choices never touch the GPU.
 */
export type BackendChoice =
  | "auto"
  | "webgpu"
  | "wasm"
  | "wasm-simd"
  | "wasm-relaxed-simd"
  | "wasm-simd-threads"
  | "wasm-relaxed-simd-threads";

/**
 * Where checkpoints go; `auto` is OPFS, falling back to IndexedDB.
 */
export type StoreChoice = "auto" | "opfs" | "idb" | "memory";

// ---- worker → page ----------------------------------------------------------

/**
 * Each OutMessage by name.
 */
export type ReadyMessage = Extract<OutMessage, { "type": "ready" }>;
export type RunStartedMessage = Extract<OutMessage, { "type": "runStarted" }>;
export type ProgressMessage = Extract<OutMessage, { "type": "progress" }>;
export type StatusMessage = Extract<OutMessage, { "type": "status" }>;
export type SampleChunkMessage = Extract<OutMessage, { "type": "sampleChunk" }>;
export type SampleDoneMessage = Extract<OutMessage, { "type": "sampleDone" }>;
export type CheckpointSavedMessage = Extract<OutMessage, { "type": "checkpointSaved" }>;
export type CheckpointsMessage = Extract<OutMessage, { "type": "checkpoints" }>;
export type DeletedMessage = Extract<OutMessage, { "type": "deleted" }>;
export type ExportedMessage = Extract<OutMessage, { "type": "exported" }>;
export type DoneMessage = Extract<OutMessage, { "type": "done" }>;
export type BaseLoadedMessage = Extract<OutMessage, { "type": "baseLoaded" }>;
export type BaseDownloadMessage = Extract<OutMessage, { "type": "baseDownload" }>;
export type AdapterSavedMessage = Extract<OutMessage, { "type": "adapterSaved" }>;
export type AdaptersMessage = Extract<OutMessage, { "type": "adapters" }>;
export type AdapterLoadedMessage = Extract<OutMessage, { "type": "adapterLoaded" }>;
export type BasesMessage = Extract<OutMessage, { "type": "bases" }>;
export type BaseDeletedMessage = Extract<OutMessage, { "type": "baseDeleted" }>;
export type ErrorMessage = Extract<OutMessage, { "type": "error" }>;

/**
 * Worker → page.
 */
export type OutMessage = {
  "type": "ready",
  capabilities: Capabilities,
  presets: Array<PresetInfo>,
  defaultTrainingConfig: TrainingConfig,
} | {
  "type": "runStarted",
  run: RunInfo,
} | {
  "type": "progress"
} & TrainingProgress | {
  "type": "status",
  state: RunState,
  step: number,
} | {
  "type": "sampleChunk",
  text: string,
} | {
  "type": "sampleDone",
  text: string,
  tokensPerSecond: number,
  cancelled: boolean,
} | {
  "type": "checkpointSaved",
  id: string,
  step: number,
  bytes: number,
} | {
  "type": "checkpoints",
  items: Array<CheckpointInfo>,
  storage: StoreKind,
} | {
  "type": "deleted",
  id: string,
} | {
  "type": "exported",
  fileName: string,
  bytes: Uint8Array,
} | {
  "type": "done",
  reason: DoneReason,
  step: number,
} | {
  "type": "baseLoaded",
  base: BaseInfo,
} | {
  "type": "baseDownload",
  file: string,
  bytesDone: number,
  bytesTotal?: number,
  cached: boolean,
} | {
  "type": "adapterSaved",
  name: string,
  id: string,
  step: number,
  bytes: number,
} | {
  "type": "adapters",
  items: Array<AdapterInfo>,
  storage: StoreKind,
} | {
  "type": "adapterLoaded",
  name: string,
  step: number,
  resumable: boolean,
} | {
  "type": "bases",
  items: Array<CachedBase>,
  storage: StoreKind,
} | {
  "type": "baseDeleted",
  url: string,
} | {
  "type": "error",
  code: ErrorCode,
  message: string,
};

// ---- what worker messages carry ---------------------------------------------

/**
 * What the worker can do here; shown in the page's capability panel.
 */
export type Capabilities = {
  /**
   * The build running now.
   */
  backend: EngineKind,
  /**
   * Whether every op is checked (developer mode, `init`'s `checked`).
   */
  checked?: boolean,
  /**
   * Whether the browser validates wasm SIMD (so `wasm-simd` can be picked).
   */
  simd: boolean,
  /**
   * Whether the browser validates relaxed SIMD (so the relaxed builds can be picked).
   */
  relaxedSimd: boolean,
  crossOriginIsolated: boolean,
  storage: StoreKind,
  /**
   * Why the preferred storage could not be used, when it could not.
   */
  storageNote?: string,
  /**
   * `navigator.storage.estimate()`, bytes.
   */
  quotaBytes?: number,
  usageBytes?: number,
  /**
   * `navigator.hardwareConcurrency`.
   */
  hardwareThreads: number,
  /**
   * Threads the CPU kernels run on in the threads builds (absent in the
   * single-threaded builds).
   */
  threads?: number,
  /**
   * Why training does not run on WebGPU, in one line, when it does not.
   */
  backendNote?: string,
  /**
   * The WebGPU adapter the browser offers, when it offers one.
   */
  webgpu?: WebgpuInfo,
  /**
   * What a `precision: "mixed"` run's matrix products run on this WebGPU device and why
   * (absent when training is not on WebGPU: the CPU builds refuse mixed).
   */
  mixedMatmul?: MatmulInfo,
};

/**
 * The engine doing the math: a wasm build flavour or WebGPU. Messages name it `backend`
 * (`capabilities.backend`, `progress.backend`); the CLI's `BackendKind` is a different
 * thing, a compute backend.
 */
export type EngineKind =
  | "wasm"
  | "wasm-simd"
  | "wasm-relaxed-simd"
  | "wasm-simd-threads"
  | "wasm-relaxed-simd-threads"
  | "webgpu";

/**
 * The checkpoint store actually in use (messages name it `storage`).
 */
export type StoreKind = "opfs" | "indexeddb" | "memory" | "none";

/**
 * A WebGPU adapter as the capability panel shows it (`GPUAdapter.info`, `.limits`).
 */
export type WebgpuInfo = {
  /**
   * Vendor, architecture and description, as far as the browser tells.
   */
  adapter: string,
  /**
   * A software or otherwise limited adapter (`isFallbackAdapter`), e.g. SwiftShader.
   */
  fallbackAdapter: boolean,
  limits: WebgpuLimits,
  /**
   * The adapter's optional features (e.g. `shader-f16`, `subgroups`).
   */
  features: Array<string>,
};

/**
 * The adapter limits a training step is planned within (bytes, or counts); 0 where the
 * browser did not say.
 */
export type WebgpuLimits = {
  maxStorageBufferBindingSize: number,
  maxBufferSize: number,
  maxComputeWorkgroupSizeX: number,
  maxComputeInvocationsPerWorkgroup: number,
  maxComputeWorkgroupStorageSize: number,
  maxComputeWorkgroupsPerDimension: number,
  maxStorageBuffersPerShaderStage: number,
};

/**
 * The matrix-product path a precision runs (kernels-wgsl's `MatmulPrecision`).
 */
export type MatmulInfo = {
  /**
   * `f32` (f32 inputs; mixed's fallback), `shader-f16` (inputs rounded to f16, f32
   * sums) or `cooperative-matrix` (tensor-core tiles).
   */
  kernels: string,
  /**
   * Why, in one line for a person.
   */
  reason: string,
  /**
   * The start-up self-test's worst error of the f16 matmul against the f32 one (in its
   * rounding bound's units), when it ran.
   */
  selfTestWorst?: number,
};

/**
 * A preset as the page's picker shows it.
 */
export type PresetInfo = {
  name: string,
  modelConfig: ModelConfig,
  batchSize: number,
  params: number,
  /**
   * Rough bytes needed to train (see `tinygpt_model::training_memory_bytes`).
   */
  memoryBytes: number,
};

/**
 * The run the worker holds.
 */
export type RunInfo = {
  modelConfig: ModelConfig,
  trainingConfig: TrainingConfig,
  dataset: DatasetManifest,
  params: number,
  step: number,
  maxSteps: number,
  /**
   * Loss points so far (non-empty after `load`), for the chart.
   */
  history: Array<LossPoint>,
  /**
   * The checkpoint it was loaded from, if any.
   */
  checkpointId?: string,
  /**
   * LoRA: the adapter this run trains on its frozen base (absent: the whole model trains).
   */
  adapter?: RunAdapter,
};

/**
 * The adapter an adapter run trains.
 */
export type RunAdapter = {
  /**
   * Its name in the adapter store.
   */
  name: string,
  rank: number,
  alpha: number,
  targetModules: Array<string>,
  /**
   * Trained parameters (the base's are frozen).
   */
  params: number,
  baseName: string,
};

/**
 * Sent at least once a second while training, and when training ends.
 */
export type TrainingProgress = {
  /**
   * Steps completed.
   */
  step: number,
  maxSteps: number,
  /**
   * The latest step's batch loss.
   */
  trainLoss: number,
  /**
   * The latest validation loss, once one was measured.
   */
  valLoss?: number,
  /**
   * Training throughput since the previous progress message.
   */
  tokensPerSecond: number,
  backend: EngineKind,
  /**
   * Seconds to `max_steps` at the current speed.
   */
  etaSeconds: number,
  /**
   * Every step since the previous progress message (validation losses included).
   */
  points: Array<LossPoint>,
};

/**
 * One chart point: a step's training loss, and the validation loss where one was measured.
 */
export type LossPoint = {
  step: number,
  trainLoss: number,
  valLoss?: number,
};

export type RunState = "training" | "paused" | "finished" | "stopped";

export type DoneReason = "finished" | "stopped" | "earlyStopped";

/**
 * A saved checkpoint as the list shows it.
 */
export type CheckpointInfo = {
  id: string,
  step: number,
  maxSteps: number,
  /**
   * Total size of its files.
   */
  bytes: number,
  modelName: string,
  datasetName: string,
  datasetId: string,
  bestValLoss?: number,
  /**
   * Whether this is the run's best generation (the lowest validation loss at its own
   * step; the store keeps it however old it is): the one to sample from or export.
   */
  best: boolean,
};

/**
 * A base as the LoRA panel shows it.
 */
export type BaseInfo = {
  /**
   * What adapters call it (`base_model.name`).
   */
  name: string,
  source: BaseSource,
  modelConfig: ModelConfig,
  params: number,
  /**
   * SHA-256 of its weights.f32 bytes: an adapter loads only onto the base it names.
   */
  weightsSha256: string,
};

/**
 * A stored adapter as the LoRA panel lists it.
 */
export type AdapterInfo = {
  name: string,
  rank: number,
  alpha: number,
  targetModules: Array<string>,
  /**
   * The base it was trained on.
   */
  baseName: string,
  /**
   * Whether it was trained on the loaded base (same weights hash); false without a base.
   */
  fitsBase: boolean,
  /**
   * The window, in tokens, it trained on (and continues on); absent for an adapter saved
   * before windows were recorded.
   */
  context?: number,
};

/**
 * A GPT-2 folder kept in browser storage (`bases`).
 */
export type CachedBase = {
  /**
   * The folder's address, ending in `/` (as `loadBase` was given it, resolved).
   */
  url: string,
  /**
   * What it takes in storage: its files, marker and pointer, in bytes.
   */
  bytes: number,
  /**
   * When it was downloaded (for an incomplete one: when its write began), in
   * milliseconds since 1970 (`Date.now()`); absent for a copy kept before this was
   * recorded.
   */
  fetchedMs?: number,
  /**
   * False for a download cut short (the tab closed while it was being written): it is
   * never read, only takes space, until `deleteBase` of its URL or the next download of
   * that URL replaces it.
   */
  complete: boolean,
};

/**
 * What went wrong, for the page to pick words and actions (the message has the details).
 */
export type ErrorCode =
  | "badMessage"
  | "emptyDataset"
  | "datasetTooShort"
  | "invalidConfig"
  | "unknownPreset"
  | "noRun"
  | "runFinished"
  | "runLocked"
  | "storageUnavailable"
  | "quotaExceeded"
  | "checkpointNotFound"
  | "badCheckpoint"
  | "datasetMismatch"
  | "deleteRefused"
  | "diverged"
  | "deviceLost"
  | "noBase"
  | "baseMismatch"
  | "adapterNotFound"
  | "downloadFailed"
  | "contextMismatch"
  | "baseNotFound"
  | "internal";

// ---- the checkpoint files (snake_case, as in the files) ---------------------

/**
 * The GPT's shape. Serialized as `model_config.json`.
 */
export type ModelConfig = {
  /**
   * A name for the model, saved with it.
   */
  model_name: string,
  /**
   * Token ids the model reads and predicts: 256 for `byte-v1`; a BPE's vocabulary size
   * (at least its 256 one-byte tokens) otherwise.
   */
  vocab_size: number,
  /**
   * The tokenizer: `"byte-v1"` (one token per UTF-8 byte; the default, and left out of
   * the JSON, so byte models' files are what they always were) or a byte-level BPE's
   * `"bpe-<16 hex>"` (GPT-2's `vocab.json` + `merges.txt`, which live beside the model;
   * the hex is `tinygpt_model::tokenizer::Bpe::id`'s hash of them).
   */
  tokenizer?: string,
  /**
   * The longest sequence the model reads (positions).
   */
  context_length: number,
  /**
   * Transformer blocks.
   */
  n_layers: number,
  /**
   * Attention heads per block (`d_model` divisible by it).
   */
  n_heads: number,
  /**
   * Width of the residual stream.
   */
  d_model: number,
  /**
   * Width of the MLP's hidden layer.
   */
  d_mlp: number,
  /**
   * Dropout probability in training, `0 <= dropout < 1` (0: none; the presets' default).
   * Where and how masks are drawn: `tinygpt_model::dropout`.
   */
  dropout: number,
  /**
   * Always true: logits use the token embedding transposed.
   */
  tie_embeddings: boolean,
  /**
   * Always "float32".
   */
  dtype: string,
};

/**
 * How a run trains (`training_config.json`). Fields left out of the JSON take the
 * [`Default`] values; unknown fields are refused, so a typo is an error, not a default.
 */
export type TrainingConfig = {
  /**
   * Sequences per optimizer step.
   */
  batch_size: number,
  /**
   * Peak learning rate, reached at the end of the warm-up.
   */
  learning_rate: number,
  /**
   * AdamW's first-moment decay.
   */
  beta1: number,
  /**
   * AdamW's second-moment decay.
   */
  beta2: number,
  /**
   * AdamW's denominator epsilon.
   */
  eps: number,
  /**
   * Decoupled weight decay, applied to tensors of rank ≥ 2 only (never biases or LayerNorm).
   */
  weight_decay: number,
  /**
   * Global-norm gradient clipping threshold; 0 disables clipping.
   */
  grad_clip: number,
  /**
   * The learning-rate schedule's shape after the warm-up.
   */
  schedule: ScheduleKind,
  /**
   * Steps of linear warm-up from 0 to `learning_rate`.
   */
  warmup_steps: number,
  /**
   * The cosine schedule's floor (also the rate past `max_steps`).
   */
  min_lr: number,
  /**
   * The run's length in optimizer steps; the cosine decays over it.
   */
  max_steps: number,
  /**
   * Validation loss is measured every `eval_interval` steps (and at the last step).
   */
  eval_interval: number,
  /**
   * Batches averaged for one validation (or training) loss estimate.
   */
  eval_batches: number,
  /**
   * Seeds the weights' initialisation and the batch sampler.
   */
  seed: number,
  /**
   * A checkpoint is written every `checkpoint_interval` steps.
   */
  checkpoint_interval: number,
  /**
   * Stop training once this many evaluations in a row have not improved on the best
   * validation loss (`tinygpt_optim::early_stop`); `None` or 0 (the default) never stops early.
   */
  early_stop_patience?: number,
  /**
   * How the backend's matrix products round their inputs: `f32` (the default) or `mixed`
   * (f16 inputs, f32 accumulation; master weights, AdamW and every reduction stay f32, and
   * the trainer scales the loss dynamically, see `tinygpt_optim::GradScaler`). The
   * composition root builds its backend with it. Not written when `f32`, so every f32
   * config, checkpoint and run id stays byte for byte what it was; an unknown name is
   * refused as the file is read, naming the two.
   */
  precision?: Precision,
};

/**
 * Learning-rate schedule shape.
 */
export type ScheduleKind = "constant" | "cosine";

/**
 * How matrix products round their inputs (`training_config.json`'s `precision`).
 */
export type Precision = "f32" | "mixed";

/**
 * `dataset_manifest.json`: identifies the exact text a run trained on.
 */
export type DatasetManifest = {
  /**
   * Lower-case hex SHA-256 of the raw bytes.
   */
  dataset_id: string,
  /**
   * A name for the data (a file name).
   */
  name: string,
  /**
   * Size of the text in bytes.
   */
  raw_bytes: number,
  /**
   * Tokens after tokenization (bytes, for the byte tokenizer).
   */
  token_count: number,
  /**
   * The tokenizer's name: `byte-v1`, or a byte-level BPE's `bpe-<16 hex>` (the model
   * config's `tokenizer`).
   */
  tokenizer: string,
  /**
   * Fraction of tokens for training.
   */
  train_split: number,
  /**
   * Fraction of tokens for validation.
   */
  val_split: number,
  /**
   * Seed the dataset was made with.
   */
  seed: number,
};

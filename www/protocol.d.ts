// The worker protocol's types, written by hand for the page's code and editors.
// worker/tests/protocol_dts.rs checks every message, field and enum value here against
// the Rust types in worker/src/protocol.rs (both directions), so they cannot drift apart.
// Documentation: worker/PROTOCOL.md.

// ---- page → worker ---------------------------------------------------------------------

export type InMessage =
  | InitMessage
  | TrainMessage
  | PauseMessage
  | ResumeMessage
  | StopMessage
  | SampleMessage
  | SaveMessage
  | ListCheckpointsMessage
  | LoadMessage
  | DeleteMessage
  | ExportMessage
  | ImportMessage
  | LoadBaseMessage
  | TrainAdapterMessage
  | ListAdaptersMessage
  | LoadAdapterMessage;

/**
 * `init` may also carry `pendingMessages`, which `worker.js` takes and the wasm side's
 * messages never hold (so it is not declared here, where every field is a Rust message's):
 * the page's pending-message counter, an Int32Array over a SharedArrayBuffer (so only on a
 * cross-origin isolated page). The page adds 1 to element 0 before posting every message
 * (`init` included) and the worker subtracts 1 as it begins handling each; while it is above
 * zero the CPU engine gives the training step in progress up and answers, so with it steps
 * are taken whole (worker/PROTOCOL.md, "Timing"; www/lib/worker-client.js does this). An
 * optional element 1 counts the waiting `pause` and `stop` messages the same way: those cut
 * short even the step taken in full after three given up in a row.
 */
export interface InitMessage {
  type: 'init';
  backend?: BackendChoice;
  storage?: StorageChoice;
  /**
   * Developer mode: every op's inputs and outputs are checked and the first op that makes a
   * NaN, an infinity or an out-of-range value is named in the error. Runs on this build's
   * CPU kernels (WebGPU is not checked in a tab); several times slower.
   */
  checked?: boolean;
}

export interface TrainMessage {
  type: 'train';
  /** model_config.json; or give `preset`. */
  modelConfig?: ModelConfig;
  preset?: string;
  /** training_config.json fields; missing ones take the documented defaults. */
  trainingConfig?: Partial<TrainingConfig>;
  dataset: DatasetInput;
}

export interface PauseMessage {
  type: 'pause';
}

export interface ResumeMessage {
  type: 'resume';
}

export interface StopMessage {
  type: 'stop';
}

export interface SampleMessage {
  type: 'sample';
  prompt: string;
  /** 1 to 10,000 (more is refused with `invalidConfig`). */
  maxTokens: number;
  /** 0 is greedy. */
  temperature: number;
  /** 0 keeps every token. */
  topK: number;
  seed: number;
  /** Nucleus sampling: above 0, at most 1 (the default: every token). */
  topP?: number;
  /** The sample ends right after any of these (compared as UTF-8 bytes). */
  stop?: string[];
  /**
   * LoRA: false samples the frozen base alone, true the base with the adapter (the adapter
   * run's, else the one `loadAdapter` selected); absent: the current run as it trains.
   */
  adapter?: boolean;
}

export interface SaveMessage {
  type: 'save';
}

export interface ListCheckpointsMessage {
  type: 'listCheckpoints';
}

export interface LoadMessage {
  type: 'load';
  id: string;
  /** The text the checkpoint trained on (its dataset_id is checked). */
  dataset: DatasetInput;
}

export interface DeleteMessage {
  type: 'delete';
  id: string;
}

export interface ExportMessage {
  type: 'export';
  /** The latest checkpoint when absent. */
  id?: string;
}

export interface ImportMessage {
  type: 'import';
  bytes: Uint8Array;
}

/** LoRA: the frozen base adapters train on and sample with. */
export interface LoadBaseMessage {
  type: 'loadBase';
  source: BaseSource;
  /** The saved run's checkpoint id (`checkpoint`). */
  id?: string;
  /** The `.safetensors` file (`upload`; for `builtin` worker.js fetches the bundled file). */
  bytes?: Uint8Array;
  name?: string;
}

/** LoRA: trains a fresh adapter `name` on the loaded base; saves go to the adapter store. */
export interface TrainAdapterMessage {
  type: 'trainAdapter';
  name: string;
  /** `qv-r4` or `qvo-r8`; or give rank, alpha and targets. */
  preset?: string;
  rank?: number;
  alpha?: number;
  targets?: string[];
  /** training_config.json fields over the adapter defaults (lr 1e-3, no weight decay, …). */
  trainingConfig?: Partial<TrainingConfig>;
  dataset: DatasetInput;
}

export interface ListAdaptersMessage {
  type: 'listAdapters';
}

/** LoRA: with `dataset` the adapter becomes the (paused) run; without, it is selected for sampling. */
export interface LoadAdapterMessage {
  type: 'loadAdapter';
  name: string;
  dataset?: DatasetInput;
}

export interface DatasetInput {
  name: string;
  bytes: Uint8Array;
}

export type BaseSource = 'builtin' | 'checkpoint' | 'upload';
export type BackendChoice =
  | 'auto'
  | 'webgpu'
  | 'wasm'
  | 'wasm-simd'
  | 'wasm-relaxed-simd'
  | 'wasm-simd-threads'
  | 'wasm-relaxed-simd-threads';
export type StorageChoice = 'auto' | 'opfs' | 'idb' | 'memory';

// ---- worker → page ---------------------------------------------------------------------

export type OutMessage =
  | ReadyMessage
  | RunStartedMessage
  | ProgressMessage
  | StatusMessage
  | SampleChunkMessage
  | SampleDoneMessage
  | CheckpointSavedMessage
  | CheckpointsMessage
  | DeletedMessage
  | ExportedMessage
  | DoneMessage
  | BaseLoadedMessage
  | AdapterSavedMessage
  | AdaptersMessage
  | AdapterLoadedMessage
  | ErrorMessage;

export interface ReadyMessage {
  type: 'ready';
  capabilities: Capabilities;
  presets: PresetInfo[];
  defaultTrainingConfig: TrainingConfig;
}

export interface RunStartedMessage {
  type: 'runStarted';
  run: RunInfo;
}

/** TrainingProgress, tagged. */
export interface ProgressMessage extends TrainingProgress {
  type: 'progress';
}

export interface StatusMessage {
  type: 'status';
  state: RunState;
  step: number;
}

export interface SampleChunkMessage {
  type: 'sampleChunk';
  text: string;
}

export interface SampleDoneMessage {
  type: 'sampleDone';
  text: string;
  tokensPerSecond: number;
  /** A newer `sample` (or a new run) ended this one early; `text` is what it produced. */
  cancelled: boolean;
}

export interface CheckpointSavedMessage {
  type: 'checkpointSaved';
  id: string;
  step: number;
  bytes: number;
}

export interface CheckpointsMessage {
  type: 'checkpoints';
  items: CheckpointInfo[];
  storage: StorageKind;
}

export interface DeletedMessage {
  type: 'deleted';
  id: string;
}

export interface ExportedMessage {
  type: 'exported';
  fileName: string;
  bytes: Uint8Array;
}

export interface DoneMessage {
  type: 'done';
  reason: DoneReason;
  step: number;
}

export interface BaseLoadedMessage {
  type: 'baseLoaded';
  base: BaseInfo;
}

export interface AdapterSavedMessage {
  type: 'adapterSaved';
  name: string;
  id: string;
  step: number;
  bytes: number;
}

export interface AdaptersMessage {
  type: 'adapters';
  items: AdapterInfo[];
  storage: StorageKind;
}

/** The adapter is the current run when `resumable`, else selected for sampling. */
export interface AdapterLoadedMessage {
  type: 'adapterLoaded';
  name: string;
  step: number;
  resumable: boolean;
}

export interface BaseInfo {
  name: string;
  source: BaseSource;
  modelConfig: ModelConfig;
  params: number;
  weightsSha256: string;
}

export interface AdapterInfo {
  name: string;
  rank: number;
  alpha: number;
  targetModules: string[];
  baseName: string;
  /** Trained on the loaded base (same weights hash). */
  fitsBase: boolean;
}

export interface RunAdapter {
  name: string;
  rank: number;
  alpha: number;
  targetModules: string[];
  params: number;
  baseName: string;
}

export interface ErrorMessage {
  type: 'error';
  code: ErrorCode;
  message: string;
}

export interface Capabilities {
  backend: BackendKind;
  /** Every op is checked (developer mode, `init`'s `checked`). */
  checked?: boolean;
  simd: boolean;
  /** The browser validates relaxed SIMD (so the relaxed builds can run). */
  relaxedSimd: boolean;
  crossOriginIsolated: boolean;
  storage: StorageKind;
  storageNote?: string;
  quotaBytes?: number;
  usageBytes?: number;
  hardwareThreads: number;
  /** Threads the CPU kernels run on in the threads builds; absent otherwise. */
  threads?: number;
  /** Why training does not run on WebGPU, in one line, when it does not. */
  backendNote?: string;
  /** The WebGPU adapter the browser offers, when it offers one. */
  webgpu?: WebgpuInfo;
  /**
   * What a `precision: "mixed"` run's matrix products run on this WebGPU device and why
   * (absent when training is not on WebGPU: the WASM builds refuse mixed).
   */
  mixedMatmul?: MatmulInfo;
}

/** A precision's matrix-product path (kernels-wgsl's `MatmulPrecision`). */
export interface MatmulInfo {
  /** `f32` (mixed's fallback), `shader-f16` (f16 inputs, f32 sums) or `cooperative-matrix`. */
  kernels: string;
  /** Why, in one line. */
  reason: string;
  /** The start-up self-test's worst error of the f16 matmul against the f32 one, when it ran. */
  selfTestWorst?: number;
}

export interface WebgpuInfo {
  adapter: string;
  fallbackAdapter: boolean;
  limits: WebgpuLimits;
  features: string[];
}

export interface WebgpuLimits {
  maxStorageBufferBindingSize: number;
  maxBufferSize: number;
  maxComputeWorkgroupSizeX: number;
  maxComputeInvocationsPerWorkgroup: number;
  maxComputeWorkgroupStorageSize: number;
  maxComputeWorkgroupsPerDimension: number;
  maxStorageBuffersPerShaderStage: number;
}

export interface PresetInfo {
  name: string;
  modelConfig: ModelConfig;
  batchSize: number;
  params: number;
  memoryBytes: number;
}

export interface RunInfo {
  modelConfig: ModelConfig;
  trainingConfig: TrainingConfig;
  dataset: DatasetManifest;
  params: number;
  step: number;
  maxSteps: number;
  history: LossPoint[];
  checkpointId?: string;
  /** LoRA: the adapter this run trains on its frozen base. */
  adapter?: RunAdapter;
}

export interface TrainingProgress {
  step: number;
  maxSteps: number;
  trainLoss: number;
  valLoss?: number;
  tokensPerSecond: number;
  backend: BackendKind;
  etaSeconds: number;
  points: LossPoint[];
}

export interface LossPoint {
  step: number;
  trainLoss: number;
  valLoss?: number;
}

export interface CheckpointInfo {
  id: string;
  step: number;
  maxSteps: number;
  bytes: number;
  modelName: string;
  datasetName: string;
  datasetId: string;
  bestValLoss?: number;
  best: boolean;
}

export type BackendKind = 'wasm' | 'wasm-simd' | 'wasm-relaxed-simd' | 'wasm-simd-threads' | 'wasm-relaxed-simd-threads' | 'webgpu';
export type StorageKind = 'opfs' | 'indexeddb' | 'memory' | 'none';
export type RunState = 'training' | 'paused' | 'finished' | 'stopped';
export type DoneReason = 'finished' | 'stopped' | 'earlyStopped';
export type ErrorCode =
  | 'badMessage'
  | 'emptyDataset'
  | 'datasetTooShort'
  | 'invalidConfig'
  | 'unknownPreset'
  | 'noRun'
  | 'runFinished'
  | 'runLocked'
  | 'storageUnavailable'
  | 'quotaExceeded'
  | 'checkpointNotFound'
  | 'badCheckpoint'
  | 'datasetMismatch'
  | 'deleteRefused'
  | 'diverged'
  | 'deviceLost'
  | 'noBase'
  | 'baseMismatch'
  | 'adapterNotFound'
  | 'internal';

// ---- the checkpoint file formats (snake_case, as in the files) -------------------------

/** model_config.json */
export interface ModelConfig {
  model_name: string;
  vocab_size: number;
  context_length: number;
  n_layers: number;
  n_heads: number;
  d_model: number;
  d_mlp: number;
  dropout: number;
  tie_embeddings: boolean;
  dtype: string;
}

/** training_config.json */
export interface TrainingConfig {
  batch_size: number;
  learning_rate: number;
  beta1: number;
  beta2: number;
  eps: number;
  weight_decay: number;
  grad_clip: number;
  schedule: ScheduleKind;
  warmup_steps: number;
  min_lr: number;
  max_steps: number;
  eval_interval: number;
  eval_batches: number;
  seed: number;
  checkpoint_interval: number;
  /**
   * Matrix products: `f32` (the default, not written) or `mixed` (f16 inputs, f32 sums,
   * dynamic loss scaling; WebGPU only, refused with `invalidConfig` on the WASM builds).
   */
  precision?: Precision;
}

export type Precision = 'f32' | 'mixed';

export type ScheduleKind = 'constant' | 'cosine';

/** dataset_manifest.json */
export interface DatasetManifest {
  dataset_id: string;
  name: string;
  raw_bytes: number;
  token_count: number;
  tokenizer: string;
  train_split: number;
  val_split: number;
  seed: number;
}

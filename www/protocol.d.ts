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
  | ImportMessage;

export interface InitMessage {
  type: 'init';
  backend?: BackendChoice;
  storage?: StorageChoice;
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

export interface DatasetInput {
  name: string;
  bytes: Uint8Array;
}

export type BackendChoice = 'auto' | 'webgpu' | 'wasm' | 'wasm-simd' | 'wasm-simd-threads';
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

export interface ErrorMessage {
  type: 'error';
  code: ErrorCode;
  message: string;
}

export interface Capabilities {
  backend: BackendKind;
  simd: boolean;
  crossOriginIsolated: boolean;
  storage: StorageKind;
  storageNote?: string;
  quotaBytes?: number;
  usageBytes?: number;
  hardwareThreads: number;
  /** Threads the CPU kernels run on in the wasm-simd-threads build; absent otherwise. */
  threads?: number;
  /** Why training does not run on WebGPU, in one line, when it does not. */
  backendNote?: string;
  /** The WebGPU adapter the browser offers, when it offers one. */
  webgpu?: WebgpuInfo;
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

export type BackendKind = 'wasm' | 'wasm-simd' | 'wasm-simd-threads' | 'webgpu';
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
}

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

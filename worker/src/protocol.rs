//! The messages between the page and the worker (see `worker/PROTOCOL.md`). The page's
//! TypeScript declarations, `www/protocol.d.ts`, are generated from these types
//! (`protocol/typescript.rs`, `cargo xtask gen-types`; ts-rs, in test builds only).
//!
//! Every message is a JSON-like object with a `type` tag; field names are camelCase.
//! Two payloads keep the field names of the files they are: `modelConfig` is
//! `model_config.json` and `trainingConfig` is `training_config.json` (snake_case), so a
//! config copied out of a checkpoint can be sent as it is. Byte payloads are `Uint8Array`s
//! (serde_bytes); natively they serialize as arrays of numbers.
//!
//! Plain Rust with serde only, so the protocol is tested natively.

use serde::{Deserialize, Serialize};
use tinygpt_model::{DatasetManifest, ModelConfig};
use tinygpt_optim::TrainingConfig;

#[cfg(test)]
mod typescript;

/// Page → worker.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[cfg_attr(test, derive(ts_rs::TS))]
#[serde(tag = "type", rename_all = "camelCase", rename_all_fields = "camelCase")]
#[cfg_attr(test, ts(optional_fields))]
pub enum InMessage {
    /// First message: which build to load and where checkpoints go. Answered by `ready`.
    Init {
        #[serde(default)]
        #[cfg_attr(test, ts(as = "Option<_>", optional))]
        backend: BackendChoice,
        #[serde(default)]
        #[cfg_attr(test, ts(as = "Option<_>", optional))]
        storage: StoreChoice,
        /// Developer mode: every op's inputs and outputs are checked (`tinygpt-kernels-checked`),
        /// and the first op that makes a NaN, an infinity or an out-of-range value is named in
        /// the error. Checking reads every result back synchronously, which WebGPU in a tab
        /// cannot do, so checked runs use this build's CPU kernels; several times slower.
        #[serde(default)]
        #[cfg_attr(test, ts(as = "Option<_>", optional))]
        checked: bool,
    },
    /// Starts a fresh run (replacing any current one). Either `modelConfig` or `preset`;
    /// `trainingConfig` fields left out take their documented defaults, and `batch_size`
    /// left out takes the preset's.
    Train {
        #[serde(default)]
        model_config: Option<ModelConfig>,
        #[serde(default)]
        preset: Option<String>,
        #[serde(default)]
        #[cfg_attr(test, ts(type = "Partial<TrainingConfig>", optional))]
        training_config: Option<serde_json::Value>,
        dataset: DatasetInput,
    },
    Pause,
    Resume,
    Stop,
    /// Generates text with the current run's model (training or not); `max_tokens` is 1 to
    /// `session::MAX_SAMPLE_TOKENS`. A sample in progress is cancelled first.
    Sample {
        prompt: String,
        max_tokens: usize,
        temperature: f32,
        top_k: usize,
        seed: u64,
        /// Nucleus sampling, above 0 and at most 1 (default 1: every token).
        #[serde(default)]
        top_p: Option<f32>,
        /// The sample ends right after any of these (their UTF-8 bytes); none by default.
        #[serde(default)]
        stop: Option<Vec<String>>,
        /// LoRA: `false` samples the frozen base alone, `true` the base with the adapter
        /// (the adapter run's, else the one `loadAdapter` selected); absent: the current run
        /// as it trains (base + adapter for an adapter run), else the loaded base.
        #[serde(default)]
        adapter: Option<bool>,
    },
    /// Saves the current run now.
    Save,
    ListCheckpoints,
    /// Makes a saved checkpoint the current run, paused at its step; `resume` continues it.
    /// `dataset` must be the text it trained on (its dataset_id is checked).
    Load {
        id: String,
        dataset: DatasetInput,
    },
    Delete {
        id: String,
    },
    /// A checkpoint (the latest if `id` is absent) as one `.safetensors` file: `exported`.
    Export {
        #[serde(default)]
        id: Option<String>,
    },
    /// Stores an uploaded `.safetensors` checkpoint: `checkpointSaved`, then `checkpoints`.
    Import {
        #[serde(with = "serde_bytes")]
        #[cfg_attr(test, ts(type = "Uint8Array"))]
        bytes: Vec<u8>,
    },
    /// LoRA: makes a frozen base the one adapters train on and sample with: `baseLoaded`,
    /// then `adapters`. `builtin`: the bundled pretrained base (worker.js fetches its file
    /// into `bytes`); `checkpoint`: saved run `id` of the checkpoint store; `upload`: a
    /// `.safetensors` checkpoint in `bytes` (weights only or full), called `name`; `url`: a
    /// Hugging Face GPT-2 folder at `url` (its four files fetched with `baseDownload`
    /// progress, kept in browser storage so the next load reads them there); `files`: the
    /// same four files as the user picked them.
    LoadBase {
        source: BaseSource,
        #[serde(default)]
        id: Option<String>,
        #[serde(default, with = "serde_bytes")]
        #[cfg_attr(test, ts(type = "Uint8Array", optional))]
        bytes: Option<Vec<u8>>,
        #[serde(default)]
        name: Option<String>,
        #[serde(default)]
        url: Option<String>,
        #[serde(default)]
        files: Option<HfFiles>,
    },
    /// LoRA: trains a fresh adapter called `name` on the loaded base (frozen) over
    /// `dataset`, replacing the current run: `preset` (`qv-r4`, `qvo-r8`), or `rank`,
    /// `alpha` and `targets`; `trainingConfig` fields over the adapter defaults; `context`,
    /// the window it trains on in tokens (1 to the base's context; 256 or the base's context
    /// when shorter if left out, so a 1,024-token GPT-2 base fits a tab). Saves go to the
    /// adapter store under `name` (`adapterSaved`).
    TrainAdapter {
        name: String,
        #[serde(default)]
        preset: Option<String>,
        #[serde(default)]
        rank: Option<usize>,
        #[serde(default)]
        alpha: Option<f32>,
        #[serde(default)]
        targets: Option<Vec<String>>,
        #[serde(default)]
        #[cfg_attr(test, ts(type = "Partial<TrainingConfig>", optional))]
        training_config: Option<serde_json::Value>,
        #[serde(default)]
        context: Option<usize>,
        dataset: DatasetInput,
    },
    /// LoRA: the adapters stored in this browser: `adapters`.
    ListAdapters,
    /// LoRA: adapter `name` onto the loaded base (refused with `baseMismatch` when it was
    /// trained on another base). With `dataset` (the text it trained on) it becomes the
    /// current run, paused (`runStarted`, `status`; `resume` continues it), training on the
    /// window it was trained on (`context` left out; an adapter saved before windows were
    /// recorded takes `context`, else `trainAdapter`'s default); a `context` other than the
    /// recorded window is refused with `contextMismatch`. Without `dataset`, it is selected
    /// for sampling only. Answered first by `adapterLoaded`.
    LoadAdapter {
        name: String,
        #[serde(default)]
        dataset: Option<DatasetInput>,
        #[serde(default)]
        context: Option<usize>,
    },
    /// LoRA: the GPT-2 folders kept in this browser after a `loadBase {source: "url"}`:
    /// `bases`.
    ListBases,
    /// LoRA: drops the kept copy of the folder at `url` (as `bases` lists it): its pointer
    /// first, then its files, so the next `loadBase` of that URL downloads it again. A
    /// loaded base stays loaded (it is in memory). `baseDeleted`, then `bases`.
    DeleteBase {
        url: String,
    },
}

/// Where `loadBase` takes the base from.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(test, derive(ts_rs::TS))]
#[serde(rename_all = "lowercase")]
pub enum BaseSource {
    Builtin,
    Checkpoint,
    Upload,
    /// A Hugging Face GPT-2 folder fetched from a URL (and cached).
    Url,
    /// A Hugging Face GPT-2 folder's files, picked by the user.
    Files,
}

/// A Hugging Face GPT-2 folder's four files (`loadBase {source: "files"}`): the tokenizer
/// comes with the weights, so a base of another vocabulary reads and writes its own tokens.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[cfg_attr(test, derive(ts_rs::TS))]
#[serde(rename_all = "camelCase")]
pub struct HfFiles {
    #[serde(with = "serde_bytes")]
    #[cfg_attr(test, ts(type = "Uint8Array"))]
    pub config_json: Vec<u8>,
    #[serde(with = "serde_bytes")]
    #[cfg_attr(test, ts(type = "Uint8Array"))]
    pub model_safetensors: Vec<u8>,
    #[serde(with = "serde_bytes")]
    #[cfg_attr(test, ts(type = "Uint8Array"))]
    pub vocab_json: Vec<u8>,
    #[serde(with = "serde_bytes")]
    #[cfg_attr(test, ts(type = "Uint8Array"))]
    pub merges_txt: Vec<u8>,
}

/// A text to train on: a display name and its raw bytes (the byte-v1 tokens).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[cfg_attr(test, derive(ts_rs::TS))]
#[serde(rename_all = "camelCase")]
pub struct DatasetInput {
    pub name: String,
    #[serde(with = "serde_bytes")]
    #[cfg_attr(test, ts(type = "Uint8Array"))]
    pub bytes: Vec<u8>,
}

/// Which backend the page asks for. `auto`: WebGPU when an adapter exists and the
/// worker's self-test passes on it (`worker/src/self_test.rs`), else the SIMD + threads
/// build when the page is cross-origin isolated, else the SIMD build when the browser
/// validates SIMD (either one's relaxed-SIMD twin when the browser validates relaxed SIMD),
/// else scalar wasm. `webgpu` is the same as `auto` except that the page asked for the GPU
/// explicitly (it still falls back, saying why). The `wasm…` choices never touch the GPU.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(test, derive(ts_rs::TS))]
#[serde(rename_all = "kebab-case")]
pub enum BackendChoice {
    #[default]
    Auto,
    Webgpu,
    Wasm,
    WasmSimd,
    WasmRelaxedSimd,
    WasmSimdThreads,
    WasmRelaxedSimdThreads,
}

/// Where checkpoints go; `auto` is OPFS, falling back to IndexedDB.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(test, derive(ts_rs::TS))]
#[serde(rename_all = "lowercase")]
pub enum StoreChoice {
    #[default]
    Auto,
    Opfs,
    Idb,
    Memory,
}

/// The engine doing the math: a wasm build flavour or WebGPU. Messages name it `backend`
/// (`capabilities.backend`, `progress.backend`); the CLI's `BackendKind` is a different
/// thing, a compute backend.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(test, derive(ts_rs::TS))]
#[serde(rename_all = "kebab-case")]
pub enum EngineKind {
    Wasm,
    WasmSimd,
    /// `wasm-simd` built with relaxed SIMD: its multiply-add is `f32x4.relaxed_madd`
    /// (fused where the machine has FMA), so results agree with the other builds within
    /// the kernel variants' tolerance, not bit for bit.
    WasmRelaxedSimd,
    /// The SIMD kernels on a pool of Web Workers sharing the module's memory
    /// (wasm-bindgen-rayon); same results as `wasm-simd`, bit for bit.
    WasmSimdThreads,
    /// `wasm-relaxed-simd` on threads; same results as `wasm-relaxed-simd`, bit for bit.
    WasmRelaxedSimdThreads,
    Webgpu,
}

impl EngineKind {
    /// The protocol's name for it, as notes and errors say it (`wasm-simd`, `webgpu`, …).
    pub fn name(self) -> &'static str {
        match self {
            EngineKind::WasmSimd => "wasm-simd",
            EngineKind::WasmRelaxedSimd => "wasm-relaxed-simd",
            EngineKind::WasmSimdThreads => "wasm-simd-threads",
            EngineKind::WasmRelaxedSimdThreads => "wasm-relaxed-simd-threads",
            EngineKind::Wasm => "wasm",
            EngineKind::Webgpu => "webgpu",
        }
    }
}

/// The checkpoint store actually in use (messages name it `storage`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(test, derive(ts_rs::TS))]
#[serde(rename_all = "lowercase")]
pub enum StoreKind {
    Opfs,
    Indexeddb,
    Memory,
    /// Nothing could be opened (e.g. a private window): training works, saving does not.
    None,
}

/// Worker → page.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[cfg_attr(test, derive(ts_rs::TS))]
#[serde(tag = "type", rename_all = "camelCase", rename_all_fields = "camelCase")]
pub enum OutMessage {
    Ready {
        capabilities: Capabilities,
        presets: Vec<PresetInfo>,
        default_training_config: TrainingConfig,
    },
    /// A run began (after `train`) or was restored (after `load`, with its `history`).
    RunStarted {
        run: RunInfo,
    },
    Progress(TrainingProgress),
    /// The run's state changed (`pause`, `resume`, or training finished).
    Status {
        state: RunState,
        step: usize,
    },
    SampleChunk {
        text: String,
    },
    /// The end of a sample: all its text. `cancelled` when a newer `sample` (or a new run)
    /// ended it early; no more `sampleChunk`s of it follow.
    SampleDone {
        text: String,
        tokens_per_second: f64,
        cancelled: bool,
    },
    CheckpointSaved {
        id: String,
        step: usize,
        bytes: u64,
    },
    Checkpoints {
        items: Vec<CheckpointInfo>,
        storage: StoreKind,
    },
    Deleted {
        id: String,
    },
    Exported {
        file_name: String,
        #[serde(with = "serde_bytes")]
        #[cfg_attr(test, ts(type = "Uint8Array"))]
        bytes: Vec<u8>,
    },
    Done {
        reason: DoneReason,
        step: usize,
    },
    /// LoRA: the base adapters now train on and sample with.
    BaseLoaded {
        base: BaseInfo,
    },
    /// LoRA: how far `loadBase {source: "url"}` is with one of the folder's files: sent as
    /// each file starts, about every MiB, and when it is complete. `cached`: read from
    /// browser storage, not downloaded. `bytesTotal` is absent when the server did not say.
    BaseDownload {
        file: String,
        bytes_done: u64,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        #[cfg_attr(test, ts(optional))]
        bytes_total: Option<u64>,
        cached: bool,
    },
    /// LoRA: an adapter run was saved (periodically, at `stop`, at the end, or by `save`).
    AdapterSaved {
        name: String,
        id: String,
        step: usize,
        bytes: u64,
    },
    /// LoRA: the stored adapters, by name.
    Adapters {
        items: Vec<AdapterInfo>,
        storage: StoreKind,
    },
    /// LoRA: adapter `name` (at `step`) is on the base: the current run when `resumable`,
    /// else selected for sampling.
    AdapterLoaded {
        name: String,
        step: usize,
        resumable: bool,
    },
    /// LoRA: the GPT-2 folders kept in browser storage, by URL.
    Bases {
        items: Vec<CachedBase>,
        storage: StoreKind,
    },
    /// LoRA: the kept copy of the folder at `url` is gone; `bases` follows.
    BaseDeleted {
        url: String,
    },
    Error {
        code: ErrorCode,
        message: String,
    },
}

/// What the worker can do here; shown in the page's capability panel.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[cfg_attr(test, derive(ts_rs::TS))]
#[serde(rename_all = "camelCase")]
#[cfg_attr(test, ts(optional_fields))]
pub struct Capabilities {
    /// The build running now.
    pub backend: EngineKind,
    /// Whether every op is checked (developer mode, `init`'s `checked`).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    #[cfg_attr(test, ts(as = "Option<_>", optional))]
    pub checked: bool,
    /// Whether the browser validates wasm SIMD (so `wasm-simd` can be picked).
    pub simd: bool,
    /// Whether the browser validates relaxed SIMD (so the relaxed builds can be picked).
    pub relaxed_simd: bool,
    pub cross_origin_isolated: bool,
    pub storage: StoreKind,
    /// Why the preferred storage could not be used, when it could not.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub storage_note: Option<String>,
    /// `navigator.storage.estimate()`, bytes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub quota_bytes: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub usage_bytes: Option<f64>,
    /// `navigator.hardwareConcurrency`.
    pub hardware_threads: usize,
    /// Threads the CPU kernels run on in the threads builds (absent in the
    /// single-threaded builds).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub threads: Option<usize>,
    /// Why training does not run on WebGPU, in one line, when it does not.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub backend_note: Option<String>,
    /// The WebGPU adapter the browser offers, when it offers one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub webgpu: Option<WebgpuInfo>,
    /// What a `precision: "mixed"` run's matrix products run on this WebGPU device and why
    /// (absent when training is not on WebGPU: the CPU builds refuse mixed).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mixed_matmul: Option<MatmulInfo>,
}

/// The matrix-product path a precision runs (kernels-wgsl's `MatmulPrecision`).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[cfg_attr(test, derive(ts_rs::TS))]
#[serde(rename_all = "camelCase")]
#[cfg_attr(test, ts(optional_fields))]
pub struct MatmulInfo {
    /// `f32` (f32 inputs; mixed's fallback), `shader-f16` (inputs rounded to f16, f32
    /// sums) or `cooperative-matrix` (tensor-core tiles).
    pub kernels: String,
    /// Why, in one line for a person.
    pub reason: String,
    /// The start-up self-test's worst error of the f16 matmul against the f32 one (in its
    /// rounding bound's units), when it ran.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub self_test_worst: Option<f64>,
}

/// A WebGPU adapter as the capability panel shows it (`GPUAdapter.info`, `.limits`).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[cfg_attr(test, derive(ts_rs::TS))]
#[serde(rename_all = "camelCase")]
pub struct WebgpuInfo {
    /// Vendor, architecture and description, as far as the browser tells.
    pub adapter: String,
    /// A software or otherwise limited adapter (`isFallbackAdapter`), e.g. SwiftShader.
    pub fallback_adapter: bool,
    pub limits: WebgpuLimits,
    /// The adapter's optional features (e.g. `shader-f16`, `subgroups`).
    pub features: Vec<String>,
}

/// The adapter limits a training step is planned within (bytes, or counts); 0 where the
/// browser did not say.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[cfg_attr(test, derive(ts_rs::TS))]
#[serde(rename_all = "camelCase", default)]
pub struct WebgpuLimits {
    pub max_storage_buffer_binding_size: f64,
    pub max_buffer_size: f64,
    pub max_compute_workgroup_size_x: u32,
    pub max_compute_invocations_per_workgroup: u32,
    pub max_compute_workgroup_storage_size: u32,
    pub max_compute_workgroups_per_dimension: u32,
    pub max_storage_buffers_per_shader_stage: u32,
}

/// A preset as the page's picker shows it.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[cfg_attr(test, derive(ts_rs::TS))]
#[serde(rename_all = "camelCase")]
pub struct PresetInfo {
    pub name: String,
    pub model_config: ModelConfig,
    pub batch_size: usize,
    pub params: usize,
    /// Rough bytes needed to train (see `tinygpt_model::training_memory_bytes`).
    pub memory_bytes: u64,
}

/// The run the worker holds.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[cfg_attr(test, derive(ts_rs::TS))]
#[serde(rename_all = "camelCase")]
#[cfg_attr(test, ts(optional_fields))]
pub struct RunInfo {
    pub model_config: ModelConfig,
    pub training_config: TrainingConfig,
    pub dataset: DatasetManifest,
    pub params: usize,
    pub step: usize,
    pub max_steps: usize,
    /// Loss points so far (non-empty after `load`), for the chart.
    pub history: Vec<LossPoint>,
    /// The checkpoint it was loaded from, if any.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub checkpoint_id: Option<String>,
    /// LoRA: the adapter this run trains on its frozen base (absent: the whole model trains).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub adapter: Option<RunAdapter>,
}

/// A base as the LoRA panel shows it.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[cfg_attr(test, derive(ts_rs::TS))]
#[serde(rename_all = "camelCase")]
pub struct BaseInfo {
    /// What adapters call it (`base_model.name`).
    pub name: String,
    pub source: BaseSource,
    pub model_config: ModelConfig,
    pub params: usize,
    /// SHA-256 of its weights.f32 bytes: an adapter loads only onto the base it names.
    pub weights_sha256: String,
}

/// A stored adapter as the LoRA panel lists it.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[cfg_attr(test, derive(ts_rs::TS))]
#[serde(rename_all = "camelCase")]
pub struct AdapterInfo {
    pub name: String,
    pub rank: usize,
    pub alpha: f32,
    pub target_modules: Vec<String>,
    /// The base it was trained on.
    pub base_name: String,
    /// Whether it was trained on the loaded base (same weights hash); false without a base.
    pub fits_base: bool,
    /// The window, in tokens, it trained on (and continues on); absent for an adapter saved
    /// before windows were recorded.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(test, ts(optional))]
    pub context: Option<usize>,
}

/// A GPT-2 folder kept in browser storage (`bases`).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[cfg_attr(test, derive(ts_rs::TS))]
#[serde(rename_all = "camelCase")]
pub struct CachedBase {
    /// The folder's address, ending in `/` (as `loadBase` was given it, resolved).
    pub url: String,
    /// What it takes in storage: its files, marker and pointer, in bytes.
    pub bytes: u64,
    /// When it was downloaded (for an incomplete one: when its write began), in
    /// milliseconds since 1970 (`Date.now()`); absent for a copy kept before this was
    /// recorded.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(test, ts(optional))]
    pub fetched_ms: Option<f64>,
    /// False for a download cut short (the tab closed while it was being written): it is
    /// never read, only takes space, until `deleteBase` of its URL or the next download of
    /// that URL replaces it.
    pub complete: bool,
}

/// The adapter an adapter run trains.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[cfg_attr(test, derive(ts_rs::TS))]
#[serde(rename_all = "camelCase")]
pub struct RunAdapter {
    /// Its name in the adapter store.
    pub name: String,
    pub rank: usize,
    pub alpha: f32,
    pub target_modules: Vec<String>,
    /// Trained parameters (the base's are frozen).
    pub params: usize,
    pub base_name: String,
}

/// One chart point: a step's training loss, and the validation loss where one was measured.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[cfg_attr(test, derive(ts_rs::TS))]
#[serde(rename_all = "camelCase")]
#[cfg_attr(test, ts(optional_fields))]
pub struct LossPoint {
    pub step: usize,
    pub train_loss: f32,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub val_loss: Option<f32>,
}

/// Sent at least once a second while training, and when training ends.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[cfg_attr(test, derive(ts_rs::TS))]
#[serde(rename_all = "camelCase")]
#[cfg_attr(test, ts(optional_fields))]
pub struct TrainingProgress {
    /// Steps completed.
    pub step: usize,
    pub max_steps: usize,
    /// The latest step's batch loss.
    pub train_loss: f32,
    /// The latest validation loss, once one was measured.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub val_loss: Option<f32>,
    /// Training throughput since the previous progress message.
    pub tokens_per_second: f64,
    pub backend: EngineKind,
    /// Seconds to `max_steps` at the current speed.
    pub eta_seconds: f64,
    /// Every step since the previous progress message (validation losses included).
    pub points: Vec<LossPoint>,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(test, derive(ts_rs::TS))]
#[serde(rename_all = "camelCase")]
pub enum RunState {
    Training,
    Paused,
    Finished,
    Stopped,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(test, derive(ts_rs::TS))]
#[serde(rename_all = "camelCase")]
pub enum DoneReason {
    /// `max_steps` reached.
    Finished,
    /// `stop` received.
    Stopped,
    /// `early_stop_patience` evaluations in a row did not improve on the best validation loss.
    EarlyStopped,
}

/// A saved checkpoint as the list shows it.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[cfg_attr(test, derive(ts_rs::TS))]
#[serde(rename_all = "camelCase")]
#[cfg_attr(test, ts(optional_fields))]
pub struct CheckpointInfo {
    pub id: String,
    pub step: usize,
    pub max_steps: usize,
    /// Total size of its files.
    pub bytes: u64,
    pub model_name: String,
    pub dataset_name: String,
    pub dataset_id: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub best_val_loss: Option<f32>,
    /// Whether this is the run's best generation (the lowest validation loss at its own
    /// step; the store keeps it however old it is): the one to sample from or export.
    #[serde(default)]
    pub best: bool,
}

/// What went wrong, for the page to pick words and actions (the message has the details).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(test, derive(ts_rs::TS))]
#[serde(rename_all = "camelCase")]
pub enum ErrorCode {
    /// A message the worker cannot read.
    BadMessage,
    EmptyDataset,
    DatasetTooShort,
    InvalidConfig,
    UnknownPreset,
    /// The command needs a run (train or load first).
    NoRun,
    /// `resume` of a run that already trained all its `max_steps`.
    RunFinished,
    /// Another tab of this site is training the same run (a Web Lock per run).
    RunLocked,
    /// A checkpoint was asked for while the storage could not be opened.
    StorageUnavailable,
    QuotaExceeded,
    CheckpointNotFound,
    /// A checkpoint or upload that cannot be read (corrupt, foreign, wrong version).
    BadCheckpoint,
    /// The checkpoint trained on other text than the one given.
    DatasetMismatch,
    /// The store refused a deletion (the latest checkpoint cannot be deleted).
    DeleteRefused,
    /// The loss became NaN or infinite.
    Diverged,
    /// The GPU failed mid-run (device lost, out of GPU memory): training stopped, the last
    /// checkpoint is intact, and the page offers to continue on WebAssembly from it.
    DeviceLost,
    /// LoRA: an adapter message needs a base (`loadBase` first).
    NoBase,
    /// LoRA: the adapter was trained on another base (its weights hash differs).
    BaseMismatch,
    /// LoRA: no adapter of that name is stored, or `sample {adapter: true}` without one.
    AdapterNotFound,
    /// LoRA: a base's file could not be fetched (an HTTP error such as 404, a network
    /// error, or a download cut short).
    DownloadFailed,
    /// LoRA: `loadAdapter` asked a saved adapter to continue on another window (`context`)
    /// than the one it was trained on.
    ContextMismatch,
    /// LoRA: `deleteBase` of a URL whose folder is not kept in this browser.
    BaseNotFound,
    Internal,
}

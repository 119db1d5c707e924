//! Every way a save or a load can fail. Messages name the file (a path, or `opfs:…` /
//! `indexeddb:…` / `memory:…` in other stores) and say what to do about it.

use thiserror::Error;
use tinygpt_run::{ConfigError, InvalidTrainingConfig};

/// Every way a save or a load fails; the message names the file and what to do.
#[derive(Debug, Error)]
// The variants' fields are the values their messages show.
#[allow(missing_docs)]
pub enum CkptError {
    /// A file of the generation is missing.
    #[error("{file}: missing; the checkpoint is incomplete")]
    MissingFile { file: String },

    /// A file has the wrong size.
    #[error(
        "{file}: {actual} bytes, but {expected} were expected ({}); the file is corrupt or belongs to another checkpoint",
        if actual < expected { "truncated" } else { "oversized" }
    )]
    SizeMismatch { file: String, expected: u64, actual: u64 },

    /// A file's checksum does not match trainer_state.json.
    #[error("{file}: sha256 is {actual}, but trainer_state.json records {expected}; the file is corrupt")]
    ChecksumMismatch { file: String, expected: String, actual: String },

    /// A JSON file does not parse or lacks a field.
    #[error("{file}: invalid: {reason}")]
    InvalidJson { file: String, reason: String },

    /// A newer (or unknown) format version.
    #[error("{file}: format_version {found} is not supported; this build reads version {supported}")]
    UnsupportedVersion { file: String, found: u64, supported: u32 },

    /// The tensor table does not fit the model config.
    #[error("{file}: the tensor table disagrees with the model config: {reason}")]
    TensorTableMismatch { file: String, reason: String },

    /// The saved model config is invalid.
    #[error("{file}: {source}")]
    InvalidConfig { file: String, source: ConfigError },

    /// The saved training config is invalid.
    #[error("{file}: {source}")]
    InvalidTrainingConfig { file: String, source: InvalidTrainingConfig },

    /// A file is larger than this reader accepts.
    #[error("{file}: {bytes} bytes is more than the {limit} this reader accepts")]
    TooLarge { file: String, bytes: u64, limit: u64 },

    /// A saved value is NaN or infinite.
    #[error(
        "{file}: {tensor}[{index}] is {value}; the saved model diverged (NaN or infinity) and cannot be used; an earlier generation may still be intact"
    )]
    NonFinite { file: String, tensor: String, index: usize, value: f32 },

    /// The folder holds files that are not a checkpoint's.
    #[error("{location} holds files that are not part of a TinyGPT {what} ({found}); nothing was written or removed: use an empty folder or one that holds a {what}")]
    ForeignFiles { location: String, what: &'static str, found: String },

    /// An adapter does not belong to the base it is used with.
    #[error("{reason}")]
    AdapterBase { reason: String },

    /// A store would be placed where it breaks another (inside a run, a generation, or
    /// over the base an adapter adapts).
    #[error("{path}: {reason}")]
    Placement { path: String, reason: String },

    /// Another process holds the run folder's lock.
    #[error(
        "{location} is in use by another training process{}; wait for it to finish or stop it, or train into another --out folder",
        match pid { Some(pid) => format!(" (pid {pid})"), None => String::new() }
    )]
    Locked { location: String, pid: Option<u32> },

    /// The path is a file.
    #[error("{path} is a file, not a checkpoint directory")]
    NotADirectory { path: String },

    /// No checkpoint is saved here.
    #[error("{location}: no checkpoint found ({detail})")]
    NoCheckpoint { location: String, detail: String },

    /// No generation has this id.
    #[error("{location}: there is no generation {id:?}; {saved}")]
    GenerationNotFound { location: String, id: String, saved: String },

    /// The latest generation cannot be deleted.
    #[error("{id} is the latest checkpoint and cannot be deleted; save a newer one first")]
    DeleteLatest { id: String },

    /// The checkpoint to save is inconsistent.
    #[error("the checkpoint to save is inconsistent: {reason}")]
    InvalidCheckpoint { reason: String },

    /// A write read back differently.
    #[error("{file}: reading back what was just written gave different bytes; the storage is unreliable ({reason})")]
    WriteVerification { file: String, reason: String },

    /// The store is full.
    #[error(
        "storage quota exceeded: the checkpoint needs {needed_bytes} bytes; the previous checkpoint is untouched. Free space (delete old runs) or allow persistent storage"
    )]
    QuotaExceeded { needed_bytes: u64 },

    /// A store is not available in this environment.
    #[error("{what} is not available here: {reason}")]
    Unavailable { what: String, reason: String },

    /// A file-system operation failed.
    #[error("{file}: {source}")]
    Io { file: String, source: std::io::Error },

    /// A store operation failed.
    #[error("{file}: {reason}")]
    Store { file: String, reason: String },

    /// Saved, but pruning old generations failed.
    #[error("saved {saved}, but removing old generations failed: {reason}")]
    Prune { saved: String, reason: String },

    /// Saved, but moving best.json failed.
    #[error("saved {saved} (latest.json names it), but moving best.json failed: {reason}; the previous best is kept")]
    BestPointer { saved: String, reason: String },

    /// The checkpoint's model config differs from the requested one.
    #[error("{file}: model config field {field} is {checkpoint} in the checkpoint but {requested} was requested; the weights do not fit this model")]
    ConfigMismatch { file: String, field: &'static str, checkpoint: String, requested: String },

    /// The checkpoint was trained on other data.
    #[error("the checkpoint was trained on data with {field} = {checkpoint}, this run has {current}; pass --force to continue training on different data")]
    DatasetMismatch { field: &'static str, checkpoint: String, current: String },

    /// The checkpoint uses another tokenizer.
    #[error("the checkpoint's tokenizer is {checkpoint:?} but this run's data uses {current:?}; the model cannot read it")]
    TokenizerMismatch { checkpoint: String, current: String },

    /// Not a TinyGPT safetensors file.
    #[error("{file}: not a TinyGPT safetensors file: {reason}")]
    Safetensors { file: String, reason: String },

    /// Not an importable nanoGPT file.
    #[error("not a nanoGPT file TinyGPT can import: {reason}")]
    NanoGpt { reason: String },
    /// Not an importable Hugging Face GPT-2 folder.
    #[error("not a Hugging Face GPT-2 model TinyGPT can import: {reason}")]
    HfGpt2 { reason: String },
    /// Not a PEFT LoRA adapter for GPT-2 that TinyGPT can read (`file` is
    /// `adapter_config.json` or `adapter_model.safetensors`).
    #[error("{file}: not a PEFT LoRA adapter for GPT-2 that TinyGPT can read: {reason}")]
    Peft { file: &'static str, reason: String },
}

/// A result whose error is [`CkptError`].
pub type Result<T, E = CkptError> = std::result::Result<T, E>;

//! Crash-safe, resumable TinyGPT checkpoints.
//!
//! A [`Checkpoint`] (configs, progress, loss history, weights and AdamW moments) is
//! written in the documented layout (see `layout.rs`: JSON files, little-endian `.f32`
//! buffers, SHA-256 of every file in trainer_state.json) as one *generation* of a
//! [`CheckpointStore`]; a pointer (latest.json) moves to it only after it was written and
//! read back, so a crash at any point leaves the previous checkpoint loadable (see
//! `generations.rs`). Stores are anything implementing [`BlobStore`]: a local directory
//! ([`DirStore`], with the synchronous [`CheckpointDir`] facade), memory
//! ([`MemoryStore`]), and in the browser OPFS and IndexedDB (`web`).
//!
//! ```no_run
//! # #[cfg(not(target_arch = "wasm32"))]
//! # fn demo(ckpt: &tinygpt_ckpt::Checkpoint) -> Result<(), tinygpt_ckpt::CkptError> {
//! let dir = tinygpt_ckpt::CheckpointDir::open("runs/shakespeare")?;
//! let report = dir.save(ckpt)?;
//! let back = dir.load_latest()?;
//! assert_eq!(back.progress.step, report.step);
//! # Ok(()) }
//! ```
//!
//! Loading trusts nothing: sizes are checked against the config before anything large is
//! read, every file against its checksum, NaN/Inf weights are refused unless
//! [`LoadOptions::allow_non_finite`] is set, and every error is a [`CkptError`] naming the
//! file. [`check_compatible`] guards a resume; [`export_safetensors`] and
//! [`import_safetensors`] move a checkpoint as one file;
//! [`export_nanogpt`] and [`import_nanogpt`] in nanoGPT's names and layout (for PyTorch);
//! [`import_hf_gpt2`] reads a Hugging Face GPT-2 folder; [`export_peft`] and [`import_peft`]
//! move a LoRA adapter in PEFT's folder for GPT-2.
#![warn(missing_docs)]

mod adapter;
mod adapter_safetensors;
mod adapter_shelf;
#[cfg(not(target_arch = "wasm32"))]
mod blocking;
mod checkpoint;
mod compat;
mod decode;
mod encode;
mod error;
mod fallback;
/// Fault injection for tests of stores and of code that saves (feature `test-util`).
#[cfg(feature = "test-util")]
mod fault;
mod generations;
mod hf_gpt2;
mod json;
mod layout;
#[cfg(not(target_arch = "wasm32"))]
mod lock;
mod memory;
mod nanogpt;
#[cfg(not(target_arch = "wasm32"))]
mod native;
mod peft;
#[cfg(not(target_arch = "wasm32"))]
mod placement;
mod safetensors;
mod store;
#[cfg(target_arch = "wasm32")]
pub mod web;

pub use adapter::{
    base_weights_sha256, AdapterCheckpoint, AdapterConfigFile, AdapterFiles, AdapterStore, BaseRef,
    ADAPTER_CONFIG, ADAPTER_M, ADAPTER_V, ADAPTER_WEIGHTS, BUILTIN_BASE_NAME,
};
pub use adapter_safetensors::{export_adapter_safetensors, import_adapter_safetensors, PEFT_PREFIX};
pub use adapter_shelf::{check_name as check_adapter_name, AdapterShelf, Shelved, MAX_ADAPTER_NAME};
#[cfg(not(target_arch = "wasm32"))]
pub use blocking::CheckpointDir;
pub use checkpoint::Checkpoint;
pub use compat::check_compatible;
pub use decode::LoadOptions;
pub use encode::EncodedFile;
pub use error::{CkptError, Result};
pub use fallback::opfs_else_indexed_db;
#[cfg(feature = "test-util")]
pub use fault::{Fault, FaultyStore};
pub use generations::{
    is_generation_name, val_loss_at_step, BestInfo, BestLoad, CheckpointStore, GenerationInfo,
    GenerationKind, Generations, PointerProblems, RunFiles, SaveReport, ADAPTERS_GROUP, BEST_POINTER,
    POINTER, TOKENIZER_GROUP,
};
pub use hf_gpt2::{config_from_hf_json, import_hf_gpt2, HfTokenizer};
pub use layout::{
    ADAM_M, ADAM_V, DATASET_MANIFEST, FILES, FORMAT_VERSION, LOSS_HISTORY, MODEL_CONFIG, TRAINER_STATE,
    TRAINING_CONFIG, WEIGHTS,
};
#[cfg(not(target_arch = "wasm32"))]
pub use lock::{WriterLock, LOCK_FILE};
pub use memory::MemoryStore;
pub use nanogpt::{
    export_nanogpt, import_nanogpt, nanogpt_tensors, to_nanogpt_layout, ImportDefaults, NanoTensor,
    NanoValues, LM_HEAD,
};
#[cfg(not(target_arch = "wasm32"))]
pub use native::{create_dir_durably, write_file_atomically, DirStore};
pub use peft::{
    export_peft, import_peft, PeftFiles, PeftImport, PEFT_CONFIG, PEFT_WEIGHTS, TINYGPT_METADATA,
};
#[cfg(not(target_arch = "wasm32"))]
pub use placement::{check_placement, StoreRole};
pub use safetensors::{export_safetensors, import_safetensors, read_safetensors, MAX_HEADER_BYTES};
pub use store::{BlobInfo, BlobStore};

/// The README's examples, compiled and run as doctests (natively: the example uses the
/// native `CheckpointDir` and the CPU backend).
#[cfg(all(doctest, not(target_arch = "wasm32")))]
#[doc = include_str!("../README.md")]
pub struct ReadmeDoctests;

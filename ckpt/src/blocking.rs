//! A synchronous facade for native callers (the CLI): a [`CheckpointStore`] over a
//! directory, driven by `tinygpt_tensor::block_on` (native storage futures are ready
//! at once).

use std::path::{Path, PathBuf};

use tinygpt_tensor::block_on;

use crate::checkpoint::Checkpoint;
use crate::decode::LoadOptions;
use crate::error::Result;
use crate::generations::{BestLoad, CheckpointStore, GenerationInfo, PointerProblems, SaveReport};
use crate::native::DirStore;

/// Checkpoint generations in a local directory.
#[derive(Debug)]
pub struct CheckpointDir {
    store: CheckpointStore<DirStore>,
}

impl CheckpointDir {
    /// Fails if `path` is a file; the directory is created by the first save.
    pub fn open(path: impl Into<PathBuf>) -> Result<Self> {
        Ok(CheckpointDir { store: CheckpointStore::new(DirStore::open(path)?) })
    }

    /// See [`CheckpointStore::with_keep`].
    pub fn with_keep(self, keep: usize) -> Self {
        CheckpointDir { store: self.store.with_keep(keep) }
    }

    /// These load options (e.g. verification) for every load.
    pub fn with_load_options(self, options: LoadOptions) -> Self {
        CheckpointDir { store: self.store.with_load_options(options) }
    }

    /// The run folder.
    pub fn path(&self) -> &Path {
        self.store.storage().root()
    }

    /// Saves `ckpt` as a new generation and makes it the latest.
    pub fn save(&self, ckpt: &Checkpoint) -> Result<SaveReport> {
        block_on(self.store.save(ckpt))
    }

    /// The latest generation.
    pub fn load_latest(&self) -> Result<Checkpoint> {
        block_on(self.store.load_latest())
    }

    /// The generation `id` (or `best`).
    pub fn load(&self, id: &str) -> Result<Checkpoint> {
        block_on(self.store.load(id))
    }

    /// See [`CheckpointStore::load_best`].
    pub fn load_best(&self) -> Result<BestLoad> {
        block_on(self.store.load_best())
    }

    /// Every generation, oldest first.
    pub fn list(&self) -> Result<Vec<GenerationInfo>> {
        block_on(self.store.list())
    }

    /// See [`CheckpointStore::pointer_problems`].
    pub fn pointer_problems(&self) -> Result<PointerProblems> {
        block_on(self.store.pointer_problems())
    }

    /// See [`CheckpointStore::check_writable`].
    pub fn check_writable(&self) -> Result<()> {
        block_on(self.store.check_writable())
    }

    /// Removes generation `id` (never the latest).
    pub fn delete(&self, id: &str) -> Result<()> {
        block_on(self.store.delete(id))
    }

    /// The async store underneath.
    pub fn store(&self) -> &CheckpointStore<DirStore> {
        &self.store
    }
}

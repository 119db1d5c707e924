//! Checkpoint coordination: a run ↔ a [`Checkpoint`], and the store operations the
//! protocol offers (save, list, load, delete, export, import) with errors in plain words.
//!
//! The store is one root of generations (`tinygpt_ckpt::CheckpointStore`): every save of
//! any run adds a generation and the oldest beyond [`KEEP`] are pruned, so "the last run"
//! is the latest generation. Snapshots are taken synchronously (CPU readbacks complete at
//! once) so the web layer never holds the session across an `await`.

use tinygpt_ckpt::{
    check_compatible, export_safetensors, import_safetensors, Checkpoint, CheckpointStore, CkptError,
    LoadOptions, Storage, DATASET_MANIFEST, MODEL_CONFIG, TRAINER_STATE, TRAINING_CONFIG,
};
use tinygpt_model::{Dataset, DatasetManifest, ModelConfig};
use tinygpt_optim::{Trainer, TrainingConfig};
use tinygpt_tensor::{block_on, Backend};

use crate::error::WorkerError;
use crate::protocol::{CheckpointInfo, DatasetInput, ErrorCode, StorageKind};
use crate::session::Run;

/// Generations kept in the browser store.
pub const KEEP: usize = 4;

/// The run's full state (weights, moments, progress, history).
pub fn snapshot<B: Backend>(run: &Run<B>) -> Result<Checkpoint, WorkerError> {
    Ok(block_on(Checkpoint::capture(&run.trainer))?)
}

/// A trainer continuing `ckpt` on `dataset`, which must be the text it trained on (a
/// weights-only checkpoint resumes with zero moments).
pub fn restore<B: Backend>(
    backend: &B,
    ckpt: Checkpoint,
    dataset: &DatasetInput,
) -> Result<Trainer<B>, WorkerError> {
    let ctx = ckpt.model_config.context_length;
    let data = Dataset::new(&dataset.name, &dataset.bytes, ctx, ckpt.dataset.seed)?;
    check_compatible(&ckpt, &ckpt.model_config, data.manifest()).map_err(|e| match e {
        CkptError::DatasetMismatch { .. } | CkptError::TokenizerMismatch { .. } => WorkerError::new(
            ErrorCode::DatasetMismatch,
            format!(
                "This checkpoint was trained on \"{}\" ({} bytes, dataset_id {}…), not on \"{}\". Load that text to resume it.",
                ckpt.dataset.name,
                ckpt.dataset.raw_bytes,
                &ckpt.dataset.dataset_id[..12.min(ckpt.dataset.dataset_id.len())],
                dataset.name
            ),
        ),
        other => ckpt_error(other),
    })?;
    Ok(ckpt.resume(backend, data)?)
}

/// The browser's checkpoint store and what kind it is.
#[derive(Debug)]
pub struct Checkpoints<S> {
    store: CheckpointStore<S>,
    kind: StorageKind,
}

impl<S: Storage> Checkpoints<S> {
    pub fn new(storage: S, kind: StorageKind) -> Self {
        Checkpoints { store: CheckpointStore::new(storage).with_keep(KEEP), kind }
    }

    pub fn kind(&self) -> StorageKind {
        self.kind
    }

    /// Saves `ckpt` as the newest generation: `(id, bytes)`.
    pub async fn save(&self, ckpt: &Checkpoint) -> Result<(String, u64), WorkerError> {
        let report = self.store.save(ckpt).await.map_err(ckpt_error)?;
        Ok((report.id, report.bytes))
    }

    /// Every readable generation, newest first, with what the list shows of it.
    pub async fn list(&self) -> Result<Vec<CheckpointInfo>, WorkerError> {
        let mut items = Vec::new();
        for g in self.store.list().await.map_err(ckpt_error)?.into_iter().rev() {
            let storage = self.store.storage();
            let json = |name: &'static str| {
                let key = format!("{}/{name}", g.id);
                async move { storage.get(&key).await.ok().flatten() }
            };
            let (Some(model), Some(data), Some(training)) =
                (json(MODEL_CONFIG).await, json(DATASET_MANIFEST).await, json(TRAINING_CONFIG).await)
            else {
                continue;
            };
            let model: Option<ModelConfig> = serde_json::from_slice(&model).ok();
            let data: Option<DatasetManifest> = serde_json::from_slice(&data).ok();
            let training: Option<TrainingConfig> = serde_json::from_slice(&training).ok();
            let state: Option<serde_json::Value> =
                json(TRAINER_STATE).await.and_then(|b| serde_json::from_slice(&b).ok());
            let (Some(model), Some(data), Some(training)) = (model, data, training) else { continue };
            items.push(CheckpointInfo {
                id: g.id,
                step: g.step,
                max_steps: training.max_steps,
                bytes: g.bytes,
                model_name: model.model_name,
                dataset_name: data.name,
                dataset_id: data.dataset_id,
                best_val_loss: state.and_then(|s| s["best_val_loss"].as_f64()).map(|v| v as f32),
            });
        }
        Ok(items)
    }

    pub async fn load(&self, id: &str) -> Result<Checkpoint, WorkerError> {
        self.check_exists(id).await?;
        self.store.load(id).await.map_err(ckpt_error)
    }

    /// A missing generation reads as missing files; say plainly that there is none.
    async fn check_exists(&self, id: &str) -> Result<(), WorkerError> {
        if self.store.list().await.map_err(ckpt_error)?.iter().any(|g| g.id == id) {
            Ok(())
        } else {
            Err(WorkerError::new(
                ErrorCode::CheckpointNotFound,
                format!("There is no checkpoint {id} any more."),
            ))
        }
    }

    pub async fn delete(&self, id: &str) -> Result<(), WorkerError> {
        self.store.delete(id).await.map_err(ckpt_error)
    }

    /// A generation (the latest when `id` is `None`) as a `.safetensors` file with the
    /// AdamW moments, so an upload resumes exactly: `(file name, bytes)`.
    pub async fn export(&self, id: Option<&str>) -> Result<(String, Vec<u8>), WorkerError> {
        let ckpt = match id {
            Some(id) => self.load(id).await?,
            None => self.store.load_latest().await.map_err(ckpt_error)?,
        };
        let bytes = export_safetensors(&ckpt, true).map_err(ckpt_error)?;
        let name = format!("{}-step{}.safetensors", ckpt.model_config.model_name, ckpt.progress.step);
        Ok((name, bytes))
    }

    /// Stores an uploaded `.safetensors` checkpoint as the newest generation.
    pub async fn import(&self, bytes: &[u8]) -> Result<(String, usize, u64), WorkerError> {
        let ckpt = import_safetensors(bytes, &LoadOptions::default()).map_err(|e| {
            WorkerError::new(ErrorCode::BadCheckpoint, format!("That file is not a TinyGPT checkpoint: {e}"))
        })?;
        let (id, bytes) = self.save(&ckpt).await?;
        Ok((id, ckpt.progress.step, bytes))
    }
}

/// A store error in words for the page.
pub fn ckpt_error(e: CkptError) -> WorkerError {
    let (code, message) = match &e {
        CkptError::QuotaExceeded { needed_bytes } => (
            ErrorCode::QuotaExceeded,
            format!(
                "The browser's storage is full: this checkpoint needs {:.1} MB. The previous checkpoint is kept. \
                 Delete old checkpoints or allow this site more storage.",
                *needed_bytes as f64 / 1e6
            ),
        ),
        CkptError::Unavailable { .. } | CkptError::Storage { .. } | CkptError::Io { .. } => (
            ErrorCode::StorageUnavailable,
            format!(
                "Browser storage is not available ({e}). This happens in private windows. Training still works, \
                 but checkpoints cannot be saved."
            ),
        ),
        CkptError::NoCheckpoint { .. } | CkptError::GenerationNotFound { .. } => {
            (ErrorCode::CheckpointNotFound, format!("No such checkpoint: {e}"))
        }
        CkptError::DatasetMismatch { .. } | CkptError::TokenizerMismatch { .. } => {
            (ErrorCode::DatasetMismatch, e.to_string())
        }
        CkptError::DeleteLatest { .. } => (ErrorCode::DeleteRefused, e.to_string()),
        _ => (ErrorCode::BadCheckpoint, format!("The checkpoint cannot be used: {e}")),
    };
    WorkerError::new(code, message)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn store_errors_become_codes_and_plain_words() {
        let quota = ckpt_error(CkptError::QuotaExceeded { needed_bytes: 3_400_000 });
        assert_eq!(quota.code, ErrorCode::QuotaExceeded);
        assert!(
            quota.message.contains("3.4 MB") && quota.message.contains("previous checkpoint is kept"),
            "{}",
            quota.message
        );

        let private =
            ckpt_error(CkptError::Unavailable { what: "OPFS".into(), reason: "SecurityError".into() });
        assert_eq!(private.code, ErrorCode::StorageUnavailable);
        assert!(
            private.message.contains("private windows") && private.message.contains("SecurityError"),
            "{}",
            private.message
        );

        let corrupt = ckpt_error(CkptError::ChecksumMismatch {
            file: "gen-000001/weights.f32".into(),
            expected: "a".into(),
            actual: "b".into(),
        });
        assert_eq!(corrupt.code, ErrorCode::BadCheckpoint);
        assert!(corrupt.message.contains("weights.f32"), "{}", corrupt.message);
    }
}

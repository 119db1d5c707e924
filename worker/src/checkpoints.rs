//! Checkpoint coordination: a run ↔ a [`Checkpoint`], and the store operations the
//! protocol offers (save, list, load, delete, export, import) with errors in plain words.
//!
//! The store is one root of generations (`tinygpt_ckpt::CheckpointStore`): every save of
//! any run adds a generation and the oldest beyond [`KEEP`] are pruned, so "the last run"
//! is the latest generation. A snapshot awaits its readbacks (a WebGPU readback completes
//! only when the event loop turns).

use tinygpt_ckpt::{
    check_compatible, export_safetensors, import_safetensors, BlobStore, Checkpoint, CheckpointStore,
    CkptError, LoadOptions, DATASET_MANIFEST, MODEL_CONFIG, TRAINER_STATE, TRAINING_CONFIG,
};
use tinygpt_model::{Dataset, DatasetManifest, ModelConfig};
use tinygpt_optim::{ResumeState, Trainer, TrainingConfig};
use tinygpt_tensor::Backend;

use crate::error::WorkerError;
use crate::fits::check_fits_wasm32;
use crate::protocol::{CheckpointInfo, DatasetInput, ErrorCode, StoreKind};

/// Generations kept in the browser store.
pub const KEEP: usize = 4;

/// The run's full state (weights, moments, progress, history).
pub async fn snapshot<B: Backend>(trainer: &Trainer<B>) -> Result<Checkpoint, WorkerError> {
    Ok(trainer.checkpoint().await?)
}

/// A trainer continuing `ckpt` on `dataset`, which must be the text it trained on (a
/// weights-only checkpoint resumes with zero moments).
pub fn restore<B: Backend>(
    backend: &B,
    ckpt: Checkpoint,
    dataset: &DatasetInput,
) -> Result<Trainer<B>, WorkerError> {
    check_fits_wasm32(&ckpt.model_config, ckpt.training_config.batch_size)?;
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
    let (trained, config, state) = ResumeState::from_checkpoint(backend, ckpt);
    Ok(Trainer::new(trained, config, data, Some(state))?)
}

/// The browser's checkpoint store and what kind it is.
#[derive(Debug)]
pub struct Checkpoints<S> {
    store: CheckpointStore<S>,
    kind: StoreKind,
}

impl<S: BlobStore> Checkpoints<S> {
    pub fn new(storage: S, kind: StoreKind) -> Self {
        Checkpoints { store: CheckpointStore::new(storage).with_keep(KEEP), kind }
    }

    pub fn kind(&self) -> StoreKind {
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
                best: g.best,
            });
        }
        Ok(items)
    }

    /// Loads generation `id`, refusing first (from its two small config files, before its
    /// weights are read) a model the worker's wasm32 memory cannot train.
    pub async fn load(&self, id: &str) -> Result<Checkpoint, WorkerError> {
        self.check_exists(id).await?;
        self.check_fits(id).await?;
        self.store.load(id).await.map_err(ckpt_error)
    }

    /// [`check_fits_wasm32`] on the generation's configs, as written (the load verifies
    /// them; unreadable ones are left to it to report).
    async fn check_fits(&self, id: &str) -> Result<(), WorkerError> {
        let storage = self.store.storage();
        let model = storage.get(&format!("{id}/{MODEL_CONFIG}")).await.ok().flatten();
        let training = storage.get(&format!("{id}/{TRAINING_CONFIG}")).await.ok().flatten();
        let model: Option<ModelConfig> = model.and_then(|b| serde_json::from_slice(&b).ok());
        let training: Option<TrainingConfig> = training.and_then(|b| serde_json::from_slice(&b).ok());
        match (model, training) {
            (Some(m), Some(t)) => check_fits_wasm32(&m, t.batch_size),
            _ => Ok(()),
        }
    }

    /// A missing generation reads as missing files; say plainly that there is none.
    async fn check_exists(&self, id: &str) -> Result<(), WorkerError> {
        if self.store.list().await.map_err(ckpt_error)?.iter().any(|g| g.id == id) {
            Ok(())
        } else {
            Err(WorkerError::new(
                ErrorCode::CheckpointNotFound,
                format!(
                    "There is no checkpoint {id} any more: it was deleted (perhaps in another tab) or newer \
                     saves replaced it. Pick one from the checkpoint list."
                ),
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
        check_upload_fits(bytes)?;
        let ckpt = import_safetensors(bytes, &LoadOptions::default()).map_err(|e| {
            WorkerError::new(ErrorCode::BadCheckpoint, format!(
                "That file is not a TinyGPT checkpoint ({e}). Choose a .safetensors file written by `tinygpt export` or this page."
            ))
        })?;
        let (id, bytes) = self.save(&ckpt).await?;
        Ok((id, ckpt.progress.step, bytes))
    }
}

/// Refuses, from the header of an uploaded `.safetensors` file (its `__metadata__` holds
/// model_config.json and training_config.json), a model the worker's wasm32 memory cannot
/// train, before any tensor is decoded. What cannot be read here is left to the import.
fn check_upload_fits(bytes: &[u8]) -> Result<(), WorkerError> {
    let Some(len) = bytes.get(..8).map(|b| u64::from_le_bytes(b.try_into().expect("8 bytes"))) else {
        return Ok(());
    };
    let Some(header) = usize::try_from(len).ok().and_then(|n| bytes.get(8..8usize.checked_add(n)?)) else {
        return Ok(());
    };
    let Ok(header) = serde_json::from_slice::<serde_json::Value>(header) else { return Ok(()) };
    let metadata = &header["__metadata__"];
    let parse = |name: &str| metadata[name].as_str().map(serde_json::from_str::<serde_json::Value>);
    let model =
        parse(MODEL_CONFIG).and_then(Result::ok).and_then(|v| serde_json::from_value::<ModelConfig>(v).ok());
    let training = parse(TRAINING_CONFIG)
        .and_then(Result::ok)
        .and_then(|v| serde_json::from_value::<TrainingConfig>(v).ok());
    match (model, training) {
        (Some(m), Some(t)) => check_fits_wasm32(&m, t.batch_size),
        _ => Ok(()),
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
        CkptError::Unavailable { .. } => (
            ErrorCode::StorageUnavailable,
            format!(
                "Browser storage is not available ({e}). This happens in private windows. Training still works, \
                 but checkpoints cannot be saved."
            ),
        ),
        // A failed read or write of a store that opened: not a private window, and nothing saved is lost.
        CkptError::Store { .. } | CkptError::Io { .. } => (
            ErrorCode::StorageUnavailable,
            format!(
                "Browser storage failed ({e}). Checkpoints saved before are kept; try again, and if it \
                 keeps failing, reload the page."
            ),
        ),
        CkptError::NoCheckpoint { .. } | CkptError::GenerationNotFound { .. } => {
            (ErrorCode::CheckpointNotFound, format!("No such checkpoint: {e}"))
        }
        CkptError::DatasetMismatch { .. } | CkptError::TokenizerMismatch { .. } => {
            (ErrorCode::DatasetMismatch, e.to_string())
        }
        CkptError::DeleteLatest { id } => (
            ErrorCode::DeleteRefused,
            format!(
                "Checkpoint {id} is the newest one, the run \"Resume last run\" continues, so it cannot be \
                 deleted. Delete an older checkpoint instead, or save a newer one first (train on, or press \
                 \"Save now\") and then delete this one."
            ),
        ),
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

        let failed = ckpt_error(CkptError::Store {
            file: "opfs:tinygpt-checkpoints/gen-000002/trainer_state.json".into(),
            reason: "NoModificationAllowedError: busy".into(),
        });
        assert_eq!(failed.code, ErrorCode::StorageUnavailable);
        assert!(
            !failed.message.contains("private windows")
                && failed.message.contains("trainer_state.json")
                && failed.message.contains("saved before are kept"),
            "{}",
            failed.message
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

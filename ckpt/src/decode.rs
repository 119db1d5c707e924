//! The layout's files → a [`Checkpoint`], trusting nothing.
//!
//! Order matters for memory: trainer_state.json and model_config.json are read first
//! (each capped), the config is validated, and only then are the `.f32` files — whose
//! sizes must equal what the config implies, checked against the store's listing before
//! reading — loaded. No allocation is sized by a number inside a file.

use std::collections::BTreeMap;

use serde::Deserialize;
use tinygpt_run::{DatasetManifest, LossPoint, ModelConfig, TensorSpec, TrainingConfig};

use crate::checkpoint::{check_finite, Checkpoint};
use crate::error::{CkptError, Result};
use crate::json::from_json;
use crate::layout::{
    check_model_config, sha256_hex, FileEntry, ModelConfigFile, TrainerState, ADAM_M, ADAM_V,
    DATASET_MANIFEST, FILES, FORMAT_VERSION, LOSS_HISTORY, MAX_JSON_BYTES, MAX_LOSS_HISTORY_BYTES,
    MODEL_CONFIG, TRAINER_STATE, TRAINING_CONFIG, WEIGHTS,
};
use crate::store::BlobStore;

/// How strict a load is.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct LoadOptions {
    /// Load weights and moments that hold NaN or infinity instead of refusing them
    /// (to inspect a diverged run).
    pub allow_non_finite: bool,
}

/// Reads the checkpoint whose files are the blobs `prefix + name` of `storage`.
pub(crate) async fn read_checkpoint<S: BlobStore>(
    storage: &S,
    prefix: &str,
    options: &LoadOptions,
) -> Result<Checkpoint> {
    let files = Files::list(storage, prefix, &FILES, "checkpoint").await?;

    let state_bytes = files.read(TRAINER_STATE, MAX_JSON_BYTES, None).await?;
    let state = parse_trainer_state(&files.location(TRAINER_STATE), &state_bytes)?;
    let moments = check_files_table(&files.location(TRAINER_STATE), &state)?;

    let config_bytes = files.read(MODEL_CONFIG, MAX_JSON_BYTES, Some(&state)).await?;
    let (model_config, specs) = parse_model_config(&files.location(MODEL_CONFIG), &config_bytes)?;
    let f32_bytes = model_config.param_count() as u64 * 4;
    let f32_files: &[&str] = if moments { &[WEIGHTS, ADAM_M, ADAM_V] } else { &[WEIGHTS] };
    // Every size is checked before the first large read.
    for &name in f32_files {
        let listed = files.listed(name)?;
        if listed != f32_bytes {
            return Err(CkptError::SizeMismatch {
                file: files.location(name),
                expected: f32_bytes,
                actual: listed,
            });
        }
    }
    let training_config: TrainingConfig = from_json(
        &files.location(TRAINING_CONFIG),
        &files.read(TRAINING_CONFIG, MAX_JSON_BYTES, Some(&state)).await?,
    )?;
    training_config.validate().map_err(|source| CkptError::InvalidTrainingConfig {
        file: files.location(TRAINING_CONFIG),
        source,
    })?;
    let dataset: DatasetManifest = from_json(
        &files.location(DATASET_MANIFEST),
        &files.read(DATASET_MANIFEST, MAX_JSON_BYTES, Some(&state)).await?,
    )?;
    let loss_history: Vec<LossPoint> = from_json(
        &files.location(LOSS_HISTORY),
        &files.read(LOSS_HISTORY, MAX_LOSS_HISTORY_BYTES, Some(&state)).await?,
    )?;

    let mut tensors = Vec::with_capacity(3);
    for &name in f32_files {
        let bytes = files.read(name, f32_bytes, Some(&state)).await?;
        let values = f32_from_le_bytes(&bytes);
        if !options.allow_non_finite {
            check_finite(&files.location(name), &values, &specs)?;
        }
        tensors.push(values);
    }
    let mut tensors = tensors.into_iter();
    let weights = tensors.next().expect("weights.f32 is always read");
    let (adam_m, adam_v) = (tensors.next().unwrap_or_default(), tensors.next().unwrap_or_default());

    let progress = state.progress();
    Ok(Checkpoint { model_config, training_config, dataset, progress, loss_history, weights, adam_m, adam_v })
}

/// The files of one generation: the store's listing, read with size and checksum checks.
pub(crate) struct Files<'a, S> {
    storage: &'a S,
    prefix: &'a str,
    listing: BTreeMap<String, u64>,
}

impl<'a, S: BlobStore> Files<'a, S> {
    /// The blobs under `prefix`, refused when one is not among `allowed` (the files of a
    /// `what` generation).
    pub(crate) async fn list(
        storage: &'a S,
        prefix: &'a str,
        allowed: &[&str],
        what: &'static str,
    ) -> Result<Files<'a, S>> {
        let mut listing = BTreeMap::new();
        for blob in storage.list(prefix).await? {
            let name = &blob.key[prefix.len()..];
            if !allowed.contains(&name) {
                return Err(CkptError::ForeignFiles {
                    location: storage.location(prefix),
                    what,
                    found: format!("{name:?} is not a file of a {what} generation"),
                });
            }
            listing.insert(name.to_string(), blob.bytes);
        }
        Ok(Files { storage, prefix, listing })
    }

    pub(crate) fn location(&self, name: &str) -> String {
        self.storage.location(&format!("{}{name}", self.prefix))
    }

    /// Whether the listing has `name`.
    pub(crate) fn has(&self, name: &str) -> bool {
        self.listing.contains_key(name)
    }

    pub(crate) fn listed(&self, name: &str) -> Result<u64> {
        self.listing.get(name).copied().ok_or_else(|| CkptError::MissingFile { file: self.location(name) })
    }

    /// Reads `name` if it is at most `cap` bytes; with `state`, also checks the size and
    /// checksum trainer_state.json records for it.
    pub(crate) async fn read(&self, name: &str, cap: u64, state: Option<&TrainerState>) -> Result<Vec<u8>> {
        let file = self.location(name);
        let listed = self.listed(name)?;
        let entry: Option<&FileEntry> = match state {
            Some(state) => {
                Some(state.files.get(name).ok_or_else(|| CkptError::MissingFile { file: file.clone() })?)
            }
            None => None,
        };
        if let Some(entry) = entry.filter(|e| e.bytes != listed) {
            return Err(CkptError::SizeMismatch { file, expected: entry.bytes, actual: listed });
        }
        if listed > cap {
            return Err(CkptError::TooLarge { file, bytes: listed, limit: cap });
        }
        let key = format!("{}{name}", self.prefix);
        let bytes =
            self.storage.get(&key).await?.ok_or_else(|| CkptError::MissingFile { file: file.clone() })?;
        if bytes.len() as u64 != listed {
            return Err(CkptError::SizeMismatch { file, expected: listed, actual: bytes.len() as u64 });
        }
        if let Some(entry) = entry {
            let actual = sha256_hex(&bytes);
            if actual != entry.sha256 {
                return Err(CkptError::ChecksumMismatch { file, expected: entry.sha256.clone(), actual });
            }
        }
        Ok(bytes)
    }
}

/// trainer_state.json, its version checked before anything else is trusted.
pub(crate) fn parse_trainer_state(file: &str, bytes: &[u8]) -> Result<TrainerState> {
    #[derive(Deserialize)]
    struct Versioned {
        format_version: Option<serde_json::Value>,
    }
    let versioned: Versioned = from_json(file, bytes)?;
    let found = match versioned.format_version {
        None => {
            return Err(CkptError::InvalidJson {
                file: file.to_string(),
                reason: "no format_version field".into(),
            })
        }
        Some(v) => v.as_u64().ok_or_else(|| CkptError::InvalidJson {
            file: file.to_string(),
            reason: format!("format_version is {v}, not a version number"),
        })?,
    };
    if found != u64::from(FORMAT_VERSION) {
        return Err(CkptError::UnsupportedVersion {
            file: file.to_string(),
            found,
            supported: FORMAT_VERSION,
        });
    }
    let state: TrainerState = from_json(file, bytes)?;
    if let Some(expected) = &state.state_sha256 {
        let actual = state.checksum();
        if &actual != expected {
            return Err(CkptError::ChecksumMismatch {
                file: file.to_string(),
                expected: expected.clone(),
                actual,
            });
        }
    }
    Ok(state)
}

/// Checks trainer_state.json lists exactly the layout's files; returns whether the
/// moments are among them.
fn check_files_table(file: &str, state: &TrainerState) -> Result<bool> {
    let invalid = |reason: String| Err(CkptError::InvalidJson { file: file.to_string(), reason });
    for name in state.files.keys() {
        if !FILES.contains(&name.as_str()) || name == TRAINER_STATE {
            return invalid(format!("files lists {name:?}, which is not a file of the layout"));
        }
    }
    for name in [MODEL_CONFIG, TRAINING_CONFIG, DATASET_MANIFEST, LOSS_HISTORY, WEIGHTS] {
        if !state.files.contains_key(name) {
            return invalid(format!("files has no entry for {name}"));
        }
    }
    match (state.files.contains_key(ADAM_M), state.files.contains_key(ADAM_V)) {
        (m, v) if m == v => Ok(m),
        _ => invalid("files lists one of adam_m.f32 and adam_v.f32 without the other".into()),
    }
}

/// model_config.json: the config (validated within size limits) and its tensor table,
/// which must equal `config.tensor_specs()`.
pub(crate) fn parse_model_config(file: &str, bytes: &[u8]) -> Result<(ModelConfig, Vec<TensorSpec>)> {
    let parsed: ModelConfigFile = from_json(file, bytes)?;
    check_model_config(file, &parsed.config)?;
    let mismatch = |reason: String| Err(CkptError::TensorTableMismatch { file: file.to_string(), reason });
    // The count is compared first so that the spec list built below is no longer than
    // the table that was already parsed from a capped file.
    let expected_len = 4 + 16 * parsed.config.n_layers;
    if parsed.tensors.len() != expected_len {
        return mismatch(format!("{} tensors listed, the config has {expected_len}", parsed.tensors.len()));
    }
    let specs = parsed.config.tensor_specs();
    if let Some((got, want)) = parsed.tensors.iter().zip(&specs).find(|(got, want)| got != want) {
        return mismatch(format!(
            "entry {:?} has shape {:?} at offset {}, the config gives {:?} with shape {:?} at offset {}",
            got.name, got.shape, got.offset, want.name, want.shape, want.offset
        ));
    }
    Ok((parsed.config, specs))
}

/// Little-endian f32s; `bytes.len()` is a multiple of 4 (checked by the caller).
pub(crate) fn f32_from_le_bytes(bytes: &[u8]) -> Vec<f32> {
    bytes.chunks_exact(4).map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]])).collect()
}

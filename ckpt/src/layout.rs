//! The on-disk contract: file names, the JSON documents ckpt owns, and the size rules a
//! reader applies before it allocates anything.
//!
//! ```text
//! <checkpoint>/
//!   model_config.json      ModelConfig fields + "tensors": [{name, shape, offset}]
//!   training_config.json   TrainingConfig
//!   dataset_manifest.json  DatasetManifest
//!   loss_history.json      [{step, train_loss, val_loss?}], every point
//!   weights.f32            little-endian f32, all parameters in canonical order
//!   adam_m.f32 adam_v.f32  the AdamW moments, same layout (absent when weights-only)
//!   trainer_state.json     {format_version, step, tokens_seen, best_val_loss,
//!                           wall_time_sec, rng_state, loss_scale?, files: {name: {bytes,
//!                           sha256}}, state_sha256}
//! ```
//! `loss_scale` ({scale, growth_tracker, skipped_steps}) is written by mixed-precision runs
//! only (`tinygpt_run::LossScaleState`); an f32 run's file has no such field.
//! `files` covers every other file of the checkpoint (lower-case hex SHA-256), and
//! `state_sha256` covers trainer_state.json itself: the SHA-256 of the compact JSON
//! (`serde_json::to_vec`, fields in the order above) of the document without that field.
//! So every byte a load depends on is checksummed; a checkpoint written before
//! `state_sha256` existed loads without it.
//! `rng_state` and `tokens_seen` are u64 JSON numbers and can exceed 2^53: JavaScript
//! readers need a BigInt-aware parser for them.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use tinygpt_run::{ConfigError, LossScaleState, ModelConfig, TensorSpec, TrainerProgress};

use crate::encode::EncodedFile;

use crate::error::{CkptError, Result};

/// The `format_version` this build writes and reads (trainer_state.json, latest.json).
pub const FORMAT_VERSION: u32 = 1;

/// The model config file.
pub const MODEL_CONFIG: &str = "model_config.json";
/// The training config file.
pub const TRAINING_CONFIG: &str = "training_config.json";
/// The dataset manifest file.
pub const DATASET_MANIFEST: &str = "dataset_manifest.json";
/// The learning-curve file.
pub const LOSS_HISTORY: &str = "loss_history.json";
/// The weights, flat f32 little-endian.
pub const WEIGHTS: &str = "weights.f32";
/// AdamW's first moments, flat f32.
pub const ADAM_M: &str = "adam_m.f32";
/// AdamW's second moments, flat f32.
pub const ADAM_V: &str = "adam_v.f32";
/// Progress, the tensor table and every file's checksum; written last.
pub const TRAINER_STATE: &str = "trainer_state.json";

/// Every file a checkpoint may hold, in write order: trainer_state.json comes last
/// because it records the checksums of all the others.
pub const FILES: [&str; 8] =
    [MODEL_CONFIG, TRAINING_CONFIG, DATASET_MANIFEST, LOSS_HISTORY, WEIGHTS, ADAM_M, ADAM_V, TRAINER_STATE];

/// Cap for every JSON file except the loss history.
pub(crate) const MAX_JSON_BYTES: u64 = 16 << 20;
/// Cap for loss_history.json (about ten million points).
pub(crate) const MAX_LOSS_HISTORY_BYTES: u64 = 512 << 20;
/// Largest model a checkpoint may describe; [`ModelConfig::validate`] uses the same bound.
pub(crate) const MAX_PARAMS: u64 = 1 << 31;

/// trainer_state.json.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct TrainerState {
    pub format_version: u32,
    pub step: usize,
    pub tokens_seen: u64,
    pub best_val_loss: Option<f32>,
    pub wall_time_sec: f64,
    pub rng_state: u64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub loss_scale: Option<LossScaleState>,
    pub files: BTreeMap<String, FileEntry>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub state_sha256: Option<String>,
}

impl TrainerState {
    /// The state that seals a generation: `progress`, the size and checksum of each of
    /// `files` (every other file of the generation), and its own checksum. Run and adapter
    /// generations write it the same way.
    pub fn sealed(progress: &TrainerProgress, files: &[EncodedFile]) -> TrainerState {
        let files = files
            .iter()
            .map(|f| {
                (f.name.to_string(), FileEntry { bytes: f.bytes.len() as u64, sha256: sha256_hex(&f.bytes) })
            })
            .collect();
        let mut state = TrainerState {
            format_version: FORMAT_VERSION,
            step: progress.step,
            tokens_seen: progress.tokens_seen,
            best_val_loss: progress.best_val_loss,
            wall_time_sec: progress.wall_time_sec,
            rng_state: progress.rng_state,
            loss_scale: progress.loss_scale,
            files,
            state_sha256: None,
        };
        state.state_sha256 = Some(state.checksum());
        state
    }

    /// Where the run stood when this state was written.
    pub fn progress(&self) -> TrainerProgress {
        TrainerProgress {
            step: self.step,
            tokens_seen: self.tokens_seen,
            best_val_loss: self.best_val_loss,
            wall_time_sec: self.wall_time_sec,
            rng_state: self.rng_state,
            loss_scale: self.loss_scale,
        }
    }

    /// The `state_sha256` this state should carry (see the module docs).
    pub fn checksum(&self) -> String {
        let unsealed = TrainerState { state_sha256: None, ..self.clone() };
        sha256_hex(&serde_json::to_vec(&unsealed).expect("a TrainerState serializes"))
    }
}

/// A file's size and lower-case hex SHA-256, as trainer_state.json records it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct FileEntry {
    pub bytes: u64,
    pub sha256: String,
}

/// model_config.json: the config plus the tensor table derived from it, so that a reader
/// needs nothing else to slice `weights.f32`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub(crate) struct ModelConfigFile {
    #[serde(flatten)]
    pub config: ModelConfig,
    pub tensors: Vec<TensorSpec>,
}

/// Checks `config` without risking overflow (on wasm32 `usize` is 32 bits, and
/// [`ModelConfig::param_count`] would overflow on a hostile config) and returns its
/// parameter count. `file` names the config in the error.
pub(crate) fn check_model_config(file: &str, config: &ModelConfig) -> Result<usize> {
    let invalid = |source| CkptError::InvalidConfig { file: file.to_string(), source };
    let count = checked_param_count(config).filter(|&n| n <= MAX_PARAMS).ok_or_else(|| {
        invalid(ConfigError::InvalidConfig {
            field: "d_model",
            reason: format!("and the other sizes give more than {MAX_PARAMS} parameters"),
        })
    })?;
    config.validate().map_err(invalid)?;
    usize::try_from(count).ok().filter(|n| n.checked_mul(4).is_some()).ok_or_else(|| {
        invalid(ConfigError::InvalidConfig {
            field: "d_model",
            reason: format!("gives {count} parameters, more than this platform can address"),
        })
    })
}

/// [`ModelConfig::param_count`] in checked u64 arithmetic; `None` on overflow.
fn checked_param_count(c: &ModelConfig) -> Option<u64> {
    let [v, ctx, d, f, l] =
        [c.vocab_size, c.context_length, c.d_model, c.d_mlp, c.n_layers].map(|x| u64::try_from(x).ok());
    let (v, ctx, d, f, l) = (v?, ctx?, d?, f?, l?);
    let d2 = d.checked_mul(d)?;
    let df = d.checked_mul(f)?;
    let per_layer = d
        .checked_mul(4)?
        .checked_add(d2.checked_add(d)?.checked_mul(4)?)?
        .checked_add(df.checked_mul(2)?)?
        .checked_add(f)?
        .checked_add(d)?;
    v.checked_mul(d)?
        .checked_add(ctx.checked_mul(d)?)?
        .checked_add(l.checked_mul(per_layer)?)?
        .checked_add(d.checked_mul(2)?)
}

/// Lower-case hex SHA-256 of `bytes`.
pub(crate) fn sha256_hex(bytes: &[u8]) -> String {
    use sha2::{Digest, Sha256};
    let digest = Sha256::digest(bytes);
    let mut hex = String::with_capacity(64);
    for b in digest {
        hex.push(char::from_digit((b >> 4) as u32, 16).expect("nibble"));
        hex.push(char::from_digit((b & 15) as u32, 16).expect("nibble"));
    }
    hex
}

#[cfg(test)]
mod tests {
    use super::*;
    use tinygpt_run::Preset;

    #[test]
    fn checked_count_matches_the_model_crate() {
        for p in Preset::all() {
            assert_eq!(checked_param_count(&p.model), Some(p.model.param_count() as u64));
        }
    }

    #[test]
    fn huge_configs_are_refused_before_anything_is_sized_by_them() {
        let mut c = ModelConfig::reference();
        c.d_model = 1 << 20;
        c.d_mlp = 1 << 22;
        c.n_layers = 1 << 20;
        let err = check_model_config("model_config.json", &c).unwrap_err().to_string();
        assert!(err.contains("model_config.json") && err.contains("parameters"), "{err}");
        c.d_model = usize::MAX;
        assert!(checked_param_count(&c).is_none());
        assert!(check_model_config("m", &c).is_err());
    }

    #[test]
    fn sha256_is_lower_case_hex() {
        assert_eq!(sha256_hex(b"abc"), "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
    }
}

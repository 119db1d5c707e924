//! LoRA adapter checkpoints: an adapter's files, stored beside its base (never a copy
//! of it), with the same guarantees as full checkpoints.
//!
//! ```text
//! <adapter>/                       an AdapterStore's root, e.g. <base run>/adapters/<name>/
//!   latest.json                    {format_version, latest, previous}, flipped atomically
//!   gen-000003/
//!     adapter_config.json          {base_model: {name, weights_sha256}, rank, alpha,
//!                                   target_modules, params: [{name, shape, offset}]}
//!     training_config.json dataset_manifest.json loss_history.json
//!     adapter.f32                  little-endian f32, the adapter's tensors in canonical order
//!     adapter_m.f32 adapter_v.f32  their AdamW moments (absent: weights only)
//!     trainer_state.json           as a full checkpoint's: progress, files {name: {bytes,
//!                                  sha256}} and state_sha256
//! ```
//! A save writes a new generation, reads every file back, then moves `latest.json` to it
//! with an atomic put, so a crash leaves the previous adapter loadable. A load checks every
//! checksum, sizes against the config before reading, and refuses NaN. Loading onto a base
//! whose weights hash differs from `base_model.weights_sha256` is refused in one line
//! naming both ([`AdapterCheckpoint::check_base`]).

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use tinygpt_run::{
    DatasetManifest, LoraConfig, LossPoint, ModelConfig, TensorSpec, TrainerProgress, TrainingConfig,
};

use crate::checkpoint::check_finite;
use crate::encode::f32_le_bytes;
use crate::error::{CkptError, Result};
use crate::json::{from_json, to_json};
use crate::layout::{
    sha256_hex, FileEntry, TrainerState, DATASET_MANIFEST, FORMAT_VERSION, LOSS_HISTORY, MAX_JSON_BYTES,
    MAX_LOSS_HISTORY_BYTES, TRAINER_STATE, TRAINING_CONFIG,
};
use crate::store::BlobStore;

/// The adapter's config file.
pub const ADAPTER_CONFIG: &str = "adapter_config.json";
/// The adapter's weights, flat f32.
pub const ADAPTER_WEIGHTS: &str = "adapter.f32";
/// The adapter's AdamW first moments, flat f32.
pub const ADAPTER_M: &str = "adapter_m.f32";
/// The adapter's AdamW second moments, flat f32.
pub const ADAPTER_V: &str = "adapter_v.f32";
const POINTER: &str = "latest.json";
const FILES: [&str; 8] = [
    ADAPTER_CONFIG,
    TRAINING_CONFIG,
    DATASET_MANIFEST,
    LOSS_HISTORY,
    ADAPTER_WEIGHTS,
    ADAPTER_M,
    ADAPTER_V,
    TRAINER_STATE,
];

/// The name adapters give the bundled pretrained base (`--base builtin` in the CLI, "Bundled
/// base" in the page): a `medium` model trained on TinyShakespeare, shipped as
/// `cli/assets/base-medium-shakespeare.safetensors` (weights only).
pub const BUILTIN_BASE_NAME: &str = "builtin (tinygpt-medium on TinyShakespeare)";

/// Which base an adapter was trained on: its model name and the SHA-256 of its
/// `weights.f32` bytes (see [`base_weights_sha256`]).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct BaseRef {
    /// The base model's name.
    pub name: String,
    /// SHA-256 of the base's weights: an adapter loads only on the base it was trained on.
    pub weights_sha256: String,
}

/// adapter_config.json.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AdapterConfigFile {
    /// The base it adapts.
    pub base_model: BaseRef,
    /// The adapters' rank.
    pub rank: usize,
    /// The scale numerator.
    pub alpha: f32,
    /// The adapted linears (`q_proj`, …).
    pub target_modules: Vec<String>,
    /// Each adapter tensor's name, shape and offset.
    pub params: Vec<TensorSpec>,
}

/// The lower-case hex SHA-256 of a base's weights as `weights.f32` stores them.
pub fn base_weights_sha256(weights: &[f32]) -> String {
    sha256_hex(&f32_le_bytes(weights))
}

/// Everything needed to resume an adapter run on its base, or to sample with it.
#[derive(Clone, Debug, PartialEq)]
pub struct AdapterCheckpoint {
    /// The base it adapts.
    pub base: BaseRef,
    /// The base's shape (not stored: it comes with the base; it sizes the adapter).
    pub model_config: ModelConfig,
    /// The adapter's config.
    pub lora: LoraConfig,
    /// How the adapter trains.
    pub training_config: TrainingConfig,
    /// The data it trains on.
    pub dataset: DatasetManifest,
    /// Where its training stands.
    pub progress: TrainerProgress,
    /// Its learning curve.
    pub loss_history: Vec<LossPoint>,
    /// The adapter's weights, flat.
    pub weights: Vec<f32>,
    /// Empty (with `adam_v`) for a weights-only adapter.
    pub adam_m: Vec<f32>,
    /// AdamW's second moments (empty for weights only).
    pub adam_v: Vec<f32>,
}

impl AdapterCheckpoint {
    /// Refuses a base whose weights are not the ones this adapter was trained on.
    pub fn check_base(&self, base_name: &str, base_weights: &[f32]) -> Result<()> {
        let found = base_weights_sha256(base_weights);
        if found != self.base.weights_sha256 {
            return Err(CkptError::InvalidCheckpoint {
                reason: format!(
                    "this adapter was trained on base {} (weights sha256 {}), not on {base_name} (weights sha256 {found})",
                    self.base.name, self.base.weights_sha256
                ),
            });
        }
        Ok(())
    }

    fn check(&self) -> Result<Vec<TensorSpec>> {
        let invalid = |reason: String| Err(CkptError::InvalidCheckpoint { reason });
        if let Err(e) = self.lora.validate(&self.model_config) {
            return invalid(format!("{ADAPTER_CONFIG}: {e}"));
        }
        if let Err(e) = self.training_config.validate() {
            return invalid(e.to_string());
        }
        let specs = self.lora.tensor_specs(&self.model_config);
        let n: usize = specs.iter().map(TensorSpec::numel).sum();
        if self.weights.len() != n {
            return invalid(format!(
                "{ADAPTER_WEIGHTS} has {} values, the adapter needs {n}",
                self.weights.len()
            ));
        }
        let moments = (self.adam_m.len(), self.adam_v.len());
        if moments != (0, 0) && moments != (n, n) {
            return invalid(format!(
                "adapter moments have {} and {} values; both must be {n} or 0",
                moments.0, moments.1
            ));
        }
        for (file, values) in
            [(ADAPTER_WEIGHTS, &self.weights), (ADAPTER_M, &self.adam_m), (ADAPTER_V, &self.adam_v)]
        {
            check_finite(file, values, &specs)?;
        }
        Ok(specs)
    }

    /// The files in write order, trainer_state.json last (it records the others' checksums).
    fn encode(&self) -> Result<Vec<(&'static str, Vec<u8>)>> {
        let specs = self.check()?;
        let config = AdapterConfigFile {
            base_model: self.base.clone(),
            rank: self.lora.rank,
            alpha: self.lora.alpha,
            target_modules: self.lora.target_modules.clone(),
            params: specs,
        };
        let mut files = vec![
            (ADAPTER_CONFIG, to_json(ADAPTER_CONFIG, &config, 2)?),
            (TRAINING_CONFIG, to_json(TRAINING_CONFIG, &self.training_config, 2)?),
            (DATASET_MANIFEST, to_json(DATASET_MANIFEST, &self.dataset, 2)?),
            (LOSS_HISTORY, to_json(LOSS_HISTORY, &self.loss_history, 1)?),
            (ADAPTER_WEIGHTS, f32_le_bytes(&self.weights)),
        ];
        if !self.adam_m.is_empty() {
            files.push((ADAPTER_M, f32_le_bytes(&self.adam_m)));
            files.push((ADAPTER_V, f32_le_bytes(&self.adam_v)));
        }
        let table = files
            .iter()
            .map(|(name, bytes)| {
                (name.to_string(), FileEntry { bytes: bytes.len() as u64, sha256: sha256_hex(bytes) })
            })
            .collect();
        let p = &self.progress;
        let mut state = TrainerState {
            format_version: FORMAT_VERSION,
            step: p.step,
            tokens_seen: p.tokens_seen,
            best_val_loss: p.best_val_loss,
            wall_time_sec: p.wall_time_sec,
            rng_state: p.rng_state,
            files: table,
            state_sha256: None,
        };
        state.state_sha256 = Some(state.checksum());
        files.push((TRAINER_STATE, to_json(TRAINER_STATE, &state, 2)?));
        Ok(files)
    }
}

/// latest.json of an adapter store.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct Pointer {
    format_version: u32,
    latest: String,
    previous: Vec<String>,
}

/// One adapter's saved generations in a [`BlobStore`] (a folder beside the base, OPFS, …).
pub struct AdapterStore<S> {
    storage: S,
}

impl<S: BlobStore> AdapterStore<S> {
    /// Adapter generations in `storage`.
    pub fn new(storage: S) -> Self {
        AdapterStore { storage }
    }

    /// The underlying store.
    pub fn storage(&self) -> &S {
        &self.storage
    }

    /// Saves `ckpt` as a new generation and makes it the latest; keeps the one before it
    /// and removes older ones. Returns the generation's id.
    pub async fn save(&self, ckpt: &AdapterCheckpoint) -> Result<String> {
        let files = ckpt.encode()?;
        let pointer = self.read_pointer().await?;
        let mut taken: Vec<u64> = Vec::new();
        for blob in self.storage.list("").await? {
            if let Some(n) = blob.key.split_once('/').and_then(|(g, _)| parse_generation(g)) {
                taken.push(n);
            }
        }
        let id = format!("gen-{:06}", taken.iter().max().map_or(1, |n| n + 1));
        for (name, bytes) in &files {
            self.storage.put(&format!("{id}/{name}"), bytes).await?;
        }
        for (name, bytes) in &files {
            let key = format!("{id}/{name}");
            if self.storage.get(&key).await?.as_deref() != Some(&bytes[..]) {
                let reason = "the bytes read back differ from those written".to_string();
                return Err(CkptError::WriteVerification { file: self.storage.location(&key), reason });
            }
        }
        let previous: Vec<String> = pointer.map(|p| p.latest).into_iter().collect();
        let new = Pointer { format_version: FORMAT_VERSION, latest: id.clone(), previous: previous.clone() };
        self.storage.put_atomic(POINTER, &to_json(POINTER, &new, 1)?).await?;
        for n in taken {
            let old = format!("gen-{n:06}");
            if !previous.contains(&old) {
                self.storage.delete(&format!("{old}/")).await?;
            }
        }
        Ok(id)
    }

    /// The latest adapter, fully checked, sized for a base of shape `model_config`.
    pub async fn load_latest(&self, model_config: &ModelConfig) -> Result<AdapterCheckpoint> {
        let pointer = self.read_pointer().await?.ok_or_else(|| CkptError::NoCheckpoint {
            location: self.storage.location(""),
            detail: format!("no {POINTER}: not an adapter folder, or nothing saved yet"),
        })?;
        self.load(&pointer.latest, model_config).await
    }

    /// The adapter's config (base reference, rank, targets) without reading its tensors.
    pub async fn config(&self) -> Result<AdapterConfigFile> {
        let pointer = self.read_pointer().await?.ok_or_else(|| CkptError::NoCheckpoint {
            location: self.storage.location(""),
            detail: format!("no {POINTER}"),
        })?;
        let key = format!("{}/{ADAPTER_CONFIG}", pointer.latest);
        let bytes = self.read(&key, MAX_JSON_BYTES).await?;
        from_json(&self.storage.location(&key), &bytes)
    }

    async fn load(&self, id: &str, model_config: &ModelConfig) -> Result<AdapterCheckpoint> {
        let key = |name: &str| format!("{id}/{name}");
        let state_bytes = self.read(&key(TRAINER_STATE), MAX_JSON_BYTES).await?;
        let state: TrainerState = from_json(&self.storage.location(&key(TRAINER_STATE)), &state_bytes)?;
        let location = self.storage.location(&key(TRAINER_STATE));
        if state.format_version != FORMAT_VERSION {
            let found = state.format_version.into();
            return Err(CkptError::UnsupportedVersion { file: location, found, supported: FORMAT_VERSION });
        }
        if let Some(expected) = &state.state_sha256 {
            let actual = state.checksum();
            if &actual != expected {
                return Err(CkptError::ChecksumMismatch {
                    file: location,
                    expected: expected.clone(),
                    actual,
                });
            }
        }
        if let Some(name) = state.files.keys().find(|n| !FILES.contains(&n.as_str())) {
            return Err(CkptError::InvalidJson {
                file: location,
                reason: format!("lists unknown file {name:?}"),
            });
        }
        let checked = |name: &'static str, limit: u64| {
            let state = &state;
            async move {
                let file = self.storage.location(&key(name));
                let entry =
                    state.files.get(name).ok_or_else(|| CkptError::MissingFile { file: file.clone() })?;
                if entry.bytes > limit {
                    return Err(CkptError::TooLarge { file, bytes: entry.bytes, limit });
                }
                let bytes = self.read(&key(name), limit).await?;
                if bytes.len() as u64 != entry.bytes {
                    return Err(CkptError::SizeMismatch {
                        file,
                        expected: entry.bytes,
                        actual: bytes.len() as u64,
                    });
                }
                let actual = sha256_hex(&bytes);
                if actual != entry.sha256 {
                    return Err(CkptError::ChecksumMismatch { file, expected: entry.sha256.clone(), actual });
                }
                Ok(bytes)
            }
        };
        let config_file: AdapterConfigFile = from_json(
            &self.storage.location(&key(ADAPTER_CONFIG)),
            &checked(ADAPTER_CONFIG, MAX_JSON_BYTES).await?,
        )?;
        let targets: Vec<&str> = config_file.target_modules.iter().map(String::as_str).collect();
        let lora = LoraConfig::new(config_file.rank, config_file.alpha, &targets)
            .and_then(|l| l.validate(model_config).map(|()| l))
            .map_err(|source| CkptError::InvalidConfig {
                file: self.storage.location(&key(ADAPTER_CONFIG)),
                source,
            })?;
        let specs = lora.tensor_specs(model_config);
        if config_file.params != specs {
            return Err(CkptError::TensorTableMismatch {
                file: self.storage.location(&key(ADAPTER_CONFIG)),
                reason: "params do not match rank, targets and the base's shape".into(),
            });
        }
        let f32_bytes = specs.iter().map(TensorSpec::numel).sum::<usize>() as u64 * 4;
        let floats = |bytes: Vec<u8>| -> Vec<f32> {
            bytes.chunks_exact(4).map(|c| f32::from_le_bytes(c.try_into().expect("4 bytes"))).collect()
        };
        let weights = floats(checked(ADAPTER_WEIGHTS, f32_bytes).await?);
        let (adam_m, adam_v) = if state.files.contains_key(ADAPTER_M) {
            (floats(checked(ADAPTER_M, f32_bytes).await?), floats(checked(ADAPTER_V, f32_bytes).await?))
        } else {
            (Vec::new(), Vec::new())
        };
        let ckpt = AdapterCheckpoint {
            base: config_file.base_model,
            model_config: model_config.clone(),
            lora,
            training_config: from_json(
                &self.storage.location(&key(TRAINING_CONFIG)),
                &checked(TRAINING_CONFIG, MAX_JSON_BYTES).await?,
            )?,
            dataset: from_json(
                &self.storage.location(&key(DATASET_MANIFEST)),
                &checked(DATASET_MANIFEST, MAX_JSON_BYTES).await?,
            )?,
            progress: TrainerProgress {
                step: state.step,
                tokens_seen: state.tokens_seen,
                best_val_loss: state.best_val_loss,
                wall_time_sec: state.wall_time_sec,
                rng_state: state.rng_state,
            },
            loss_history: from_json(
                &self.storage.location(&key(LOSS_HISTORY)),
                &checked(LOSS_HISTORY, MAX_LOSS_HISTORY_BYTES).await?,
            )?,
            weights,
            adam_m,
            adam_v,
        };
        ckpt.check()?;
        Ok(ckpt)
    }

    async fn read(&self, key: &str, limit: u64) -> Result<Vec<u8>> {
        let file = self.storage.location(key);
        let bytes =
            self.storage.get(key).await?.ok_or_else(|| CkptError::MissingFile { file: file.clone() })?;
        if bytes.len() as u64 > limit {
            return Err(CkptError::TooLarge { file, bytes: bytes.len() as u64, limit });
        }
        Ok(bytes)
    }

    async fn read_pointer(&self) -> Result<Option<Pointer>> {
        let Some(bytes) = self.storage.get(POINTER).await? else { return Ok(None) };
        let file = self.storage.location(POINTER);
        if bytes.len() > 64 << 10 {
            return Err(CkptError::TooLarge { file, bytes: bytes.len() as u64, limit: 64 << 10 });
        }
        let pointer: Pointer = from_json(&file, &bytes)?;
        if pointer.format_version != FORMAT_VERSION {
            let found = pointer.format_version.into();
            return Err(CkptError::UnsupportedVersion { file, found, supported: FORMAT_VERSION });
        }
        if parse_generation(&pointer.latest).is_none() {
            return Err(CkptError::InvalidJson {
                file,
                reason: format!("{:?} is not a generation", pointer.latest),
            });
        }
        Ok(Some(pointer))
    }
}

fn parse_generation(id: &str) -> Option<u64> {
    id.strip_prefix("gen-").filter(|n| n.len() == 6 && n.bytes().all(|b| b.is_ascii_digit()))?.parse().ok()
}

/// The adapter tensors keyed by canonical name (for exports).
pub(crate) fn named_tensors(ckpt: &AdapterCheckpoint) -> BTreeMap<String, (Vec<usize>, &[f32])> {
    ckpt.lora
        .tensor_specs(&ckpt.model_config)
        .into_iter()
        .map(|s| {
            let values = &ckpt.weights[s.offset..][..s.numel()];
            (s.name, (s.shape, values))
        })
        .collect()
}

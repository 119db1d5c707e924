//! LoRA adapter checkpoints: an adapter's files, stored beside its base (never a copy
//! of it), with the same guarantees as full checkpoints.
//!
//! ```text
//! <adapter>/                       an AdapterStore's root, e.g. <base run>/adapters/<name>/
//!   latest.json                    {format_version, latest, previous}, flipped atomically
//!   gen-000003/
//!     adapter_config.json          {base_model: {name, weights_sha256}, rank, alpha,
//!                                   target_modules, params: [{name, shape, offset}],
//!                                   context_length (absent in older files)}
//!     training_config.json dataset_manifest.json loss_history.json
//!     adapter.f32                  little-endian f32, the adapter's tensors in canonical order
//!     adapter_m.f32 adapter_v.f32  their AdamW moments (absent: weights only)
//!     trainer_state.json           as a full checkpoint's: progress, files {name: {bytes,
//!                                  sha256}} and state_sha256
//! ```
//! The generations are the run's protocol ([`Generations`] of [`AdapterFiles`]): the same
//! pointer flip after a verified write, best.json, pruning of only this adapter's own
//! generations, and refusal of a folder holding anything else (a run, another kind's
//! generations, stray files) before anything is written. A load checks every checksum,
//! sizes against the config before reading, and refuses NaN. Loading onto a base whose
//! weights hash differs from `base_model.weights_sha256`, or whose shape differs from the
//! one the adapter was trained on, is refused in one line naming both
//! ([`AdapterCheckpoint::check_base`]).

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use tinygpt_run::{
    DatasetManifest, LoraConfig, LossPoint, ModelConfig, TensorSpec, TrainerProgress, TrainingConfig,
};

use crate::checkpoint::check_finite;
use crate::decode::{f32_from_le_bytes, parse_trainer_state, Files};
use crate::encode::{f32_le_bytes, EncodedFile};
use crate::error::{CkptError, Result};
use crate::generations::{GenerationKind, Generations, SaveReport};
use crate::json::{from_json, to_json};
use crate::layout::{
    sha256_hex, TrainerState, DATASET_MANIFEST, LOSS_HISTORY, MAX_JSON_BYTES, MAX_LOSS_HISTORY_BYTES,
    TRAINER_STATE, TRAINING_CONFIG,
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
    /// The window, in tokens, it trains on (the base's context or less: the page trains on
    /// shorter windows than a GPT-2 base's 1,024). Absent in files written before it was
    /// recorded, and in imports, which were not trained here: a reader takes its default.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub context_length: Option<usize>,
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
    /// The window it trains on, in tokens (`adapter_config.json`'s `context_length`); `None`
    /// for an adapter saved before the window was recorded, or imported.
    pub context_length: Option<usize>,
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
            return Err(CkptError::AdapterBase {
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
        let context = self.model_config.context_length;
        if let Some(window) = self.context_length.filter(|w| !(1..=context).contains(w)) {
            return invalid(format!(
                "{ADAPTER_CONFIG}: context_length {window} is not a window of this base (1 to its context, {context})"
            ));
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
    fn encode(&self) -> Result<Vec<EncodedFile>> {
        let specs = self.check()?;
        let config = AdapterConfigFile {
            base_model: self.base.clone(),
            rank: self.lora.rank,
            alpha: self.lora.alpha,
            target_modules: self.lora.target_modules.clone(),
            params: specs,
            context_length: self.context_length,
        };
        let file = |name: &'static str, bytes: Vec<u8>| EncodedFile { name, bytes };
        let mut files = vec![
            file(ADAPTER_CONFIG, to_json(ADAPTER_CONFIG, &config, 2)?),
            file(TRAINING_CONFIG, to_json(TRAINING_CONFIG, &self.training_config, 2)?),
            file(DATASET_MANIFEST, to_json(DATASET_MANIFEST, &self.dataset, 2)?),
            file(LOSS_HISTORY, to_json(LOSS_HISTORY, &self.loss_history, 1)?),
            file(ADAPTER_WEIGHTS, f32_le_bytes(&self.weights)),
        ];
        if !self.adam_m.is_empty() {
            files.push(file(ADAPTER_M, f32_le_bytes(&self.adam_m)));
            files.push(file(ADAPTER_V, f32_le_bytes(&self.adam_v)));
        }
        let state = TrainerState::sealed(&self.progress, &files);
        files.push(file(TRAINER_STATE, to_json(TRAINER_STATE, &state, 2)?));
        Ok(files)
    }
}

/// The files of an adapter generation, read for a base of shape `base` (an adapter's
/// tensors are sized by the base it adapts, which is not stored with it).
#[derive(Clone, Debug, Default)]
pub struct AdapterFiles {
    base: Option<ModelConfig>,
}

impl GenerationKind for AdapterFiles {
    type Value = AdapterCheckpoint;
    const WHAT: &'static str = "LoRA adapter";
    const FILES: &'static [&'static str] = &FILES;
    const RESERVED_GROUPS: &'static [&'static str] = &[];
    const BARE_ROOT: bool = false;

    fn encode(&self, value: &AdapterCheckpoint) -> Result<Vec<EncodedFile>> {
        value.encode()
    }

    async fn decode<S: BlobStore>(&self, storage: &S, prefix: &str) -> Result<AdapterCheckpoint> {
        let base = self.base.as_ref().ok_or_else(|| CkptError::InvalidCheckpoint {
            reason: "an adapter is read for a base: its shape sizes the adapter".into(),
        })?;
        read_adapter(storage, prefix, base).await
    }

    fn step(value: &AdapterCheckpoint) -> usize {
        value.progress.step
    }

    fn val_loss_at_step(value: &AdapterCheckpoint) -> Option<f32> {
        let step = value.progress.step;
        value.loss_history.iter().rev().find(|p| p.step == step).and_then(|p| p.val_loss)
    }
}

/// One adapter's saved generations in a [`BlobStore`] (a folder such as
/// `<run>/adapters/<name>/`, one name on an [`crate::AdapterShelf`], …): [`Generations`]
/// of [`AdapterFiles`], sized for the base each call names.
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

    /// The generations, read for a base of shape `base` (`None`: nothing is decoded).
    pub fn generations(&self, base: Option<&ModelConfig>) -> Generations<&S, AdapterFiles> {
        Generations::with_kind(&self.storage, AdapterFiles { base: base.cloned() })
    }

    /// Refuses a folder an adapter cannot be saved into (a run, another kind's
    /// generations, stray files), naming what is there; see [`Generations::check_writable`].
    pub async fn check_writable(&self) -> Result<()> {
        self.generations(None).check_writable().await
    }

    /// Saves `ckpt` as a new generation and makes it the latest; keeps the one before it
    /// (and the best) and removes this adapter's older generations.
    pub async fn save(&self, ckpt: &AdapterCheckpoint) -> Result<SaveReport> {
        self.generations(Some(&ckpt.model_config)).save(ckpt).await
    }

    /// The latest adapter, fully checked, sized for a base of shape `model_config`.
    pub async fn load_latest(&self, model_config: &ModelConfig) -> Result<AdapterCheckpoint> {
        let generations = self.generations(Some(model_config));
        if generations.latest_id().await?.is_none() && generations.generation_ids().await?.is_empty() {
            generations.check_writable().await?;
            return Err(CkptError::NoCheckpoint {
                location: self.storage.location(""),
                detail: "no latest.json: not an adapter folder, or nothing saved yet".into(),
            });
        }
        generations.load_latest().await
    }

    /// The adapter's config (base reference, rank, targets) without reading its tensors.
    pub async fn config(&self) -> Result<AdapterConfigFile> {
        let generations = self.generations(None);
        let latest = generations.latest_id().await?.ok_or_else(|| CkptError::NoCheckpoint {
            location: self.storage.location(""),
            detail: "no latest.json: not an adapter folder, or nothing saved yet".into(),
        })?;
        let prefix = format!("{latest}/");
        let files = Files::list(&self.storage, &prefix, &FILES, AdapterFiles::WHAT).await?;
        from_json(&files.location(ADAPTER_CONFIG), &files.read(ADAPTER_CONFIG, MAX_JSON_BYTES, None).await?)
    }
}

/// Reads the adapter whose files are `prefix + name` in `storage`, for a base of shape
/// `model_config`: trainer_state.json and adapter_config.json first, every size checked
/// against the config before the tensors are read.
async fn read_adapter<S: BlobStore>(
    storage: &S,
    prefix: &str,
    model_config: &ModelConfig,
) -> Result<AdapterCheckpoint> {
    let files = Files::list(storage, prefix, &FILES, AdapterFiles::WHAT).await?;
    let state_bytes = files.read(TRAINER_STATE, MAX_JSON_BYTES, None).await?;
    let state: TrainerState = parse_trainer_state(&files.location(TRAINER_STATE), &state_bytes)?;
    if let Some(name) = state.files.keys().find(|n| !FILES.contains(&n.as_str()) || *n == TRAINER_STATE) {
        return Err(CkptError::InvalidJson {
            file: files.location(TRAINER_STATE),
            reason: format!("lists unknown file {name:?}"),
        });
    }
    let config_file: AdapterConfigFile = from_json(
        &files.location(ADAPTER_CONFIG),
        &files.read(ADAPTER_CONFIG, MAX_JSON_BYTES, Some(&state)).await?,
    )?;
    let targets: Vec<&str> = config_file.target_modules.iter().map(String::as_str).collect();
    let lora = LoraConfig::new(config_file.rank, config_file.alpha, &targets)
        .map_err(|source| CkptError::InvalidConfig { file: files.location(ADAPTER_CONFIG), source })?;
    let specs = lora.tensor_specs(model_config);
    if lora.validate(model_config).is_err() || config_file.params != specs {
        return Err(CkptError::AdapterBase {
            reason: format!(
                "{}: this adapter was trained on base {} with {}; the base given has {}: use the adapter with the base it was trained on",
                files.location(ADAPTER_CONFIG),
                config_file.base_model.name,
                trained_shape(&config_file.params),
                base_shape(model_config)
            ),
        });
    }
    let f32_bytes = specs.iter().map(TensorSpec::numel).sum::<usize>() as u64 * 4;
    let tensor = |name: &'static str| {
        let (files, state) = (&files, &state);
        async move {
            let listed = files.listed(name)?;
            if listed != f32_bytes {
                let file = files.location(name);
                return Err(CkptError::SizeMismatch { file, expected: f32_bytes, actual: listed });
            }
            Ok(f32_from_le_bytes(&files.read(name, f32_bytes, Some(state)).await?))
        }
    };
    let weights = tensor(ADAPTER_WEIGHTS).await?;
    let (adam_m, adam_v) = if state.files.contains_key(ADAPTER_M) || files.has(ADAPTER_M) {
        (tensor(ADAPTER_M).await?, tensor(ADAPTER_V).await?)
    } else {
        (Vec::new(), Vec::new())
    };
    let ckpt = AdapterCheckpoint {
        base: config_file.base_model,
        model_config: model_config.clone(),
        lora,
        context_length: config_file.context_length,
        training_config: from_json(
            &files.location(TRAINING_CONFIG),
            &files.read(TRAINING_CONFIG, MAX_JSON_BYTES, Some(&state)).await?,
        )?,
        dataset: from_json(
            &files.location(DATASET_MANIFEST),
            &files.read(DATASET_MANIFEST, MAX_JSON_BYTES, Some(&state)).await?,
        )?,
        progress: state.progress(),
        loss_history: from_json(
            &files.location(LOSS_HISTORY),
            &files.read(LOSS_HISTORY, MAX_LOSS_HISTORY_BYTES, Some(&state)).await?,
        )?,
        weights,
        adam_m,
        adam_v,
    };
    ckpt.check()?;
    Ok(ckpt)
}

/// A base's shape in words, as an adapter error names it.
fn base_shape(model: &ModelConfig) -> String {
    format!("{} layers of width {} (MLP {})", model.n_layers, model.d_model, model.d_mlp)
}

/// The base shape an adapter's tensor table was made for, read from its names
/// (`blocks.<layer>.…`) and the shapes of its `lora_A` (`[rank, in]`) and `lora_B`
/// (`[out, rank]`) tensors.
fn trained_shape(params: &[TensorSpec]) -> String {
    let layers = params
        .iter()
        .filter_map(|p| p.name.strip_prefix("blocks.")?.split('.').next()?.parse::<usize>().ok())
        .max()
        .map_or(0, |l| l + 1);
    let width = params
        .iter()
        .find(|p| p.name.ends_with("lora_A.weight") && !p.name.contains("fc_out"))
        .and_then(|p| p.shape.get(1).copied());
    match width {
        Some(width) => format!("{layers} layers of width {width}"),
        None => format!("{layers} layers ({} adapter tensors)", params.len()),
    }
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

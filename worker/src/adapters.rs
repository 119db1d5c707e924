//! LoRA in the worker, apart from the session: the frozen base adapters train on
//! ([`BaseModel`]: the bundled one, a saved run, or an upload) and the browser's adapter
//! store ([`Adapters`]: several named adapters, each with atomic generations, listed and
//! loaded with their base checked), with errors in plain words.

use tinygpt_ckpt::{
    base_weights_sha256, import_safetensors, AdapterCheckpoint, AdapterShelf, BaseRef, BlobStore, Checkpoint,
    CkptError, LoadOptions, BUILTIN_BASE_NAME,
};
use tinygpt_model::Tokenizer;

use crate::checkpoints::ckpt_error;
use crate::error::WorkerError;
use crate::fits::check_base_fits_wasm32;
use crate::protocol::{AdapterInfo, BaseInfo, BaseSource, ErrorCode, StoreKind};

/// The bundled base's file in `dist/` (copied there from cli/assets by `cargo xtask
/// build-web`); worker.js fetches it for `loadBase {source: "builtin"}`.
pub const BUILTIN_BASE_FILE: &str = "assets/base-medium-shakespeare.safetensors";

/// A base on the host: its checkpoint (moments dropped), what adapters call it, and the
/// tokenizer its vocabulary is (adapter text is encoded, and samples decoded, with it).
#[derive(Clone, Debug)]
pub struct BaseModel {
    pub name: String,
    pub source: BaseSource,
    pub weights_sha256: String,
    pub ckpt: Checkpoint,
    pub tokenizer: Tokenizer,
}

impl BaseModel {
    /// A base from a checkpoint (a saved run or an import), refused when the worker's wasm32
    /// memory could not train adapters on it. Its tokenizer is bytes: one of another
    /// tokenizer needs [`BaseModel::with_tokenizer`] (a GPT-2 folder brings its files).
    pub fn new(name: String, source: BaseSource, ckpt: Checkpoint) -> Result<Self, WorkerError> {
        check_base_fits_wasm32(&ckpt.model_config, ckpt.training_config.batch_size)?;
        let ckpt = Checkpoint { adam_m: Vec::new(), adam_v: Vec::new(), ..ckpt };
        let weights_sha256 = base_weights_sha256(&ckpt.weights);
        Ok(BaseModel { name, source, weights_sha256, ckpt, tokenizer: Tokenizer::Byte })
    }

    /// The same base read with `tokenizer`.
    pub fn with_tokenizer(self, tokenizer: Tokenizer) -> Self {
        BaseModel { tokenizer, ..self }
    }

    /// Refuses a base whose tokenizer is not the one its model was made with (a checkpoint
    /// of a BPE model without its tokenizer files), before text is read with the wrong one.
    pub fn check_tokenizer(&self) -> Result<(), WorkerError> {
        let (model, ours) = (&self.ckpt.model_config.tokenizer, self.tokenizer.name());
        if model == ours && self.tokenizer.vocab_size() <= self.ckpt.model_config.vocab_size {
            return Ok(());
        }
        Err(WorkerError::new(
            ErrorCode::BadCheckpoint,
            format!(
                "Base {} reads text with the tokenizer {model}, whose files the page does not have here. Load \
                 its Hugging Face folder (a URL or the four files) instead.",
                self.name
            ),
        ))
    }

    /// A base from a `.safetensors` file (`tinygpt export`, weights only or not).
    pub fn from_safetensors(name: String, source: BaseSource, bytes: &[u8]) -> Result<Self, WorkerError> {
        let ckpt = import_safetensors(bytes, &LoadOptions::default()).map_err(|e| {
            WorkerError::new(ErrorCode::BadCheckpoint, format!(
                "That file cannot be a base model ({e}). Choose a .safetensors file written by `tinygpt export` or this page."
            ))
        })?;
        Self::new(name, source, ckpt)
    }

    /// The bundled base from its file's bytes.
    pub fn builtin(bytes: &[u8]) -> Result<Self, WorkerError> {
        Self::from_safetensors(BUILTIN_BASE_NAME.to_string(), BaseSource::Builtin, bytes)
    }

    pub fn reference(&self) -> BaseRef {
        BaseRef { name: self.name.clone(), weights_sha256: self.weights_sha256.clone() }
    }

    pub fn info(&self) -> BaseInfo {
        BaseInfo {
            name: self.name.clone(),
            source: self.source,
            model_config: self.ckpt.model_config.clone(),
            params: self.ckpt.model_config.param_count(),
            weights_sha256: self.weights_sha256.clone(),
        }
    }
}

/// The browser's adapter store.
pub struct Adapters<S> {
    shelf: AdapterShelf<S>,
    kind: StoreKind,
}

impl<S: BlobStore> Adapters<S> {
    pub fn new(storage: S, kind: StoreKind) -> Self {
        Adapters { shelf: AdapterShelf::new(storage), kind }
    }

    pub fn kind(&self) -> StoreKind {
        self.kind
    }

    /// Saves `ckpt` as adapter `name`'s newest generation: `(generation id, bytes)`.
    pub async fn save(&self, name: &str, ckpt: &AdapterCheckpoint) -> Result<(String, u64), WorkerError> {
        let store = self.shelf.adapter(name).map_err(name_error)?;
        let id = store.save(ckpt).await.map_err(ckpt_error)?.id;
        let floats = ckpt.weights.len() + ckpt.adam_m.len() + ckpt.adam_v.len();
        Ok((id, 4 * floats as u64))
    }

    /// Every readable adapter, by name; `fits_base` against `base`'s weights hash.
    pub async fn list(&self, base: Option<&BaseModel>) -> Result<Vec<AdapterInfo>, WorkerError> {
        let mut items = Vec::new();
        for (name, config) in self.shelf.list().await.map_err(ckpt_error)? {
            let Ok(c) = config else { continue };
            items.push(AdapterInfo {
                name,
                rank: c.rank,
                alpha: c.alpha,
                target_modules: c.target_modules,
                fits_base: base.is_some_and(|b| b.weights_sha256 == c.base_model.weights_sha256),
                base_name: c.base_model.name,
                context: c.context_length,
            });
        }
        Ok(items)
    }

    /// Adapter `name`'s latest generation, refused in one line naming both bases when it was
    /// trained on another base than `base`.
    pub async fn load(&self, name: &str, base: &BaseModel) -> Result<AdapterCheckpoint, WorkerError> {
        if !self.shelf.names().await.map_err(ckpt_error)?.iter().any(|n| n == name) {
            return Err(WorkerError::new(
                ErrorCode::AdapterNotFound,
                format!(
                    "There is no adapter called \"{name}\" in this browser. Pick one from the adapter list."
                ),
            ));
        }
        let store = self.shelf.adapter(name).map_err(name_error)?;
        let config = store.config().await.map_err(ckpt_error)?;
        if config.base_model.weights_sha256 != base.weights_sha256 {
            return Err(base_mismatch(name, &config.base_model, base));
        }
        let ckpt = store.load_latest(&base.ckpt.model_config).await.map_err(ckpt_error)?;
        ckpt.check_base(&base.name, &base.ckpt.weights).map_err(|_| base_mismatch(name, &ckpt.base, base))?;
        Ok(ckpt)
    }
}

/// The refusal of an adapter trained on another base, naming both.
fn base_mismatch(name: &str, trained_on: &BaseRef, base: &BaseModel) -> WorkerError {
    WorkerError::new(
        ErrorCode::BaseMismatch,
        format!(
            "Adapter \"{name}\" was trained on base {} (weights sha256 {}…), not on the loaded base {} (weights sha256 {}…): load its base first.",
            trained_on.name,
            &trained_on.weights_sha256[..12.min(trained_on.weights_sha256.len())],
            base.name,
            &base.weights_sha256[..12]
        ),
    )
}

/// A bad adapter name, as `invalidConfig`.
pub fn name_error(e: CkptError) -> WorkerError {
    let message = match e {
        CkptError::InvalidCheckpoint { reason } => format!("{}{}.", reason[..1].to_uppercase(), &reason[1..]),
        other => other.to_string(),
    };
    WorkerError::new(ErrorCode::InvalidConfig, message)
}

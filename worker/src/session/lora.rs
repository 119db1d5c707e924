//! The session's LoRA side: the frozen base (`loadBase`), adapter runs (`trainAdapter`,
//! `loadAdapter` with its text), an adapter selected for sampling (`loadAdapter` without),
//! and which model a sample runs on — the base alone or base + adapter, so the page can
//! put the two side by side.
//!
//! An adapter run is an ordinary [`ActiveRun`] whose trainer trains only the adapter
//! (`TrainedSet::fresh_adapter`, the CLI's `lora train` path) and whose loop is every run's
//! (`tinygpt_optim::TrainingRun`), so progress, pause, stop, evaluations, early stopping and
//! periodic saves are the full runs' own. Base + adapter samples run on the merged
//! weights (`W' = W + (alpha/r)·B·A`, `tinygpt_model::lora::merge`), which give the
//! adapted model's logits with the plain (cached) forward.

use std::rc::Rc;

use serde_json::Value;
use tinygpt_ckpt::AdapterCheckpoint;
use tinygpt_model::{windowed_weights, ConfigError, Dataset, Gpt, LoraConfig, Params, Tokenizer};
use tinygpt_optim::{adapter_training_config, ResumeState, TrainedSet, Trainer, TrainingConfig};
use tinygpt_tensor::Backend;

use super::{training_fields, ActiveRun, AdapterRunInfo, SampleModel, Session};
use crate::adapters::BaseModel;
use crate::error::WorkerError;
use crate::fits::{adapter_window, check_adapter_fits_wasm32, resumed_window};
use crate::protocol::{DatasetInput, ErrorCode, OutMessage, RunState};

/// What `trainAdapter` asks for, before validation.
#[derive(Clone, Debug, Default)]
pub struct AdapterRequest {
    pub name: String,
    pub preset: Option<String>,
    pub rank: Option<usize>,
    pub alpha: Option<f32>,
    pub targets: Option<Vec<String>>,
    pub training_config: Option<Value>,
    /// The window it trains on, in tokens ([`adapter_window`]).
    pub context: Option<usize>,
}

impl AdapterRequest {
    /// The adapter's shape: the preset, or rank/alpha/targets (rank 4, alpha 2·rank,
    /// `q_proj,v_proj` where left out); no preset and nothing else is `qv-r4`.
    pub fn lora_config(&self) -> Result<LoraConfig, WorkerError> {
        let custom = self.rank.is_some() || self.alpha.is_some() || self.targets.is_some();
        let config = match (&self.preset, custom) {
            (Some(_), true) => {
                return Err(WorkerError::new(
                    ErrorCode::InvalidConfig,
                    "Give an adapter preset or rank, alpha and targets, not both.",
                ))
            }
            (Some(name), false) => LoraConfig::preset(name),
            (None, false) => LoraConfig::preset("qv-r4"),
            (None, true) => {
                let rank = self.rank.unwrap_or(4);
                let targets = self.targets.clone().unwrap_or_else(|| vec!["q_proj".into(), "v_proj".into()]);
                let targets: Vec<&str> = targets.iter().map(String::as_str).collect();
                LoraConfig::new(rank, self.alpha.unwrap_or(2.0 * rank as f32), &targets)
            }
        };
        config.map_err(refused_shape)
    }
}

/// A refused adapter shape as sentences that say what to change (the config crate's words
/// name the field, in lower case, without an ending).
fn refused_shape(e: ConfigError) -> WorkerError {
    match e {
        ConfigError::InvalidConfig { field, reason } => WorkerError::new(
            ErrorCode::InvalidConfig,
            format!(
                "This adapter cannot be trained: its {field} {reason}. Change the adapter's rank, alpha \
                 or targets and start it again."
            ),
        ),
        ConfigError::UnknownPreset { name, known } => WorkerError::new(
            ErrorCode::UnknownPreset,
            format!("There is no adapter preset \"{name}\". Pick one of {known}, or give rank, alpha and targets."),
        ),
    }
}

impl<B: Backend> Session<B> {
    /// The loaded base, if any.
    pub fn base(&self) -> Option<Rc<BaseModel>> {
        self.base.clone()
    }

    /// The adapter selected for sampling, if any.
    pub fn selected_adapter(&self) -> Option<&str> {
        self.selected.as_ref().map(|(name, _)| name.as_str())
    }

    /// Makes `base` the one adapters train on and sample with: `baseLoaded`. The current run
    /// stays (an adapter run keeps its own base); a selected adapter of another base is
    /// dropped.
    pub fn load_base(&mut self, base: Rc<BaseModel>) -> Vec<OutMessage> {
        if self.selected.as_ref().is_some_and(|(_, a)| a.base.weights_sha256 != base.weights_sha256) {
            self.selected = None;
        }
        let info = base.info();
        self.base = Some(base);
        vec![OutMessage::BaseLoaded { base: info }]
    }

    fn require_base(&self, what: &str) -> Result<&BaseModel, WorkerError> {
        self.base.as_deref().ok_or_else(|| {
            WorkerError::new(
                ErrorCode::NoBase,
                format!("Load a base model first (the bundled one, a saved run or a file), then {what}."),
            )
        })
    }

    /// The base as a model on this session's backend.
    fn base_model(&self, base: &BaseModel, weights: &[f32]) -> Result<Gpt<B>, WorkerError> {
        base_model_on(&self.backend, base, weights)
    }

    /// Starts a fresh adapter run on the loaded base, replacing the current run:
    /// `runStarted` (with `run.adapter`), `status`.
    pub fn start_adapter(
        &mut self,
        request: AdapterRequest,
        dataset: DatasetInput,
        now_ms: f64,
    ) -> Result<Vec<OutMessage>, WorkerError> {
        let base = self.require_base("train an adapter on it")?;
        tinygpt_ckpt::check_adapter_name(&request.name).map_err(crate::adapters::name_error)?;
        let lora = request.lora_config()?;
        lora.validate(&base.ckpt.model_config)?;
        let fields = training_fields(request.training_config)?;
        let training = adapter_training_config(&base.ckpt.training_config, fields)?;
        let model_config = &base.ckpt.model_config;
        let window = adapter_window(model_config, request.context)?;
        check_adapter_fits_wasm32(model_config, &lora, training.batch_size, window)?;
        let data = base_dataset(base, &dataset, window, training.seed)?;
        let model = windowed_base_on(self.backend_for(training.precision)?, base, window)?;
        let info =
            AdapterRunInfo { name: request.name, base: base.reference(), tokenizer: base.tokenizer.clone() };
        let trained = TrainedSet::fresh_adapter(model, lora, &training)?;
        let trainer = Trainer::new(trained, training, data, None)?;
        Ok(self.install_adapter(trainer, info, None, RunState::Training, now_ms))
    }

    /// Adapter `name` (its latest stored generation) on the loaded base: with `dataset` (its
    /// text) the current run, paused, on the window it was trained on ([`resumed_window`]
    /// with `context`); without, selected for sampling. `adapterLoaded`, then `runStarted`
    /// and `status` for a run.
    pub fn load_adapter(
        &mut self,
        name: String,
        ckpt: AdapterCheckpoint,
        dataset: Option<&DatasetInput>,
        context: Option<usize>,
        now_ms: f64,
    ) -> Result<Vec<OutMessage>, WorkerError> {
        let base = self.require_base("load an adapter onto it")?;
        let step = ckpt.progress.step;
        let Some(dataset) = dataset else {
            self.selected = Some((name.clone(), ckpt));
            return Ok(vec![OutMessage::AdapterLoaded { name, step, resumable: false }]);
        };
        let model_config = &base.ckpt.model_config;
        let window = resumed_window(model_config, &name, ckpt.context_length, context)?;
        check_adapter_fits_wasm32(model_config, &ckpt.lora, ckpt.training_config.batch_size, window)?;
        let data = base_dataset(base, dataset, window, ckpt.dataset.seed)?;
        if data.manifest().dataset_id != ckpt.dataset.dataset_id {
            return Err(WorkerError::new(
                ErrorCode::DatasetMismatch,
                format!(
                    "Adapter \"{name}\" was trained on \"{}\" ({} bytes), not on \"{}\". Give that text to continue \
                     training it, or load it without text to sample with it.",
                    ckpt.dataset.name, ckpt.dataset.raw_bytes, dataset.name
                ),
            ));
        }
        let precision = self.continuing_precision(ckpt.training_config.precision);
        let backend = self.backend_for(precision)?;
        let model = windowed_base_on(backend, base, window)?;
        let info =
            AdapterRunInfo { name: name.clone(), base: base.reference(), tokenizer: base.tokenizer.clone() };
        let config = TrainingConfig { precision, ..ckpt.training_config.clone() };
        let (trained, state) = ResumeState::from_adapter_checkpoint(model, ckpt, &config)?;
        let trainer = Trainer::new(trained, config, data, Some(state))?;
        let mut out = vec![OutMessage::AdapterLoaded { name, step, resumable: true }];
        let id = Some(info.name.clone());
        out.extend(self.install_adapter(trainer, info, id, RunState::Paused, now_ms));
        Ok(out)
    }

    fn install_adapter(
        &mut self,
        trainer: Trainer<B>,
        info: AdapterRunInfo,
        id: Option<String>,
        state: RunState,
        now_ms: f64,
    ) -> Vec<OutMessage> {
        let mut out = self.install(trainer, id, state, now_ms);
        if let Some(run) = self.run.as_mut() {
            run.adapter = Some(info);
            // runStarted went out before the adapter was set: say it again with it.
            if let Some(OutMessage::RunStarted { run: started }) =
                out.iter_mut().find(|m| matches!(m, OutMessage::RunStarted { .. }))
            {
                *started = run.info();
            }
        }
        out
    }

    /// Which model a sample with `adapter` (see `InMessage::Sample`) runs on.
    pub(super) fn sample_model_for(&self, adapter: Option<bool>) -> Result<SampleModel<B>, WorkerError> {
        let adapter_run = self.run.as_ref().is_some_and(|r: &ActiveRun<B>| r.trainer().adapter().is_some());
        match (adapter, adapter_run) {
            // The adapter run's own frozen base, or base + its adapter as trained so far.
            (Some(false), true) => Ok(SampleModel::Run),
            (None | Some(true), true) => Ok(SampleModel::RunMerged),
            (Some(false), false) => match &self.base {
                Some(base) => Ok(SampleModel::Own(Box::new(self.base_model(base, &base.ckpt.weights)?))),
                None => Ok(SampleModel::Run),
            },
            (Some(true), false) => self.selected_model()?.ok_or_else(|| {
                WorkerError::new(
                    ErrorCode::AdapterNotFound,
                    "No adapter to sample with: train one, or load one from the adapter list.",
                )
            }),
            (None, false) if self.run.is_some() => Ok(SampleModel::Run),
            (None, false) => match self.selected_model()? {
                Some(model) => Ok(model),
                None => {
                    let base = self.require_base("sample from it")?;
                    Ok(SampleModel::Own(Box::new(self.base_model(base, &base.ckpt.weights)?)))
                }
            },
        }
    }

    /// The tokenizer a sample on `model` reads its prompt with and decodes with: a model
    /// built for the sample is the loaded base's (alone or merged); the run's is its base's
    /// for an adapter run, else bytes (the worker trains byte-v1 models only).
    pub(super) fn tokenizer_of(&self, model: &SampleModel<B>) -> Tokenizer {
        match model {
            SampleModel::Own(_) => self.base.as_ref().map(|b| b.tokenizer.clone()).unwrap_or_default(),
            SampleModel::Run | SampleModel::RunMerged => self
                .run
                .as_ref()
                .and_then(|r| r.adapter.as_ref())
                .map(|a| a.tokenizer.clone())
                .unwrap_or_default(),
        }
    }

    /// The loaded base with the selected adapter merged in, if an adapter is selected.
    fn selected_model(&self) -> Result<Option<SampleModel<B>>, WorkerError> {
        let Some(((_, ckpt), base)) = self.selected.as_ref().zip(self.base.as_ref()) else { return Ok(None) };
        let config = &base.ckpt.model_config;
        let merged = tinygpt_model::lora::merge(config, &ckpt.lora, &base.ckpt.weights, &ckpt.weights)?;
        Ok(Some(SampleModel::Own(Box::new(self.base_model(base, &merged)?))))
    }
}

/// `dataset` in `base`'s tokens (a GPT-2 base's BPE, else bytes), in windows of `window`.
fn base_dataset(
    base: &BaseModel,
    dataset: &DatasetInput,
    window: usize,
    seed: u64,
) -> Result<Dataset, WorkerError> {
    Ok(Dataset::with_tokenizer(&dataset.name, &dataset.bytes, &base.tokenizer, window, seed)?)
}

/// The frozen base an adapter run trains on at windows of `window` tokens: the base itself
/// with a context of `window` and the first `window` rows of its position table. A run
/// trains at its model's context (as the native benchmark's `configs/gpt2-124m-lora.json`
/// does with a model of context 256), and with learned positions and causal attention the
/// logits of a window of `window` tokens are the same in either model, so the adapter is one
/// of the full base.
fn windowed_base_on<B: Backend>(backend: &B, base: &BaseModel, window: usize) -> Result<Gpt<B>, WorkerError> {
    let full = &base.ckpt.model_config;
    if window == full.context_length {
        return base_model_on(backend, base, &base.ckpt.weights);
    }
    let (config, weights) = windowed_weights(full, &base.ckpt.weights, window);
    Ok(Gpt::new(config.clone(), Params::from_flat(backend, &config, &weights)?)?)
}

/// The base as a model on `backend` (an adapter run's: f32 or mixed, see
/// `Session::backend_for`).
fn base_model_on<B: Backend>(backend: &B, base: &BaseModel, weights: &[f32]) -> Result<Gpt<B>, WorkerError> {
    let config = base.ckpt.model_config.clone();
    Ok(Gpt::new(config.clone(), Params::from_flat(backend, &config, weights)?)?)
}

/// The adapter run's model with its adapter merged in, as it is now (both read back).
pub(super) async fn merged_model<B: Backend>(trainer: &Trainer<B>) -> Result<Gpt<B>, WorkerError> {
    let model = trainer.model();
    let Some(adapter) = trainer.adapter() else {
        return Err(WorkerError::new(
            ErrorCode::Internal,
            "Internal error: a merged sample without an adapter.",
        ));
    };
    let config = model.config();
    let base = model.params().to_flat().await?;
    let weights = adapter.to_flat().await?;
    let merged = tinygpt_model::lora::merge(config, adapter.config(), &base, &weights)?;
    let backend = model.params().tensors()[0].backend().clone();
    Ok(Gpt::new(config.clone(), Params::from_flat(&backend, config, &merged)?)?)
}

/// An adapter run's state for the adapter store: `(name, checkpoint)`; `None` for a run
/// that trains the whole model.
pub async fn adapter_snapshot<B: Backend>(
    run: &ActiveRun<B>,
) -> Option<Result<(String, AdapterCheckpoint), WorkerError>> {
    let info = run.adapter.as_ref()?;
    let captured = run.trainer().adapter_checkpoint(info.base.clone()).await;
    Some(captured.map(|c| (info.name.clone(), c)).map_err(WorkerError::from))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::incoming::is_a_sentence_for_people;

    /// `trainAdapter`'s shape refusals are sentences for people that say what to change.
    #[test]
    fn adapter_shape_refusals_are_sentences_that_say_what_to_do() {
        let targets = |t: &[&str]| Some(t.iter().map(|s| s.to_string()).collect());
        let requests = [
            AdapterRequest { preset: Some("qv-r4".into()), rank: Some(2), ..Default::default() },
            AdapterRequest { preset: Some("qkv-r99".into()), ..Default::default() },
            AdapterRequest { rank: Some(0), ..Default::default() },
            AdapterRequest { rank: Some(5000), ..Default::default() },
            AdapterRequest { alpha: Some(f32::NAN), ..Default::default() },
            AdapterRequest { targets: targets(&[]), ..Default::default() },
            AdapterRequest { targets: targets(&["x_proj"]), ..Default::default() },
            AdapterRequest { targets: targets(&["q_proj", "q_proj"]), ..Default::default() },
        ];
        for request in requests {
            let e = request.lora_config().expect_err("refused");
            assert!(is_a_sentence_for_people(&e.message), "{request:?}: {:?}", e.message);
        }
        let twice = AdapterRequest { targets: targets(&["q_proj", "q_proj"]), ..Default::default() };
        assert!(twice.lora_config().unwrap_err().message.contains("\"q_proj\" twice"));
    }
}

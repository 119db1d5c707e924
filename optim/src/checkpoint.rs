//! The mapping between a [`Trainer`] and a [`Checkpoint`] or an [`AdapterCheckpoint`]
//! (feature `ckpt`): a trainer's state out, and what [`Trainer::new`] takes to continue one.
//!
//! It lives with the trainer so that the checkpoint format (`tinygpt-ckpt`) needs no
//! training code: a checkpoint is configs, progress and flat vectors as data, and only the
//! trainer knows how to read its state out of the device and put it back.

use tinygpt_ckpt::{AdapterCheckpoint, BaseRef, Checkpoint};
use tinygpt_model::Gpt;
use tinygpt_tensor::Backend;

use crate::error::TrainError;
use crate::trainer::{ResumeState, TrainedSet, Trainer};
use crate::TrainingConfig;

impl<B: Backend> Trainer<B> {
    /// The whole state of this run: configs, data manifest, progress, history, and the
    /// weights and AdamW moments read back from the device.
    pub async fn checkpoint(&self) -> Result<Checkpoint, TrainError> {
        let state = self.resume_state().await?;
        Ok(Checkpoint {
            model_config: self.model().config().clone(),
            training_config: self.config().clone(),
            dataset: self.dataset().manifest().clone(),
            progress: state.progress,
            loss_history: state.history,
            weights: state.weights,
            adam_m: state.adam_m,
            adam_v: state.adam_v,
        })
    }

    /// An adapter run's whole state for the adapter store: the adapter's weights and moments
    /// read back from the device, progress, history, configs, and `base`, the base it trains
    /// on. Refused for a run that trains the whole model.
    pub async fn adapter_checkpoint(&self, base: BaseRef) -> Result<AdapterCheckpoint, TrainError> {
        let adapter = self.adapter().ok_or_else(|| TrainError::InvalidConfig {
            field: "adapter",
            reason: "this run trains the whole model, not an adapter".into(),
        })?;
        let state = self.resume_state().await?;
        Ok(AdapterCheckpoint {
            base,
            model_config: self.model().config().clone(),
            lora: adapter.config().clone(),
            context_length: Some(self.model().config().context_length),
            training_config: self.config().clone(),
            dataset: self.dataset().manifest().clone(),
            progress: state.progress,
            loss_history: state.history,
            weights: state.weights,
            adam_m: state.adam_m,
            adam_v: state.adam_v,
        })
    }
}

impl ResumeState {
    /// What [`Trainer::new`] takes to continue the run `ckpt` holds on `backend` (check it
    /// with `tinygpt_ckpt::check_compatible` first): the whole model of its shape, its
    /// training config, and the state it continues from; the steps that follow are those an
    /// uninterrupted run would have taken. A weights-only checkpoint starts the moments at zero.
    pub fn from_checkpoint<B: Backend>(
        backend: &B,
        ckpt: Checkpoint,
    ) -> (TrainedSet<B>, TrainingConfig, Self) {
        let state = ResumeState {
            weights: ckpt.weights,
            adam_m: ckpt.adam_m,
            adam_v: ckpt.adam_v,
            progress: ckpt.progress,
            history: ckpt.loss_history,
        };
        (TrainedSet::whole_model(backend, ckpt.model_config), ckpt.training_config, state)
    }

    /// What [`Trainer::new`] takes to continue the adapter run `ckpt` holds on the frozen
    /// `base` (the base `ckpt.base` names: the adapter store checks the hash when it loads)
    /// under `config` (usually `ckpt.training_config`): its adapter, whose group takes
    /// `config`'s weight decay as a fresh adapter's does, and the state it continues from.
    pub fn from_adapter_checkpoint<B: Backend>(
        base: Gpt<B>,
        ckpt: AdapterCheckpoint,
        config: &TrainingConfig,
    ) -> Result<(TrainedSet<B>, Self), TrainError> {
        let trained = TrainedSet::saved_adapter(base, ckpt.lora, &ckpt.weights, config)?;
        let state = ResumeState {
            weights: Vec::new(),
            adam_m: ckpt.adam_m,
            adam_v: ckpt.adam_v,
            progress: ckpt.progress,
            history: ckpt.loss_history,
        };
        Ok((trained, state))
    }
}

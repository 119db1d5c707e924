//! The training loop's step: sample a batch, forward, backward, AdamW.
//!
//! Randomness, so that any backend replays a run exactly: weights come from
//! `Rng::new(seed)` (see `Params::init`), training batches from `Rng::new(seed ^ BATCH_SALT)`
//! (whose state checkpoints save as `rng_state`), and evaluation batches from a fresh
//! `Rng::new(seed ^ EVAL_SALT_*)` on every evaluation, so each one scores the same windows.
//!
//! A step can also be taken a few batch rows at a time ([`Trainer::step_part`]): gradient
//! accumulation over row parts of the one batch the step draws, so a caller that must stay
//! responsive (the web worker) can stop between parts. One part of the whole batch is the
//! plain step, bit for bit; several parts give the same step up to float rounding.
//!
//! What a run trains is its *trained set*: the base model's parameters (a pretraining run),
//! or a LoRA adapter's tensors on a frozen base ([`TrainedSet`]). The optimizer
//! holds moments for the trained set only; frozen tensors go on the tape without gradient,
//! so they get neither gradient buffers nor moments, and stay bit-identical.
//!
//! Files: the one constructor and what a run continues from (`start.rs`), what is trained
//! (`trained_set.rs`), a step in row parts (`step.rs`), the answer of a part that may be
//! given up (`row_part.rs`), and losses read back later (`step_loss.rs`). The run loop that
//! drives a trainer (evaluation, early stop, saves) is [`crate::TrainingRun`].

mod row_part;
mod start;
mod step;
mod step_loss;
#[cfg(test)]
mod tests;
mod trained_set;

use tinygpt_autograd::{Gradients, Tape, Var};
use tinygpt_model::{Batch, Dataset, DropoutDraw, Gpt, Lora};
use tinygpt_tensor::{Backend, Indices, Rng, Tensor};

use crate::adamw::AdamW;
use crate::error::TrainError;
use crate::groups::GroupOptions;
use tinygpt_run::{LossPoint, TrainerProgress, TrainingConfig};

pub use row_part::RowPart;
pub use start::ResumeState;
use step::PartialStep;
pub use step::{StepDone, StepReport};
use step_loss::StepLoss;
use trained_set::trained_tensors;
pub use trained_set::TrainedSet;

/// Everything a run needs besides the backend: model, optimizer, data and progress.
#[derive(Debug)]
pub struct Trainer<B: Backend> {
    model: Gpt<B>,
    /// The adapter being trained on the frozen `model`, if this is an adapter run.
    adapter: Option<(Lora<B>, GroupOptions)>,
    optimizer: AdamW<B>,
    config: TrainingConfig,
    dataset: Dataset,
    rng: Rng,
    progress: TrainerProgress,
    history: Vec<LossPoint>,
    /// The step in progress when it is being taken in parts (see [`Trainer::step_part`]).
    partial: Option<PartialStep<B>>,
    /// Losses of finished steps not read back yet, oldest first (see
    /// [`Trainer::step_part_deferred`]); they join `history` when read.
    unread: Vec<StepLoss<B>>,
    /// Set by [`Trainer::model_mut`], which may freeze or unfreeze parameters: the
    /// optimizer's groups are checked against the model before the next update.
    regroup_due: bool,
    /// What each step leaves for the next, so a steady step allocates nothing.
    scratch: StepScratch<B>,
}

/// What a step keeps for the next one, so that a steady-state step allocates nothing
/// (`tests/allocations.rs`): the tape and its gradients, the lists a step fills, and the
/// emptied lists of steps already finished.
#[derive(Debug)]
struct StepScratch<B: Backend> {
    /// Reset after each part's backward pass (which frees the activations).
    tape: Tape<B>,
    grads: Gradients<B>,
    /// The trained set's vars on `tape`, in canonical order.
    params: Vec<Var<B>>,
    /// A finished step's batch, for the next step to draw into.
    batch: Batch,
    /// A finished step's per-parameter gradient list, emptied.
    step_grads: Vec<Option<Tensor<B>>>,
    /// Read steps' lists of part losses, emptied.
    losses: Vec<Vec<(Tensor<B>, usize)>>,
    /// What a loss, or loss scaling's sum of squares, is read back into: kept, so that a
    /// readback allocates nothing.
    readback: Vec<f32>,
}

impl<B: Backend> Default for StepScratch<B> {
    fn default() -> Self {
        StepScratch {
            tape: Tape::new(),
            grads: Gradients::new(),
            params: Vec::new(),
            batch: Batch::default(),
            step_grads: Vec::new(),
            losses: Vec::new(),
            readback: Vec::new(),
        }
    }
}

/// The most loss points [`Trainer`] reserves room for up front (a run's `max_steps`, up to
/// this): pushing a step's point then never reallocates mid-run in all but the longest runs.
const HISTORY_RESERVE: usize = 1 << 16;

impl<B: Backend> Trainer<B> {
    /// The adapter this run trains (None: the run trains the base model).
    pub fn adapter(&self) -> Option<&Lora<B>> {
        self.adapter.as_ref().map(|(lora, _)| lora)
    }

    /// Mean loss of `inputs` against `targets` (`[batch, seq]`) with the run's model (and
    /// adapter): [`Gpt::loss_into`], the one loss both trained sets share.
    pub fn loss(
        &self,
        tape: &Tape<B>,
        inputs: &Indices<B>,
        targets: &[u32],
        batch: usize,
        seq: usize,
        draw: Option<DropoutDraw>,
    ) -> Var<B> {
        let mut vars = Vec::new();
        self.model.loss_into(tape, self.adapter(), inputs, targets, batch, seq, draw, &mut vars)
    }

    /// The model being trained.
    pub fn model(&self) -> &Gpt<B> {
        &self.model
    }

    /// Mutable access, e.g. to freeze parameters; the optimizer's groups follow at the
    /// next step (see [`AdamW::regroup`]).
    pub fn model_mut(&mut self) -> &mut Gpt<B> {
        self.regroup_due = true;
        &mut self.model
    }

    /// The optimizer: its parameter groups, their flat layout, the step count.
    pub fn optimizer(&self) -> &AdamW<B> {
        &self.optimizer
    }

    /// The training config.
    pub fn config(&self) -> &TrainingConfig {
        &self.config
    }

    /// Changes the step budget (e.g. `--steps` on resume); other fields are fixed for a run.
    pub fn set_max_steps(&mut self, max_steps: usize) {
        self.config.max_steps = max_steps;
        self.reserve_history();
    }

    /// Room in the history for the run's steps (see [`HISTORY_RESERVE`]).
    fn reserve_history(&mut self) {
        let left = self.config.max_steps.saturating_sub(self.history.len());
        self.history.reserve(left.min(HISTORY_RESERVE));
    }

    fn with_history_reserved(mut self) -> Self {
        self.reserve_history();
        self
    }

    /// The data.
    pub fn dataset(&self) -> &Dataset {
        &self.dataset
    }

    /// Where the run stands.
    pub fn progress(&self) -> &TrainerProgress {
        &self.progress
    }

    /// Every logged step's loss.
    pub fn history(&self) -> &[LossPoint] {
        &self.history
    }

    /// Whether `max_steps` are done.
    pub fn is_finished(&self) -> bool {
        self.progress.step >= self.config.max_steps
    }

    /// Adds time spent training (measured by the caller: clocks differ between native and web).
    pub fn add_wall_time(&mut self, seconds: f64) {
        self.progress.wall_time_sec += seconds;
    }

    /// The optimizer moments `(adam_m, adam_v)`, flat in canonical order (of the adapter's
    /// tensors in an adapter run).
    pub async fn moments(&self) -> Result<(Vec<f32>, Vec<f32>), TrainError> {
        Ok(self.optimizer.to_flat().await?)
    }

    /// Everything [`Trainer::new`] needs to continue this run (`weights` being the adapter's in an adapter
    /// run, the base staying as it was loaded), read back from the device (the weights one
    /// parameter group at a time, see [`AdamW::weights`]). Losses not read back yet (see
    /// [`Trainer::step_part_deferred`]) are read for it, so its history holds every step
    /// either way.
    pub async fn resume_state(&self) -> Result<ResumeState, TrainError> {
        let weights = self.optimizer.weights(trained_tensors(&self.model, &self.adapter)).await?;
        let (adam_m, adam_v) = self.moments().await?;
        let (mut history, mut value) = (self.history.clone(), Vec::new());
        for loss in &self.unread {
            history.push(loss.read(&mut value).await?);
        }
        Ok(ResumeState { weights, adam_m, adam_v, progress: self.progress.clone(), history })
    }
    /// Whether `early_stop_patience` evaluations in a row have not improved on the best
    /// validation loss (never when the patience is off; see [`crate::early_stop`]).
    pub fn should_stop_early(&self) -> bool {
        crate::early_stop::should_stop(&self.config, &self.history)
    }

    /// Records an evaluation in the loss history (on the current step's point, which the
    /// step already added once its loss is read — read it first, see
    /// [`Trainer::read_losses`] — or as a new point) and tracks the best validation loss.
    pub fn record_eval(&mut self, train_loss: f32, val_loss: f32) {
        let step = self.progress.step;
        match self.history.last_mut() {
            Some(last) if last.step == step => last.val_loss = Some(val_loss),
            _ => self.history.push(LossPoint { step, train_loss, val_loss: Some(val_loss) }),
        }
        if self.progress.best_val_loss.is_none_or(|best| val_loss < best) {
            self.progress.best_val_loss = Some(val_loss);
        }
    }
}

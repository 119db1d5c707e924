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
//! or a LoRA adapter's tensors on a frozen base ([`Trainer::new_adapter`]). The optimizer
//! holds moments for the trained set only; frozen tensors go on the tape without gradient,
//! so they get neither gradient buffers nor moments, and stay bit-identical.

use tinygpt_autograd::{Gradients, Tape, Var};
use tinygpt_model::{
    Batch, Dataset, DropoutDraw, Forward, Gpt, Lora, ModelConfig, ModelError, Params, Split,
};
use tinygpt_tensor::{block_on, Backend, Indices, Precision, Rng, Tensor};

use crate::adamw::AdamW;
use crate::error::TrainError;
use crate::groups::{GroupOptions, ParamGroup};
use crate::loss_scale::{self, GradScaler};
use crate::schedule::learning_rate;
use tinygpt_run::{LossPoint, TrainerProgress};
use tinygpt_run::{TrainingConfig, BATCH_SALT};

/// What one optimizer step did.
#[derive(Clone, Debug, PartialEq)]
pub struct StepReport {
    /// Steps completed, this one included.
    pub step: usize,
    /// This step's training loss.
    pub train_loss: f32,
    /// The learning rate it used.
    pub lr: f32,
    /// Tokens in this step's batch.
    pub tokens: usize,
    /// Whether this step ends an evaluation interval (or the run): the caller should
    /// [`Trainer::evaluate`] and [`Trainer::record_eval`].
    pub eval_due: bool,
}

/// A finished optimizer step whose loss is still on the device ([`Trainer::step_part_deferred`]):
/// everything a [`StepReport`] says except the loss, which the trainer keeps queued until
/// [`Trainer::read_losses`] brings it back (e.g. only when a progress message is due).
#[derive(Clone, Debug, PartialEq)]
pub struct StepDone {
    /// Steps completed, this one included.
    pub step: usize,
    /// The learning rate it used.
    pub lr: f32,
    /// Tokens in this step's batch.
    pub tokens: usize,
    /// See [`StepReport::eval_due`].
    pub eval_due: bool,
}

/// What one call that may give its part up did ([`Trainer::step_part_unless`],
/// [`crate::Evaluation::next_part_unless`]): three answers a caller treats differently, so
/// not folded into an `Option`.
#[derive(Clone, Debug, PartialEq)]
pub enum Part<T> {
    /// The part was the last of its batch: here is what the batch gave.
    Done(T),
    /// The part was taken and counted; rows of the batch are left for the next call.
    MoreRows,
    /// `give_up` answered true: the part was dropped and the next call takes the same rows.
    GivenUp,
}

impl<T> Part<T> {
    /// The batch's result, if this part ended it.
    pub fn done(self) -> Option<T> {
        match self {
            Part::Done(t) => Some(t),
            Part::MoreRows | Part::GivenUp => None,
        }
    }
}

/// A step's mean training loss, still on the device: each row part's mean loss (`[1]`)
/// and its row count.
#[derive(Clone, Debug)]
struct StepLoss<B: Backend> {
    step: usize,
    batch: usize,
    parts: Vec<(Tensor<B>, usize)>,
}

impl<B: Backend> StepLoss<B> {
    /// The row-weighted mean of the parts' losses (summed in f64); a loss that is not
    /// finite is [`TrainError::Diverged`].
    async fn read(&self) -> Result<LossPoint, TrainError> {
        let mut weighted = 0.0f64;
        for (loss, rows) in &self.parts {
            let mut value = [0.0];
            loss.read_into(&mut value).await?;
            weighted += value[0] as f64 * *rows as f64;
        }
        let train_loss = (weighted / self.batch as f64) as f32;
        if !train_loss.is_finite() {
            return Err(TrainError::Diverged { step: self.step, loss: train_loss });
        }
        Ok(LossPoint { step: self.step, train_loss, val_loss: None })
    }
}

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
        }
    }
}

/// The most loss points [`Trainer`] reserves room for up front (a run's `max_steps`, up to
/// this): pushing a step's point then never reallocates mid-run in all but the longest runs.
const HISTORY_RESERVE: usize = 1 << 16;

/// A step taken in row parts, between parts: its batch, and the gradients and losses of
/// the rows done so far.
#[derive(Debug)]
struct PartialStep<B: Backend> {
    /// The step's whole batch, `[batch_size, context_length]`.
    data: Batch,
    /// The batch sampler after drawing `data`; it becomes the trainer's when the step ends,
    /// so until then `progress.rng_state` (and a checkpoint) still describes the step before.
    rng: Rng,
    rows_done: usize,
    /// Per parameter (canonical order; `None` when frozen): the sum over parts of each part's
    /// gradient scaled by `rows / batch_size`, i.e. the whole batch's mean-loss gradient.
    grads: Vec<Option<Tensor<B>>>,
    /// Each part's mean loss (`[1]`, read when the step ends) and its row count.
    losses: Vec<(Tensor<B>, usize)>,
    /// At mixed precision, once every row is done: the gathered gradients' sum of squares,
    /// queued on the device, which loss scaling's decision reads ([`Trainer::finish_update`]).
    sumsq: Option<Tensor<B>>,
}

/// The parts of a saved run that [`Trainer::resume`] restores.
#[derive(Clone, Debug)]
pub struct ResumeState {
    /// All parameters, flat.
    pub weights: Vec<f32>,
    /// AdamW's first moments (empty: start at zero).
    pub adam_m: Vec<f32>,
    /// AdamW's second moments (empty: start at zero).
    pub adam_v: Vec<f32>,
    /// Where the run stands.
    pub progress: TrainerProgress,
    /// Its learning curve.
    pub history: Vec<LossPoint>,
}

fn check_fits(model: &ModelConfig, config: &TrainingConfig, dataset: &Dataset) -> Result<(), TrainError> {
    model.validate()?;
    config.validate()?;
    // Mixed precision needs a backend with a narrow matmul; which backends have one is the
    // composition root's to say (the CLI and the web worker refuse it on their CPU backends).
    // A browser cannot block on loss scaling's readback: it drives the step with
    // `queue_part_unless` and awaits `finish_update`.
    Ok(dataset.fits_context(model.context_length)?)
}

/// `progress` with loss scaling's state where `config` trains at mixed precision: kept
/// from a saved mixed run, started afresh otherwise ([`GradScaler::start`]). An f32 run
/// keeps whatever the progress had (nothing, unless it continues a mixed run: its count of
/// skipped steps still tells AdamW's step apart from the run's).
fn with_loss_scale(mut progress: TrainerProgress, config: &TrainingConfig) -> TrainerProgress {
    if config.precision == Precision::Mixed && progress.loss_scale.is_none() {
        progress.loss_scale = Some(GradScaler::DEFAULT.start());
    }
    progress
}

/// AdamW's bias-correction count after `progress.step` steps: one update a step, except
/// the steps loss scaling skipped.
fn adam_steps(progress: &TrainerProgress) -> u32 {
    let skipped = progress.loss_scale.map_or(0, |s| s.skipped_steps);
    progress.step.saturating_sub(skipped) as u32
}

/// The tensors the optimizer updates: the adapter's, or the model's parameters.
fn trained_tensors<'a, B: Backend>(
    model: &'a Gpt<B>,
    adapter: &'a Option<(Lora<B>, GroupOptions)>,
) -> &'a [Tensor<B>] {
    match adapter {
        Some((lora, _)) => lora.tensors(),
        None => model.params().tensors(),
    }
}

/// The loss of the model (with the adapter, if any), the trained set's vars put in `params`
/// (emptied first; a list the trainer keeps from step to step).
#[allow(clippy::too_many_arguments)]
fn set_loss_into<B: Backend>(
    model: &Gpt<B>,
    adapter: &Option<(Lora<B>, GroupOptions)>,
    tape: &Tape<B>,
    inputs: &Indices<B>,
    targets: &Indices<B>,
    batch: usize,
    seq: usize,
    draw: Option<DropoutDraw>,
    params: &mut Vec<Var<B>>,
) -> Var<B> {
    match adapter {
        Some((lora, _)) => {
            let (loss, fwd) = lora.loss(model, tape, inputs, targets, batch, seq, draw);
            *params = fwd.params;
            loss
        }
        // `Gpt::loss_dropout`, with the parameters' vars in the kept list.
        None => {
            model.leaves_into(tape, params);
            let logits = model.forward_with_dropout(tape, params, inputs, batch, seq, draw);
            tape.cross_entropy(&logits, targets)
        }
    }
}

/// The loss of the model (with the adapter, if any); `Forward::params` are the trained set's vars.
#[allow(clippy::too_many_arguments)]
fn set_loss<B: Backend>(
    model: &Gpt<B>,
    adapter: &Option<(Lora<B>, GroupOptions)>,
    tape: &Tape<B>,
    inputs: &Indices<B>,
    targets: &Indices<B>,
    batch: usize,
    seq: usize,
    draw: Option<DropoutDraw>,
) -> (Var<B>, Forward<B>) {
    match adapter {
        Some((lora, _)) => lora.loss(model, tape, inputs, targets, batch, seq, draw),
        None => model.loss_dropout(tape, inputs, targets, batch, seq, draw),
    }
}

impl<B: Backend> Trainer<B> {
    /// A fresh run.
    pub fn new(
        backend: &B,
        model_config: ModelConfig,
        config: TrainingConfig,
        dataset: Dataset,
    ) -> Result<Self, TrainError> {
        check_fits(&model_config, &config, &dataset)?;
        let model = Gpt::init(backend, model_config, &mut Rng::new(config.seed))?;
        let params = model.params().tensors();
        let optimizer = AdamW::new(params, ParamGroup::decay_split(params, model.trainable(), &config));
        let rng = Rng::new(config.seed ^ BATCH_SALT);
        let progress = TrainerProgress {
            step: 0,
            tokens_seen: 0,
            best_val_loss: None,
            wall_time_sec: 0.0,
            rng_state: rng.state(),
            loss_scale: None,
        };
        let progress = with_loss_scale(progress, &config);
        Ok(Trainer {
            model,
            adapter: None,
            optimizer,
            config,
            dataset,
            rng,
            progress,
            history: Vec::new(),
            partial: None,
            unread: Vec::new(),
            regroup_due: false,
            scratch: StepScratch::default(),
        }
        .with_history_reserved())
    }

    /// A run continued from saved state; continuing gives the very same steps as never stopping.
    /// Empty `adam_m` and `adam_v` (a weights-only checkpoint) start the moments at zero.
    pub fn resume(
        backend: &B,
        model_config: ModelConfig,
        config: TrainingConfig,
        dataset: Dataset,
        state: ResumeState,
    ) -> Result<Self, TrainError> {
        check_fits(&model_config, &config, &dataset)?;
        let params = Params::from_flat(backend, &model_config, &state.weights)?;
        let n = model_config.param_count();
        let mut state = state;
        if state.adam_m.is_empty() && state.adam_v.is_empty() {
            state.adam_m = vec![0.0; n];
            state.adam_v = vec![0.0; n];
        }
        for (name, moments) in [("adam_m", &state.adam_m), ("adam_v", &state.adam_v)] {
            if moments.len() != n {
                return Err(ModelError::WeightsMismatch {
                    name: name.into(),
                    expected: n,
                    got: moments.len(),
                }
                .into());
            }
        }
        let model = Gpt::new(model_config, params)?;
        let params = model.params().tensors();
        let optimizer = AdamW::from_flat(
            params,
            ParamGroup::decay_split(params, model.trainable(), &config),
            &state.adam_m,
            &state.adam_v,
            adam_steps(&state.progress),
        );
        let rng = Rng::from_state(state.progress.rng_state);
        let progress = with_loss_scale(state.progress, &config);
        Ok(Trainer {
            model,
            adapter: None,
            optimizer,
            config,
            dataset,
            rng,
            progress,
            history: state.history,
            partial: None,
            unread: Vec::new(),
            regroup_due: false,
            scratch: StepScratch::default(),
        }
        .with_history_reserved())
    }

    /// A fresh adapter run: trains `adapter` only, in one parameter group `"lora"` with
    /// `options` (weight decay and learning-rate scale), on the frozen `base`.
    pub fn new_adapter(
        base: Gpt<B>,
        adapter: Lora<B>,
        options: GroupOptions,
        config: TrainingConfig,
        dataset: Dataset,
    ) -> Result<Self, TrainError> {
        let state = ResumeState {
            weights: Vec::new(),
            adam_m: Vec::new(),
            adam_v: Vec::new(),
            progress: TrainerProgress {
                step: 0,
                tokens_seen: 0,
                best_val_loss: None,
                wall_time_sec: 0.0,
                rng_state: Rng::new(config.seed ^ BATCH_SALT).state(),
                loss_scale: None,
            },
            history: Vec::new(),
        };
        Self::resume_adapter(base, adapter, options, config, dataset, state)
    }

    /// An adapter run continued from saved state: `adapter` holds the saved adapter
    /// weights (`state.weights` is ignored), `state.adam_*` its moments (empty: zero).
    pub fn resume_adapter(
        base: Gpt<B>,
        adapter: Lora<B>,
        options: GroupOptions,
        config: TrainingConfig,
        dataset: Dataset,
        state: ResumeState,
    ) -> Result<Self, TrainError> {
        check_fits(base.config(), &config, &dataset)?;
        let tensors = adapter.tensors();
        let n: usize = tensors.iter().map(Tensor::numel).sum();
        let group = vec![ParamGroup { name: "lora".into(), members: (0..tensors.len()).collect(), options }];
        let optimizer = if state.adam_m.is_empty() && state.adam_v.is_empty() {
            AdamW::new(tensors, group)
        } else {
            for (name, moments) in [("adapter_m", &state.adam_m), ("adapter_v", &state.adam_v)] {
                if moments.len() != n {
                    let got = moments.len();
                    return Err(ModelError::WeightsMismatch { name: name.into(), expected: n, got }.into());
                }
            }
            AdamW::from_flat(tensors, group, &state.adam_m, &state.adam_v, adam_steps(&state.progress))
        };
        let progress = with_loss_scale(state.progress, &config);
        Ok(Trainer {
            model: base,
            adapter: Some((adapter, options)),
            optimizer,
            config,
            dataset,
            rng: Rng::from_state(progress.rng_state),
            progress,
            history: state.history,
            partial: None,
            unread: Vec::new(),
            regroup_due: false,
            scratch: StepScratch::default(),
        }
        .with_history_reserved())
    }

    /// The adapter this run trains (None: the run trains the base model).
    pub fn adapter(&self) -> Option<&Lora<B>> {
        self.adapter.as_ref().map(|(lora, _)| lora)
    }

    fn trained_tensors(&self) -> &[Tensor<B>] {
        trained_tensors(&self.model, &self.adapter)
    }

    /// The optimizer's groups for the trained set as it is now.
    fn groups(&self) -> Vec<ParamGroup> {
        match &self.adapter {
            Some((lora, options)) => {
                vec![ParamGroup {
                    name: "lora".into(),
                    members: (0..lora.tensors().len()).collect(),
                    options: *options,
                }]
            }
            None => {
                ParamGroup::decay_split(self.model.params().tensors(), self.model.trainable(), &self.config)
            }
        }
    }

    /// Mean loss of `inputs` against `targets` (`[batch, seq]`) with the run's model (and
    /// adapter); `Forward::params` are the vars of the trained set.
    pub fn loss(
        &self,
        tape: &Tape<B>,
        inputs: &Indices<B>,
        targets: &Indices<B>,
        batch: usize,
        seq: usize,
        draw: Option<DropoutDraw>,
    ) -> (Var<B>, Forward<B>) {
        set_loss(&self.model, &self.adapter, tape, inputs, targets, batch, seq, draw)
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

    /// Everything [`Trainer::resume`] needs (`weights` being the adapter's in an adapter
    /// run, the base staying as it was loaded), read back from the device (the weights one
    /// parameter group at a time, see [`AdamW::weights`]). Losses not read back yet (see
    /// [`Trainer::step_part_deferred`]) are read for it, so its history holds every step
    /// either way.
    pub async fn resume_state(&self) -> Result<ResumeState, TrainError> {
        let weights = self.optimizer.weights(self.trained_tensors()).await?;
        let (adam_m, adam_v) = self.moments().await?;
        let mut history = self.history.clone();
        for loss in &self.unread {
            history.push(loss.read().await?);
        }
        Ok(ResumeState { weights, adam_m, adam_v, progress: self.progress.clone(), history })
    }

    /// One optimizer step on the next training batch: [`Trainer::step_part_async`] with one
    /// part of the whole batch (or of the rows left, if a step is in progress).
    pub async fn step_async(&mut self) -> Result<StepReport, TrainError> {
        let rows = self.config.batch_size;
        Ok(self.step_part_async(rows).await?.expect("a part of all the rows left ends the step"))
    }

    /// [`Trainer::step_async`] for synchronous callers (see `tinygpt_tensor::block_on`).
    pub fn step(&mut self) -> Result<StepReport, TrainError> {
        block_on(self.step_async())
    }

    /// Rows of the step in progress already done by [`Trainer::step_part`] (0 between steps).
    pub fn rows_done(&self) -> usize {
        self.partial.as_ref().map_or(0, |p| p.rows_done)
    }

    /// Advances the current step by the next `rows` rows of its batch (at least one; the
    /// rest if fewer remain), first drawing the step's batch from the batch sampler if no
    /// step is in progress. A part is a forward and backward pass on a `[rows,
    /// context_length]` sub-batch whose gradients, scaled by `rows / batch_size`, add up to
    /// the whole batch's. After the last row AdamW is applied once and the step's report
    /// returned, `train_loss` being the row-weighted mean of the parts' losses (summed in
    /// f64); before that, `None`, and weights, progress and the sampler state are untouched.
    ///
    /// With `rows >= batch_size` this is the plain step (a test holds it to the unsplit
    /// step's code bit for bit); several parts give the same step up to float rounding.
    /// Between parts the model may be read (sampled, evaluated, saved as the state before
    /// the step) but not changed.
    pub async fn step_part_async(&mut self, rows: usize) -> Result<Option<StepReport>, TrainError> {
        let Some(done) = self.step_part_deferred(rows) else { return Ok(None) };
        self.read_unread().await?;
        let train_loss = self.history.last().expect("the step just taken was unread").train_loss;
        let StepDone { step, lr, tokens, eval_due } = done;
        Ok(Some(StepReport { step, train_loss, lr, tokens, eval_due }))
    }

    /// [`Trainer::step_part_async`] without the loss readback: queues the part's work and
    /// returns at once, reading nothing from the device. A step's loss stays queued on the
    /// device until [`Trainer::read_losses`]; [`Trainer::step_part_async`] is this plus that
    /// read, so the two take the very same steps. A diverged loss is reported by the read.
    pub fn step_part_deferred(&mut self, rows: usize) -> Option<StepDone> {
        self.step_part_unless(rows, || false).done()
    }

    /// [`Trainer::step_part_deferred`] that may give the part up: after the part's forward
    /// and backward, before anything of the trainer changes, it calls `give_up` once; when
    /// that answers true the part's work is dropped and [`Part::GivenUp`] returned, the step
    /// standing as it was before the part (a step given up in its only part is taken again,
    /// from its start, by the next call: same batch, same dropout masks, so the run is
    /// unchanged).
    ///
    /// Why: the web worker takes whole steps on a backend that stops computing once a page
    /// message waits (`tinygpt_worker::abandon`); the values of such a part are meaningless,
    /// and `give_up` is where the worker says so. Past `give_up` nothing is given up: the
    /// gradient sums and AdamW always run to the end, so parameters and moments are never
    /// half-updated.
    ///
    /// At mixed precision the step's last part waits on the device once, for loss scaling's
    /// decision (see `loss_scale.rs`); [`Trainer::queue_part_unless`] is this without
    /// that wait.
    pub fn step_part_unless(&mut self, rows: usize, give_up: impl FnOnce() -> bool) -> Part<StepDone> {
        let part = self.queue_part_unless(rows, give_up);
        if !self.update_pending() {
            return part;
        }
        Part::Done(block_on(self.finish_update()).expect("an update is pending"))
    }

    /// Whether the step in progress has all its rows and waits for loss scaling's decision
    /// ([`Trainer::finish_update`]); only at mixed precision, after
    /// [`Trainer::queue_part_unless`].
    pub fn update_pending(&self) -> bool {
        self.partial.as_ref().is_some_and(|p| p.sumsq.is_some())
    }

    /// [`Trainer::step_part_unless`] that never waits on the device, for callers that cannot
    /// block (the browser). At f32 the two are the same. At mixed precision the last part
    /// stops short of the update: it queues the gradients' sum of squares and returns
    /// [`Part::MoreRows`] with [`Trainer::update_pending`] true; [`Trainer::finish_update`]
    /// then reads it back (awaited) and applies or skips the update. Until then the trainer
    /// is still at the step before, as between parts, and further calls do nothing and
    /// answer [`Part::MoreRows`].
    pub fn queue_part_unless(&mut self, rows: usize, give_up: impl FnOnce() -> bool) -> Part<StepDone> {
        if self.update_pending() {
            return Part::MoreRows;
        }
        let (batch, seq) = (self.config.batch_size, self.model.config().context_length);
        let backend = self.model.params().tensors()[0].backend().clone();
        let scratch = &mut self.scratch;
        let partial = match &mut self.partial {
            Some(partial) => partial,
            empty => {
                let mut rng = self.rng.clone();
                let mut data = std::mem::take(&mut scratch.batch);
                self.dataset.batch_into(Split::Train, batch, seq, &mut rng, &mut data);
                let (grads, losses) =
                    (std::mem::take(&mut scratch.step_grads), scratch.losses.pop().unwrap_or_default());
                empty.insert(PartialStep { data, rng, rows_done: 0, grads, losses, sumsq: None })
            }
        };
        let rows = rows.clamp(1, batch - partial.rows_done);
        let tokens = partial.rows_done * seq..(partial.rows_done + rows) * seq;
        let inputs = Indices::new(&backend, &partial.data.inputs[tokens.clone()]);
        let targets = Indices::new(&backend, &partial.data.targets[tokens]);

        let tape = &scratch.tape;
        // Dropout masks are a function of (seed, step, site, element): a resumed run and a
        // step cut into parts draw what the uninterrupted, uncut step draws.
        let draw = DropoutDraw {
            seed: self.config.seed,
            step: self.progress.step as u64,
            first_row: partial.rows_done,
        };
        let params = &mut scratch.params;
        let loss =
            set_loss_into(&self.model, &self.adapter, tape, &inputs, &targets, rows, seq, Some(draw), params);
        // d(batch mean)/d(part mean) = rows / batch: exactly 1 for a whole-batch part (the
        // mean loss is one value). At mixed precision, times the loss scale (see `loss_scale`).
        let mut scale = [rows as f32 / batch as f32];
        if let (Precision::Mixed, Some(state)) = (self.config.precision, self.progress.loss_scale) {
            scale[0] *= state.scale;
        }
        let seed = Tensor::from_slice(&backend, &scale, loss.value().shape().clone());
        let grads = &mut scratch.grads;
        tape.backward_into(&loss, seed, grads);
        tape.reset();
        if give_up() {
            grads.clear();
            params.clear();
            return Part::GivenUp;
        }
        if partial.grads.is_empty() {
            partial.grads.extend(params.iter().map(|p| grads.take(p)));
        } else {
            for (sum, p) in partial.grads.iter_mut().zip(params.iter()) {
                if let (Some(sum), Some(g)) = (sum.as_mut(), grads.take(p)) {
                    *sum = sum.add(&g);
                }
            }
        }
        grads.clear();
        params.clear();
        partial.losses.push((loss.value().clone(), rows));
        partial.rows_done += rows;
        if partial.rows_done < batch {
            return Part::MoreRows;
        }

        if std::mem::take(&mut self.regroup_due) {
            let groups = self.groups();
            if !self.optimizer.groups().eq(&groups) {
                self.optimizer.regroup(trained_tensors(&self.model, &self.adapter), groups);
            }
        }
        let params = trained_tensors(&self.model, &self.adapter);
        let partial = self.partial.as_mut().expect("the step in progress");
        match (self.config.precision, self.progress.loss_scale) {
            (Precision::Mixed, Some(_)) => {
                // Loss scaling decides from the gradients' sum of squares (see `finish_update`);
                // with nothing trained there is nothing to decide.
                if let Some(sumsq) = self.optimizer.gather(params, &partial.grads) {
                    partial.sumsq = Some(sumsq);
                    return Part::MoreRows;
                }
            }
            _ => {
                let lr = learning_rate(&self.config, self.progress.step);
                self.optimizer.update(params, &partial.grads, lr, &self.config);
            }
        }
        Part::Done(self.end_step())
    }

    /// Loss scaling's decision for the step [`Trainer::queue_part_unless`] left pending:
    /// reads the gradients' sum of squares back (the one await), then applies the update or,
    /// when it is not finite, skips it (see `loss_scale.rs`), and ends the step. `None`
    /// when no update is pending. Nothing changes before the readback completes, so a caller
    /// may drop the future unfinished and call again later.
    pub async fn finish_update(&mut self) -> Option<StepDone> {
        let sumsq = self.partial.as_ref()?.sumsq.as_ref()?;
        let finite = loss_scale::read_finite(sumsq).await;
        let partial = self.partial.as_mut().expect("the step in progress");
        let sumsq = partial.sumsq.take().expect("the pending update");
        let lr = learning_rate(&self.config, self.progress.step);
        let state = self.progress.loss_scale.as_mut().expect("mixed precision keeps a loss scale");
        let params = trained_tensors(&self.model, &self.adapter);
        let scaler = &GradScaler::DEFAULT;
        loss_scale::update_scaled(
            &mut self.optimizer,
            params,
            &sumsq,
            finite,
            lr,
            &self.config,
            scaler,
            state,
        );
        Some(self.end_step())
    }

    /// Ends the step in progress once its update is applied (or skipped): the sampler moves
    /// on, the step is counted and its loss queued for reading.
    fn end_step(&mut self) -> StepDone {
        let PartialStep { data, rng, mut grads, losses, .. } =
            self.partial.take().expect("the step in progress");
        let batch = self.config.batch_size;
        let seq = self.model.config().context_length;
        let lr = learning_rate(&self.config, self.progress.step);
        grads.clear();
        (self.scratch.batch, self.scratch.step_grads) = (data, grads);

        self.rng = rng;
        self.progress.step += 1;
        self.progress.tokens_seen += (batch * seq) as u64;
        self.progress.rng_state = self.rng.state();
        let step = self.progress.step;
        // The run's learning curve, every step's training loss, once read (evaluations add
        // val_loss).
        self.unread.push(StepLoss { step, batch, parts: losses });
        let eval_due = step.is_multiple_of(self.config.eval_interval) || step == self.config.max_steps;
        StepDone { step, lr, tokens: batch * seq, eval_due }
    }

    /// Reads back the losses of the steps taken since the last read (oldest first), adds
    /// them to the history and returns them. A loss that is not finite ends the read with
    /// [`TrainError::Diverged`]; it and the ones after it are dropped.
    pub async fn read_losses(&mut self) -> Result<Vec<LossPoint>, TrainError> {
        let from = self.history.len();
        self.read_unread().await?;
        Ok(self.history[from..].to_vec())
    }

    /// [`Trainer::read_losses`] into the history only, keeping the emptied lists for the
    /// steps to come.
    async fn read_unread(&mut self) -> Result<(), TrainError> {
        let mut unread = std::mem::take(&mut self.unread);
        for mut loss in unread.drain(..) {
            self.history.push(loss.read().await?);
            loss.parts.clear();
            self.scratch.losses.push(loss.parts);
        }
        self.unread = unread;
        Ok(())
    }

    /// Steps whose loss has not been read back yet.
    pub fn unread_losses(&self) -> usize {
        self.unread.len()
    }

    /// [`Trainer::step_part_async`] for synchronous callers.
    pub fn step_part(&mut self, rows: usize) -> Result<Option<StepReport>, TrainError> {
        block_on(self.step_part_async(rows))
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

#[cfg(test)]
mod tests {
    use tinygpt_kernels_cpu::CpuBackend;
    use tinygpt_model::Preset;

    use super::*;
    use crate::evaluation::Evaluation;

    const TEXT: &[u8] = include_bytes!("../../data/tinyshakespeare.txt");

    fn trainer(batch_size: usize) -> Trainer<CpuBackend> {
        let model = Preset::by_name("tiny").unwrap().model;
        let config = TrainingConfig {
            batch_size,
            max_steps: 100,
            warmup_steps: 2,
            learning_rate: 3e-3,
            ..Default::default()
        };
        let dataset =
            Dataset::new("shakespeare", &TEXT[..100_000], model.context_length, config.seed).unwrap();
        Trainer::new(&CpuBackend::new(1), model, config, dataset).unwrap()
    }

    /// The step as it was before steps could be split (one forward and backward over the
    /// whole batch, AdamW, then the loss read back): the oracle for a one-part step.
    async fn reference_step(t: &mut Trainer<CpuBackend>) -> f32 {
        let (batch, seq) = (t.config.batch_size, t.model.config().context_length);
        let data = t.dataset.batch(Split::Train, batch, seq, &mut t.rng);
        let backend = t.model.params().tensors()[0].backend().clone();
        let inputs = Indices::new(&backend, &data.inputs);
        let targets = Indices::new(&backend, &data.targets);
        let tape = Tape::new();
        let (loss, fwd) = t.model.loss(&tape, &inputs, &targets, batch, seq);
        let mut grads = tape.backward(&loss);
        let grads: Vec<_> = fwd.params.iter().map(|p| grads.take(p)).collect();
        drop(tape);
        let lr = learning_rate(&t.config, t.progress.step);
        t.optimizer.update(t.model.params().tensors(), &grads, lr, &t.config);
        let train_loss = loss.value().read().await.unwrap()[0];
        t.progress.step += 1;
        t.progress.rng_state = t.rng.state();
        train_loss
    }

    fn state(t: &Trainer<CpuBackend>) -> ResumeState {
        block_on(t.resume_state()).unwrap()
    }

    fn bits(v: &[f32]) -> Vec<u32> {
        v.iter().map(|x| x.to_bits()).collect()
    }

    fn relative(a: f32, b: f32) -> f32 {
        (a - b).abs() / b.abs().max(1e-12)
    }

    #[test]
    fn one_part_of_the_whole_batch_is_the_plain_step_bit_for_bit() {
        let (mut reference, mut one_part, mut plain) = (trainer(8), trainer(8), trainer(8));
        for _ in 0..4 {
            let expected = block_on(reference_step(&mut reference));
            let part = one_part.step_part(8).unwrap().expect("a whole-batch part ends the step");
            let step = plain.step().unwrap();
            assert_eq!(part.train_loss.to_bits(), expected.to_bits(), "{} vs {expected}", part.train_loss);
            assert_eq!(step, part);
        }
        let (r, p, s) = (state(&reference), state(&one_part), state(&plain));
        for other in [&p, &s] {
            assert_eq!(bits(&other.weights), bits(&r.weights), "weights");
            assert_eq!(bits(&other.adam_m), bits(&r.adam_m), "adam_m");
            assert_eq!(bits(&other.adam_v), bits(&r.adam_v), "adam_v");
            assert_eq!(other.progress.rng_state, r.progress.rng_state, "batch sampler");
        }
    }

    #[test]
    fn several_parts_match_the_whole_step_within_rounding() {
        let (mut whole, mut parts) = (trainer(12), trainer(12));
        for _ in 0..5 {
            let w = whole.step().unwrap();
            // Uneven parts: 5 + 5 + the 2 rows left.
            assert_eq!(parts.step_part(5).unwrap(), None);
            assert_eq!(parts.rows_done(), 5);
            assert_eq!(parts.step_part(5).unwrap(), None);
            let p = parts.step_part(5).unwrap().expect("the last rows end the step");
            assert_eq!(parts.rows_done(), 0);
            assert_eq!((p.step, p.lr.to_bits(), p.tokens), (w.step, w.lr.to_bits(), w.tokens));
            let rel = relative(p.train_loss, w.train_loss);
            assert!(rel <= 1e-5, "step {}: {} vs {} (relative {rel:e})", w.step, p.train_loss, w.train_loss);
        }
        let (w, p) = (state(&whole), state(&parts));
        assert_eq!(p.progress, w.progress, "same step count, tokens and sampler state");
        // Rounding in the summed gradients moves each AdamW update (about lr = 3e-3 a step) by
        // far less than 1e-5 over these 5 steps (about 1.4e-6 at worst when written).
        for (name, a, b) in [("weights", &w.weights, &p.weights), ("adam_m", &w.adam_m, &p.adam_m)] {
            let worst = a.iter().zip(b.iter()).map(|(x, y)| (x - y).abs()).fold(0.0, f32::max);
            assert!(worst <= 1e-5, "{name}: worst difference {worst:e}");
        }
    }

    #[test]
    fn a_part_given_up_changes_nothing_and_is_taken_again_the_same() {
        let (mut plain, mut gives_up) = (trainer(12), trainer(12));
        for _ in 0..3 {
            // A whole step given up, then taken.
            let before = state(&gives_up);
            assert_eq!(gives_up.step_part_unless(12, || true), Part::GivenUp);
            let after = state(&gives_up);
            assert_eq!(gives_up.rows_done(), 0);
            assert_eq!(after.progress, before.progress, "step count, tokens and sampler state");
            assert_eq!(bits(&after.weights), bits(&before.weights), "weights");
            assert_eq!(bits(&after.adam_m), bits(&before.adam_m), "adam_m");
            assert_eq!(gives_up.unread_losses(), plain.unread_losses());
            let expected = plain.step().unwrap();
            assert_eq!(gives_up.step().unwrap(), expected);
        }
        // Parts: the second of 6 + 6 rows given up once, then taken.
        let (mut parts, mut gives_up_parts) = (trainer(12), trainer(12));
        assert_eq!(parts.step_part(6).unwrap(), None);
        let expected = parts.step_part(6).unwrap().expect("the last rows end the step");
        assert_eq!(gives_up_parts.step_part(6).unwrap(), None);
        assert_eq!(gives_up_parts.step_part_unless(6, || true), Part::GivenUp);
        assert_eq!(gives_up_parts.rows_done(), 6, "the first part stays");
        assert_eq!(gives_up_parts.step_part(6).unwrap().expect("the last rows end the step"), expected);
        let (p, g) = (state(&parts), state(&gives_up_parts));
        assert_eq!(bits(&g.weights), bits(&p.weights), "weights");
        assert_eq!(bits(&g.adam_v), bits(&p.adam_v), "adam_v");
    }

    #[test]
    fn deferred_steps_read_later_are_the_same_steps() {
        let (mut read_now, mut deferred) = (trainer(12), trainer(12));
        let mut expected = Vec::new();
        for _ in 0..9 {
            let a = read_now.step_part(5).unwrap();
            let b = deferred.step_part_deferred(5);
            assert_eq!(a.is_some(), b.is_some(), "the same parts end the same steps");
            if let (Some(a), Some(b)) = (a, b) {
                assert_eq!(
                    (b.step, b.lr.to_bits(), b.tokens, b.eval_due),
                    (a.step, a.lr.to_bits(), a.tokens, a.eval_due)
                );
                expected.push(a.train_loss);
            }
        }
        assert_eq!(expected.len(), 3, "9 parts of 5, 5, 2 rows are 3 steps");
        assert_eq!((deferred.unread_losses(), deferred.history().len()), (3, 0));
        // A checkpoint taken now still has every step in its history.
        let unread_state = state(&deferred);
        // The losses are read only now, after later steps changed the weights.
        let points = block_on(deferred.read_losses()).unwrap();
        assert_eq!(deferred.unread_losses(), 0);
        for history in [&points[..], deferred.history(), read_now.history(), &unread_state.history] {
            let steps: Vec<_> = history.iter().map(|p| p.step).collect();
            let losses: Vec<_> = history.iter().map(|p| p.train_loss.to_bits()).collect();
            assert_eq!(steps, [1, 2, 3]);
            assert_eq!(losses, bits(&expected));
        }
        assert_eq!(bits(&state(&deferred).weights), bits(&state(&read_now).weights));
    }

    #[test]
    fn between_parts_the_trainer_is_still_at_the_step_before() {
        let mut t = trainer(8);
        t.step().unwrap();
        let before = state(&t);
        assert_eq!(t.step_part(3).unwrap(), None);
        let during = state(&t);
        assert_eq!(bits(&during.weights), bits(&before.weights));
        assert_eq!(during.progress, before.progress, "a checkpoint now would replay the whole step");
        let finished = t.step_part(8).unwrap().expect("the 5 rows left end the step");
        assert_eq!(finished.step, 2);

        let (model, config, data) = (t.model.config().clone(), t.config.clone(), t.dataset.clone());
        let mut resumed = Trainer::resume(&CpuBackend::new(1), model, config, data, before).unwrap();
        let whole = resumed.step().unwrap();
        assert!(relative(finished.train_loss, whole.train_loss) <= 1e-5, "{finished:?} vs {whole:?}");
        assert_eq!(state(&resumed).progress, state(&t).progress);
    }

    #[test]
    fn evaluation_in_parts_matches_whole_batches() {
        let mut t = trainer(8);
        t.step().unwrap();
        let expected = t.evaluate(Split::Val).unwrap();
        let score = |rows: usize| {
            let mut eval = Evaluation::new(&t, Split::Val);
            let mut parts = 0;
            loop {
                parts += 1;
                if let Some(loss) = block_on(eval.next_part(&t, rows)).unwrap() {
                    return (loss, parts);
                }
            }
        };
        let batches = t.config.eval_batches;
        assert_eq!(score(8), (expected, batches), "one part a batch is next_batch bit for bit");
        let (split, parts) = score(3);
        assert_eq!(parts, 3 * batches, "3 + 3 + 2 rows a batch");
        assert!(relative(split, expected) <= 1e-6, "{split} vs {expected}");
    }
}

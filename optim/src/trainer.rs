//! The training loop's step: sample a batch, forward, backward, AdamW.
//!
//! Randomness, so that any backend replays a run exactly: weights come from
//! `Rng::new(seed)` (see `Params::init`), training batches from `Rng::new(seed ^ BATCH_SALT)`
//! (whose state checkpoints save as `rng_state`), and evaluation batches from a fresh
//! `Rng::new(seed ^ EVAL_SALT_*)` on every evaluation, so each one scores the same windows.

use tinygpt_autograd::Tape;
use tinygpt_model::{Dataset, Gpt, ModelConfig, ModelError, Params, Split};
use tinygpt_tensor::{block_on, Backend, Indices, Rng};

use crate::adamw::AdamW;
use crate::config::TrainingConfig;
use crate::error::TrainError;
use crate::schedule::learning_rate;
use crate::state::{LossPoint, TrainerProgress};

pub const BATCH_SALT: u64 = 0xBA7C_4E55_0000_0001;
pub const EVAL_SALT_TRAIN: u64 = 0xE7A1_0000_0000_0002;
pub const EVAL_SALT_VAL: u64 = 0xE7A1_0000_0000_0003;

/// What one optimizer step did.
#[derive(Clone, Debug, PartialEq)]
pub struct StepReport {
    /// Steps completed, this one included.
    pub step: usize,
    pub train_loss: f32,
    pub lr: f32,
    /// Tokens in this step's batch.
    pub tokens: usize,
    /// Whether this step ends an evaluation interval (or the run): the caller should
    /// [`Trainer::evaluate`] and [`Trainer::record_eval`].
    pub eval_due: bool,
}

/// Everything a run needs besides the backend: model, optimizer, data and progress.
#[derive(Debug)]
pub struct Trainer<B: Backend> {
    model: Gpt<B>,
    optimizer: AdamW<B>,
    config: TrainingConfig,
    dataset: Dataset,
    rng: Rng,
    progress: TrainerProgress,
    history: Vec<LossPoint>,
}

/// The parts of a saved run that [`Trainer::resume`] restores.
#[derive(Clone, Debug)]
pub struct ResumeState {
    pub weights: Vec<f32>,
    pub adam_m: Vec<f32>,
    pub adam_v: Vec<f32>,
    pub progress: TrainerProgress,
    pub history: Vec<LossPoint>,
}

fn check_fits(model: &ModelConfig, config: &TrainingConfig, dataset: &Dataset) -> Result<(), TrainError> {
    model.validate()?;
    config.validate()?;
    let shortest = dataset.split(Split::Train).len().min(dataset.split(Split::Val).len());
    if shortest <= model.context_length {
        let bytes = dataset.manifest().raw_bytes;
        let context = model.context_length;
        return Err(ModelError::DatasetTooShort { bytes, context, needed: 10 * (context + 1) }.into());
    }
    Ok(())
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
        let optimizer = AdamW::new(model.params().tensors());
        let rng = Rng::new(config.seed ^ BATCH_SALT);
        let progress = TrainerProgress {
            step: 0,
            tokens_seen: 0,
            best_val_loss: None,
            wall_time_sec: 0.0,
            rng_state: rng.state(),
        };
        Ok(Trainer { model, optimizer, config, dataset, rng, progress, history: Vec::new() })
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
        let optimizer = AdamW::from_flat(
            model.params().tensors(),
            &state.adam_m,
            &state.adam_v,
            state.progress.step as u32,
        );
        let rng = Rng::from_state(state.progress.rng_state);
        Ok(Trainer {
            model,
            optimizer,
            config,
            dataset,
            rng,
            progress: state.progress,
            history: state.history,
        })
    }

    pub fn model(&self) -> &Gpt<B> {
        &self.model
    }

    /// Mutable access, e.g. to freeze parameters before training.
    pub fn model_mut(&mut self) -> &mut Gpt<B> {
        &mut self.model
    }

    pub fn config(&self) -> &TrainingConfig {
        &self.config
    }

    /// Changes the step budget (e.g. `--steps` on resume); other fields are fixed for a run.
    pub fn set_max_steps(&mut self, max_steps: usize) {
        self.config.max_steps = max_steps;
    }

    pub fn dataset(&self) -> &Dataset {
        &self.dataset
    }

    pub fn progress(&self) -> &TrainerProgress {
        &self.progress
    }

    pub fn history(&self) -> &[LossPoint] {
        &self.history
    }

    pub fn is_finished(&self) -> bool {
        self.progress.step >= self.config.max_steps
    }

    /// Adds time spent training (measured by the caller: clocks differ between native and web).
    pub fn add_wall_time(&mut self, seconds: f64) {
        self.progress.wall_time_sec += seconds;
    }

    /// The optimizer moments `(adam_m, adam_v)`, flat in canonical order.
    pub async fn moments(&self) -> Result<(Vec<f32>, Vec<f32>), TrainError> {
        Ok(self.optimizer.to_flat().await?)
    }

    /// Everything [`Trainer::resume`] needs, read back from the device.
    pub async fn resume_state(&self) -> Result<ResumeState, TrainError> {
        let weights = self.model.params().to_flat().await?;
        let (adam_m, adam_v) = self.moments().await?;
        Ok(ResumeState {
            weights,
            adam_m,
            adam_v,
            progress: self.progress.clone(),
            history: self.history.clone(),
        })
    }

    /// One optimizer step on the next training batch.
    pub async fn step_async(&mut self) -> Result<StepReport, TrainError> {
        let (batch, seq) = (self.config.batch_size, self.model.config().context_length);
        let data = self.dataset.batch(Split::Train, batch, seq, &mut self.rng);
        let backend = self.model.params().tensors()[0].backend().clone();
        let inputs = Indices::new(&backend, &data.inputs);
        let targets = Indices::new(&backend, &data.targets);

        let tape = Tape::new();
        let (loss, fwd) = self.model.loss(&tape, &inputs, &targets, batch, seq);
        let mut grads = tape.backward(&loss);
        let grads: Vec<_> = fwd.params.iter().map(|p| grads.take(p)).collect();
        drop(tape);

        let lr = learning_rate(&self.config, self.progress.step);
        self.optimizer.update(self.model.params().tensors(), &grads, lr, &self.config);
        let train_loss = loss.value().read().await?[0];

        self.progress.step += 1;
        self.progress.tokens_seen += (batch * seq) as u64;
        self.progress.rng_state = self.rng.state();
        if !train_loss.is_finite() {
            return Err(TrainError::Diverged { step: self.progress.step, loss: train_loss });
        }
        let step = self.progress.step;
        let eval_due = step.is_multiple_of(self.config.eval_interval) || step == self.config.max_steps;
        Ok(StepReport { step, train_loss, lr, tokens: batch * seq, eval_due })
    }

    /// [`Trainer::step_async`] for synchronous callers (see `tinygpt_tensor::block_on`).
    pub fn step(&mut self) -> Result<StepReport, TrainError> {
        block_on(self.step_async())
    }

    /// Mean loss over `eval_batches` fixed batches of `split` (the same windows every time).
    pub async fn evaluate_async(&self, split: Split) -> Result<f32, TrainError> {
        let mut evaluation = Evaluation::new(self, split);
        loop {
            if let Some(loss) = evaluation.next_batch(self).await? {
                return Ok(loss);
            }
        }
    }

    /// [`Trainer::evaluate_async`] for synchronous callers.
    pub fn evaluate(&self, split: Split) -> Result<f32, TrainError> {
        block_on(self.evaluate_async(split))
    }

    /// Appends an evaluation point to the loss history and tracks the best validation loss.
    pub fn record_eval(&mut self, train_loss: f32, val_loss: f32) {
        self.history.push(LossPoint { step: self.progress.step, train_loss, val_loss: Some(val_loss) });
        if self.progress.best_val_loss.is_none_or(|best| val_loss < best) {
            self.progress.best_val_loss = Some(val_loss);
        }
    }
}

/// An evaluation scored a batch at a time, so callers can spread it over several slices
/// of work (the web worker answers pause and stop between batches). It draws
/// `eval_batches` batches of the training batch size from a fresh `Rng::new(seed ^
/// EVAL_SALT_*)` and averages their losses in f64.
#[derive(Clone, Debug)]
pub struct Evaluation {
    split: Split,
    rng: Rng,
    done: usize,
    total: f64,
}

impl Evaluation {
    pub fn new<B: Backend>(trainer: &Trainer<B>, split: Split) -> Self {
        let salt = match split {
            Split::Train => EVAL_SALT_TRAIN,
            Split::Val => EVAL_SALT_VAL,
        };
        Evaluation { split, rng: Rng::new(trainer.config.seed ^ salt), done: 0, total: 0.0 }
    }

    /// Scores one more batch; returns the mean loss once all `eval_batches` are in.
    pub async fn next_batch<B: Backend>(&mut self, trainer: &Trainer<B>) -> Result<Option<f32>, TrainError> {
        let config = &trainer.config;
        let (batch, seq) = (config.batch_size, trainer.model.config().context_length);
        let data = trainer.dataset.batch(self.split, batch, seq, &mut self.rng);
        let backend = trainer.model.params().tensors()[0].backend().clone();
        let tape = Tape::no_grad();
        let inputs = Indices::new(&backend, &data.inputs);
        let targets = Indices::new(&backend, &data.targets);
        let (loss, _) = trainer.model.loss(&tape, &inputs, &targets, batch, seq);
        self.total += loss.value().read().await?[0] as f64;
        self.done += 1;
        Ok((self.done >= config.eval_batches).then(|| (self.total / config.eval_batches as f64) as f32))
    }
}

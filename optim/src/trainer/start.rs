//! [`Trainer::new`], the one way a run starts: what is trained ([`TrainedSet`]) and, when
//! it continues a saved run, the state it continues from ([`ResumeState`]).

use tinygpt_model::{Dataset, Gpt, ModelConfig, ModelError, Params};
use tinygpt_tensor::{Backend, Precision, Rng, Tensor};

use super::trained_set::{trained_groups, trained_tensors, TrainedSet};
use super::Trainer;
use crate::adamw::AdamW;
use crate::error::TrainError;
use crate::loss_scale::GradScaler;
use tinygpt_run::{LossPoint, TrainerProgress, TrainingConfig, BATCH_SALT};

/// The parts of a saved run that [`Trainer::new`] continues from.
#[derive(Clone, Debug)]
pub struct ResumeState {
    /// The trained set's tensors, flat (all the model's parameters; ignored for an adapter,
    /// whose [`TrainedSet::Adapter`] holds them).
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

impl<B: Backend> Trainer<B> {
    /// A run that trains `trained` under `config` on `dataset`: fresh when `resume` is
    /// `None` (batches from `Rng::new(seed ^ BATCH_SALT)`), else continuing the saved run,
    /// which gives the very same steps as never stopping. Empty `adam_m` and `adam_v` (a
    /// weights-only checkpoint) start the moments at zero, AdamW's count at the run's step
    /// (see `adam_steps`), for either trained set.
    pub fn new(
        trained: TrainedSet<B>,
        config: TrainingConfig,
        dataset: Dataset,
        resume: Option<ResumeState>,
    ) -> Result<Self, TrainError> {
        let (model, adapter) = match trained {
            TrainedSet::WholeModel { backend, model } => {
                check_fits(&model, &config, &dataset)?;
                let model = match &resume {
                    None => Gpt::init(&backend, model, &mut Rng::new(config.seed))?,
                    Some(state) => {
                        Gpt::new(model.clone(), Params::from_flat(&backend, &model, &state.weights)?)?
                    }
                };
                (model, None)
            }
            TrainedSet::Adapter { base, adapter, options } => {
                check_fits(base.config(), &config, &dataset)?;
                (base, Some((adapter, options)))
            }
        };
        let tensors = trained_tensors(&model, &adapter);
        let groups = trained_groups(&model, &adapter, &config);
        let (optimizer, progress, history) = match resume {
            None => (AdamW::new(tensors, groups), fresh_progress(&config), Vec::new()),
            Some(mut state) => {
                let n: usize = tensors.iter().map(Tensor::numel).sum();
                if state.adam_m.is_empty() && state.adam_v.is_empty() {
                    (state.adam_m, state.adam_v) = (vec![0.0; n], vec![0.0; n]);
                }
                let names = if adapter.is_some() { ["adapter_m", "adapter_v"] } else { ["adam_m", "adam_v"] };
                for (name, moments) in names.into_iter().zip([&state.adam_m, &state.adam_v]) {
                    if moments.len() != n {
                        let got = moments.len();
                        return Err(
                            ModelError::WeightsMismatch { name: name.into(), expected: n, got }.into()
                        );
                    }
                }
                let steps = adam_steps(&state.progress);
                let optimizer = AdamW::from_flat(tensors, groups, &state.adam_m, &state.adam_v, steps);
                (optimizer, state.progress, state.history)
            }
        };
        let progress = with_loss_scale(progress, &config);
        Ok(Trainer {
            model,
            adapter,
            optimizer,
            config,
            dataset,
            rng: Rng::from_state(progress.rng_state),
            progress,
            history,
            partial: None,
            unread: Vec::new(),
            regroup_due: false,
            scratch: Default::default(),
        }
        .with_history_reserved())
    }
}

impl ResumeState {
    /// A fresh run of the whole model that starts from `weights` instead of a random draw
    /// (fine-tuning a pretrained model): step 0, zero moments, no history, batches as any
    /// fresh run of `config` draws them.
    pub fn from_weights(weights: Vec<f32>, config: &TrainingConfig) -> Self {
        ResumeState {
            weights,
            adam_m: Vec::new(),
            adam_v: Vec::new(),
            progress: fresh_progress(config),
            history: Vec::new(),
        }
    }
}

/// Where a fresh run stands: step 0, the batch sampler at `seed ^ BATCH_SALT`.
fn fresh_progress(config: &TrainingConfig) -> TrainerProgress {
    TrainerProgress {
        step: 0,
        tokens_seen: 0,
        best_val_loss: None,
        wall_time_sec: 0.0,
        rng_state: Rng::new(config.seed ^ BATCH_SALT).state(),
        loss_scale: None,
    }
}

fn check_fits(model: &ModelConfig, config: &TrainingConfig, dataset: &Dataset) -> Result<(), TrainError> {
    model.validate()?;
    config.validate()?;
    // Mixed precision needs a backend with a narrow matmul; which backends have one is the
    // composition root's to say (the CLI and the web worker refuse it on their CPU backends).
    // A browser cannot block on loss scaling's readback: it drives the step with
    // `queue_part` and awaits `finish_update`.
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

//! Training: AdamW over parameter groups in flat buffers, learning-rate schedules,
//! gradient clipping, the training step ([`Trainer`]) and the run loop every caller drives
//! ([`TrainingRun`]).
#![warn(missing_docs)]

mod adamw;
mod adapter_run;
#[cfg(feature = "ckpt")]
mod checkpoint;
pub mod early_stop;
mod error;
mod evaluation;
mod flat;
mod groups;
mod loss_scale;
mod recipe;
mod reference_state;
mod schedule;
mod trainer;
mod training_run;

pub use adamw::AdamW;
pub use adapter_run::{adapter_training_config, ADAPTER_INIT_SALT, DEFAULT_ADAPTER_STEPS};
pub use error::TrainError;
pub use evaluation::{Evaluation, EVAL_SALT_TRAIN, EVAL_SALT_VAL};
pub use flat::Slot;
pub use groups::{GroupOptions, ParamGroup};
pub use loss_scale::GradScaler;
pub use recipe::{Overrides, Recipe};
pub use reference_state::{reference_state, ReferenceState};
pub use schedule::{learning_rate, min_lr_for};
/// The run's plain data (configs, progress, history), defined in `tinygpt-run` so that the
/// checkpoint format can store it without depending on the trainer.
pub use tinygpt_run::{
    InvalidTrainingConfig, LossPoint, LossScaleState, ScheduleKind, TrainerProgress, TrainingConfig,
    BATCH_SALT,
};
pub use trainer::{ResumeState, RowPart, StepDone, StepReport, TrainedSet, Trainer};
pub use training_run::{BestEval, RunEvent, TrainingRun, Unhurried, UnitHooks};

/// The README's examples, compiled and run as doctests.
#[cfg(doctest)]
#[doc = include_str!("../README.md")]
pub struct ReadmeDoctests;

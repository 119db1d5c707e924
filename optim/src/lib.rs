//! Training: AdamW over parameter groups in flat buffers, learning-rate schedules,
//! gradient clipping and the training step.

mod adamw;
mod config;
pub mod early_stop;
mod error;
mod evaluation;
mod flat;
mod groups;
mod recipe;
mod reference_state;
mod schedule;
mod state;
mod trainer;

pub use adamw::AdamW;
pub use config::{ScheduleKind, TrainingConfig};
pub use error::TrainError;
pub use evaluation::Evaluation;
pub use flat::Slot;
pub use groups::{GroupOptions, ParamGroup};
pub use recipe::{Overrides, Recipe};
pub use reference_state::{reference_state, ReferenceState};
pub use schedule::learning_rate;
pub use state::{LossPoint, TrainerProgress};
pub use trainer::{ResumeState, StepDone, StepReport, Trainer, BATCH_SALT, EVAL_SALT_TRAIN, EVAL_SALT_VAL};

/// The README's examples, compiled and run as doctests.
#[cfg(doctest)]
#[doc = include_str!("../README.md")]
pub struct ReadmeDoctests;

//! Training: AdamW, learning-rate schedules, gradient clipping and the training step.

mod adamw;
mod config;
mod error;
mod schedule;
mod state;
mod trainer;

pub use adamw::AdamW;
pub use config::{ScheduleKind, TrainingConfig};
pub use error::TrainError;
pub use schedule::learning_rate;
pub use state::{LossPoint, TrainerProgress};
pub use trainer::{Evaluation, ResumeState, StepReport, Trainer, BATCH_SALT, EVAL_SALT_TRAIN, EVAL_SALT_VAL};

//! Training: AdamW, learning-rate schedules, gradient clipping and the training step.

mod adamw;
mod config;
mod error;
mod evaluation;
mod schedule;
mod state;
mod trainer;

pub use adamw::AdamW;
pub use config::{ScheduleKind, TrainingConfig};
pub use error::TrainError;
pub use evaluation::Evaluation;
pub use schedule::learning_rate;
pub use state::{LossPoint, TrainerProgress};
pub use trainer::{ResumeState, StepReport, Trainer, BATCH_SALT, EVAL_SALT_TRAIN, EVAL_SALT_VAL};

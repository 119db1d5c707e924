//! Training: AdamW, learning-rate schedules, gradient clipping and the training loop step.

mod config;
mod error;
mod state;

pub use config::{ScheduleKind, TrainingConfig};
pub use error::TrainError;
pub use state::{LossPoint, TrainerProgress};

//! A training run as plain data: how it trains ([`TrainingConfig`], `training_config.json`)
//! and where it stands ([`TrainerProgress`] and [`LossPoint`], `trainer_state.json` and
//! `loss_history.json`).
//!
//! These types sit below both the trainer (`tinygpt-optim`, which runs them) and the
//! checkpoint format (`tinygpt-ckpt`, which stores them), so that neither needs the other:
//! a checkpoint reader takes no training code, and the trainer re-exports them unchanged.
#![warn(missing_docs)]

mod config;
mod error;
mod progress;

pub use config::{ScheduleKind, TrainingConfig};
pub use error::InvalidTrainingConfig;
pub use progress::{LossPoint, TrainerProgress};

/// Salt of the training batch sampler's seed: batches come from `Rng::new(seed ^ BATCH_SALT)`.
/// Part of the run's definition (a checkpoint converted from another trainer starts its
/// sampler here), so it lives with the data rather than in the trainer.
pub const BATCH_SALT: u64 = 0xBA7C_4E55_0000_0001;

/// The README's examples, compiled and run as doctests.
#[cfg(doctest)]
#[doc = include_str!("../README.md")]
pub struct ReadmeDoctests;

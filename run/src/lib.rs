//! A training run as plain data: the model's architecture ([`ModelConfig`],
//! `model_config.json`, with its canonical tensor names and shapes from [`GptParts::build`]),
//! how it trains ([`TrainingConfig`], `training_config.json`), what it trains on
//! ([`DatasetManifest`]), the adapter it trains ([`LoraConfig`]) and where it stands
//! ([`TrainerProgress`] and [`LossPoint`], `trainer_state.json` and `loss_history.json`).
//!
//! These types sit below both the trainer (`tinygpt-model` and `tinygpt-optim`, which run
//! them and re-export them unchanged) and the checkpoint format (`tinygpt-ckpt`, which stores
//! them), so that neither needs the other: a checkpoint reader takes no training code.
#![warn(missing_docs)]

mod config;
mod dataset;
mod error;
mod lora;
mod model_config;
mod progress;
mod structure;

pub use config::{ScheduleKind, TrainingConfig};
pub use dataset::DatasetManifest;
pub use error::{ConfigError, InvalidTrainingConfig};
pub use lora::LoraConfig;
pub use model_config::{is_bpe_name, ModelConfig, Preset, TensorSpec, BYTE_V1};
pub use progress::{LossPoint, LossScaleState, TrainerProgress};
pub use structure::{Block, GptParts, Init, LayerNorm, Linear, LinearKind, TensorDecl};

/// Salt of the training batch sampler's seed: batches come from `Rng::new(seed ^ BATCH_SALT)`.
/// Part of the run's definition (a checkpoint converted from another trainer starts its
/// sampler here), so it lives with the data rather than in the trainer.
pub const BATCH_SALT: u64 = 0xBA7C_4E55_0000_0001;

/// The README's examples, compiled and run as doctests.
#[cfg(doctest)]
#[doc = include_str!("../README.md")]
pub struct ReadmeDoctests;

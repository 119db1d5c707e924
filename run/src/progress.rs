//! The trainer's own progress, as `trainer_state.json` and `loss_history.json` store it.

use serde::{Deserialize, Serialize};

/// Where a run stands, apart from weights and optimizer moments.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct TrainerProgress {
    /// Optimizer steps completed.
    pub step: usize,
    /// Training tokens consumed (steps × batch × context).
    pub tokens_seen: u64,
    /// Lowest validation loss seen so far (`None` before the first evaluation).
    pub best_val_loss: Option<f32>,
    /// Seconds spent training, summed over sessions.
    pub wall_time_sec: f64,
    /// The batch sampler's `tinygpt_tensor::Rng` state.
    pub rng_state: u64,
}

/// One entry of `loss_history.json`: every logged step, with the validation loss at
/// evaluation points.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct LossPoint {
    /// The optimizer step this loss was measured after.
    pub step: usize,
    /// That step's training loss (the batch's mean cross-entropy).
    pub train_loss: f32,
    /// The validation loss, at evaluation points only.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub val_loss: Option<f32>,
}

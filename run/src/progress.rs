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
    /// Dynamic loss scaling's state, in a run trained at `precision: mixed` (`None` in f32
    /// runs, and then not written: their trainer_state.json stays byte for byte as it was).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub loss_scale: Option<LossScaleState>,
}

/// Where dynamic loss scaling stands (`tinygpt_optim::GradScaler` updates it after every
/// step), saved so that a resumed mixed-precision run continues exactly.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LossScaleState {
    /// The factor the loss's gradient is multiplied by before the backward pass (a power of
    /// two, so scaling and unscaling are exact in f32).
    pub scale: f32,
    /// Steps in a row whose gradients were finite since the scale last changed (PyTorch
    /// GradScaler's `_growth_tracker`).
    pub growth_tracker: u32,
    /// Steps whose update was skipped because a gradient was not finite, over the whole run.
    /// They count as steps (batch, schedule, `step`) but not as AdamW updates, whose
    /// bias-correction count is `step - skipped_steps`.
    pub skipped_steps: usize,
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

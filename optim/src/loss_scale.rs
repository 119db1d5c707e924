//! Dynamic loss scaling for mixed-precision training ([`GradScaler`]), as PyTorch's
//! `torch.amp.GradScaler` does it.
//!
//! Why: with `precision: mixed` the backend rounds every matmul input to f16, whose
//! smallest subnormal is 2⁻²⁴ ≈ 6e-8 and smallest normal 2⁻¹⁴ ≈ 6e-5. The backward
//! pass's matmuls take gradients as inputs, and a small model's gradients sit largely
//! below 6e-5 (`tests/loss_scaling.rs` measures them): rounded to f16 they lose their bits
//! or become zero, and the run learns slowly or not at all. The trainer therefore seeds the
//! backward pass with `scale` (a power of two) times the loss's gradient, so every gradient
//! is `scale` times larger while it flows through the f16 inputs, and divides the summed
//! gradients by `scale` before AdamW sees them. Scaling by a power of two is exact in f32,
//! so AdamW, clipping and the master weights see the gradients an f32 trainer would.
//!
//! Too large a scale overflows f16 (past 65504) into a gradient that is not finite; the step
//! is then skipped and the scale halved. After `growth_interval` steps in a row without
//! overflow the scale doubles, to keep gradients as far above the underflow as the overflow
//! allows. The numbers are GradScaler's defaults: initial scale 2¹⁶, growth ×2 after 2000
//! steps, backoff ×0.5.
//!
//! A skipped step, as with GradScaler (its `step` does not call `optimizer.step()`, the
//! user's loop still calls `scheduler.step()`): the parameters, both moments and AdamW's
//! bias-correction count stay as they were; the step itself is counted: the batch is
//! consumed, the learning-rate schedule moves on, the loss joins the history, and
//! [`LossScaleState::skipped_steps`] says how many such steps the run has had.
//!
//! Cost: one host readback per step (the gradients' global sum of squares, to decide
//! between skipping and updating before AdamW runs), which f32 runs do not pay. Native
//! callers wait for it inside the step (`Trainer::step_part`); the browser, which
//! cannot block on a readback, queues the step (`Trainer::queue_part`), waits for
//! the device as it does after every step, and then awaits the decision
//! (`Trainer::finish_update`). Either way the decision comes before AdamW runs, so a
//! skipped step never applies a non-finite gradient.

use tinygpt_tensor::{Backend, Tensor};

use crate::adamw::AdamW;
use tinygpt_run::{LossScaleState, TrainingConfig};

/// Dynamic loss scaling's rule: where the scale starts and how it moves.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct GradScaler {
    /// The first step's scale.
    pub init_scale: f32,
    /// The scale's factor after `growth_interval` steps in a row without overflow.
    pub growth_factor: f32,
    /// The scale's factor after an overflow.
    pub backoff_factor: f32,
    /// Steps in a row without overflow before the scale grows.
    pub growth_interval: u32,
}

impl GradScaler {
    /// PyTorch's defaults: 2¹⁶, ×2 after 2000 clean steps, ×0.5 on overflow.
    pub const DEFAULT: GradScaler =
        GradScaler { init_scale: 65536.0, growth_factor: 2.0, backoff_factor: 0.5, growth_interval: 2000 };

    /// A run's state before its first step.
    pub fn start(&self) -> LossScaleState {
        LossScaleState { scale: self.init_scale, growth_tracker: 0, skipped_steps: 0 }
    }

    /// After a step whose scaled gradients were `finite` (or not): an overflow skips the
    /// step and backs the scale off; a clean step counts towards growth, and the
    /// `growth_interval`-th in a row grows the scale (unless that would overflow f32, as
    /// GradScaler checks). Returns whether the step's update should be applied.
    pub fn update(&self, state: &mut LossScaleState, finite: bool) -> bool {
        if !finite {
            state.scale *= self.backoff_factor;
            state.growth_tracker = 0;
            state.skipped_steps += 1;
            return false;
        }
        state.growth_tracker += 1;
        if state.growth_tracker == self.growth_interval {
            let grown = state.scale * self.growth_factor;
            if grown.is_finite() {
                state.scale = grown;
            }
            state.growth_tracker = 0;
        }
        true
    }
}

impl Default for GradScaler {
    fn default() -> Self {
        GradScaler::DEFAULT
    }
}

/// Whether the gathered gradients' sum of squares `sumsq` (`[1]`) is finite: loss scaling's
/// one host readback a step. A readback that fails counts as an overflow: nothing is
/// half-applied, and the device's error surfaces at the next loss read. Read into `value`.
pub(crate) async fn read_finite<B: Backend>(sumsq: &Tensor<B>, value: &mut Vec<f32>) -> bool {
    sumsq.read_into(value).await.is_ok() && value[0].is_finite()
}

/// AdamW's update from gathered gradients scaled by `state.scale` (the trainer's
/// mixed-precision step), once [`read_finite`] has said whether their sum of squares
/// `sumsq` is `finite`: unscales them (exactly: `1 / scale` is a power of two) and applies
/// the update with the unscaled sum of squares, so clipping sees the true norm, or, when
/// it is not finite, skips it. Then `scaler` moves the scale. Returns whether the update
/// was applied.
#[allow(clippy::too_many_arguments)]
pub(crate) fn update_scaled<B: Backend>(
    optimizer: &mut AdamW<B>,
    params: &[Tensor<B>],
    sumsq: &Tensor<B>,
    finite: bool,
    lr: f32,
    config: &TrainingConfig,
    scaler: &GradScaler,
    state: &mut LossScaleState,
) -> bool {
    let inv = 1.0 / state.scale;
    if !scaler.update(state, finite) {
        return false;
    }
    optimizer.scale_gathered(inv);
    // Two factors of 1/scale rather than one of 1/scale²: each stays a normal f32, so the
    // result is bit for bit the sum of squares of the unscaled gradients.
    optimizer.apply(params, &sumsq.scale(inv).scale(inv), lr, config);
    true
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn starts_at_2_to_the_16() {
        let s = GradScaler::DEFAULT.start();
        assert_eq!(s, LossScaleState { scale: 65536.0, growth_tracker: 0, skipped_steps: 0 });
    }

    #[test]
    fn an_overflow_skips_the_step_backs_off_and_resets_growth() {
        let scaler = GradScaler::DEFAULT;
        let mut s = scaler.start();
        for _ in 0..5 {
            assert!(scaler.update(&mut s, true));
        }
        assert_eq!((s.scale, s.growth_tracker), (65536.0, 5));
        assert!(!scaler.update(&mut s, false), "a non-finite gradient skips the update");
        assert_eq!(s, LossScaleState { scale: 32768.0, growth_tracker: 0, skipped_steps: 1 });
        assert!(!scaler.update(&mut s, false));
        assert_eq!(s, LossScaleState { scale: 16384.0, growth_tracker: 0, skipped_steps: 2 });
    }

    #[test]
    fn the_scale_doubles_after_the_interval_without_overflow() {
        let scaler = GradScaler::DEFAULT;
        let mut s = scaler.start();
        for _ in 0..1999 {
            assert!(scaler.update(&mut s, true));
        }
        assert_eq!((s.scale, s.growth_tracker), (65536.0, 1999));
        assert!(scaler.update(&mut s, true));
        assert_eq!((s.scale, s.growth_tracker), (131072.0, 0), "the 2000th clean step doubles it");
        // An overflow part-way restarts the count.
        for _ in 0..1000 {
            scaler.update(&mut s, true);
        }
        scaler.update(&mut s, false);
        for _ in 0..1999 {
            scaler.update(&mut s, true);
        }
        assert_eq!((s.scale, s.growth_tracker), (65536.0, 1999));
    }

    #[test]
    fn growth_stops_short_of_infinity() {
        let scaler = GradScaler { growth_interval: 1, ..GradScaler::DEFAULT };
        let mut s = LossScaleState { scale: 2f32.powi(127), growth_tracker: 0, skipped_steps: 0 };
        assert!(scaler.update(&mut s, true));
        assert_eq!((s.scale, s.growth_tracker), (2f32.powi(127), 0));
    }
}

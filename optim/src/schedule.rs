//! Learning rate as a function of the step.

use tinygpt_run::{ScheduleKind, TrainingConfig};

/// The learning rate for the optimizer step that follows `step` completed steps.
///
/// Warm-up (both kinds): `lr * (step + 1) / warmup_steps` while `step < warmup_steps`.
/// Then `constant` stays at `lr`; `cosine` is
/// `min_lr + (lr - min_lr) * 0.5 * (1 + cos(π * p))` with
/// `p = (step - warmup) / (max_steps - warmup)`, clamped to `[0, 1]` (so `min_lr` after `max_steps`).
pub fn learning_rate(config: &TrainingConfig, step: usize) -> f32 {
    let (lr, min_lr, warmup) = (config.learning_rate as f64, config.min_lr as f64, config.warmup_steps);
    if step < warmup {
        return (lr * (step + 1) as f64 / warmup as f64) as f32;
    }
    match config.schedule {
        ScheduleKind::Constant => lr as f32,
        ScheduleKind::Cosine => {
            let span = config.max_steps.saturating_sub(warmup).max(1) as f64;
            let p = ((step - warmup) as f64 / span).clamp(0.0, 1.0);
            (min_lr + (lr - min_lr) * 0.5 * (1.0 + (std::f64::consts::PI * p).cos())) as f32
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cosine() -> TrainingConfig {
        TrainingConfig {
            learning_rate: 1e-3,
            min_lr: 1e-4,
            warmup_steps: 100,
            max_steps: 2000,
            schedule: ScheduleKind::Cosine,
            ..TrainingConfig::default()
        }
    }

    #[test]
    fn warmup_is_linear_then_cosine_reaches_min_lr() {
        let c = cosine();
        assert!((learning_rate(&c, 0) - 1e-5).abs() < 1e-9);
        assert!((learning_rate(&c, 49) - 5e-4).abs() < 1e-9);
        assert!((learning_rate(&c, 100) - 1e-3).abs() < 1e-9);
        assert!((learning_rate(&c, 1050) - 5.5e-4).abs() < 1e-7);
        assert!((learning_rate(&c, 2000) - 1e-4).abs() < 1e-9);
        assert!((learning_rate(&c, 5000) - 1e-4).abs() < 1e-9);
    }

    #[test]
    fn constant_holds_after_warmup() {
        let c = TrainingConfig { schedule: ScheduleKind::Constant, warmup_steps: 0, ..cosine() };
        assert_eq!(learning_rate(&c, 0), 1e-3);
        assert_eq!(learning_rate(&c, 1999), 1e-3);
    }
}

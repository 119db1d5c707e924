//! Learning rate as a function of the step.

use tinygpt_run::{ScheduleKind, TrainingConfig};

/// The cosine schedule's floor when a run names none: a tenth of its peak learning rate,
/// wherever that came from (the defaults, a config file, `--lr`, a LoRA run's default). The
/// documented default (`learning_rate` 3e-4, `min_lr` 3e-5, `docs/model.md`) is this rule.
///
/// A tenth of the number as written: its shortest decimal form with the exponent moved
/// down by one, so 3e-4 gives exactly the f32 nearest 3e-5 (`3e-4 / 10.0` in f32 is one
/// ulp above it, and would not be the documented default).
pub fn min_lr_for(learning_rate: f32) -> f32 {
    let written = format!("{learning_rate:e}");
    let tenth = written.split_once('e').and_then(|(mantissa, exponent)| {
        let exponent: i32 = exponent.parse().ok()?;
        format!("{mantissa}e{}", exponent - 1).parse().ok()
    });
    tenth.unwrap_or(learning_rate / 10.0)
}

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
    fn the_default_min_lr_is_the_rule_applied_to_the_default_learning_rate() {
        let d = TrainingConfig::default();
        assert_eq!(d.min_lr, min_lr_for(d.learning_rate));
        assert_eq!((d.learning_rate, d.min_lr), (3e-4, 3e-5), "as docs/model.md documents");
        assert_eq!(min_lr_for(1e-3), 1e-4);
        assert_eq!(min_lr_for(6e-4), 6e-5);
        for lr in [1e-12f32, 0.5, 3.0, 1.7e-3] {
            let tenth = min_lr_for(lr);
            assert!((tenth - lr / 10.0).abs() <= lr * 1e-6, "{lr}: {tenth}");
        }
    }

    #[test]
    fn constant_holds_after_warmup() {
        let c = TrainingConfig { schedule: ScheduleKind::Constant, warmup_steps: 0, ..cosine() };
        assert_eq!(learning_rate(&c, 0), 1e-3);
        assert_eq!(learning_rate(&c, 1999), 1e-3);
    }
}

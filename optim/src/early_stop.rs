//! Early stopping: a run ends once `early_stop_patience` evaluations in a row have not
//! improved on the best validation loss. The count is derived from the loss history alone
//! (the evaluations after the first one that reached the minimum), so a resumed run stops
//! where the uninterrupted one would have.

use tinygpt_run::LossPoint;
use tinygpt_run::TrainingConfig;

/// Whether `config` asks for early stopping (`early_stop_patience` set and non-zero).
pub fn enabled(config: &TrainingConfig) -> bool {
    config.early_stop_patience.is_some_and(|p| p > 0)
}

/// Evaluations recorded after the first one that reached the lowest validation loss.
pub fn evals_since_best(history: &[LossPoint]) -> usize {
    let vals: Vec<f32> = history.iter().filter_map(|p| p.val_loss).collect();
    let mut best = 0;
    for (i, &v) in vals.iter().enumerate() {
        if v < vals[best] {
            best = i;
        }
    }
    vals.len().saturating_sub(best + 1)
}

/// Whether a run with this `history` should stop under `config`'s patience.
pub fn should_stop(config: &TrainingConfig, history: &[LossPoint]) -> bool {
    match config.early_stop_patience {
        Some(patience) if patience > 0 => evals_since_best(history) >= patience,
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn history(vals: &[Option<f32>]) -> Vec<LossPoint> {
        vals.iter()
            .enumerate()
            .map(|(i, &val_loss)| LossPoint { step: i + 1, train_loss: 3.0, val_loss })
            .collect()
    }

    #[test]
    fn stops_after_patience_evaluations_without_improvement() {
        let config = TrainingConfig { early_stop_patience: Some(2), ..TrainingConfig::default() };
        let h = history(&[Some(3.0), None, Some(2.0), Some(2.5)]);
        assert_eq!(evals_since_best(&h), 1);
        assert!(!should_stop(&config, &h));
        // Equal to the best is no improvement.
        let h = history(&[Some(3.0), None, Some(2.0), Some(2.5), None, Some(2.0)]);
        assert_eq!(evals_since_best(&h), 2);
        assert!(should_stop(&config, &h));
        // An improvement resets the count.
        let h = history(&[Some(3.0), Some(2.0), Some(2.5), Some(1.9)]);
        assert!(!should_stop(&config, &h));
    }

    #[test]
    fn never_stops_when_patience_is_off() {
        let worse = history(&[Some(1.0), Some(2.0), Some(3.0), Some(4.0), Some(5.0)]);
        for patience in [None, Some(0)] {
            let config = TrainingConfig { early_stop_patience: patience, ..TrainingConfig::default() };
            assert!(!enabled(&config));
            assert!(!should_stop(&config, &worse), "{patience:?}");
        }
        assert!(!should_stop(&TrainingConfig::default(), &worse));
    }

    #[test]
    fn null_or_0_patience_keeps_early_stopping_off() {
        for off in [r#"{}"#, r#"{"early_stop_patience": null}"#, r#"{"early_stop_patience": 0}"#] {
            let c: TrainingConfig = serde_json::from_str(off).unwrap();
            assert!(!enabled(&c), "{off}");
        }
    }
}

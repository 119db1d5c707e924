//! `training_config.json`: how a run trains. Defaults are the documented ones and are
//! tested field by field, since a wrong default looks like a model that cannot learn.

use serde::{Deserialize, Serialize};
use tinygpt_tensor::Precision;

use crate::error::InvalidTrainingConfig;

/// Learning-rate schedule shape.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
#[cfg_attr(feature = "ts", derive(ts_rs::TS))]
pub enum ScheduleKind {
    /// Linear warm-up to `learning_rate`, then constant.
    Constant,
    /// Linear warm-up to `learning_rate`, then cosine decay to `min_lr` at `max_steps`.
    Cosine,
}

/// How a run trains (`training_config.json`). Fields left out of the JSON take the
/// [`Default`] values; unknown fields are refused, so a typo is an error, not a default.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
#[cfg_attr(feature = "ts", derive(ts_rs::TS))]
pub struct TrainingConfig {
    /// Sequences per optimizer step.
    pub batch_size: usize,
    /// Peak learning rate, reached at the end of the warm-up.
    pub learning_rate: f32,
    /// AdamW's first-moment decay.
    pub beta1: f32,
    /// AdamW's second-moment decay.
    pub beta2: f32,
    /// AdamW's denominator epsilon.
    pub eps: f32,
    /// Decoupled weight decay, applied to tensors of rank ≥ 2 only (never biases or LayerNorm).
    pub weight_decay: f32,
    /// Global-norm gradient clipping threshold; 0 disables clipping.
    pub grad_clip: f32,
    /// The learning-rate schedule's shape after the warm-up.
    pub schedule: ScheduleKind,
    /// Steps of linear warm-up from 0 to `learning_rate`.
    pub warmup_steps: usize,
    /// The cosine schedule's floor (also the rate past `max_steps`).
    pub min_lr: f32,
    /// The run's length in optimizer steps; the cosine decays over it.
    pub max_steps: usize,
    /// Validation loss is measured every `eval_interval` steps (and at the last step).
    pub eval_interval: usize,
    /// Batches averaged for one validation (or training) loss estimate.
    pub eval_batches: usize,
    /// Seeds the weights' initialisation and the batch sampler.
    pub seed: u64,
    /// A checkpoint is written every `checkpoint_interval` steps.
    pub checkpoint_interval: usize,
    /// Stop training once this many evaluations in a row have not improved on the best
    /// validation loss (`tinygpt_optim::early_stop`); `None` or 0 (the default) never stops early.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[cfg_attr(feature = "ts", ts(optional))]
    pub early_stop_patience: Option<usize>,
    /// How the backend's matrix products round their inputs: `f32` (the default) or `mixed`
    /// (f16 inputs, f32 accumulation; master weights, AdamW and every reduction stay f32, and
    /// the trainer scales the loss dynamically, see `tinygpt_optim::GradScaler`). The
    /// composition root builds its backend with it. Not written when `f32`, so every f32
    /// config, checkpoint and run id stays byte for byte what it was; an unknown name is
    /// refused as the file is read, naming the two.
    #[serde(skip_serializing_if = "is_f32", with = "precision_name")]
    // TypeScript: the `Precision` union the worker's protocol.d.ts declares from
    // `Precision::ALL` (tinygpt-tensor has no serde and no TS); left out when f32.
    #[cfg_attr(feature = "ts", ts(type = "Precision", optional = nullable))]
    pub precision: Precision,
}

fn is_f32(precision: &Precision) -> bool {
    *precision == Precision::F32
}

/// [`Precision`] in JSON as its name (`"f32"`, `"mixed"`), parsed by its `FromStr`: one
/// list of names for flags, configs and messages. `tinygpt-tensor` has no serde, and needs none.
mod precision_name {
    use serde::{Deserialize, Deserializer, Serializer};
    use tinygpt_tensor::Precision;

    pub fn serialize<S: Serializer>(precision: &Precision, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(precision.as_str())
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Precision, D::Error> {
        let name = String::deserialize(d)?;
        name.parse().map_err(serde::de::Error::custom)
    }
}

impl Default for TrainingConfig {
    fn default() -> Self {
        TrainingConfig {
            batch_size: 16,
            learning_rate: 3e-4,
            beta1: 0.9,
            beta2: 0.95,
            eps: 1e-8,
            weight_decay: 0.1,
            grad_clip: 1.0,
            schedule: ScheduleKind::Cosine,
            warmup_steps: 100,
            min_lr: 3e-5,
            max_steps: 2000,
            eval_interval: 100,
            eval_batches: 20,
            seed: 1337,
            checkpoint_interval: 200,
            early_stop_patience: None,
            precision: Precision::F32,
        }
    }
}

impl TrainingConfig {
    /// Rejects values that cannot train, naming the field.
    pub fn validate(&self) -> Result<(), InvalidTrainingConfig> {
        let bad = |field: &'static str, reason: String| Err(InvalidTrainingConfig { field, reason });
        if self.batch_size == 0 {
            return bad("batch_size", "must be positive".into());
        }
        if self.max_steps == 0 {
            return bad("max_steps", "must be positive".into());
        }
        if !(self.learning_rate.is_finite() && self.learning_rate > 0.0) {
            return bad("learning_rate", format!("must be positive, got {}", self.learning_rate));
        }
        if !(self.min_lr.is_finite() && self.min_lr >= 0.0 && self.min_lr <= self.learning_rate) {
            return bad("min_lr", format!("must be in [0, learning_rate], got {}", self.min_lr));
        }
        for (field, b) in [("beta1", self.beta1), ("beta2", self.beta2)] {
            if !(0.0..1.0).contains(&b) {
                return bad(field, format!("must be in [0, 1), got {b}"));
            }
        }
        if !(self.eps.is_finite() && self.eps > 0.0) {
            return bad("eps", format!("must be positive, got {}", self.eps));
        }
        if !self.weight_decay.is_finite() || self.weight_decay < 0.0 {
            return bad("weight_decay", format!("must not be negative, got {}", self.weight_decay));
        }
        if !self.grad_clip.is_finite() || self.grad_clip < 0.0 {
            return bad("grad_clip", format!("must not be negative (0 disables), got {}", self.grad_clip));
        }
        if self.eval_interval == 0 || self.eval_batches == 0 {
            return bad("eval_interval", "eval_interval and eval_batches must be positive".into());
        }
        if self.checkpoint_interval == 0 {
            return bad("checkpoint_interval", "must be positive".into());
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_are_the_documented_ones() {
        let c = TrainingConfig::default();
        assert_eq!(c.batch_size, 16);
        assert_eq!(c.learning_rate, 3e-4);
        assert_eq!((c.beta1, c.beta2), (0.9, 0.95));
        assert_eq!(c.eps, 1e-8);
        assert_eq!(c.weight_decay, 0.1);
        assert_eq!(c.grad_clip, 1.0);
        assert_eq!(c.checkpoint_interval, 200);
        assert_eq!(c.early_stop_patience, None, "early stopping is off by default");
        assert_eq!(c.precision, Precision::F32);
        c.validate().unwrap();
    }

    #[test]
    fn missing_fields_take_defaults_and_unknown_fields_are_refused() {
        let c: TrainingConfig = serde_json::from_str(r#"{"max_steps": 10}"#).unwrap();
        assert_eq!(c, TrainingConfig { max_steps: 10, ..TrainingConfig::default() });
        assert!(serde_json::from_str::<TrainingConfig>(r#"{"learning_rat": 1}"#).is_err());
    }

    #[test]
    fn early_stop_patience_is_off_by_default_and_null_or_0_mean_none_or_zero() {
        let json = serde_json::to_string(&TrainingConfig::default()).unwrap();
        assert!(!json.contains("early_stop_patience"), "the default is not written: {json}");
        let c: TrainingConfig = serde_json::from_str(r#"{"early_stop_patience": 3}"#).unwrap();
        assert_eq!(c.early_stop_patience, Some(3));
    }

    #[test]
    fn precision_is_written_only_when_mixed_and_unknown_names_are_refused() {
        let json = serde_json::to_string(&TrainingConfig::default()).unwrap();
        assert!(!json.contains("precision"), "f32 is not written: {json}");
        let mixed = TrainingConfig { precision: Precision::Mixed, ..TrainingConfig::default() };
        let json = serde_json::to_string(&mixed).unwrap();
        assert!(json.ends_with(r#""precision":"mixed"}"#), "{json}");
        assert_eq!(serde_json::from_str::<TrainingConfig>(&json).unwrap(), mixed);
        let f32: TrainingConfig = serde_json::from_str(r#"{"precision": "f32"}"#).unwrap();
        assert_eq!(f32, TrainingConfig::default());
        let err = serde_json::from_str::<TrainingConfig>(r#"{"precision": "bf16"}"#).unwrap_err();
        assert!(err.to_string().contains("use f32 or mixed"), "{err}");
    }

    #[test]
    fn validation_names_the_field() {
        let c = TrainingConfig { learning_rate: -1.0, ..TrainingConfig::default() };
        assert!(c.validate().unwrap_err().to_string().contains("learning_rate"));
        let c = TrainingConfig { batch_size: 0, ..TrainingConfig::default() };
        assert!(c.validate().unwrap_err().to_string().contains("batch_size"));
    }
}

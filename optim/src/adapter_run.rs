//! A LoRA adapter run built the same way everywhere: the CLI's `tinygpt lora train` and the
//! worker's `trainAdapter` message take their defaults and their adapter's first draw from
//! here, so an adapter trained in the page and one trained in the terminal with the same
//! seed and settings take the same steps (up to each backend's float rounding).
//!
//! Defaults (over [`TrainingConfig::default`]): the learning rate
//! [`DEFAULT_LORA_LEARNING_RATE`] (1e-3) decaying to a tenth of itself (the rule of every run), warm-up of a
//! twentieth of the steps (at most 100), no weight decay (decay would pull the adapter
//! back to the base), an evaluation every 200 steps (at most every `max_steps`), and the
//! base's own batch size and seed.

use serde_json::{Map, Value};
use tinygpt_model::DEFAULT_LORA_LEARNING_RATE;

use crate::error::TrainError;
use crate::recipe::derive_min_lr;
use crate::TrainingConfig;

/// Salt for a fresh adapter's A draw (`seed ^ ADAPTER_INIT_SALT`), apart from the batch
/// sampler's, so the adapter's start does not repeat the batches' random stream.
pub const ADAPTER_INIT_SALT: u64 = 0x10FA_0000_0000_0004;

/// Steps of an adapter run when none are named.
pub const DEFAULT_ADAPTER_STEPS: usize = 1000;

/// The adapter run's config: `fields` (training_config.json names; the ones named win)
/// over the adapter defaults in the module docs, `base` supplying batch size and seed. A
/// run that names no `min_lr` decays to a tenth of its learning rate (the rule every run
/// follows, `crate::schedule::min_lr_for`); named
/// `max_steps` without named `warmup_steps`/`eval_interval` rescale those.
pub fn adapter_training_config(
    base: &TrainingConfig,
    fields: Map<String, Value>,
) -> Result<TrainingConfig, TrainError> {
    let bad = |e: serde_json::Error| TrainError::InvalidConfig {
        field: "training",
        reason: format!("fields: {e}"),
    };
    let number = |name: &str| fields.get(name).and_then(Value::as_f64);
    let steps = number("max_steps").map_or(DEFAULT_ADAPTER_STEPS, |s| s as usize).max(1);
    let lr = number("learning_rate").map_or(DEFAULT_LORA_LEARNING_RATE, |v| v as f32);
    let defaults = TrainingConfig {
        max_steps: steps,
        learning_rate: lr,
        warmup_steps: (steps / 20).min(100),
        weight_decay: 0.0,
        eval_interval: 200.min(steps),
        batch_size: base.batch_size,
        seed: base.seed,
        ..TrainingConfig::default()
    };
    let mut merged = match serde_json::to_value(&defaults).map_err(bad)? {
        Value::Object(map) => map,
        _ => unreachable!("a struct serializes to an object"),
    };
    let names_min_lr = fields.contains_key("min_lr");
    merged.extend(fields);
    let mut config: TrainingConfig = serde_json::from_value(Value::Object(merged)).map_err(bad)?;
    if !names_min_lr {
        derive_min_lr(&mut config);
    }
    config.validate()?;
    Ok(config)
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn fields(v: Value) -> Map<String, Value> {
        v.as_object().unwrap().clone()
    }

    #[test]
    fn adapter_defaults_and_named_fields() {
        let base = TrainingConfig { batch_size: 6, seed: 9, ..TrainingConfig::default() };
        let c = adapter_training_config(&base, Map::new()).unwrap();
        assert_eq!((c.learning_rate, c.min_lr, c.weight_decay), (1e-3, 1e-4, 0.0));
        assert_eq!(
            (c.max_steps, c.warmup_steps, c.eval_interval, c.batch_size, c.seed),
            (1000, 50, 200, 6, 9)
        );
        let c = adapter_training_config(
            &base,
            fields(json!({"max_steps": 50, "learning_rate": 3e-3, "batch_size": 2})),
        )
        .unwrap();
        assert_eq!((c.max_steps, c.warmup_steps, c.eval_interval, c.batch_size), (50, 2, 50, 2));
        assert_eq!((c.learning_rate, c.min_lr), (3e-3, 3e-4));
        let err = adapter_training_config(&base, fields(json!({"learning_rat": 1}))).unwrap_err();
        assert!(err.to_string().contains("learning_rat"), "{err}");
    }
}

//! The one set of rules that turns what a user asked for (a preset or a model config, the
//! training-config fields they named, flag-style overrides) into a run's validated configs.
//! The CLI (`tinygpt train`, with `--config` and flags) and the worker (`train` message)
//! both build their runs here, so a run means the same thing in the terminal and the page.
//!
//! Rules, in order:
//! 1. The model is the explicit model config if there is one, else the preset's.
//! 2. Training fields the caller names win over the defaults ([`TrainingConfig::default`]);
//!    `batch_size` not named is the preset's (when there is a preset).
//! 3. [`Overrides`] win over both.
//! 4. A run that names no `min_lr` decays to a tenth of its learning rate, wherever the
//!    learning rate came from ([`crate::schedule::min_lr_for`], the one rule; the LoRA
//!    runs' defaults apply it too, see [`derive_min_lr`]).
//! 5. Both configs are validated.

use serde_json::{Map, Value};
use tinygpt_model::{ModelConfig, Preset};

use crate::error::TrainError;
use crate::schedule::min_lr_for;
use tinygpt_run::TrainingConfig;

/// What a run is built from. `training` holds only the fields the caller named
/// (training_config.json names); the rest take their defaults.
#[derive(Clone, Debug, Default)]
pub struct Recipe {
    /// A preset's name, for the model.
    pub preset: Option<String>,
    /// A model config (instead of a preset).
    pub model: Option<ModelConfig>,
    /// Training config fields; missing ones take the defaults.
    pub training: Map<String, Value>,
    /// Values from the command line, applied last.
    pub overrides: Overrides,
}

/// Values set on top of the named fields (the CLI's `--steps`, `--batch`, `--lr`, `--seed`).
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct Overrides {
    /// The run's length.
    pub max_steps: Option<usize>,
    /// Sequences per step.
    pub batch_size: Option<usize>,
    /// Peak learning rate.
    pub learning_rate: Option<f32>,
    /// The run's seed.
    pub seed: Option<u64>,
}

/// A `--config` file: `{"preset"?, "model"?, "training"?}`.
#[derive(serde::Deserialize)]
struct ConfigFile {
    preset: Option<String>,
    model: Option<ModelConfig>,
    #[serde(default)]
    training: Map<String, Value>,
}

impl Recipe {
    /// The recipe of a `tinygpt train --config` file's text (`preset`, `model` and
    /// `training`, no overrides), for the tools that time such a run (the step profiles).
    /// The CLI reads its files more strictly, refusing unknown fields.
    pub fn from_config_json(text: &str) -> Result<Recipe, serde_json::Error> {
        let ConfigFile { preset, model, training } = serde_json::from_str(text)?;
        Ok(Recipe { preset, model, training, overrides: Overrides::default() })
    }

    /// The run's model and training configs, validated (see the module docs for the rules).
    pub fn build(self) -> Result<(ModelConfig, TrainingConfig), TrainError> {
        let preset = self.preset.as_deref().map(Preset::by_name).transpose()?;
        let model = match (self.model, &preset) {
            (Some(m), _) => m,
            (None, Some(p)) => p.model.clone(),
            (None, None) => {
                return Err(TrainError::InvalidConfig {
                    field: "model",
                    reason: "is missing: choose a preset or give a model config".into(),
                })
            }
        };
        let names_min_lr = self.training.contains_key("min_lr");
        let mut fields = self.training;
        if let Some(p) = &preset {
            fields.entry("batch_size").or_insert(p.batch_size.into());
        }
        let mut training: TrainingConfig = serde_json::from_value(Value::Object(fields))
            .map_err(|e| TrainError::InvalidConfig { field: "training", reason: format!("fields: {e}") })?;
        let o = self.overrides;
        if let Some(steps) = o.max_steps {
            training.max_steps = steps;
        }
        if let Some(batch) = o.batch_size {
            training.batch_size = batch;
        }
        if let Some(lr) = o.learning_rate {
            training.learning_rate = lr;
        }
        if let Some(seed) = o.seed {
            training.seed = seed;
        }
        if !names_min_lr {
            derive_min_lr(&mut training);
        }
        model.validate()?;
        training.validate()?;
        Ok((model, training))
    }
}

/// Sets `min_lr` by the one rule ([`min_lr_for`]), for a run whose fields name none.
pub(crate) fn derive_min_lr(training: &mut TrainingConfig) {
    training.min_lr = min_lr_for(training.learning_rate);
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn fields(v: Value) -> Map<String, Value> {
        v.as_object().unwrap().clone()
    }

    #[test]
    fn a_learning_rate_from_anywhere_derives_min_lr_only_when_no_min_lr_is_named() {
        let lr = Overrides { learning_rate: Some(1e-3), ..Default::default() };
        let named = Recipe {
            preset: Some("tiny".into()),
            training: fields(json!({"min_lr": 5e-5})),
            overrides: lr,
            ..Default::default()
        };
        let (_, t) = named.build().unwrap();
        assert_eq!((t.learning_rate, t.min_lr), (1e-3, 5e-5));
        let unnamed = Recipe { preset: Some("tiny".into()), overrides: lr, ..Default::default() };
        let (_, t) = unnamed.build().unwrap();
        assert_eq!((t.learning_rate, t.min_lr), (1e-3, 1e-4));
        // The same rule when the learning rate is a named field, or the default.
        let field = Recipe {
            preset: Some("tiny".into()),
            training: fields(json!({"learning_rate": 2e-3})),
            ..Default::default()
        };
        let (_, t) = field.build().unwrap();
        assert_eq!((t.learning_rate, t.min_lr), (2e-3, 2e-4));
        let (_, t) = Recipe { preset: Some("tiny".into()), ..Default::default() }.build().unwrap();
        assert_eq!(t.min_lr, TrainingConfig::default().min_lr);
    }

    #[test]
    fn named_fields_beat_defaults_the_preset_batch_fills_in_and_overrides_beat_both() {
        let large = Preset::by_name("large").unwrap();
        let recipe = Recipe {
            preset: Some("large".into()),
            training: fields(json!({"max_steps": 7, "seed": 3})),
            ..Default::default()
        };
        let (m, t) = recipe.build().unwrap();
        assert_eq!(m, large.model);
        assert_eq!((t.max_steps, t.seed, t.batch_size), (7, 3, large.batch_size));
        assert_eq!(t.learning_rate, TrainingConfig::default().learning_rate);
        let recipe = Recipe {
            preset: Some("large".into()),
            training: fields(json!({"batch_size": 4, "max_steps": 7})),
            overrides: Overrides { max_steps: Some(9), batch_size: Some(2), ..Default::default() },
            ..Default::default()
        };
        let (_, t) = recipe.build().unwrap();
        assert_eq!((t.max_steps, t.batch_size), (9, 2));
    }

    #[test]
    fn a_config_files_text_is_its_preset_model_and_training_fields() {
        let recipe =
            Recipe::from_config_json(r#"{"preset": "large", "training": {"max_steps": 7}}"#).unwrap();
        let (m, t) = recipe.build().unwrap();
        assert_eq!((m, t.max_steps), (Preset::by_name("large").unwrap().model, 7));
        let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../configs/gpt2-124m-lora.json");
        let (m, t) =
            Recipe::from_config_json(&std::fs::read_to_string(path).unwrap()).unwrap().build().unwrap();
        assert_eq!((m.vocab_size, m.n_layers, t.batch_size), (50_257, 12, 4));
        assert!(Recipe::from_config_json(r#"{"preset": 3}"#).is_err());
    }

    #[test]
    fn bad_recipes_are_refused() {
        let err = Recipe::default().build().unwrap_err().to_string();
        assert!(err.contains("choose a preset"), "{err}");
        let typo = Recipe {
            preset: Some("tiny".into()),
            training: fields(json!({"learning_rat": 1})),
            ..Default::default()
        };
        assert!(typo.build().unwrap_err().to_string().contains("learning_rat"));
        let unknown = Recipe { preset: Some("gigantic".into()), ..Default::default() };
        assert!(matches!(unknown.build(), Err(TrainError::Model(_))));
    }
}

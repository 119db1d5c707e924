//! Reads `--config` and the flags of `tinygpt train`; the rules that turn them into a run's
//! configs are `tinygpt_optim::Recipe`'s, shared with the web worker.

use std::path::Path;

use serde::Deserialize;
use serde_json::{Map, Value};
use tinygpt_model::ModelConfig;
use tinygpt_optim::{Overrides, Recipe, TrainingConfig};

use crate::args::TrainArgs;
use crate::error::CliError;

/// The default preset when neither `--preset` nor `--config` names one.
pub const DEFAULT_PRESET: &str = "small";

/// The `--config` file: a preset and/or explicit configs (fields missing from `training`
/// take their documented defaults; `batch_size` the preset's).
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct ConfigFile {
    preset: Option<String>,
    #[serde(default, deserialize_with = "strict_model")]
    model: Option<ModelConfig>,
    training: Option<Map<String, Value>>,
}

/// The `model` section, refusing fields ModelConfig does not have (as the top level does):
/// a misspelt `n_layer` must not silently train the default.
fn strict_model<'de, D: serde::Deserializer<'de>>(de: D) -> Result<Option<ModelConfig>, D::Error> {
    use serde::de::Error;
    let value = serde_json::Value::deserialize(de)?;
    // The reference config's fields, and `tokenizer`, which a byte-level config leaves out
    // when it is written (a BPE model names its tokenizer there).
    let reference = ModelConfig { tokenizer: "bpe-0000000000000000".into(), ..ModelConfig::reference() };
    let known = serde_json::to_value(reference).map_err(D::Error::custom)?;
    if let (Some(given), Some(known)) = (value.as_object(), known.as_object()) {
        if let Some(unknown) = given.keys().find(|k| !known.contains_key(*k)) {
            let names: Vec<&str> = known.keys().map(String::as_str).collect();
            return Err(D::Error::custom(format!(
                "unknown field `{unknown}` in `model`, expected one of {}",
                names.join(", ")
            )));
        }
    }
    ModelConfig::deserialize(value).map(Some).map_err(D::Error::custom)
}

fn read_config(path: &Path) -> Result<ConfigFile, CliError> {
    let text = std::fs::read_to_string(path).map_err(|source| CliError::Io {
        what: "cannot read config file",
        path: path.to_path_buf(),
        source,
    })?;
    serde_json::from_str(&text).map_err(|source| CliError::Json {
        what: "a config ({\"preset\"?, \"model\"?, \"training\"?})",
        path: path.to_path_buf(),
        source,
    })
}

pub fn positive(flag: &str, v: i64) -> Result<usize, CliError> {
    if v <= 0 {
        return Err(CliError::Usage(format!("{flag} must be positive, got {v}")));
    }
    Ok(v as usize)
}

/// The configs a `--config` file alone describes (`tinygpt bench --config`), validated.
pub fn from_file(path: &Path) -> Result<(ModelConfig, TrainingConfig), CliError> {
    let file = read_config(path)?;
    let recipe = Recipe {
        preset: file.preset,
        model: file.model,
        training: file.training.unwrap_or_default(),
        overrides: Overrides::default(),
    };
    Ok(recipe.build()?)
}

/// The configs a `train` run uses, validated.
pub fn resolve(args: &TrainArgs) -> Result<(ModelConfig, TrainingConfig), CliError> {
    let file = match &args.config {
        Some(path) => read_config(path)?,
        None => ConfigFile::default(),
    };
    let recipe = Recipe {
        preset: Some(args.preset.clone().or(file.preset).unwrap_or_else(|| DEFAULT_PRESET.into())),
        model: file.model,
        training: file.training.unwrap_or_default(),
        overrides: Overrides {
            max_steps: args.steps.map(|s| positive("--steps", s)).transpose()?,
            batch_size: args.batch.map(|b| positive("--batch", b)).transpose()?,
            // Finite, positive and finite as an f32 (`args::values`).
            learning_rate: args.lr.map(|lr| lr as f32),
            seed: args.seed,
        },
    };
    let (model, mut training) = recipe.build()?;
    if let Some(precision) = args.precision {
        training.precision = precision;
    }
    Ok((model, training))
}

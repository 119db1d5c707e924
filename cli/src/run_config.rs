//! Resolves the model and training configs from `--preset`, `--config` and overrides.

use std::path::Path;

use serde::Deserialize;
use tinygpt_model::{ModelConfig, Preset};
use tinygpt_optim::TrainingConfig;

use crate::args::TrainArgs;
use crate::error::CliError;

/// The default preset when neither `--preset` nor `--config` names one.
pub const DEFAULT_PRESET: &str = "small";

/// The `--config` file: a preset and/or explicit configs (fields missing from `training`
/// take their documented defaults).
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct ConfigFile {
    preset: Option<String>,
    model: Option<ModelConfig>,
    training: Option<TrainingConfig>,
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

/// The configs a `train` run uses, validated.
pub fn resolve(args: &TrainArgs) -> Result<(ModelConfig, TrainingConfig), CliError> {
    let file = match &args.config {
        Some(path) => read_config(path)?,
        None => ConfigFile::default(),
    };
    let preset_name = args.preset.clone().or(file.preset).unwrap_or_else(|| DEFAULT_PRESET.into());
    let preset = Preset::by_name(&preset_name)?;
    let model = file.model.unwrap_or(preset.model);
    let mut training = file
        .training
        .unwrap_or(TrainingConfig { batch_size: preset.batch_size, ..TrainingConfig::default() });
    if let Some(steps) = args.steps {
        training.max_steps = positive("--steps", steps)?;
    }
    if let Some(batch) = args.batch {
        training.batch_size = positive("--batch", batch)?;
    }
    if let Some(lr) = args.lr {
        if !(lr.is_finite() && lr > 0.0) {
            return Err(CliError::Usage(format!("--lr must be positive, got {lr}")));
        }
        training.learning_rate = lr as f32;
        training.min_lr = training.learning_rate / 10.0;
    }
    if let Some(seed) = args.seed {
        training.seed = seed;
    }
    model.validate()?;
    training.validate()?;
    Ok((model, training))
}

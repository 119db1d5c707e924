//! Why a training, model or adapter config was refused.

use thiserror::Error;

/// A `training_config.json` value that cannot train, naming the field.
#[derive(Debug, Error, Clone, PartialEq)]
#[error("invalid training config: {field} {reason}")]
pub struct InvalidTrainingConfig {
    /// The field at fault, as it is spelled in the JSON.
    pub field: &'static str,
    /// What is wrong with its value, in words a user can act on.
    pub reason: String,
}

/// A model or adapter config value this implementation cannot run, or an unknown preset.
/// `tinygpt_model::ModelError` has the same variants and converts from this one.
#[derive(Debug, Error, Clone, PartialEq)]
// The variants' fields are the values their messages show.
#[allow(missing_docs)]
pub enum ConfigError {
    /// A config value this implementation cannot run.
    #[error("invalid model config: {field} {reason}")]
    InvalidConfig { field: &'static str, reason: String },
    /// No preset has this name.
    #[error("unknown preset {name:?} (known: {known})")]
    UnknownPreset { name: String, known: String },
}

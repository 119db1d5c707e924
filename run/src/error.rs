//! Why a training config was refused.

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

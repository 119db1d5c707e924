use thiserror::Error;

/// Errors a user can cause through configs and data.
#[derive(Debug, Error, Clone, PartialEq)]
// The variants' fields are the values their messages show.
#[allow(missing_docs)]
pub enum ModelError {
    /// A config value this implementation cannot run.
    #[error("invalid model config: {field} {reason}")]
    InvalidConfig { field: &'static str, reason: String },
    /// No preset has this name.
    #[error("unknown preset {name:?} (known: {known})")]
    UnknownPreset { name: String, known: String },
    /// The text has no bytes.
    #[error("the dataset is empty")]
    EmptyDataset,
    /// The text is too short for a validation window.
    #[error("the dataset is too short: {bytes} bytes, but a context of {context} needs about 10× the context so that the validation split (the last 10%) holds one window of context + 1 bytes; use at least {needed} bytes")]
    DatasetTooShort { bytes: usize, context: usize, needed: usize },
    /// Training would need more memory than there is.
    #[error(
        "training needs about {} but {available_what} is {}; use a smaller model, batch size or context length",
        crate::memory::human_bytes(*needed), crate::memory::human_bytes(*available)
    )]
    OutOfMemory { needed: u64, available: u64, available_what: String },
    /// A parameter's values do not match its shape.
    #[error("parameter {name}: expected {expected} values, got {got}")]
    WeightsMismatch { name: String, expected: usize, got: usize },
}

/// A refused config keeps its variant and message (`?` on a config check works in model code).
impl From<tinygpt_run::ConfigError> for ModelError {
    fn from(e: tinygpt_run::ConfigError) -> Self {
        match e {
            tinygpt_run::ConfigError::InvalidConfig { field, reason } => {
                ModelError::InvalidConfig { field, reason }
            }
            tinygpt_run::ConfigError::UnknownPreset { name, known } => {
                ModelError::UnknownPreset { name, known }
            }
        }
    }
}

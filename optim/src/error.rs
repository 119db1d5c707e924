use thiserror::Error;
use tinygpt_model::ModelError;
use tinygpt_run::InvalidTrainingConfig;
use tinygpt_tensor::TensorError;

/// Why a training step or setup failed.
#[derive(Debug, Error, Clone, PartialEq)]
// The variants' fields are the values their messages show.
#[allow(missing_docs)]
pub enum TrainError {
    /// A training config value that cannot train.
    #[error("invalid training config: {field} {reason}")]
    InvalidConfig { field: &'static str, reason: String },
    /// The model refused a config or data.
    #[error(transparent)]
    Model(#[from] ModelError),
    /// The device failed.
    #[error(transparent)]
    Tensor(#[from] TensorError),
    /// The loss became NaN or infinite.
    #[error("training diverged at step {step}: the loss is {loss}")]
    Diverged { step: usize, loss: f32 },
}

/// A refused `training_config.json` is [`TrainError::InvalidConfig`], with the same message.
impl From<InvalidTrainingConfig> for TrainError {
    fn from(e: InvalidTrainingConfig) -> Self {
        TrainError::InvalidConfig { field: e.field, reason: e.reason }
    }
}

/// A refused model or adapter config is [`TrainError::Model`], as when the model crate refused it.
impl From<tinygpt_run::ConfigError> for TrainError {
    fn from(e: tinygpt_run::ConfigError) -> Self {
        TrainError::Model(e.into())
    }
}

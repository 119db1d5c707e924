use thiserror::Error;
use tinygpt_model::ModelError;
use tinygpt_run::InvalidTrainingConfig;
use tinygpt_tensor::TensorError;

#[derive(Debug, Error, Clone, PartialEq)]
pub enum TrainError {
    #[error("invalid training config: {field} {reason}")]
    InvalidConfig { field: &'static str, reason: String },
    #[error(transparent)]
    Model(#[from] ModelError),
    #[error(transparent)]
    Tensor(#[from] TensorError),
    #[error("training diverged at step {step}: the loss is {loss}")]
    Diverged { step: usize, loss: f32 },
}

/// A refused `training_config.json` is [`TrainError::InvalidConfig`], with the same message.
impl From<InvalidTrainingConfig> for TrainError {
    fn from(e: InvalidTrainingConfig) -> Self {
        TrainError::InvalidConfig { field: e.field, reason: e.reason }
    }
}

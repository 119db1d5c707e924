//! [`WorkerError`]: a protocol error code plus a message a person can act on.

use thiserror::Error;
use tinygpt_model::ModelError;
use tinygpt_optim::TrainError;
use tinygpt_tensor::TensorError;

use crate::protocol::{ErrorCode, OutMessage};

#[derive(Clone, Debug, Error, PartialEq)]
#[error("{message}")]
pub struct WorkerError {
    pub code: ErrorCode,
    pub message: String,
}

impl WorkerError {
    pub fn new(code: ErrorCode, message: impl Into<String>) -> Self {
        WorkerError { code, message: message.into() }
    }

    pub fn no_run(what: &str) -> Self {
        Self::new(
            ErrorCode::NoRun,
            format!("There is no model to {what} yet: start training or load a checkpoint first."),
        )
    }

    pub fn to_message(&self) -> OutMessage {
        OutMessage::Error { code: self.code, message: self.message.clone() }
    }
}

/// A refused model or adapter config reads as the model crate's refusal.
impl From<tinygpt_model::ConfigError> for WorkerError {
    fn from(e: tinygpt_model::ConfigError) -> Self {
        ModelError::from(e).into()
    }
}

impl From<ModelError> for WorkerError {
    fn from(e: ModelError) -> Self {
        let code = match &e {
            ModelError::EmptyDataset => ErrorCode::EmptyDataset,
            ModelError::DatasetTooShort { .. } => ErrorCode::DatasetTooShort,
            ModelError::UnknownPreset { .. } => ErrorCode::UnknownPreset,
            ModelError::InvalidConfig { .. } | ModelError::OutOfMemory { .. } => ErrorCode::InvalidConfig,
            ModelError::WeightsMismatch { .. } => ErrorCode::BadCheckpoint,
        };
        let message = match &e {
            ModelError::EmptyDataset => "The text file is empty: choose a file with some text in it.".to_string(),
            ModelError::DatasetTooShort { bytes, context, needed } => format!(
                "The text is too short: {bytes} bytes, but a model with a context of {context} bytes needs at \
                 least {needed} bytes. Use a longer text or a smaller preset."
            ),
            other => capitalize(&other.to_string()),
        };
        WorkerError::new(code, message)
    }
}

impl From<TrainError> for WorkerError {
    fn from(e: TrainError) -> Self {
        match e {
            TrainError::Model(m) => m.into(),
            TrainError::InvalidConfig { .. } => {
                WorkerError::new(ErrorCode::InvalidConfig, capitalize(&e.to_string()))
            }
            TrainError::Diverged { step, loss } => WorkerError::new(
                ErrorCode::Diverged,
                format!("Training diverged at step {step} (loss {loss}). Try a lower learning rate."),
            ),
            TrainError::Tensor(t) => t.into(),
        }
    }
}

/// A device failure (only a GPU has them: a lost device, out of memory, a failed readback)
/// is `deviceLost`, which the page answers by offering to continue on WebAssembly. Out of
/// memory says so first: the GPU still works, this model (or batch) is too big for it.
impl From<TensorError> for WorkerError {
    fn from(e: TensorError) -> Self {
        let message = match &e {
            TensorError::OutOfMemory { .. } => format!(
                "The GPU ran out of memory ({e}), so training stopped. Saved checkpoints are intact: train a \
                 smaller model, or continue on WebAssembly."
            ),
            _ => format!(
                "The GPU stopped working ({e}), so training stopped. The last checkpoint is intact: continue on \
                 WebAssembly from it."
            ),
        };
        WorkerError::new(ErrorCode::DeviceLost, message)
    }
}

fn capitalize(s: &str) -> String {
    let mut c = s.chars();
    c.next().map(|f| f.to_uppercase().chain(c).collect()).unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn gpu_out_of_memory_says_so_and_names_the_sizes() {
        let reason =
            "a tensor of 536870912 elements (2147483648 bytes) is larger than this adapter's largest \
                      storage binding (1073741824 bytes)";
        let e = WorkerError::from(TensorError::OutOfMemory { backend: "wgpu".into(), reason: reason.into() });
        assert_eq!(e.code, ErrorCode::DeviceLost, "the page offers WebAssembly for every GPU failure");
        assert!(e.message.starts_with("The GPU ran out of memory ("), "{}", e.message);
        assert!(e.message.contains(reason) && e.message.contains("checkpoints are intact"), "{}", e.message);
        let lost =
            WorkerError::from(TensorError::DeviceLost { backend: "wgpu".into(), reason: "reset".into() });
        assert!(lost.message.starts_with("The GPU stopped working"), "{}", lost.message);
    }
}

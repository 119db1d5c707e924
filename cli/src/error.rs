use std::path::PathBuf;

use thiserror::Error;
use tinygpt_ckpt::CkptError;
use tinygpt_model::ModelError;
use tinygpt_optim::TrainError;
use tinygpt_tensor::TensorError;

/// Everything that ends a command; `main` prints it as one line on stderr.
#[derive(Debug, Error)]
pub enum CliError {
    #[error("{what} {path}: {source}")]
    Io { what: &'static str, path: PathBuf, source: std::io::Error },
    #[error("{path}: not valid JSON for {what}: {source}")]
    Json { what: &'static str, path: PathBuf, source: serde_json::Error },
    #[error("{0}")]
    Usage(String),
    #[error(transparent)]
    Model(#[from] ModelError),
    #[error(transparent)]
    Train(#[from] TrainError),
    #[error(transparent)]
    Tensor(#[from] TensorError),
    #[error(transparent)]
    Checkpoint(#[from] CkptError),
    #[error("{path}: {source}")]
    Import { path: PathBuf, source: CkptError },
}

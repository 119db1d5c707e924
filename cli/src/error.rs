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
    #[error(
        "saving the checkpoint at step {step} failed: {source}. Any earlier checkpoint in {} is intact: fix the cause (free disk space, say) and continue with --resume {}",
        dir.display(), dir.display()
    )]
    SaveFailed { step: usize, dir: PathBuf, source: Box<CkptError> },
    #[error(
        "{source}. Generation {id} (step {step}) is intact: add --generation {id} to use it (`tinygpt checkpoints {}` lists them all)",
        dir.display()
    )]
    IntactGeneration { source: Box<CkptError>, id: String, step: usize, dir: PathBuf },
}

/// A refused model or adapter config reads as the model crate's refusal.
impl From<tinygpt_model::ConfigError> for CliError {
    fn from(e: tinygpt_model::ConfigError) -> Self {
        CliError::Model(e.into())
    }
}

//! Loading a checkpoint folder for the commands that read one.

use std::path::Path;

use tinygpt_ckpt::{Checkpoint, CheckpointDir};

use crate::error::CliError;

/// The latest checkpoint in a folder; a missing folder is an error naming it.
pub fn load_latest(dir: &Path) -> Result<Checkpoint, CliError> {
    if !dir.exists() {
        return Err(CliError::Usage(format!("checkpoint folder {} does not exist", dir.display())));
    }
    Ok(CheckpointDir::open(dir)?.load_latest()?)
}

//! Between the trainer and `tinygpt-ckpt`: what a checkpoint holds and how a run resumes.

use std::path::Path;

use tinygpt_ckpt::{Checkpoint, CheckpointDir};
use tinygpt_optim::{ResumeState, Trainer};
use tinygpt_tensor::{block_on, Backend};

use crate::error::CliError;

/// The trainer's whole state as a checkpoint (reads weights and moments back from the device).
pub fn snapshot<B: Backend>(trainer: &Trainer<B>) -> Result<Checkpoint, CliError> {
    let state = block_on(trainer.resume_state())?;
    Ok(Checkpoint {
        model_config: trainer.model().config().clone(),
        training_config: trainer.config().clone(),
        dataset: trainer.dataset().manifest().clone(),
        progress: state.progress,
        loss_history: state.history,
        weights: state.weights,
        adam_m: state.adam_m,
        adam_v: state.adam_v,
    })
}

/// The parts of a checkpoint [`Trainer::resume`] takes.
pub fn resume_state(ckpt: Checkpoint) -> ResumeState {
    ResumeState {
        weights: ckpt.weights,
        adam_m: ckpt.adam_m,
        adam_v: ckpt.adam_v,
        progress: ckpt.progress,
        history: ckpt.loss_history,
    }
}

/// The latest checkpoint in a folder; a missing folder is an error naming it.
pub fn load_latest(dir: &Path) -> Result<Checkpoint, CliError> {
    if !dir.exists() {
        return Err(CliError::Usage(format!("checkpoint folder {} does not exist", dir.display())));
    }
    Ok(CheckpointDir::open(dir)?.load_latest()?)
}

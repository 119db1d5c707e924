//! Step losses read back later: a finished step's loss stays on the device until a caller
//! needs it ([`Trainer::read_losses`]), so a GPU runs one step while the next is recorded.

use tinygpt_tensor::{Backend, Tensor};

use super::Trainer;
use crate::error::TrainError;
use tinygpt_run::LossPoint;

/// A step's mean training loss, still on the device: each row part's mean loss (`[1]`)
/// and its row count.
#[derive(Clone, Debug)]
pub(super) struct StepLoss<B: Backend> {
    pub(super) step: usize,
    pub(super) batch: usize,
    pub(super) parts: Vec<(Tensor<B>, usize)>,
}

impl<B: Backend> StepLoss<B> {
    /// The row-weighted mean of the parts' losses (summed in f64); a loss that is not
    /// finite is [`TrainError::Diverged`]. Each part's loss is read into `value`.
    pub(super) async fn read(&self, value: &mut Vec<f32>) -> Result<LossPoint, TrainError> {
        let mut weighted = 0.0f64;
        for (loss, rows) in &self.parts {
            loss.read_into(value).await?;
            weighted += value[0] as f64 * *rows as f64;
        }
        let train_loss = (weighted / self.batch as f64) as f32;
        if !train_loss.is_finite() {
            return Err(TrainError::Diverged { step: self.step, loss: train_loss });
        }
        Ok(LossPoint { step: self.step, train_loss, val_loss: None })
    }
}

impl<B: Backend> Trainer<B> {
    /// Reads back the losses of the steps taken since the last read (oldest first), adds
    /// them to the history and returns them. A loss that is not finite ends the read with
    /// [`TrainError::Diverged`]; it and the ones after it are dropped.
    pub async fn read_losses(&mut self) -> Result<Vec<LossPoint>, TrainError> {
        let from = self.history.len();
        self.read_unread().await?;
        Ok(self.history[from..].to_vec())
    }

    /// [`Trainer::read_losses`] into the history only, keeping the emptied lists for the
    /// steps to come.
    pub(super) async fn read_unread(&mut self) -> Result<(), TrainError> {
        let mut unread = std::mem::take(&mut self.unread);
        for mut loss in unread.drain(..) {
            self.history.push(loss.read(&mut self.scratch.readback).await?);
            loss.parts.clear();
            self.scratch.losses.push(loss.parts);
        }
        self.unread = unread;
        Ok(())
    }

    /// Steps whose loss has not been read back yet.
    pub fn unread_losses(&self) -> usize {
        self.unread.len()
    }
}

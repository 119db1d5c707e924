//! What a [`crate::TrainingRun`] tells its caller: the events a caller displays and saves on.

use crate::trainer::StepDone;

/// Something that happened in a run, in the order it happened. The same config gives the
/// same events wherever the run is driven (the CLI, the web worker, tests), whatever the
/// caller's units of work.
#[derive(Clone, Debug, PartialEq)]
pub enum RunEvent {
    /// A step finished; its loss may still be on the device
    /// ([`crate::TrainingRun::read_losses`] brings it back).
    StepDone(StepDone),
    /// The step's evaluation: its training and validation loss, and the best evaluation of
    /// the run so far (this one when it improved on every earlier one).
    Evaluated {
        /// The step evaluated.
        step: usize,
        /// Its training loss.
        train_loss: f32,
        /// Its validation loss.
        val_loss: f32,
        /// The lowest validation loss so far.
        best: BestEval,
    },
    /// Write a checkpoint now: the checkpoint interval came round (after that step's
    /// evaluation, so the checkpoint's history holds it), the caller asked for one
    /// ([`crate::TrainingRun::request_save`]), or the run ended (it comes just before
    /// [`RunEvent::StoppedEarly`] or [`RunEvent::Finished`]).
    SaveDue {
        /// The step the checkpoint holds.
        step: usize,
    },
    /// Early stopping ended the run: `early_stop_patience` evaluations in a row did not
    /// improve on the best.
    StoppedEarly {
        /// The last step taken.
        step: usize,
    },
    /// The run trained every step it was to take.
    Finished {
        /// The last step taken.
        step: usize,
    },
}

/// The run's lowest validation loss, its step, and the training seconds (the caller's
/// [`crate::Trainer::add_wall_time`], summed over sessions) that reached it.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct BestEval {
    /// The lowest validation loss.
    pub val_loss: f32,
    /// The step that reached it.
    pub step: usize,
    /// `None` when it was reached in an earlier session, whose time at that step the
    /// checkpoint does not record.
    pub train_seconds: Option<f64>,
}

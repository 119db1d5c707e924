//! [`TrainingRun`]: the one run loop. The CLI's `train` and `lora train` and the web worker's
//! full and adapter runs all drive it, so a run behaves the same wherever it is started.
//!
//! It owns what happens between steps: when to evaluate (every `eval_interval` steps and at
//! `max_steps`), the best evaluation, early stopping (`early_stop_patience`), when a
//! checkpoint is due (every `checkpoint_interval` steps, when the caller asks, and at the
//! end), and when the run is over. The learning-rate schedule is the trainer's. Callers
//! only display and save: they call [`TrainingRun::advance`] for one unit of work (a row
//! part of a step, or of an evaluation batch) and act on the [`RunEvent`]s it returns.
//!
//! Poll-driven because the browser must yield between units (see [`UnitHooks`]); the CLI
//! simply loops. A unit of `rows` rows of a batch of `batch_size` rows; whole batches give
//! the plain step bit for bit, so callers cutting the same rows get the same losses.

mod event;
mod hooks;
#[cfg(test)]
mod tests;

use tinygpt_model::Split;
use tinygpt_tensor::Backend;

pub use event::{BestEval, RunEvent};
pub use hooks::{Unhurried, UnitHooks};

use crate::error::TrainError;
use crate::evaluation::Evaluation;
use crate::trainer::{RowPart, Trainer};
use tinygpt_run::LossPoint;

/// A run in progress: a [`Trainer`] and what its loop must remember between units.
#[derive(Debug)]
pub struct TrainingRun<B: Backend> {
    trainer: Trainer<B>,
    /// The step the run ends at: `max_steps`, or later on a resume told to train more
    /// (the schedule stays the original run's).
    stop_at: usize,
    /// The evaluation of the last step, while it is being scored, and that step's loss.
    eval: Option<(Evaluation, f32)>,
    /// A checkpoint is due once the step's evaluation (if any) is in.
    save_pending: bool,
    /// The caller asked for a checkpoint at the end of the step in progress.
    save_requested: bool,
    best: Option<BestEval>,
    /// Whether [`RunEvent::Finished`] or [`RunEvent::StoppedEarly`] went out.
    over: bool,
    /// History points before this one were returned by [`TrainingRun::read_losses`].
    reported: usize,
}

impl<B: Backend> TrainingRun<B> {
    /// A run of `trainer` to its `max_steps`.
    pub fn new(trainer: Trainer<B>) -> Self {
        let stop_at = trainer.config().max_steps;
        let reported = trainer.history().len();
        let best = best_in(trainer.history());
        TrainingRun {
            trainer,
            stop_at,
            eval: None,
            save_pending: false,
            save_requested: false,
            best,
            over: false,
            reported,
        }
    }

    /// This run, ending at step `stop_at` instead (e.g. `--steps N` on a resume: N past the
    /// checkpoint; the learning rates stay those of the original schedule, `min_lr` past
    /// its `max_steps`).
    pub fn stopping_at(self, stop_at: usize) -> Self {
        TrainingRun { stop_at, ..self }
    }

    /// The trainer (to read the model, progress and history, or to save).
    pub fn trainer(&self) -> &Trainer<B> {
        &self.trainer
    }

    /// The trainer, to add wall time or change what does not change the loop.
    pub fn trainer_mut(&mut self) -> &mut Trainer<B> {
        &mut self.trainer
    }

    /// The step the run ends at.
    pub fn stop_at(&self) -> usize {
        self.stop_at
    }

    /// The lowest validation loss so far, its step and the seconds that reached it.
    pub fn best(&self) -> Option<BestEval> {
        self.best
    }

    /// Whether the run has ended ([`RunEvent::Finished`] or [`RunEvent::StoppedEarly`]).
    pub fn is_over(&self) -> bool {
        self.over
    }

    /// Whether the run is done as its config stands: trained to its stop, or its history
    /// early-stopped, with no evaluation left to score. The page refuses to resume such a
    /// run; the CLI's `--resume --steps N` moves the stop instead and trains to the next
    /// evaluation.
    pub fn has_nothing_left(&self) -> bool {
        self.eval.is_none()
            && (self.trainer.progress().step >= self.stop_at || self.trainer.should_stop_early())
    }

    /// Whether an evaluation is being scored.
    pub fn is_evaluating(&self) -> bool {
        self.eval.is_some()
    }

    /// Between steps, no evaluation pending: where a run can be saved and left, nothing of
    /// the step in progress lost.
    pub fn at_step_boundary(&self) -> bool {
        self.eval.is_none() && self.trainer.rows_done() == 0 && !self.trainer.update_pending()
    }

    /// Asks for a checkpoint at the end of the step in progress (after its evaluation, if
    /// one is due): a cadence the caller keeps, e.g. the CLI's at least once a minute.
    pub fn request_save(&mut self) {
        self.save_requested = true;
    }

    /// Does one unit of work: the next `rows` rows of the evaluation being scored, or else
    /// of the step in progress; returns what happened. Nothing once the run is over.
    pub async fn advance(
        &mut self,
        rows: usize,
        hooks: &impl UnitHooks,
    ) -> Result<Vec<RunEvent>, TrainError> {
        let mut events = Vec::new();
        if self.over {
            return Ok(events);
        }
        let mut evaluated = false;
        if let Some((eval, train_loss)) = self.eval.as_mut() {
            let scored = eval.next_part_unless(&self.trainer, rows, || hooks.give_up()).await?;
            if let RowPart::Done(val_loss) = scored {
                let train_loss = *train_loss;
                self.eval = None;
                self.record_eval(train_loss, val_loss, &mut events);
                evaluated = true;
            }
        } else if self.trainer.progress().step < self.stop_at {
            let mut done = self.trainer.queue_part(rows, || hooks.give_up()).done();
            let backend = self.trainer.model().params().tensors()[0].backend().clone();
            let waited = hooks.wait_for_device(&backend).await?;
            // Mixed precision: the step's update waits for loss scaling's decision (one
            // value, which the finished device hands back at once). Cut short, it stays
            // pending (the trainer still at the step before) for the next unit.
            if waited && self.trainer.update_pending() {
                done = self.trainer.finish_update().await;
            }
            if let Some(done) = done {
                self.step_done(done, &mut events).await?;
            }
        }
        self.settle(evaluated, &mut events).await?;
        Ok(events)
    }

    /// The step's bookkeeping: its evaluation begins if one is due, a save is noted.
    async fn step_done(
        &mut self,
        done: crate::StepDone,
        events: &mut Vec<RunEvent>,
    ) -> Result<(), TrainError> {
        let step = done.step;
        if done.eval_due {
            // The evaluation point carries this step's training loss.
            self.trainer.read_losses().await?;
            let train_loss = self.trainer.history().last().map_or(f32::NAN, |p| p.train_loss);
            self.eval = Some((Evaluation::new(&self.trainer, Split::Val), train_loss));
        }
        if step.is_multiple_of(self.trainer.config().checkpoint_interval) || self.save_requested {
            self.save_requested = false;
            self.save_pending = true;
        }
        events.push(RunEvent::StepDone(done));
        Ok(())
    }

    fn record_eval(&mut self, train_loss: f32, val_loss: f32, events: &mut Vec<RunEvent>) {
        self.trainer.record_eval(train_loss, val_loss);
        let step = self.trainer.progress().step;
        let seconds = self.trainer.progress().wall_time_sec;
        if self.best.is_none_or(|b| val_loss < b.val_loss) {
            self.best = Some(BestEval { val_loss, step, train_seconds: Some(seconds) });
        }
        let best = self.best.expect("set above");
        events.push(RunEvent::Evaluated { step, train_loss, val_loss, best });
    }

    /// Once no evaluation is pending: the run ends (a last save, then why), or a due save
    /// goes out. Losses are read first, so a checkpoint's history holds every step. Early
    /// stopping is decided by an evaluation (`evaluated`: one just came in), so a run
    /// continued past an early stop (the CLI's `--resume --steps`) trains to its next one.
    async fn settle(&mut self, evaluated: bool, events: &mut Vec<RunEvent>) -> Result<(), TrainError> {
        if self.eval.is_some() {
            return Ok(());
        }
        let step = self.trainer.progress().step;
        let early = evaluated && self.trainer.should_stop_early();
        let finished = step >= self.stop_at && self.trainer.rows_done() == 0;
        if early || finished {
            self.trainer.read_losses().await?;
            self.over = true;
            self.save_pending = false;
            events.push(RunEvent::SaveDue { step });
            events.push(if early { RunEvent::StoppedEarly { step } } else { RunEvent::Finished { step } });
        } else if std::mem::take(&mut self.save_pending) {
            self.trainer.read_losses().await?;
            events.push(RunEvent::SaveDue { step });
        }
        Ok(())
    }

    /// Reads back the losses still on the device and returns every point the history
    /// gained since the last call (the run reads some itself, before evaluations and saves).
    /// A point's validation loss may come later, in a [`RunEvent::Evaluated`].
    pub async fn read_losses(&mut self) -> Result<Vec<LossPoint>, TrainError> {
        self.trainer.read_losses().await?;
        let history = self.trainer.history();
        let new = history[self.reported.min(history.len())..].to_vec();
        self.reported = history.len();
        Ok(new)
    }

    /// Steps whose loss is still on the device.
    pub fn unread_losses(&self) -> usize {
        self.trainer.unread_losses()
    }

    /// The trainer, once the run is done with it.
    pub fn into_trainer(self) -> Trainer<B> {
        self.trainer
    }
}

/// The best evaluation in a loaded history (its time unknown: an earlier session's).
fn best_in(history: &[LossPoint]) -> Option<BestEval> {
    let mut best: Option<BestEval> = None;
    for point in history {
        if let Some(v) = point.val_loss {
            if best.is_none_or(|b| v < b.val_loss) {
                best = Some(BestEval { val_loss: v, step: point.step, train_seconds: None });
            }
        }
    }
    best
}

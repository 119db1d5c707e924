//! [`ActiveRun`]: the session's run, driven a time-budgeted slice at a time. The run loop
//! itself ([`TrainingRun`]: steps, evaluations, early stop, saves) is the CLI's too; this
//! file keeps the worker's side of it: the page's hooks for giving a unit up, the budget,
//! and turning the loop's events into `progress`, `status` and `done` messages.

use std::cell::Cell;

use tinygpt_optim::{RunEvent, TrainError, Trainer, TrainingRun, UnitHooks};
use tinygpt_tensor::Backend;

use super::{AdapterRunInfo, TickOutcome, PROGRESS_INTERVAL_MS};
use crate::abandon::Abandon;
use crate::clock::Clock;
use crate::error::WorkerError;
use crate::interrupt::Interrupt;
use crate::locks::{adapter_lock_name, run_lock_name};
use crate::protocol::{
    DoneReason, EngineKind, LossPoint, OutMessage, RunAdapter, RunInfo, RunState, TrainingProgress,
};

/// The session's run: the run loop every caller drives ([`TrainingRun`]) and what the page
/// is told about it (lifecycle, saves, progress). Named apart from the `tinygpt-run` crate,
/// which holds a run's plain data.
#[derive(Debug)]
pub struct ActiveRun<B: Backend> {
    /// The run loop and its trainer.
    pub training: TrainingRun<B>,
    pub state: RunState,
    /// The checkpoint the run was loaded from or last saved to.
    pub checkpoint_id: Option<String>,
    /// LoRA: the adapter's name in the adapter store and the base it trains on (`None`: the
    /// run trains the whole model).
    pub adapter: Option<AdapterRunInfo>,
    /// The step of the last checkpoint written (or loaded).
    pub saved_step: usize,
    /// Batch rows a unit of training or validation covers (see [`crate::row_parts`]).
    rows_per_part: usize,
    /// Loss points not sent yet (the next progress message's).
    points: Vec<LossPoint>,
    last_train_loss: f32,
    last_val_loss: Option<f32>,
    window_tokens: usize,
    window_ms: f64,
    /// The training throughput last reported: a progress message after a slice that only
    /// scored validation batches (no training tokens in its window) repeats it.
    tokens_per_second: f64,
    last_progress_ms: f64,
    /// Exponential average of a step's duration, for the ETA.
    step_ms: Option<f64>,
    /// Time spent so far on the parts of the step in progress.
    partial_step_ms: f64,
}

/// The page's say over a unit of work (see [`UnitHooks`]): a unit a page message overtook
/// is given up ([`Abandon`]); a wait for the GPU ends when a message arrives ([`Interrupt`]).
struct PageHooks<'a> {
    abandon: Option<&'a Abandon>,
    interrupt: &'a Interrupt,
    /// The last wait for the device was cut short.
    cut_short: Cell<bool>,
}

impl UnitHooks for PageHooks<'_> {
    fn give_up(&self) -> bool {
        self.abandon.is_some_and(Abandon::settle)
    }

    /// The part is queued, not done (on a GPU): wait for it, so the unit's time is its real
    /// duration (the budget rule needs it) and a device failure surfaces here, while
    /// nothing is read back. A page message cuts the wait short (the part finishes on the
    /// device; its time is then counted so far).
    async fn wait_for_device<D: Backend>(&self, backend: &D) -> Result<bool, TrainError> {
        match self.interrupt.race(backend.flush()).await {
            Some(flushed) => {
                flushed?;
                Ok(true)
            }
            None => {
                self.cut_short.set(true);
                Ok(false)
            }
        }
    }
}

impl<B: Backend> ActiveRun<B> {
    /// `trainer` as the session's run in `state`, units of `rows_per_part` rows; a run
    /// loaded from checkpoint `checkpoint_id` counts as saved at its step.
    pub(super) fn new(
        trainer: Trainer<B>,
        checkpoint_id: Option<String>,
        state: RunState,
        rows_per_part: usize,
        now_ms: f64,
    ) -> Self {
        let step = trainer.progress().step;
        let last = trainer.history().last().cloned();
        ActiveRun {
            state,
            rows_per_part,
            adapter: None,
            saved_step: if checkpoint_id.is_some() { step } else { 0 },
            checkpoint_id,
            points: Vec::new(),
            last_train_loss: last.as_ref().map_or(f32::NAN, |p| p.train_loss),
            last_val_loss: last.and_then(|p| p.val_loss),
            window_tokens: 0,
            window_ms: 0.0,
            tokens_per_second: 0.0,
            last_progress_ms: now_ms,
            step_ms: None,
            partial_step_ms: 0.0,
            training: TrainingRun::new(trainer),
        }
    }

    /// Training again from `now_ms` (progress timing restarts there).
    pub(super) fn resume_at(&mut self, now_ms: f64) {
        self.state = RunState::Training;
        self.last_progress_ms = now_ms;
    }

    /// The run's trainer (model, configs, progress, history).
    pub fn trainer(&self) -> &Trainer<B> {
        self.training.trainer()
    }

    pub fn step(&self) -> usize {
        self.trainer().progress().step
    }

    /// The Web Lock this run holds while it trains (see [`crate::locks`]).
    pub fn lock_name(&self) -> String {
        if let Some(adapter) = &self.adapter {
            return adapter_lock_name(&adapter.name);
        }
        let t = self.trainer();
        run_lock_name(t.model().config(), t.config(), &t.dataset().manifest().dataset_id)
    }

    /// Whether the weights changed since the last checkpoint.
    pub fn needs_save(&self) -> bool {
        self.step() > self.saved_step
    }

    pub fn info(&self) -> RunInfo {
        run_info(self)
    }

    /// Batch rows a unit of training or validation covers (see [`crate::row_parts`]).
    pub fn rows_per_part(&self) -> usize {
        self.rows_per_part
    }

    /// Units of the run loop until the budget is spent, a page message waits, a save is
    /// due or the run ends; the run loop decides what each unit is and what it means, this
    /// only keeps time and turns its events into messages.
    #[allow(clippy::too_many_arguments)]
    pub(super) async fn train_slice(
        &mut self,
        kind: EngineKind,
        start: f64,
        budget_ms: f64,
        clock: &dyn Clock,
        interrupt: &Interrupt,
        abandon: Option<&Abandon>,
        out: &mut TickOutcome,
    ) -> Result<(), WorkerError> {
        let mut interrupted = false;
        let (batch, seq) =
            (self.trainer().config().batch_size, self.trainer().model().config().context_length);
        let hooks = PageHooks { abandon, interrupt, cut_short: Cell::new(false) };
        loop {
            // A message waits already: answer it before starting a unit.
            if abandon.is_some_and(Abandon::message_waiting) {
                interrupted = true;
                break;
            }
            let unit_start = clock.now_ms();
            if let Some(a) = abandon {
                a.arm();
            }
            let training = !self.training.is_evaluating();
            let rows_before = self.trainer().rows_done();
            let events = self.training.advance(self.rows_per_part, &hooks).await;
            // A unit is given up when a page message arrived while it ran (its ops were
            // skipped from then on); the message is answered next and the unit taken again.
            interrupted |= hooks.give_up() || hooks.cut_short.replace(false);
            let events = events?;
            let stepped = events.iter().any(|e| matches!(e, RunEvent::StepDone(_)));
            if training {
                let ms = clock.now_ms() - unit_start;
                let rows_after = if stepped { batch } else { self.trainer().rows_done() };
                self.training.trainer_mut().add_wall_time(ms / 1e3);
                self.window_tokens += rows_after.saturating_sub(rows_before) * seq;
                self.window_ms += ms;
                self.partial_step_ms += ms;
            }
            for event in events {
                match event {
                    RunEvent::StepDone(_) => {
                        let ms = std::mem::take(&mut self.partial_step_ms);
                        self.step_ms = Some(self.step_ms.map_or(ms, |avg| 0.8 * avg + 0.2 * ms));
                    }
                    RunEvent::Evaluated { step, train_loss, val_loss, .. } => {
                        self.collect_points().await?;
                        self.last_val_loss = Some(val_loss);
                        // The step's point may already have gone out; the page merges by step.
                        match self.points.iter_mut().rev().find(|p| p.step == step) {
                            Some(p) => p.val_loss = Some(val_loss),
                            None => {
                                self.points.push(LossPoint { step, train_loss, val_loss: Some(val_loss) })
                            }
                        }
                        // A validation point is worth showing at once.
                        self.last_progress_ms = f64::NEG_INFINITY;
                    }
                    RunEvent::SaveDue { .. } => out.save_due = true,
                    RunEvent::StoppedEarly { step } | RunEvent::Finished { step } => {
                        self.state = RunState::Finished;
                        self.collect_points().await?;
                        if let Some(p) = self.progress(kind) {
                            out.messages.push(OutMessage::Progress(p));
                        }
                        out.messages.push(OutMessage::Status { state: RunState::Finished, step });
                        let reason = match event {
                            RunEvent::StoppedEarly { .. } => DoneReason::EarlyStopped,
                            _ => DoneReason::Finished,
                        };
                        out.messages.push(OutMessage::Done { reason, step });
                        return Ok(());
                    }
                }
            }
            // Stop before a unit that, taking as long as this one, would overrun the budget.
            let now = clock.now_ms();
            if interrupted || out.save_due || now - start + (now - unit_start) >= budget_ms {
                break;
            }
        }
        let now = clock.now_ms();
        // Reading the losses waits for the device: not while a message is waiting.
        let progress_due = !interrupted && now - self.last_progress_ms >= PROGRESS_INTERVAL_MS;
        if progress_due || out.save_due {
            self.collect_points().await?;
            if let Some(p) = self.progress(kind) {
                out.messages.push(OutMessage::Progress(p));
            }
            self.last_progress_ms = now;
        }
        Ok(())
    }

    /// Reads the losses of the steps taken since the last read (see
    /// [`TrainingRun::read_losses`]) into the next progress message's points.
    pub(super) async fn collect_points(&mut self) -> Result<(), WorkerError> {
        for p in self.training.read_losses().await? {
            self.last_train_loss = p.train_loss;
            match self.points.iter_mut().rev().find(|q| q.step == p.step) {
                Some(q) => q.val_loss = q.val_loss.or(p.val_loss),
                None => self.points.push(LossPoint {
                    step: p.step,
                    train_loss: p.train_loss,
                    val_loss: p.val_loss,
                }),
            }
        }
        Ok(())
    }

    /// A progress message with the points since the last one (`None` before the first step).
    pub(super) fn progress(&mut self, kind: EngineKind) -> Option<TrainingProgress> {
        if self.last_train_loss.is_nan() && self.points.is_empty() {
            return None;
        }
        if self.window_ms > 0.0 && self.window_tokens > 0 {
            self.tokens_per_second = self.window_tokens as f64 / (self.window_ms / 1e3);
        }
        let max_steps = self.trainer().config().max_steps;
        let remaining = max_steps.saturating_sub(self.step()) as f64;
        let progress = TrainingProgress {
            step: self.step(),
            max_steps,
            train_loss: self.last_train_loss,
            val_loss: self.last_val_loss,
            tokens_per_second: self.tokens_per_second,
            backend: kind,
            eta_seconds: self.step_ms.map_or(0.0, |ms| remaining * ms / 1e3),
            points: std::mem::take(&mut self.points),
        };
        self.window_tokens = 0;
        self.window_ms = 0.0;
        Some(progress)
    }
}

pub(super) fn run_info<B: Backend>(run: &ActiveRun<B>) -> RunInfo {
    let t = run.trainer();
    RunInfo {
        adapter: run.adapter.as_ref().zip(t.adapter()).map(|(a, lora)| RunAdapter {
            name: a.name.clone(),
            rank: lora.config().rank,
            alpha: lora.config().alpha,
            target_modules: lora.config().target_modules.clone(),
            params: lora.config().param_count(t.model().config()),
            base_name: a.base.name.clone(),
        }),
        model_config: t.model().config().clone(),
        training_config: t.config().clone(),
        dataset: t.dataset().manifest().clone(),
        params: t.model().config().param_count(),
        step: t.progress().step,
        max_steps: t.config().max_steps,
        history: t
            .history()
            .iter()
            .map(|p| LossPoint { step: p.step, train_loss: p.train_loss, val_loss: p.val_loss })
            .collect(),
        checkpoint_id: run.checkpoint_id.clone(),
    }
}

//! Taking a step: draw the batch, forward and backward a row part of it at a time
//! (gradient accumulation over the one batch), then AdamW once the last row is in. At mixed
//! precision the update waits for loss scaling's decision ([`Trainer::finish_update`]).

use tinygpt_model::{Batch, DropoutDraw, Split};
use tinygpt_tensor::{block_on, Backend, Indices, Precision, Rng, Tensor};

use super::row_part::RowPart;
use super::step_loss::StepLoss;
use super::trained_set::{trained_groups, trained_tensors};
use super::Trainer;
use crate::error::TrainError;
use crate::loss_scale::{self, GradScaler};
use crate::schedule::learning_rate;

/// What one optimizer step did.
#[derive(Clone, Debug, PartialEq)]
pub struct StepReport {
    /// Steps completed, this one included.
    pub step: usize,
    /// This step's training loss.
    pub train_loss: f32,
    /// The learning rate it used.
    pub lr: f32,
    /// Tokens in this step's batch.
    pub tokens: usize,
    /// Whether this step ends an evaluation interval (or the run): the caller should
    /// [`Trainer::evaluate`] and [`Trainer::record_eval`].
    pub eval_due: bool,
}

/// A finished optimizer step whose loss is still on the device ([`Trainer::step_part_deferred`]):
/// everything a [`StepReport`] says except the loss, which the trainer keeps queued until
/// [`Trainer::read_losses`] brings it back (e.g. only when a progress message is due).
#[derive(Clone, Debug, PartialEq)]
pub struct StepDone {
    /// Steps completed, this one included.
    pub step: usize,
    /// The learning rate it used.
    pub lr: f32,
    /// Tokens in this step's batch.
    pub tokens: usize,
    /// See [`StepReport::eval_due`].
    pub eval_due: bool,
}

/// A step taken in row parts, between parts: its batch, and the gradients and losses of
/// the rows done so far.
#[derive(Debug)]
pub(super) struct PartialStep<B: Backend> {
    /// The step's whole batch, `[batch_size, context_length]`.
    data: Batch,
    /// The batch sampler after drawing `data`; it becomes the trainer's when the step ends,
    /// so until then `progress.rng_state` (and a checkpoint) still describes the step before.
    rng: Rng,
    rows_done: usize,
    /// Per parameter (canonical order; `None` when frozen): the sum over parts of each part's
    /// gradient scaled by `rows / batch_size`, i.e. the whole batch's mean-loss gradient.
    grads: Vec<Option<Tensor<B>>>,
    /// Each part's mean loss (`[1]`, read when the step ends) and its row count.
    losses: Vec<(Tensor<B>, usize)>,
    /// At mixed precision, once every row is done: the gathered gradients' sum of squares,
    /// queued on the device, which loss scaling's decision reads ([`Trainer::finish_update`]).
    sumsq: Option<Tensor<B>>,
}

impl<B: Backend> Trainer<B> {
    /// Rows of the step in progress already done by [`Trainer::step_part`] (0 between steps).
    pub fn rows_done(&self) -> usize {
        self.partial.as_ref().map_or(0, |p| p.rows_done)
    }

    /// One optimizer step on the next training batch: [`Trainer::step_part`] with one
    /// part of the whole batch (or of the rows left, if a step is in progress).
    pub fn step(&mut self) -> Result<StepReport, TrainError> {
        let rows = self.config.batch_size;
        Ok(self.step_part(rows)?.expect("a part of all the rows left ends the step"))
    }

    /// Advances the current step by the next `rows` rows of its batch (at least one; the
    /// rest if fewer remain), first drawing the step's batch from the batch sampler if no
    /// step is in progress. A part is a forward and backward pass on a `[rows,
    /// context_length]` sub-batch whose gradients, scaled by `rows / batch_size`, add up to
    /// the whole batch's. After the last row AdamW is applied once and the step's report
    /// returned, `train_loss` being the row-weighted mean of the parts' losses (summed in
    /// f64); before that, `None`, and weights, progress and the sampler state are untouched.
    ///
    /// With `rows >= batch_size` this is the plain step (a test holds it to the unsplit
    /// step's code bit for bit); several parts give the same step up to float rounding.
    /// Between parts the model may be read (sampled, evaluated, saved as the state before
    /// the step) but not changed. Blocks on the device (the loss, and at mixed precision
    /// loss scaling's decision); [`Trainer::queue_part`] never does.
    pub fn step_part(&mut self, rows: usize) -> Result<Option<StepReport>, TrainError> {
        let Some(done) = self.step_part_deferred(rows) else { return Ok(None) };
        block_on(self.read_unread())?;
        let train_loss = self.history.last().expect("the step just taken was unread").train_loss;
        let StepDone { step, lr, tokens, eval_due } = done;
        Ok(Some(StepReport { step, train_loss, lr, tokens, eval_due }))
    }

    /// [`Trainer::step_part`] without the loss readback: a step's loss stays queued on the
    /// device until [`Trainer::read_losses`] (a diverged loss is reported by the read), so
    /// the two take the very same steps. At mixed precision it blocks once on the step's
    /// last part, for loss scaling's decision (see `loss_scale.rs`).
    pub fn step_part_deferred(&mut self, rows: usize) -> Option<StepDone> {
        let part = self.queue_part(rows, || false);
        if !self.update_pending() {
            return part.done();
        }
        block_on(self.finish_update())
    }

    /// Whether the step in progress has all its rows and waits for loss scaling's decision
    /// ([`Trainer::finish_update`]); only at mixed precision, after
    /// [`Trainer::queue_part`].
    pub fn update_pending(&self) -> bool {
        self.partial.as_ref().is_some_and(|p| p.sumsq.is_some())
    }

    /// The next row part of the step ([`Trainer::step_part`]'s contract) queued on the
    /// device, never waiting on it: for callers that cannot block (the browser) and the run
    /// loop ([`crate::TrainingRun`]).
    ///
    /// It may be given up: after the part's forward and backward, before anything of the
    /// trainer changes, it calls `give_up` once; when that answers true the part's work is
    /// dropped and [`RowPart::GivenUp`] returned, the step standing as it was before the
    /// part (a step given up in its only part is taken again, from its start, by the next
    /// call: same batch, same dropout masks, so the run is unchanged). Why: the web worker
    /// takes whole steps on a backend that stops computing once a page message waits
    /// (`tinygpt_worker::abandon`); the values of such a part are meaningless, and
    /// `give_up` is where the worker says so. Past `give_up` nothing is given up: the
    /// gradient sums and AdamW always run to the end, so parameters and moments are never
    /// half-updated.
    ///
    /// At mixed precision the last part stops short of the update: it queues the gradients'
    /// sum of squares and returns [`RowPart::MoreRows`] with [`Trainer::update_pending`]
    /// true; [`Trainer::finish_update`] then reads it back (awaited) and applies or skips
    /// the update. Until then the trainer is still at the step before, as between parts,
    /// and further calls do nothing and answer [`RowPart::MoreRows`].
    pub fn queue_part(&mut self, rows: usize, give_up: impl FnOnce() -> bool) -> RowPart<StepDone> {
        if self.update_pending() {
            return RowPart::MoreRows;
        }
        let (batch, seq) = (self.config.batch_size, self.model.config().context_length);
        let backend = self.model.params().tensors()[0].backend().clone();
        let scratch = &mut self.scratch;
        let partial = match &mut self.partial {
            Some(partial) => partial,
            empty => {
                let mut rng = self.rng.clone();
                let mut data = std::mem::take(&mut scratch.batch);
                self.dataset.batch_into(Split::Train, batch, seq, &mut rng, &mut data);
                let (grads, losses) =
                    (std::mem::take(&mut scratch.step_grads), scratch.losses.pop().unwrap_or_default());
                empty.insert(PartialStep { data, rng, rows_done: 0, grads, losses, sumsq: None })
            }
        };
        let rows = rows.clamp(1, batch - partial.rows_done);
        let tokens = partial.rows_done * seq..(partial.rows_done + rows) * seq;
        let inputs = Indices::new(&backend, &partial.data.inputs[tokens.clone()]);
        let targets = &partial.data.targets[tokens];

        let tape = &scratch.tape;
        // Dropout masks are a function of (seed, step, site, element): a resumed run and a
        // step cut into parts draw what the uninterrupted, uncut step draws.
        let draw = DropoutDraw {
            seed: self.config.seed,
            step: self.progress.step as u64,
            first_row: partial.rows_done,
        };
        let params = &mut scratch.params;
        let adapter = self.adapter.as_ref().map(|(lora, _)| lora);
        let loss = self.model.loss_into(tape, adapter, &inputs, targets, rows, seq, Some(draw), params);
        // d(batch mean)/d(part mean) = rows / batch: exactly 1 for a whole-batch part (the
        // mean loss is one value). At mixed precision, times the loss scale (see `loss_scale`).
        let mut scale = [rows as f32 / batch as f32];
        if let (Precision::Mixed, Some(state)) = (self.config.precision, self.progress.loss_scale) {
            scale[0] *= state.scale;
        }
        let seed = Tensor::from_slice(&backend, &scale, loss.value().shape().clone());
        let grads = &mut scratch.grads;
        tape.backward_into(&loss, seed, grads);
        tape.reset();
        if give_up() {
            grads.clear();
            params.clear();
            return RowPart::GivenUp;
        }
        if partial.grads.is_empty() {
            partial.grads.extend(params.iter().map(|p| grads.take(p)));
        } else {
            for (sum, p) in partial.grads.iter_mut().zip(params.iter()) {
                if let (Some(sum), Some(g)) = (sum.as_mut(), grads.take(p)) {
                    *sum = sum.add(&g);
                }
            }
        }
        grads.clear();
        params.clear();
        partial.losses.push((loss.value().clone(), rows));
        partial.rows_done += rows;
        if partial.rows_done < batch {
            return RowPart::MoreRows;
        }

        if std::mem::take(&mut self.regroup_due) {
            let groups = trained_groups(&self.model, &self.adapter, &self.config);
            if !self.optimizer.groups().eq(&groups) {
                self.optimizer.regroup(trained_tensors(&self.model, &self.adapter), groups);
            }
        }
        let params = trained_tensors(&self.model, &self.adapter);
        let partial = self.partial.as_mut().expect("the step in progress");
        match (self.config.precision, self.progress.loss_scale) {
            (Precision::Mixed, Some(_)) => {
                // Loss scaling decides from the gradients' sum of squares (see `finish_update`);
                // with nothing trained there is nothing to decide.
                if let Some(sumsq) = self.optimizer.gather(params, &partial.grads) {
                    partial.sumsq = Some(sumsq);
                    return RowPart::MoreRows;
                }
            }
            _ => {
                let lr = learning_rate(&self.config, self.progress.step);
                self.optimizer.update(params, &partial.grads, lr, &self.config);
            }
        }
        RowPart::Done(self.end_step())
    }

    /// Loss scaling's decision for the step [`Trainer::queue_part`] left pending:
    /// reads the gradients' sum of squares back (the one await), then applies the update or,
    /// when it is not finite, skips it (see `loss_scale.rs`), and ends the step. `None`
    /// when no update is pending. Nothing changes before the readback completes, so a caller
    /// may drop the future unfinished and call again later.
    pub async fn finish_update(&mut self) -> Option<StepDone> {
        let sumsq = self.partial.as_ref()?.sumsq.as_ref()?;
        let finite = loss_scale::read_finite(sumsq, &mut self.scratch.readback).await;
        let partial = self.partial.as_mut().expect("the step in progress");
        let sumsq = partial.sumsq.take().expect("the pending update");
        let lr = learning_rate(&self.config, self.progress.step);
        let state = self.progress.loss_scale.as_mut().expect("mixed precision keeps a loss scale");
        let params = trained_tensors(&self.model, &self.adapter);
        let scaler = &GradScaler::DEFAULT;
        loss_scale::update_scaled(
            &mut self.optimizer,
            params,
            &sumsq,
            finite,
            lr,
            &self.config,
            scaler,
            state,
        );
        Some(self.end_step())
    }

    /// Ends the step in progress once its update is applied (or skipped): the sampler moves
    /// on, the step is counted and its loss queued for reading.
    fn end_step(&mut self) -> StepDone {
        let PartialStep { data, rng, mut grads, losses, .. } =
            self.partial.take().expect("the step in progress");
        let batch = self.config.batch_size;
        let seq = self.model.config().context_length;
        let lr = learning_rate(&self.config, self.progress.step);
        grads.clear();
        (self.scratch.batch, self.scratch.step_grads) = (data, grads);

        self.rng = rng;
        self.progress.step += 1;
        self.progress.tokens_seen += (batch * seq) as u64;
        self.progress.rng_state = self.rng.state();
        let step = self.progress.step;
        // The run's learning curve, every step's training loss, once read (evaluations add
        // val_loss).
        self.unread.push(StepLoss { step, batch, parts: losses });
        let eval_due = step.is_multiple_of(self.config.eval_interval) || step == self.config.max_steps;
        StepDone { step, lr, tokens: batch * seq, eval_due }
    }
}

//! Scoring a model on fixed, seeded batches, a batch (or a few rows) at a time, and
//! [`Trainer::evaluate`] on top of it. This file uses the trainer; the trainer does not use
//! it (one direction, no import circle).

use tinygpt_autograd::Tape;
use tinygpt_model::{Batch, Split};
use tinygpt_tensor::{block_on, Backend, Indices, Rng};

use crate::error::TrainError;
use crate::trainer::{RowPart, Trainer};

/// Salt of the sampler seed for evaluation batches of the training split.
pub const EVAL_SALT_TRAIN: u64 = 0xE7A1_0000_0000_0002;
/// Salt of the sampler seed for evaluation batches of the validation split.
pub const EVAL_SALT_VAL: u64 = 0xE7A1_0000_0000_0003;

/// An evaluation scored a batch at a time, so callers can spread it over several slices
/// of work (the web worker answers pause and stop between batches). It draws
/// `eval_batches` batches of the training batch size from a fresh `Rng::new(seed ^
/// EVAL_SALT_*)` and averages their losses in f64. A batch can itself be scored in row
/// parts ([`Evaluation::next_part`]): its loss is then the row-weighted mean of the parts'.
#[derive(Clone, Debug)]
pub struct Evaluation {
    split: Split,
    rng: Rng,
    done: usize,
    total: f64,
    /// The batch being scored in parts, the rows of it done, and their losses times rows.
    batch: Option<Batch>,
    rows_done: usize,
    batch_total: f64,
}

impl Evaluation {
    /// An evaluation of `split` with `trainer`'s batches.
    pub fn new<B: Backend>(trainer: &Trainer<B>, split: Split) -> Self {
        let salt = match split {
            Split::Train => EVAL_SALT_TRAIN,
            Split::Val => EVAL_SALT_VAL,
        };
        let rng = Rng::new(trainer.config().seed ^ salt);
        Evaluation { split, rng, done: 0, total: 0.0, batch: None, rows_done: 0, batch_total: 0.0 }
    }

    /// Scores one more batch (the rest of it, if it was begun in parts); returns the mean
    /// loss once all `eval_batches` are in.
    pub async fn next_batch<B: Backend>(&mut self, trainer: &Trainer<B>) -> Result<Option<f32>, TrainError> {
        self.next_part(trainer, trainer.config().batch_size).await
    }

    /// Scores the next `rows` rows (at least one; the rest if fewer remain) of the current
    /// batch, drawing it first if none is begun; returns the mean loss once all
    /// `eval_batches` are in. A batch scored in one part counts exactly as in
    /// [`Evaluation::next_batch`] (`loss · rows / rows` is exact in f64).
    pub async fn next_part<B: Backend>(
        &mut self,
        trainer: &Trainer<B>,
        rows: usize,
    ) -> Result<Option<f32>, TrainError> {
        Ok(self.next_part_unless(trainer, rows, || false).await?.done())
    }

    /// [`Evaluation::next_part`] that may give the part up: after the part's forward pass,
    /// before its loss is read, it calls `give_up` once; when that answers true the part is
    /// dropped (nothing read, nothing counted) and [`RowPart::GivenUp`] returned, so the next
    /// call scores the same rows again (see [`Trainer::queue_part`] for why).
    /// [`RowPart::MoreRows`] means rows or batches are left.
    pub async fn next_part_unless<B: Backend>(
        &mut self,
        trainer: &Trainer<B>,
        rows: usize,
        give_up: impl FnOnce() -> bool,
    ) -> Result<RowPart<f32>, TrainError> {
        let config = trainer.config();
        let (batch, seq) = (config.batch_size, trainer.model().config().context_length);
        let data =
            self.batch.get_or_insert_with(|| trainer.dataset().batch(self.split, batch, seq, &mut self.rng));
        let rows = rows.clamp(1, batch - self.rows_done);
        let tokens = self.rows_done * seq..(self.rows_done + rows) * seq;
        let backend = trainer.model().params().tensors()[0].backend().clone();
        let tape = Tape::no_grad();
        let inputs = Indices::new(&backend, &data.inputs[tokens.clone()]);
        let loss = trainer.loss(&tape, &inputs, &data.targets[tokens], rows, seq, None);
        if give_up() {
            return Ok(RowPart::GivenUp);
        }
        self.batch_total += loss.value().read().await?[0] as f64 * rows as f64;
        self.rows_done += rows;
        if self.rows_done < batch {
            return Ok(RowPart::MoreRows);
        }
        self.total += self.batch_total / batch as f64;
        (self.batch, self.rows_done, self.batch_total) = (None, 0, 0.0);
        self.done += 1;
        if self.done < config.eval_batches {
            return Ok(RowPart::MoreRows);
        }
        Ok(RowPart::Done((self.total / config.eval_batches as f64) as f32))
    }
}

impl<B: Backend> Trainer<B> {
    /// Mean loss over `eval_batches` fixed batches of `split` (the same windows every time).
    pub async fn evaluate_async(&self, split: Split) -> Result<f32, TrainError> {
        let mut evaluation = Evaluation::new(self, split);
        loop {
            if let Some(loss) = evaluation.next_batch(self).await? {
                return Ok(loss);
            }
        }
    }

    /// [`Trainer::evaluate_async`] for synchronous callers.
    pub fn evaluate(&self, split: Split) -> Result<f32, TrainError> {
        block_on(self.evaluate_async(split))
    }
}

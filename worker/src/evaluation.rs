//! Validation loss measured a batch at a time, so an evaluation can be spread over
//! several slices and pause or stop still answer quickly.
//!
//! It draws the very batches `Trainer::evaluate` draws (a fresh `Rng::new(seed ^
//! EVAL_SALT_VAL)`, `eval_batches` batches of the training batch size) and averages the
//! same way (f64 sum, divided at the end), so the number is the same bit for bit; a test
//! holds it to that.

use tinygpt_autograd::Tape;
use tinygpt_model::Split;
use tinygpt_optim::{TrainError, Trainer, EVAL_SALT_VAL};
use tinygpt_tensor::{block_on, Backend, Indices, Rng};

#[derive(Clone, Debug)]
pub struct Evaluation {
    rng: Rng,
    done: usize,
    total: f64,
}

impl Evaluation {
    pub fn new<B: Backend>(trainer: &Trainer<B>) -> Self {
        Evaluation { rng: Rng::new(trainer.config().seed ^ EVAL_SALT_VAL), done: 0, total: 0.0 }
    }

    /// Scores one more batch; returns the mean loss once all `eval_batches` are in.
    pub fn advance<B: Backend>(&mut self, trainer: &Trainer<B>) -> Result<Option<f32>, TrainError> {
        let config = trainer.config();
        let (batch, seq) = (config.batch_size, trainer.model().config().context_length);
        let data = trainer.dataset().batch(Split::Val, batch, seq, &mut self.rng);
        let backend = trainer.model().params().tensors()[0].backend().clone();
        let tape = Tape::no_grad();
        let inputs = Indices::new(&backend, &data.inputs);
        let targets = Indices::new(&backend, &data.targets);
        let (loss, _) = trainer.model().loss(&tape, &inputs, &targets, batch, seq);
        self.total += block_on(loss.value().read())?[0] as f64;
        self.done += 1;
        Ok((self.done >= config.eval_batches).then(|| (self.total / config.eval_batches as f64) as f32))
    }
}

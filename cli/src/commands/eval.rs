//! `tinygpt eval`: one JSON line of train and validation loss over fixed, seeded batches.

use tinygpt_model::{Dataset, Split};
use tinygpt_optim::{ResumeState, Trainer, TrainerProgress};
use tinygpt_tensor::Backend;

use crate::args::EvalArgs;
use crate::compute::{dispatch, WithBackend};
use crate::error::CliError;
use crate::{model_dir, text};

struct Eval(EvalArgs);

pub fn run(args: EvalArgs) -> Result<(), CliError> {
    let compute = args.compute.clone();
    dispatch(&compute, Eval(args))
}

impl WithBackend for Eval {
    type Output = ();

    fn run<B: Backend>(self, backend: B, _threads: usize) -> Result<(), CliError> {
        let args = self.0;
        let saved = model_dir::load(&args.model)?;
        let (name, bytes) = text::load(args.data.as_deref())?;
        let dataset = Dataset::new(&name, &bytes, saved.model.context_length, saved.training.seed)?;
        let n = saved.model.param_count();
        // Evaluation reuses the trainer's fixed eval batches; the moments are unused.
        let state = ResumeState {
            weights: saved.weights,
            adam_m: vec![0.0; n],
            adam_v: vec![0.0; n],
            progress: TrainerProgress {
                step: 0,
                tokens_seen: 0,
                best_val_loss: None,
                wall_time_sec: 0.0,
                rng_state: 0,
            },
            history: Vec::new(),
        };
        let trainer = Trainer::resume(&backend, saved.model, saved.training, dataset, state)?;
        let train_loss = trainer.evaluate(Split::Train)?;
        let val_loss = trainer.evaluate(Split::Val)?;
        let c = trainer.config();
        let tokens = 2 * c.eval_batches * c.batch_size * trainer.model().config().context_length;
        println!(
            "{}",
            serde_json::json!({ "train_loss": train_loss, "val_loss": val_loss, "tokens": tokens })
        );
        Ok(())
    }
}

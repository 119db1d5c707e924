//! `tinygpt eval`: one JSON line of train and validation loss over fixed, seeded batches.

use tinygpt_model::{Dataset, Split};
use tinygpt_tensor::Backend;

use crate::args::EvalArgs;
use crate::checkpoint::load;
use crate::compute::{dispatch, WithBackend};
use crate::error::CliError;
use crate::text;

struct Eval(EvalArgs);

pub fn run(args: EvalArgs) -> Result<(), CliError> {
    let compute = args.compute.clone();
    dispatch(&compute, Eval(args))
}

impl WithBackend for Eval {
    type Output = ();

    fn run<B: Backend>(self, backend: B, _threads: usize) -> Result<(), CliError> {
        let args = self.0;
        let ckpt = load(&args.model, args.generation.as_deref())?;
        let (name, bytes) = text::load(args.data.as_deref())?;
        let (context, seed) = (ckpt.model_config.context_length, ckpt.training_config.seed);
        let dataset = Dataset::new(&name, &bytes, context, seed)?;
        // Evaluation reuses the trainer's fixed, seeded eval batches.
        crate::memory::check_fits(&ckpt.model_config, ckpt.training_config.batch_size)?;
        let trainer = ckpt.weights_only().resume(&backend, dataset)?;
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

//! `tinygpt eval`: one JSON line of train and validation loss over fixed, seeded batches,
//! of a model or of a model with a LoRA adapter.

use tinygpt_model::{Dataset, Gpt, Lora, Params, Split};
use tinygpt_optim::{GroupOptions, ResumeState, TrainedSet, Trainer};
use tinygpt_tensor::Backend;

use crate::args::EvalArgs;
use crate::base::{adapter_dir, load_adapter, load_base};
use crate::compute::{dispatch, WithBackend};
use crate::error::CliError;
use crate::{text, tokenizer};

struct Eval(EvalArgs);

pub fn run(args: EvalArgs) -> Result<(), CliError> {
    let compute = args.compute.clone();
    dispatch(&compute, Eval(args))
}

impl WithBackend for Eval {
    type Output = ();

    fn run<B: Backend>(self, backend: B, _threads: usize) -> Result<(), CliError> {
        let args = self.0;
        let base = load_base(&args.model, args.generation.as_deref())?;
        let adapter = match &args.adapter {
            Some(dir) => Some(load_adapter(&base, &adapter_dir(&base, dir))?),
            None => None,
        };
        let tokenizer = tokenizer::for_model(&base.ckpt.model_config, base.dir.as_deref())?;
        let ckpt = base.ckpt;
        let (name, bytes) = text::load(args.data.as_deref())?;
        let (context, seed) = (ckpt.model_config.context_length, ckpt.training_config.seed);
        let dataset = Dataset::with_tokenizer(&name, &bytes, &tokenizer, context, seed)?;
        // Evaluation reuses the trainer's fixed, seeded eval batches (the base's, with or
        // without the adapter, so the two are scored on the same windows).
        crate::memory::check_fits(&ckpt.model_config, ckpt.training_config.batch_size)?;
        let trainer = match adapter {
            Some(a) => {
                let config = ckpt.model_config.clone();
                let model = Gpt::new(config.clone(), Params::from_flat(&backend, &config, &ckpt.weights)?)?;
                let lora = Lora::from_flat(&backend, &config, a.lora, &a.weights)?;
                let options = GroupOptions { weight_decay: 0.0, lr_scale: 1.0 };
                let trained = TrainedSet::Adapter { base: model, adapter: lora, options };
                Trainer::new(trained, ckpt.training_config, dataset, None)?
            }
            None => {
                let (trained, config, state) = ResumeState::from_checkpoint(&backend, ckpt);
                Trainer::new(trained, config, dataset, Some(state))?
            }
        };
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

//! `tinygpt sample`: streams generated text to stdout (from a model, or a model with a
//! LoRA adapter folded in).

use std::io::Write;

use tinygpt_model::tokenizer::Utf8Stream;
use tinygpt_model::{Gpt, Params, SampleConfig};
use tinygpt_tensor::{block_on, Backend};

use crate::args::SampleArgs;
use crate::base::{adapter_dir, load_adapter, load_base, merged_weights};
use crate::compute::{dispatch, WithBackend};
use crate::error::CliError;

struct Sample(SampleArgs);

pub fn run(args: SampleArgs) -> Result<(), CliError> {
    if !(args.temperature.is_finite() && args.temperature >= 0.0) {
        return Err(CliError::Usage(format!("--temperature must be 0 or more, got {}", args.temperature)));
    }
    let compute = args.compute.clone();
    dispatch(&compute, Sample(args))
}

impl WithBackend for Sample {
    type Output = ();

    fn run<B: Backend>(self, backend: B, _threads: usize) -> Result<(), CliError> {
        let args = self.0;
        let base = load_base(&args.model, args.generation.as_deref())?;
        // With an adapter: its merge into the base, the same function as base + adapter.
        let weights = match &args.adapter {
            Some(dir) => merged_weights(&base, &load_adapter(&base, &adapter_dir(&base, dir))?)?,
            None => base.ckpt.weights.clone(),
        };
        let params = Params::from_flat(&backend, &base.ckpt.model_config, &weights)?;
        let model = Gpt::new(base.ckpt.model_config, params)?;
        let config = SampleConfig {
            max_tokens: args.tokens,
            temperature: args.temperature,
            top_k: args.top_k,
            seed: args.seed,
        };
        let mut stdout = std::io::stdout().lock();
        let mut stream = Utf8Stream::new();
        let _ = write!(stdout, "{}", args.prompt);
        block_on(model.generate(args.prompt.as_bytes(), &config, |byte| {
            let piece = stream.push(byte);
            // A closed pipe (e.g. `| head`) ends generation quietly.
            write!(stdout, "{piece}").and_then(|_| stdout.flush()).is_ok()
        }))?;
        let _ = writeln!(stdout, "{}", stream.finish());
        Ok(())
    }
}

//! `tinygpt bench-generate`: generation speed with and without the key/value cache, one
//! JSON line each, back to back in one process.
//!
//! The model is the preset's, freshly initialised (speed does not depend on the weights).
//! From a prompt of half a window, greedy generation runs for `--windows` context lengths
//! of tokens, so the window fills, slides (see `tinygpt_model::sample`) and fills again:
//! the steady state of a long sample. `first_token_ms` is the prompt's pass plus the first
//! token; `tokens_per_s` counts the tokens after it, and `positions_per_token` the positions
//! each of them ran through the model on average: the whole window for every token
//! without the cache (between half a window and a full one, as it slides: about three
//! quarters of `context`), one plus the recomputed half window after each slide with it.
//! Both modes use the same window (and so give the same tokens); a sampler that slid its
//! window by one token would run a full window per uncached token, a third more.

use std::time::Instant;

use tinygpt_model::{Generation, Gpt, Preset, SampleConfig};
use tinygpt_tensor::{block_on, Backend, Rng};

use crate::args::BenchGenerateArgs;
use crate::compute::{cpu_kernels, device_label, dispatch, WithBackend};
use crate::error::CliError;

struct BenchGenerate {
    preset: Preset,
    windows: usize,
}

pub fn run(args: BenchGenerateArgs) -> Result<(), CliError> {
    if args.windows <= 0 {
        return Err(CliError::Usage(format!("--windows must be positive, got {}", args.windows)));
    }
    let preset = Preset::by_name(&args.preset)?;
    dispatch(&args.compute, BenchGenerate { preset, windows: args.windows as usize })
}

impl WithBackend for BenchGenerate {
    type Output = ();

    fn run<B: Backend>(self, backend: B, threads: usize) -> Result<(), CliError> {
        let BenchGenerate { preset, windows } = self;
        let ctx = preset.model.context_length;
        let model = Gpt::init(&backend, preset.model.clone(), &mut Rng::new(1))?;
        let prompt: Vec<u8> = b"ROMEO: ".iter().copied().cycle().take(ctx / 2).collect();
        let tokens = windows * ctx;
        for cached in [true, false] {
            let config =
                SampleConfig { max_tokens: tokens, temperature: 0.0, cached, ..SampleConfig::default() };
            let mut generation = Generation::new(&prompt, config);
            let started = Instant::now();
            block_on(generation.next_token(&model))?;
            let first = started.elapsed();
            let first_positions = generation.positions_run();
            let mut produced = 1;
            while !generation.is_done() {
                block_on(generation.next_token(&model))?;
                produced += 1;
            }
            let rest = started.elapsed() - first;
            let line = serde_json::json!({
                "backend": backend.name(),
                "adapter": device_label(&backend, threads),
                "kernels": cpu_kernels(&backend),
                "preset": preset.name,
                "cached": cached,
                "context": ctx,
                "tokens": produced,
                "first_token_ms": (first.as_secs_f64() * 1e4).round() / 10.0,
                "tokens_per_s": ((produced - 1) as f64 / rest.as_secs_f64()).round(),
                "positions_per_token": ((generation.positions_run() - first_positions) as f64
                    / (produced - 1).max(1) as f64
                    * 10.0)
                    .round()
                    / 10.0,
            });
            println!("{line}");
        }
        Ok(())
    }
}

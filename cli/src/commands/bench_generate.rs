//! `tinygpt bench-generate`: generation speed with and without the key/value cache, one
//! JSON line each, back to back in one process.
//!
//! The model is the preset's, freshly initialised (speed does not depend on the weights).
//! From a prompt of half a window, greedy generation runs for `--windows` context lengths
//! of tokens, so the window fills, slides (see `tinygpt_model::sample`) and fills again:
//! the steady state of a long sample. `first_token_ms` is the prompt's pass plus the first
//! token; `tokens_per_s` counts the tokens after it (over `runs` samples, as many as make a
//! second of them: a machine shared with other work makes a 0.1 s cached run noisy), and
//! `positions_per_token` the positions each of them ran through the model on average: the
//! whole window for every token without the cache (between half a window and a full one,
//! as it slides: about three quarters of `context`), one plus the recomputed half window
//! after each slide with it.
//! Both modes use the same window (and so give the same tokens); a sampler that slid its
//! window by one token would run a full window per uncached token, a third more.

use std::time::{Duration, Instant};

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
    // --windows is 1 to `MAX_WINDOWS` (`args::values`), so it is a usize and times any
    // context length without wrapping; the conversion and product are checked all the same.
    let windows = usize::try_from(args.windows).ok().filter(|&w| w > 0);
    let windows = windows
        .ok_or_else(|| CliError::Usage(format!("--windows must be positive, got {}", args.windows)))?;
    let preset = Preset::by_name(&args.preset)?;
    windows.checked_mul(preset.model.context_length).ok_or_else(|| {
        CliError::Usage(format!(
            "--windows {windows} × a context of {} tokens is too many tokens",
            preset.model.context_length
        ))
    })?;
    dispatch(&args.compute, BenchGenerate { preset, windows })
}

/// Each mode generates its sample again (the same tokens) until its timed tokens add up to
/// at least this long, so a short cached run is not one burst of another process's load.
const MIN_TIMED_SECONDS: f64 = 1.0;

/// One sample, timed: the first token (the prompt's pass) apart from the rest.
struct TimedSample {
    first: Duration,
    rest: Duration,
    /// Tokens after the first.
    tokens: usize,
    /// Positions run through the model for them.
    positions: usize,
}

fn timed_sample<B: Backend>(
    model: &Gpt<B>,
    prompt: &[u8],
    config: &SampleConfig,
) -> Result<TimedSample, CliError> {
    let mut generation = Generation::new(prompt, config.clone());
    let started = Instant::now();
    block_on(generation.next_token(model))?;
    let first = started.elapsed();
    let first_positions = generation.positions_run();
    let mut tokens = 0;
    while !generation.is_done() {
        block_on(generation.next_token(model))?;
        tokens += 1;
    }
    let rest = started.elapsed() - first;
    Ok(TimedSample { first, rest, tokens, positions: generation.positions_run() - first_positions })
}

impl WithBackend for BenchGenerate {
    type Output = ();

    fn run<B: Backend>(self, backend: B, threads: usize) -> Result<(), CliError> {
        let BenchGenerate { preset, windows } = self;
        let ctx = preset.model.context_length;
        let model = Gpt::init(&backend, preset.model.clone(), &mut Rng::new(1))?;
        let prompt: Vec<u8> = b"ROMEO: ".iter().copied().cycle().take(ctx / 2).collect();
        let max_tokens = windows.saturating_mul(ctx); // checked in `run`
        for cached in [true, false] {
            let config = SampleConfig { max_tokens, temperature: 0.0, cached, ..SampleConfig::default() };
            let first = timed_sample(&model, &prompt, &config)?;
            let (mut rest, mut tokens, mut runs) = (first.rest, first.tokens, 1);
            while rest.as_secs_f64() < MIN_TIMED_SECONDS {
                let again = timed_sample(&model, &prompt, &config)?;
                (rest, tokens, runs) = (rest + again.rest, tokens + again.tokens, runs + 1);
            }
            let line = serde_json::json!({
                "backend": backend.name(),
                "adapter": device_label(&backend, threads),
                "kernels": cpu_kernels(&backend),
                "preset": preset.name,
                "cached": cached,
                "context": ctx,
                "tokens": first.tokens + 1,
                "runs": runs,
                "first_token_ms": (first.first.as_secs_f64() * 1e4).round() / 10.0,
                "tokens_per_s": (tokens as f64 / rest.as_secs_f64()).round(),
                "positions_per_token": (first.positions as f64 / first.tokens.max(1) as f64 * 10.0).round() / 10.0,
            });
            println!("{line}");
        }
        Ok(())
    }
}

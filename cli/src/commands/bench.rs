//! `tinygpt bench`: times training steps after warm-up; one JSON line.

use std::time::Instant;

use tinygpt_model::{Dataset, Preset};
use tinygpt_optim::{Trainer, TrainingConfig};
use tinygpt_tensor::{block_on, Backend};

use crate::args::BenchArgs;
use crate::compute::{cpu_kernels, device_label, dispatch, gpu_features, WithBackend};
use crate::error::CliError;
use crate::text;

/// Untimed steps first, so allocation and thread-pool start-up are not measured.
const WARMUP_STEPS: usize = 2;

struct Bench {
    preset: Preset,
    steps: usize,
}

pub fn run(args: BenchArgs) -> Result<(), CliError> {
    if args.steps <= 0 {
        return Err(CliError::Usage(format!("--steps must be positive, got {}", args.steps)));
    }
    let preset = Preset::by_name(&args.preset)?;
    crate::memory::check_fits(&preset.model, preset.batch_size)?;
    dispatch(&args.compute, Bench { preset, steps: args.steps as usize })
}

impl WithBackend for Bench {
    type Output = ();

    fn run<B: Backend>(self, backend: B, threads: usize) -> Result<(), CliError> {
        let Bench { preset, steps } = self;
        let training = TrainingConfig {
            batch_size: preset.batch_size,
            max_steps: WARMUP_STEPS + steps,
            ..TrainingConfig::default()
        };
        let dataset =
            Dataset::new("tinyshakespeare", text::TINY_SHAKESPEARE, preset.model.context_length, 1)?;
        let params = preset.model.param_count();
        let tokens = preset.batch_size * preset.model.context_length;
        let mut trainer = Trainer::new(&backend, preset.model, training, dataset)?;
        for _ in 0..WARMUP_STEPS {
            trainer.step()?;
        }
        // A step need not wait for its work to finish on a device; flushing on both sides
        // of the timed steps measures the work, not how much of it was queued.
        block_on(backend.flush())?;
        let started = Instant::now();
        for _ in 0..steps {
            trainer.step()?;
        }
        block_on(backend.flush())?;
        let ms_per_step = started.elapsed().as_secs_f64() * 1000.0 / steps as f64;
        let line = serde_json::json!({
            "backend": backend.name(),
            "adapter": device_label(&backend, threads),
            "kernels": cpu_kernels(&backend),
            "gpu_features": gpu_features(&backend),
            "threads": threads,
            "preset": preset.name,
            "params": params,
            "ms_per_step": (ms_per_step * 1000.0).round() / 1000.0,
            "tok_per_s": (tokens as f64 / (ms_per_step / 1000.0)).round(),
        });
        println!("{line}");
        Ok(())
    }
}

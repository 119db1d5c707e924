//! `tinygpt bench`: times training steps after warm-up; one JSON line.

use std::time::Instant;

use tinygpt_model::{Dataset, Gpt, LoraConfig, ModelConfig, Preset};
use tinygpt_optim::{TrainedSet, Trainer, TrainingConfig};
use tinygpt_tensor::{block_on, Backend, Rng};

use crate::args::BenchArgs;
use crate::compute::{cpu_kernels, device_label, dispatch_at, gpu_features, matmul_path, WithBackend};
use crate::error::CliError;
use crate::text;

/// Untimed steps first, so allocation and thread-pool start-up are not measured.
const WARMUP_STEPS: usize = 2;

struct Bench {
    /// `preset` in the printed line: the preset's name, or the config file's `model_name`.
    name: String,
    model: ModelConfig,
    /// The training config's batch size and dropout seed; its other fields do not change
    /// a step's cost.
    training: TrainingConfig,
    steps: usize,
    /// LoRA steps of this adapter on the frozen model instead of whole-model steps.
    lora: Option<(String, LoraConfig)>,
}

pub fn run(args: BenchArgs) -> Result<(), CliError> {
    if args.steps <= 0 {
        return Err(CliError::Usage(format!("--steps must be positive, got {}", args.steps)));
    }
    let (name, model, training) = match &args.config {
        Some(path) => {
            let (model, training) = crate::run_config::from_file(path)?;
            (model.model_name.clone(), model, training)
        }
        None => {
            let preset = Preset::by_name(&args.preset)?;
            let training = TrainingConfig { batch_size: preset.batch_size, ..TrainingConfig::default() };
            (preset.name.to_string(), preset.model, training)
        }
    };
    let training = TrainingConfig { precision: args.precision.unwrap_or(training.precision), ..training };
    crate::memory::check_fits(&model, training.batch_size)?;
    let precision = training.precision;
    let lora = args.lora.map(|name| LoraConfig::preset(&name).map(|config| (name, config))).transpose()?;
    dispatch_at(&args.compute, precision, Bench { name, model, training, steps: args.steps as usize, lora })
}

impl WithBackend for Bench {
    type Output = ();

    fn run<B: Backend>(self, backend: B, threads: usize) -> Result<(), CliError> {
        let Bench { name, model, training, steps, lora } = self;
        let training = TrainingConfig { max_steps: training.max_steps.max(WARMUP_STEPS + steps), ..training };
        let dataset = Dataset::new("tinyshakespeare", text::TINY_SHAKESPEARE, model.context_length, 1)?;
        let params = model.param_count();
        let estimate = tinygpt_model::training_memory_bytes(&model, training.batch_size);
        let tokens = training.batch_size * model.context_length;
        let precision = training.precision;
        let (path, reason) = matmul_path(&backend);
        let lora_name = lora.as_ref().map(|(name, _)| name.clone());
        let trainable = lora.as_ref().map_or(params, |(_, l)| l.param_count(&model));
        let trained = match lora {
            None => TrainedSet::whole_model(&backend, model),
            Some((_, lora)) => {
                let base = Gpt::init(&backend, model, &mut Rng::new(training.seed))?;
                TrainedSet::fresh_adapter(base, lora, &training)?
            }
        };
        let mut trainer = Trainer::new(trained, training, dataset, None)?;
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
            // What was asked for, what the matmul runs (`f32`, `shader-f16`) and why.
            "precision": precision.as_str(),
            "matmul_path": path,
            "matmul_reason": reason,
            "preset": name,
            "params": params,
            // The adapter's preset and its parameters (the base frozen), or null.
            "lora": lora_name,
            "trainable": trainable,
            "ms_per_step": (ms_per_step * 1000.0).round() / 1000.0,
            "tok_per_s": (tokens as f64 / (ms_per_step / 1000.0)).round(),
            // Memory: the process's peak resident set (Linux only; null elsewhere) against
            // parameters × 16 bytes (weights, gradients, two AdamW moments) plus the
            // activations `training_memory_bytes` estimates (which counts the attention
            // probabilities a flash-style backend never stores).
            "peak_rss_bytes": peak_rss_bytes(),
            "params_x16_bytes": params as u64 * 16,
            "activation_bytes": estimate.saturating_sub(params as u64 * 16),
        });
        println!("{line}");
        Ok(())
    }
}

/// The process's peak resident set size (`VmHWM` in `/proc/self/status`), where there is one.
fn peak_rss_bytes() -> Option<u64> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    let line = status.lines().find(|l| l.starts_with("VmHWM:"))?;
    let kib: u64 = line.trim_start_matches("VmHWM:").trim().trim_end_matches("kB").trim().parse().ok()?;
    Some(kib * 1024)
}

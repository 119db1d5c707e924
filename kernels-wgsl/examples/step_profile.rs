//! Where a training step's time goes on the wgpu backend: host recording against waiting,
//! and GPU time per kernel. JSON lines, one summary per preset, then its kernels.
//!
//! ```sh
//! cargo run --release -p tinygpt-kernels-wgsl --example step_profile -- --presets large,huge --steps 10 --top 25
//! cargo run --release -p tinygpt-kernels-wgsl --example step_profile -- --config configs/nanogpt-shakespeare-char.json
//! ```
//!
//! `--precision f32|mixed` picks the backend's precision (default f32).
//!
//! `--config FILE` profiles the model and batch of a `tinygpt train --config` file (dropout
//! included) instead of presets; it is named by its `model_name`.
//!
//! For each preset, after 2 warm-up steps:
//! - `{"preset", "ms_per_step", "record_ms", "wait_ms", "dispatches", "submissions", "bind_groups"}`:
//!   `steps` unprofiled steps, each split into recording (`Trainer::step_part_deferred`:
//!   the host builds the step's commands; the GPU runs what was submitted meanwhile) and
//!   the wait for its loss (`read_losses`), per step (objects: created per step).
//! - `{"preset", "gpu_ms", "kernel", "calls", "ms", "share"}` per kernel entry point, then
//!   the `top` costliest labels (`"label"`: layout and sizes for matmul, grid otherwise),
//!   from `steps` more steps with a timestamp around every dispatch (see
//!   `src/profile.rs`), per step. `gpu_ms` is their sum: GPU time including barriers,
//!   excluding gaps between submissions.

use std::collections::BTreeMap;
use std::time::Instant;

use tinygpt_kernels_wgsl::{KernelTime, WgpuBackend};
use tinygpt_model::{Dataset, ModelConfig, Preset};
use tinygpt_optim::{Recipe, TrainedSet, Trainer, TrainingConfig};
use tinygpt_tensor::{block_on, Precision};

const TEXT: &[u8] = include_bytes!("../../data/tinyshakespeare.txt");
const WARMUP_STEPS: usize = 2;

struct Options {
    presets: Vec<String>,
    config: Option<String>,
    steps: usize,
    top: usize,
    precision: Precision,
}

fn options() -> Result<Options, String> {
    let mut o = Options {
        presets: vec!["large".into()],
        config: None,
        steps: 10,
        top: 25,
        precision: Precision::F32,
    };
    let args: Vec<String> = std::env::args().skip(1).collect();
    for pair in args.chunks(2) {
        let [name, value] = pair else { return Err(format!("{} needs a value", pair[0])) };
        let number = || value.parse::<usize>().map_err(|_| format!("{name}: not a number: {value}"));
        match name.as_str() {
            "--presets" => o.presets = value.split(',').map(String::from).collect(),
            "--steps" => o.steps = number()?.max(1),
            "--top" => o.top = number()?,
            "--config" => o.config = Some(value.clone()),
            "--precision" => o.precision = value.parse().map_err(|e| format!("{name}: {e}"))?,
            _ => {
                return Err(format!(
                    "unknown option {name} (--presets, --config, --steps, --top, --precision)"
                ))
            }
        }
    }
    Ok(o)
}

fn main() -> Result<(), String> {
    let o = options()?;
    let backend = WgpuBackend::new_profiled(o.precision).map_err(|e| e.to_string())?;
    let runs = match &o.config {
        Some(path) => vec![config_file(path)?],
        None => o.presets.iter().map(|name| preset_run(name)).collect::<Result<_, _>>()?,
    };
    for (name, model, training) in runs {
        let max_steps = training.max_steps.max(WARMUP_STEPS + 2 * o.steps);
        let training = TrainingConfig { max_steps, ..training };
        profile(&backend, &name, model, training, &o)?;
    }
    Ok(())
}

fn preset_run(name: &str) -> Result<(String, ModelConfig, TrainingConfig), String> {
    let preset = Preset::by_name(name).map_err(|e| e.to_string())?;
    let training = TrainingConfig { batch_size: preset.batch_size, ..TrainingConfig::default() };
    Ok((name.to_string(), preset.model, training))
}

/// The run a `tinygpt train --config` file describes (its preset, model and training
/// sections, by `Recipe`'s rules).
fn config_file(path: &str) -> Result<(String, ModelConfig, TrainingConfig), String> {
    let text = std::fs::read_to_string(path).map_err(|e| format!("cannot read {path}: {e}"))?;
    let recipe = Recipe::from_config_json(&text).map_err(|e| format!("{path}: {e}"))?;
    let (model, training) = recipe.build().map_err(|e| format!("{path}: {e}"))?;
    Ok((model.model_name.clone(), model, training))
}

fn profile(
    backend: &WgpuBackend,
    name: &str,
    model: ModelConfig,
    training: TrainingConfig,
    o: &Options,
) -> Result<(), String> {
    let err = |e: &dyn std::fmt::Display| e.to_string();
    let rows = training.batch_size;
    let dataset = Dataset::new("tinyshakespeare", TEXT, model.context_length, 1).map_err(|e| err(&e))?;
    let mut trainer = Trainer::new(TrainedSet::whole_model(backend, model), training, dataset, None)
        .map_err(|e| err(&e))?;
    for _ in 0..WARMUP_STEPS {
        trainer.step().map_err(|e| err(&e))?;
    }

    let before = backend.stats();
    let (mut record, mut total) = (0.0, 0.0);
    for _ in 0..o.steps {
        let t0 = Instant::now();
        trainer.step_part_deferred(rows).ok_or("a whole batch ends its step")?;
        let t1 = Instant::now();
        block_on(trainer.read_losses()).map_err(|e| err(&e))?;
        record += (t1 - t0).as_secs_f64();
        total += t0.elapsed().as_secs_f64();
    }
    let after = backend.stats();
    let per_step = |x: f64| (x * 1000.0 / o.steps as f64 * 1000.0).round() / 1000.0;
    let n = o.steps as u64;
    println!(
        "{{\"preset\":\"{name}\",\"adapter\":\"{}\",\"ms_per_step\":{},\"record_ms\":{},\"wait_ms\":{},\"dispatches\":{},\"submissions\":{},\"bind_groups\":{}}}",
        backend.adapter().name,
        per_step(total),
        per_step(record),
        per_step(total - record),
        (after.dispatches - before.dispatches) / n,
        (after.submissions - before.submissions) / n,
        (after.bind_groups - before.bind_groups) / n,
    );

    backend.set_profiling(true);
    for _ in 0..o.steps {
        trainer.step().map_err(|e| err(&e))?;
    }
    let kernels = backend.take_profile();
    backend.set_profiling(false);
    print_profile(name, &kernels, o.steps, o.top);
    Ok(())
}

fn print_profile(preset: &str, kernels: &[KernelTime], steps: usize, top: usize) {
    let gpu: f64 = kernels.iter().map(|k| k.nanos).sum();
    let ms = |nanos: f64| (nanos / steps as f64 / 1e6 * 1000.0).round() / 1000.0;
    let share = |nanos: f64| (nanos / gpu.max(1.0) * 1000.0).round() / 1000.0;
    let mut by_entry: BTreeMap<&str, (u64, f64)> = BTreeMap::new();
    for k in kernels {
        let entry = k.label.split(' ').next().unwrap_or("");
        let e = by_entry.entry(entry).or_default();
        e.0 += k.calls;
        e.1 += k.nanos;
    }
    let mut entries: Vec<_> = by_entry.into_iter().collect();
    entries.sort_by(|a, b| b.1 .1.total_cmp(&a.1 .1));
    for (entry, (calls, nanos)) in entries {
        println!(
            "{{\"preset\":\"{preset}\",\"gpu_ms\":{},\"kernel\":\"{entry}\",\"calls\":{},\"ms\":{},\"share\":{}}}",
            ms(gpu),
            calls / steps as u64,
            ms(nanos),
            share(nanos)
        );
    }
    for k in kernels.iter().take(top) {
        println!(
            "{{\"preset\":\"{preset}\",\"label\":\"{}\",\"calls\":{},\"ms\":{},\"share\":{}}}",
            k.label,
            k.calls / steps as u64,
            ms(k.nanos),
            share(k.nanos)
        );
    }
}

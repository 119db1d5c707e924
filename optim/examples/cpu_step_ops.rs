//! Where a training step's time goes on the CPU backend, op by op: each op of a few steps
//! timed as the backend runs it, summed by kind (a matmul by its shape and layout).
//! JSON lines: a summary, then the `top` costliest entries.
//!
//! ```sh
//! cargo run --release -p tinygpt-optim --example cpu_step_ops -- --config configs/gpt2-124m-lora.json --lora qvo-r8 --threads 2
//! cargo run --release -p tinygpt-optim --example cpu_step_ops -- --preset medium
//! ```
//!
//! - `{"ms_per_step", "op_ms_per_step", "threads", "kernels"}`: wall time a step, and the
//!   part of it spent inside ops (the rest is the tape, the trainer and allocation).
//! - `{"op", "calls", "ms", "share"}` per entry, per step, costliest first; `share` is of
//!   the ops' time.
//!
//! The CPU backend runs every op before it returns, so an op's time is its kernel's (a GPU
//! backend only queues its ops: `kernels-wgsl`'s `step_profile` times those on the device).

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::Instant;

use tinygpt_kernels_cpu::CpuBackend;
use tinygpt_model::{Dataset, Gpt, LoraConfig};
use tinygpt_optim::{Recipe, TrainedSet, Trainer, TrainingConfig};
use tinygpt_tensor::{Backend, Flow, Hook, Hooked, Op, Operand, Rng};

const TEXT: &[u8] = include_bytes!("../../data/tinyshakespeare.txt");
const WARMUP_STEPS: usize = 1;

type Storage = <CpuBackend as Backend>::Storage;

/// Times each op from [`Hook::before`] to [`Hook::after`] and sums the times by entry name.
/// Memory ops (allocation, upload) get no `after` and are not timed.
#[derive(Clone, Debug, Default)]
struct OpTimes {
    started: Arc<Mutex<Option<Instant>>>,
    /// Entry name -> (calls, milliseconds).
    totals: Arc<Mutex<BTreeMap<String, (usize, f64)>>>,
}

impl Hook<CpuBackend> for OpTimes {
    fn before(&self, _inner: &CpuBackend, _op: &Op<'_, Storage>) -> Flow {
        *self.started.lock().unwrap() = Some(Instant::now());
        Flow::Run
    }

    fn after(&self, _inner: &CpuBackend, op: &Op<'_, Storage>, _outputs: &dyn Fn() -> Vec<Operand<Storage>>) {
        let Some(started) = self.started.lock().unwrap().take() else { return };
        let ms = started.elapsed().as_secs_f64() * 1e3;
        let name = if op.name.starts_with("matmul") {
            format!("{} {}", op.name, op.shape())
        } else {
            op.name.into()
        };
        let mut totals = self.totals.lock().unwrap();
        let entry = totals.entry(name).or_default();
        entry.0 += 1;
        entry.1 += ms;
    }
}

struct Options {
    preset: String,
    config: Option<String>,
    lora: Option<String>,
    threads: usize,
    steps: usize,
    top: usize,
}

fn options() -> Result<Options, String> {
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
    let mut o =
        Options { preset: "small".into(), config: None, lora: None, threads: cores, steps: 3, top: 25 };
    let args: Vec<String> = std::env::args().skip(1).collect();
    for pair in args.chunks(2) {
        let [name, value] = pair else { return Err(format!("{} needs a value", pair[0])) };
        let number = || value.parse::<usize>().map_err(|_| format!("{name}: not a number: {value}"));
        match name.as_str() {
            "--preset" => o.preset = value.clone(),
            "--config" => o.config = Some(value.clone()),
            "--lora" => o.lora = Some(value.clone()),
            "--threads" => o.threads = number()?.max(1),
            "--steps" => o.steps = number()?.max(1),
            "--top" => o.top = number()?,
            _ => {
                return Err(format!(
                    "unknown option {name} (--preset, --config, --lora, --threads, --steps, --top)"
                ))
            }
        }
    }
    Ok(o)
}

fn main() -> Result<(), String> {
    let err = |e: &dyn std::fmt::Display| e.to_string();
    let o = options()?;
    // A preset's run as `tinygpt train --preset` makes it (its batch size), or a --config file's.
    let recipe = match &o.config {
        Some(path) => {
            let text = std::fs::read_to_string(path).map_err(|e| format!("cannot read {path}: {e}"))?;
            Recipe::from_config_json(&text).map_err(|e| format!("{path}: {e}"))?
        }
        None => Recipe { preset: Some(o.preset.clone()), ..Recipe::default() },
    };
    let (model, training) = recipe.build().map_err(|e| err(&e))?;
    let training = TrainingConfig { max_steps: training.max_steps.max(WARMUP_STEPS + o.steps), ..training };
    let cpu = CpuBackend::try_new_on_this_thread(o.threads).map_err(|e| err(&e))?;
    let kernels = cpu.variant().name();
    let backend: Hooked<CpuBackend, OpTimes> = Hooked::new(cpu);
    let dataset = Dataset::new("tinyshakespeare", TEXT, model.context_length, 1).map_err(|e| err(&e))?;
    let trained = match &o.lora {
        None => TrainedSet::whole_model(&backend, model),
        Some(name) => {
            let lora = LoraConfig::preset(name).map_err(|e| err(&e))?;
            let base = Gpt::init(&backend, model, &mut Rng::new(training.seed)).map_err(|e| err(&e))?;
            TrainedSet::fresh_adapter(base, lora, &training).map_err(|e| err(&e))?
        }
    };
    let mut trainer = Trainer::new(trained, training, dataset, None).map_err(|e| err(&e))?;
    for _ in 0..WARMUP_STEPS {
        trainer.step().map_err(|e| err(&e))?;
    }
    backend.totals.lock().unwrap().clear();
    let started = Instant::now();
    for _ in 0..o.steps {
        trainer.step().map_err(|e| err(&e))?;
    }
    let per_step = |ms: f64| (ms / o.steps as f64 * 1000.0).round() / 1000.0;
    let wall_ms = started.elapsed().as_secs_f64() * 1e3;
    let mut entries: Vec<(String, (usize, f64))> =
        backend.totals.lock().unwrap().clone().into_iter().collect();
    entries.sort_by(|a, b| b.1 .1.total_cmp(&a.1 .1));
    let op_ms: f64 = entries.iter().map(|(_, (_, ms))| ms).sum();
    let summary = serde_json::json!({
        "ms_per_step": per_step(wall_ms),
        "op_ms_per_step": per_step(op_ms),
        "threads": o.threads,
        "kernels": kernels,
        "model": trainer.model().config().model_name,
        "lora": o.lora,
    });
    println!("{summary}");
    for (name, (calls, ms)) in entries.into_iter().take(o.top) {
        let line = serde_json::json!({
            "op": name,
            "calls": calls / o.steps,
            "ms": per_step(ms),
            "share": (ms / op_ms * 1000.0).round() / 1000.0,
        });
        println!("{line}");
    }
    Ok(())
}

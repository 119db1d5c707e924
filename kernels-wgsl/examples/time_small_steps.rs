//! Seconds per training step of the `small` preset (batch 16) on the wgpu backend and on the
//! CPU backend (2 threads), side by side, with the backend's object counters. A timing, not
//! a check: it asserts nothing (it was an `#[ignore]`d "test" in `tests/training.rs`).
//!
//! ```sh
//! cargo run --release -p tinygpt-kernels-wgsl --example time_small_steps
//! ```
//!
//! Lavapipe is used when no Vulkan driver is configured (`VK_ICD_FILENAMES`).

use std::time::Instant;

use tinygpt_kernels_cpu::CpuBackend;
use tinygpt_kernels_wgsl::testing::prefer_lavapipe;
use tinygpt_kernels_wgsl::WgpuBackend;
use tinygpt_model::{Dataset, Preset};
use tinygpt_optim::{TrainedSet, Trainer, TrainingConfig};
use tinygpt_tensor::Backend;

const TEXT: &[u8] = include_bytes!("../../data/tinyshakespeare.txt");
const TIMED_STEPS: u32 = 3;

fn trainer<B: Backend>(backend: &B) -> Trainer<B> {
    let preset = Preset::by_name("small").unwrap();
    let config = TrainingConfig { batch_size: 16, max_steps: 10, warmup_steps: 10, ..Default::default() };
    let dataset =
        Dataset::new("shakespeare", &TEXT[..300_000], preset.model.context_length, config.seed).unwrap();
    Trainer::new(TrainedSet::whole_model(backend, preset.model), config, dataset, None).unwrap()
}

/// Seconds per step over [`TIMED_STEPS`] steps, after one warm-up step.
fn seconds_per_step<B: Backend>(trainer: &mut Trainer<B>) -> f64 {
    trainer.step().unwrap();
    let started = Instant::now();
    for _ in 0..TIMED_STEPS {
        trainer.step().unwrap();
    }
    started.elapsed().as_secs_f64() / f64::from(TIMED_STEPS)
}

fn main() {
    prefer_lavapipe();
    let gpu = WgpuBackend::new().unwrap_or_else(|e| panic!("no wgpu adapter: {e}"));
    let cpu = CpuBackend::new(2);
    let wgpu_s = seconds_per_step(&mut trainer(&gpu));
    let cpu_s = seconds_per_step(&mut trainer(&cpu));
    println!("small: wgpu {wgpu_s:.3} s/step, cpu {cpu_s:.3} s/step; {:?}", gpu.stats());
}

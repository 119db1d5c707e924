//! LoRA adapter training on wgpu against the CPU backend: the adapter is composed from
//! the backends' existing ops, so the same seed gives the same run within float rounding.

use tinygpt_kernels_cpu::CpuBackend;
use tinygpt_kernels_wgsl::testing::shared_backend;
use tinygpt_model::{Dataset, Gpt, Lora, LoraConfig, Preset};
use tinygpt_optim::{GroupOptions, TrainedSet, Trainer, TrainingConfig};
use tinygpt_tensor::{block_on, Backend, Rng};

const TEXT: &[u8] = include_bytes!("../../data/tinyshakespeare.txt");

/// An adapter run (qvo-r8, learning rate 3e-3) on a `tiny` base drawn from seed 1.
fn adapter_run<B: Backend>(backend: &B, steps: usize) -> Trainer<B> {
    let model = Preset::by_name("tiny").unwrap().model;
    let base = Gpt::init(backend, model.clone(), &mut Rng::new(1)).unwrap();
    let config = TrainingConfig {
        batch_size: 4,
        max_steps: steps,
        warmup_steps: 5,
        learning_rate: 3e-3,
        eval_interval: 1000,
        ..Default::default()
    };
    let lora = Lora::init(backend, &model, LoraConfig::preset("qvo-r8").unwrap(), &mut Rng::new(7)).unwrap();
    let dataset = Dataset::new("shakespeare", &TEXT[..300_000], model.context_length, config.seed).unwrap();
    let options = GroupOptions { weight_decay: 0.0, lr_scale: 1.0 };
    Trainer::new(TrainedSet::Adapter { base, adapter: lora, options }, config, dataset, None).unwrap()
}

/// 50 adapter steps, same seed, on both backends: the loss at step 50 agrees within 1%, and
/// the frozen base on the GPU is still bit-identical to the CPU's.
#[test]
fn adapter_training_on_wgpu_matches_the_cpu_backend() {
    let Some(gpu) = shared_backend() else { return };
    let cpu = CpuBackend::new(2);
    let (mut on_gpu, mut on_cpu) = (adapter_run(&gpu, 50), adapter_run(&cpu, 50));
    let (mut first, mut gpu_loss, mut cpu_loss) = (0.0, 0.0, 0.0);
    for step in 1..=50 {
        gpu_loss = on_gpu.step().unwrap().train_loss;
        cpu_loss = on_cpu.step().unwrap().train_loss;
        if step == 1 {
            first = cpu_loss;
        }
    }
    let rel = ((gpu_loss - cpu_loss) / cpu_loss).abs();
    eprintln!("adapter loss at step 50: wgpu {gpu_loss}, cpu {cpu_loss} (relative difference {rel:.2e})");
    assert!(rel <= 0.01, "adapter loss at step 50: wgpu {gpu_loss}, cpu {cpu_loss}");
    assert!(cpu_loss < first - 0.05, "the adapter should learn: {first} → {cpu_loss}");
    let (g, c) = (base_weights(&on_gpu), base_weights(&on_cpu));
    assert!(g.iter().zip(&c).all(|(a, b)| a.to_bits() == b.to_bits()), "the frozen base moved");
}

fn base_weights<B: Backend>(t: &Trainer<B>) -> Vec<f32> {
    block_on(t.model().params().to_flat()).unwrap()
}

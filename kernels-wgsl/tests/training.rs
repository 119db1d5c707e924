//! Training through optim's `Trainer` on wgpu against the CPU backend: the same seed and
//! batches give the same run (within float rounding), a steady training loop creates no
//! device buffers after its first step, and a run's saved state continues on either backend.

use tinygpt_kernels_cpu::CpuBackend;
use tinygpt_kernels_wgsl::testing::{own_backend, shared_backend};
use tinygpt_kernels_wgsl::WgpuBackend;
use tinygpt_model::{Dataset, Preset, Split};
use tinygpt_optim::{TrainedSet, Trainer, TrainingConfig};
use tinygpt_tensor::{block_on, Backend};

const TEXT: &[u8] = include_bytes!("../../data/tinyshakespeare.txt");

fn trainer<B: Backend>(backend: &B, preset: &str, batch_size: usize, steps: usize) -> Trainer<B> {
    let preset = Preset::by_name(preset).unwrap();
    let config = TrainingConfig {
        batch_size,
        max_steps: steps,
        warmup_steps: 10,
        eval_interval: 1000,
        eval_batches: 2,
        ..Default::default()
    };
    // A shorter text than the whole play: batches are drawn the same way either way.
    let dataset =
        Dataset::new("shakespeare", &TEXT[..300_000], preset.model.context_length, config.seed).unwrap();
    Trainer::new(TrainedSet::whole_model(backend, preset.model), config, dataset, None).unwrap()
}

fn weights<B: Backend>(t: &Trainer<B>) -> Vec<Vec<f32>> {
    t.model().params().tensors().iter().map(|p| block_on(p.read()).unwrap()).collect()
}

/// 50 steps of `small` (4 rows a batch instead of 16: a software adapter runs this model
/// at a few steps a second at most) on both backends: the loss at step 50 agrees within 1%, and after
/// 5 steps every weight agrees within 1e-3 relative to its tensor's scale (its largest
/// magnitude, at least the init std 0.02). The floor is for tensors whose gradient is
/// rounding noise: a key bias does not change attention (softmax ignores a per-row shift),
/// and AdamW turns its 1e-8 noise into updates of size lr on both backends, differently.
#[test]
fn small_trains_like_the_cpu_backend() {
    let Some(gpu) = shared_backend() else { return };
    let cpu = CpuBackend::new(2);
    let mut on_gpu = trainer(&gpu, "small", 4, 50);
    let mut on_cpu = trainer(&cpu, "small", 4, 50);
    let (mut gpu_loss, mut cpu_loss) = (0.0, 0.0);
    for step in 1..=50 {
        gpu_loss = on_gpu.step().unwrap().train_loss;
        cpu_loss = on_cpu.step().unwrap().train_loss;
        if step == 5 {
            let names = on_cpu.model().config().tensor_specs();
            for ((g, c), spec) in weights(&on_gpu).iter().zip(weights(&on_cpu)).zip(names) {
                let scale = c.iter().fold(0.02f32, |m, v| m.max(v.abs()));
                let worst = g.iter().zip(&c).map(|(a, b)| (a - b).abs()).fold(0f32, f32::max);
                assert!(
                    worst <= 1e-3 * scale,
                    "{} after 5 steps: wgpu and cpu differ by {worst} (scale {scale})",
                    spec.name
                );
            }
        }
    }
    let rel = ((gpu_loss - cpu_loss) / cpu_loss).abs();
    eprintln!("loss at step 50: wgpu {gpu_loss}, cpu {cpu_loss} (relative difference {rel:.2e})");
    assert!(rel <= 0.01, "loss at step 50: wgpu {gpu_loss}, cpu {cpu_loss}");
    assert!(gpu_loss < 5.0, "loss should fall from ln 256 = 5.55 within 50 steps, got {gpu_loss}");
}

/// After the first step (and a warm-up evaluation), training steps and evaluations create
/// no device buffers: the pool serves them all; and no bind groups: they are cached by the
/// exact buffers bound, and the pool hands out the same buffers at the same points of
/// every step (smallest id first).
#[test]
fn a_steady_training_loop_creates_no_buffers_or_bind_groups() {
    // Its own device: the other tests of this binary share theirs.
    let Some(gpu) = own_backend() else { return };
    let mut t = trainer(&gpu, "tiny", 4, 10);
    t.step().unwrap();
    t.evaluate(Split::Val).unwrap();
    t.step().unwrap();
    let before = gpu.stats();
    for _ in 0..4 {
        t.step().unwrap();
    }
    t.evaluate(Split::Val).unwrap();
    let after = gpu.stats();
    eprintln!("stats after warm-up {before:?}, after 4 more steps {after:?}");
    assert_eq!(after.buffers, before.buffers, "buffers created in steady state");
    assert_eq!(after.bind_groups, before.bind_groups, "bind groups created in steady state");
    assert!(after.dispatches > before.dispatches);
    // One submission per upload batch and per read, plus one per 128 dispatches (the
    // recorder's own, see tuning.rs): a handful per step, not one per op.
    let dispatches = (after.dispatches - before.dispatches) as f64 / 5.0;
    let per_step = (after.submissions - before.submissions) as f64 / 5.0;
    assert!(per_step <= 8.0 + dispatches / 128.0, "{per_step} submissions per step");
}

/// A run trained on one backend continues and evaluates on the other: its saved state
/// (weights, moments, progress) is plain f32 in canonical order on both.
#[test]
fn saved_state_moves_between_backends() {
    let Some(gpu) = shared_backend() else { return };
    let cpu = CpuBackend::new(2);
    let mut on_gpu = trainer(&gpu, "tiny", 4, 6);
    for _ in 0..3 {
        on_gpu.step().unwrap();
    }
    let state = block_on(on_gpu.resume_state()).unwrap();
    let resumed = |state| {
        let fresh = trainer(&cpu, "tiny", 4, 6);
        let (model, config, dataset) =
            (fresh.model().config().clone(), fresh.config().clone(), fresh.dataset().clone());
        Trainer::new(TrainedSet::whole_model(&cpu, model), config, dataset, Some(state)).unwrap()
    };
    let mut on_cpu = resumed(state);
    let (g, c) = (on_gpu.evaluate(Split::Val).unwrap(), on_cpu.evaluate(Split::Val).unwrap());
    assert!(((g - c) / c).abs() < 1e-4, "val loss of the same weights: wgpu {g}, cpu {c}");
    let (g, c) = (on_gpu.step().unwrap().train_loss, on_cpu.step().unwrap().train_loss);
    assert!(((g - c) / c).abs() < 1e-3, "the step after resuming: wgpu {g}, cpu {c}");
}

/// 20 steps of `small` with dropout 0.2 on both backends: the counter-based masks are the
/// same on each, so the losses agree step by step within the 1% of the test above (a
/// different mask would move them by far more); and dropout is really on (step 1's loss
/// differs from the run without it).
#[test]
fn small_with_dropout_trains_like_the_cpu_backend() {
    let Some(gpu) = shared_backend() else { return };
    dropout_parity(&gpu);
}

fn dropout_parity(gpu: &WgpuBackend) {
    let cpu = CpuBackend::new(2);
    let mut on_gpu = trainer_with_dropout(gpu, 0.2, 20);
    let mut on_cpu = trainer_with_dropout(&cpu, 0.2, 20);
    let mut plain = trainer_with_dropout(&cpu, 0.0, 20);
    for step in 1..=20 {
        let (g, c) = (on_gpu.step().unwrap().train_loss, on_cpu.step().unwrap().train_loss);
        let rel = ((g - c) / c).abs();
        assert!(rel <= 0.01, "step {step} with dropout 0.2: wgpu {g}, cpu {c}");
        if step == 1 {
            let p = plain.step().unwrap().train_loss;
            assert!((p - c).abs() > 1e-3, "dropout 0.2 left step 1's loss at {c} (without: {p})");
        }
        if step == 20 {
            eprintln!("loss at step 20 with dropout 0.2: wgpu {g}, cpu {c} (relative difference {rel:.2e})");
        }
    }
}

fn trainer_with_dropout<B: Backend>(backend: &B, dropout: f32, steps: usize) -> Trainer<B> {
    let t = trainer(backend, "small", 4, steps);
    let (mut model, config, dataset) = (t.model().config().clone(), t.config().clone(), t.dataset().clone());
    model.dropout = dropout;
    Trainer::new(TrainedSet::whole_model(backend, model), config, dataset, None).unwrap()
}

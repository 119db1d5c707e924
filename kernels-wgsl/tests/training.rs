//! Training through optim's `Trainer` on wgpu against the CPU backend: the same seed and
//! batches give the same run (within float rounding), a steady training loop creates no
//! device buffers after its first step, and a run's saved state continues on either backend.

use tinygpt_kernels_cpu::CpuBackend;
use tinygpt_kernels_wgsl::testing::{own_backend, shared_backend};
use tinygpt_kernels_wgsl::WgpuBackend;
use tinygpt_model::{Dataset, Preset, Split};
use tinygpt_optim::{Trainer, TrainingConfig};
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
    Trainer::new(backend, preset.model, config, dataset).unwrap()
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
        Trainer::resume(&cpu, model, config, dataset, state).unwrap()
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
    Trainer::new(backend, model, config, dataset).unwrap()
}

/// Not a check: seconds per step of `small` on each backend (`--ignored --nocapture`).
#[test]
#[ignore]
fn time_small_steps() {
    let Some(gpu) = shared_backend() else { return };
    let cpu = CpuBackend::new(2);
    let mut g = trainer(&gpu, "small", 16, 10);
    let mut c = trainer(&cpu, "small", 16, 10);
    g.step().unwrap();
    c.step().unwrap();
    let t = std::time::Instant::now();
    for _ in 0..3 {
        g.step().unwrap();
    }
    let tg = t.elapsed().as_secs_f64() / 3.0;
    let t = std::time::Instant::now();
    for _ in 0..3 {
        c.step().unwrap();
    }
    let tc = t.elapsed().as_secs_f64() / 3.0;
    eprintln!("small: wgpu {tg:.3} s/step, cpu {tc:.3} s/step; {:?}", gpu.stats());
}

/// Not a check: milliseconds per op at `small`'s sizes (`--ignored --nocapture`).
#[test]
#[ignore]
fn time_small_ops() {
    use tinygpt_tensor::{AttentionDims, MatmulDims};
    let Some(gpu) = shared_backend() else { return };
    let b = &gpu;
    let x = b.upload(&vec![0.5f32; 1024 * 384]);
    let w = b.upload(&vec![0.5f32; 384 * 384]);
    let ids = b.upload_indices(&vec![3u32; 1024]);
    let only = std::env::var("TIME_OPS").unwrap_or_default();
    let time = |what: &str, f: &dyn Fn()| {
        if !what.contains(only.as_str()) {
            return;
        }
        f();
        block_on(gpu.sync()).unwrap();
        let t = std::time::Instant::now();
        for _ in 0..5 {
            f();
        }
        block_on(gpu.sync()).unwrap();
        eprintln!("{what}: {:.2} ms", t.elapsed().as_secs_f64() * 200.0);
    };
    let mm = |m, k, n, ta, tb| MatmulDims { m, k, n, trans_a: ta, trans_b: tb };
    let xs = b.upload(&vec![0.5f32; 1024 * 96]);
    time("matmul 1024x96x96 (q proj)", &|| {
        drop(b.matmul(&xs, &b.upload(&vec![0.1f32; 96 * 96]), None, mm(1024, 96, 96, false, true)))
    });
    let w1 = b.upload(&vec![0.5f32; 384 * 96]);
    let w2 = b.upload(&vec![0.5f32; 256 * 96]);
    time("matmul 1024x96x384 (fc_in)", &|| drop(b.matmul(&xs, &w1, None, mm(1024, 96, 384, false, true))));
    time("matmul 96x1024x384 (dW)", &|| drop(b.matmul(&xs, &x, None, mm(96, 1024, 384, true, false))));
    time("matmul 1024x96x256 (logits)", &|| drop(b.matmul(&xs, &w2, None, mm(1024, 96, 256, false, true))));
    let dims = AttentionDims { batch: 16, seq: 64, heads: 3, head_dim: 32, dropout: None };
    let att = b.attention(&xs, &xs, &xs, dims);
    time("attention", &|| drop(b.attention(&xs, &xs, &xs, dims)));
    time("attention_backward", &|| drop(b.attention_backward(&xs, &xs, &xs, &xs, &att.probs, dims)));
    let g = b.upload(&vec![1.0f32; 96]);
    let ln = b.layer_norm(&xs, &g, &g, 1024, 96, 1e-5);
    time("layer_norm", &|| drop(b.layer_norm(&xs, &g, &g, 1024, 96, 1e-5)));
    time("layer_norm_backward", &|| drop(b.layer_norm_backward(&xs, &xs, &g, &ln, 1024, 96)));
    time("gelu 1024x384", &|| drop(b.gelu(&x, 1024 * 384)));
    time("sum_rows 1024x384", &|| drop(b.sum_rows(&x, 1024, 384)));
    time("embedding_backward 256x96", &|| drop(b.embedding_backward(&xs, &ids, 1024, 256, 96)));
    let logits = b.upload(&vec![0.5f32; 1024 * 256]);
    time("cross_entropy", &|| drop(b.cross_entropy(&logits, &ids, 1024, 256)));
    let one = b.upload(&[1.0]);
    time("cross_entropy_backward", &|| drop(b.cross_entropy_backward(&logits, &ids, &one, 1024, 256)));
    time("sum_squares 147456", &|| drop(b.sum_squares(&w, 147456)));
}

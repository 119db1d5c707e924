//! Dynamic loss scaling on the wgpu backend's mixed precision (f16 matmul inputs, f32
//! sums; lavapipe natively): the gradients of `tiny` really fall below f16's range, so a
//! mixed run without scaling gets them wrong, and with GradScaler's scale it gets them (and
//! the run) right; an overflowing scale skips the step and backs off. Quietly passes where
//! no adapter with `shader-f16` opens.

use tinygpt_autograd::Tape;
use tinygpt_kernels_wgsl::testing::{shared_backend, shared_backend_with};
use tinygpt_kernels_wgsl::{MatmulKernels, WgpuBackend};
use tinygpt_model::{Dataset, Gpt, Params, Preset, Split};
use tinygpt_optim::{GradScaler, LossScaleState, ResumeState, TrainedSet, Trainer, TrainingConfig};
use tinygpt_tensor::{block_on, Backend, Indices, Precision, Rng, Tensor};

const TEXT: &[u8] = include_bytes!("../../data/tinyshakespeare.txt");

/// f16's smallest subnormal and smallest normal: below the first a value rounds to 0,
/// below the second it keeps fewer than 11 bits.
const F16_TINY: f32 = 5.960_464_5e-8;
const F16_MIN_NORMAL: f32 = 6.103_515_6e-5;

fn mixed() -> Option<WgpuBackend> {
    let gpu = shared_backend_with(Precision::Mixed)?;
    if gpu.matmul_precision().kernels != MatmulKernels::ShaderF16 {
        eprintln!("skipped: {}", gpu.matmul_precision());
        return None;
    }
    Some(gpu)
}

fn config(precision: Precision) -> TrainingConfig {
    TrainingConfig {
        batch_size: 16,
        max_steps: 100,
        warmup_steps: 5,
        learning_rate: 3e-3,
        eval_interval: 1000,
        eval_batches: 4,
        precision,
        ..Default::default()
    }
}

fn dataset() -> Dataset {
    let ctx = Preset::by_name("tiny").unwrap().model.context_length;
    Dataset::new("shakespeare", &TEXT[..300_000], ctx, 1337).unwrap()
}

/// `tiny` with these weights (flat, canonical order) on `backend`.
fn model<B: Backend>(backend: &B, weights: &[f32]) -> Gpt<B> {
    let config = Preset::by_name("tiny").unwrap().model;
    Gpt::new(config.clone(), Params::from_flat(backend, &config, weights).unwrap()).unwrap()
}

/// Every parameter's gradient of one batch's mean loss, the backward seeded with `scale`
/// and the result divided by it (what the trainer does).
fn gradients<B: Backend>(backend: &B, weights: &[f32], scale: f32) -> Vec<Vec<f32>> {
    let model_config = Preset::by_name("tiny").unwrap().model;
    let model = model(backend, weights);
    let seq = model_config.context_length;
    let batch = dataset().batch(Split::Train, 16, seq, &mut Rng::new(7));
    let (inputs, targets) = (Indices::new(backend, &batch.inputs), Indices::new(backend, &batch.targets));
    let tape = Tape::new();
    let (loss, fwd) = model.loss(&tape, &inputs, &targets, 16, seq);
    let seed = Tensor::from_slice(backend, &[scale], loss.value().shape().clone());
    let mut grads = tape.backward_from(&loss, seed);
    fwd.params
        .iter()
        .map(|p| block_on(grads.take(p).unwrap().read()).unwrap().iter().map(|g| g / scale).collect())
        .collect()
}

/// Over all parameters: ‖mixed − f32‖ / ‖f32‖, and the share of values f32 has non-zero
/// that mixed has at exactly 0.
fn compare(mixed: &[Vec<f32>], f32: &[Vec<f32>]) -> (f64, f64) {
    let (mut diff, mut norm, mut lost, mut nonzero) = (0.0f64, 0.0f64, 0usize, 0usize);
    for (m, r) in mixed.iter().zip(f32) {
        for (&a, &b) in m.iter().zip(r) {
            diff += ((a - b) as f64).powi(2);
            norm += (b as f64).powi(2);
            if b != 0.0 {
                nonzero += 1;
                lost += (a == 0.0) as usize;
            }
        }
    }
    ((diff / norm).sqrt(), lost as f64 / nonzero as f64)
}

/// The magnitudes at the backward pass's first matmul input: the logits' gradient
/// (softmax − onehot) / N, measured on the f32 backend; returns the shares of its entries
/// below f16's smallest subnormal and below its smallest normal, and its median magnitude.
fn logit_gradient_magnitudes<B: Backend>(backend: &B, weights: &[f32]) -> (f64, f64, f32) {
    let model_config = Preset::by_name("tiny").unwrap().model;
    let model = model(backend, weights);
    let seq = model_config.context_length;
    let batch = dataset().batch(Split::Train, 16, seq, &mut Rng::new(7));
    let inputs = Indices::new(backend, &batch.inputs);
    let tape = Tape::new();
    let logits = block_on(model.forward(&tape, &inputs, 16, seq).logits.value().read()).unwrap();
    let vocab = model_config.vocab_size;
    let n = (16 * seq) as f32;
    let mut mags = Vec::with_capacity(logits.len());
    for (row, &target) in logits.chunks(vocab).zip(&batch.targets) {
        let max = row.iter().fold(f32::MIN, |m, &v| m.max(v));
        let sum: f32 = row.iter().map(|v| (v - max).exp()).sum();
        for (j, v) in row.iter().enumerate() {
            let p = (v - max).exp() / sum;
            mags.push(((p - (j as u32 == target) as u32 as f32) / n).abs());
        }
    }
    let below = |t: f32| mags.iter().filter(|&&m| m < t).count() as f64 / mags.len() as f64;
    let (tiny, subnormal) = (below(F16_TINY), below(F16_MIN_NORMAL));
    mags.sort_by(f32::total_cmp);
    (tiny, subnormal, mags[mags.len() / 2])
}

#[test]
fn tiny_gradients_underflow_f16_without_scaling_and_not_with_it() {
    let (Some(gpu), Some(f32)) = (mixed(), shared_backend()) else { return };
    let scale = GradScaler::DEFAULT.init_scale;
    // At initialisation (every prediction near 1/256) and after 60 f32 steps (confident
    // predictions: the non-targets' probabilities, and so their gradients, shrink).
    let init = block_on(trainer(&f32, Precision::F32).resume_state()).unwrap().weights;
    let mut trained = trainer(&f32, Precision::F32);
    for _ in 0..60 {
        trained.step().unwrap();
    }
    let trained = block_on(trained.resume_state()).unwrap().weights;
    let mut measured = Vec::new();
    for (when, weights) in [("initial", &init), ("after 60 steps", &trained)] {
        let (below_tiny, below_normal, median) = logit_gradient_magnitudes(&f32, weights);
        let reference = gradients(&f32, weights, 1.0);
        let unscaled = compare(&gradients(&gpu, weights, 1.0), &reference);
        let scaled = compare(&gradients(&gpu, weights, scale), &reference);
        eprintln!(
            "{when}: logit gradient median {median:e}, {:.1}% below f16's smallest normal, {:.2}% below its \
             smallest subnormal; mixed vs f32 parameter gradients: unscaled relative error {:e} ({:.3}% \
             flushed to 0), scaled by {scale}: {:e} ({:.3}%)",
            below_normal * 100.0,
            below_tiny * 100.0,
            unscaled.0,
            unscaled.1 * 100.0,
            scaled.0,
            scaled.1 * 100.0
        );
        measured.push((below_normal, unscaled, scaled));
    }
    // Measured on lavapipe: after 60 steps the median is 3.6e-7, 95.8% of the entries are
    // subnormal in f16 and 17.6% below its smallest subnormal (they round to 0); the
    // unscaled gradients' error is 2.1× the scaled ones' (4.6e-4 vs 2.2e-4, which is the
    // forward's f16 rounding, the same at initialisation either way).
    let (below_tiny, below_normal, _) = logit_gradient_magnitudes(&f32, &trained);
    let (_, unscaled, scaled) = measured[1];
    assert!(below_normal > 0.9 && below_tiny > 0.1, "{below_normal} subnormal, {below_tiny} zero in f16");
    assert!(scaled.0 < 1e-3, "scaled, f16 inputs cost only their rounding: {scaled:?}");
    assert!(unscaled.0 > 1.5 * scaled.0, "unscaled {unscaled:?} vs scaled {scaled:?}");
}

fn trainer<B: Backend>(backend: &B, precision: Precision) -> Trainer<B> {
    let model = Preset::by_name("tiny").unwrap().model;
    Trainer::new(TrainedSet::whole_model(backend, model), config(precision), dataset(), None).unwrap()
}

/// A run from the same initial state with the loss scale fixed at `scale` for `steps`
/// steps (GradScaler grows it only after 2000): the losses.
fn run<B: Backend>(backend: &B, precision: Precision, scale: Option<f32>, steps: usize) -> Vec<f32> {
    let model = Preset::by_name("tiny").unwrap().model;
    let fresh = Trainer::new(
        TrainedSet::whole_model(backend, model.clone()),
        config(Precision::F32),
        dataset(),
        None,
    )
    .unwrap();
    let mut state = block_on(fresh.resume_state()).unwrap();
    state.progress.loss_scale = scale.map(|scale| LossScaleState { scale, ..GradScaler::DEFAULT.start() });
    let state = ResumeState { adam_m: Vec::new(), adam_v: Vec::new(), ..state };
    let mut t =
        Trainer::new(TrainedSet::whole_model(backend, model), config(precision), dataset(), Some(state))
            .unwrap();
    (0..steps).map(|_| t.step().unwrap().train_loss).collect()
}

#[test]
fn a_mixed_run_learns_like_f32_with_scaling_and_worse_without() {
    let (Some(gpu), Some(f32)) = (mixed(), shared_backend()) else { return };
    const STEPS: usize = 40;
    let reference = run(&f32, Precision::F32, None, STEPS);
    let scaled = run(&gpu, Precision::Mixed, Some(GradScaler::DEFAULT.init_scale), STEPS);
    let unscaled = run(&gpu, Precision::Mixed, Some(1.0), STEPS);
    let tail = |l: &[f32]| l[STEPS - 5..].iter().sum::<f32>() / 5.0;
    let (r, s, u) = (tail(&reference), tail(&scaled), tail(&unscaled));
    eprintln!(
        "mean loss of steps {}..{STEPS} from {}: f32 {r}, mixed scaled {s}, mixed unscaled {u}",
        STEPS - 4,
        reference[0]
    );
    let scaled_gap = (s - r).abs();
    let unscaled_gap = (u - r).abs();
    assert!(scaled_gap < 0.02, "scaled mixed tracks f32: {s} vs {r}");
    assert!(r < reference[0] - 0.5, "the reference learns: {} → {r}", reference[0]);
    assert!(unscaled_gap > 2.0 * scaled_gap, "unscaled {u}, scaled {s}, f32 {r}");
}

#[test]
fn an_overflowing_scale_skips_the_step_and_backs_off() {
    let Some(gpu) = mixed() else { return };
    let model = Preset::by_name("tiny").unwrap().model;
    let fresh =
        Trainer::new(TrainedSet::whole_model(&gpu, model.clone()), config(Precision::F32), dataset(), None)
            .unwrap();
    let mut state = block_on(fresh.resume_state()).unwrap();
    let start = 2f32.powi(40);
    state.progress.loss_scale = Some(LossScaleState { scale: start, ..GradScaler::DEFAULT.start() });
    let before = state.weights.clone();
    let mut t =
        Trainer::new(TrainedSet::whole_model(&gpu, model), config(Precision::Mixed), dataset(), Some(state))
            .unwrap();
    t.step().unwrap();
    let after = block_on(t.resume_state()).unwrap();
    let ls = after.progress.loss_scale.unwrap();
    eprintln!("first step at 2^40: {ls:?}");
    assert_eq!(ls, LossScaleState { scale: start / 2.0, growth_tracker: 0, skipped_steps: 1 });
    assert_eq!(after.progress.step, 1, "a skipped step is still a step");
    assert_eq!(t.optimizer().step(), 0, "but not an AdamW update");
    let bits = |v: &[f32]| v.iter().map(|x| x.to_bits()).collect::<Vec<_>>();
    assert_eq!(bits(&after.weights), bits(&before), "weights unchanged");
    assert!(after.adam_m.iter().chain(&after.adam_v).all(|&x| x == 0.0), "moments unchanged");
    // It backs off until the gradients fit f16, then trains.
    let mut steps = 1;
    while t.progress().loss_scale.unwrap().skipped_steps == steps && steps < 40 {
        t.step().unwrap();
        steps += 1;
    }
    let ls = t.progress().loss_scale.unwrap();
    eprintln!("after {steps} steps: {ls:?}");
    assert!(ls.skipped_steps < steps && ls.scale >= 1.0, "{ls:?}");
    assert_eq!(t.optimizer().step() as usize, steps - ls.skipped_steps);
}

/// A mixed run saved and resumed mid-way (after skipped steps) continues exactly: the
/// loss scale, its growth count and the skipped steps (AdamW's bias-correction count is
/// `step - skipped_steps`) travel in `TrainerProgress`.
#[test]
fn a_resumed_mixed_run_continues_exactly_through_skipped_steps() {
    let Some(gpu) = mixed() else { return };
    let model = Preset::by_name("tiny").unwrap().model;
    let fresh =
        Trainer::new(TrainedSet::whole_model(&gpu, model.clone()), config(Precision::F32), dataset(), None)
            .unwrap();
    let mut state = block_on(fresh.resume_state()).unwrap();
    // Overflows for the first few steps, then trains.
    state.progress.loss_scale = Some(LossScaleState { scale: 2f32.powi(28), ..GradScaler::DEFAULT.start() });
    let resume = |state: ResumeState| {
        Trainer::new(
            TrainedSet::whole_model(&gpu, model.clone()),
            config(Precision::Mixed),
            dataset(),
            Some(state),
        )
    };
    let mut straight = resume(state.clone()).unwrap();
    let expected: Vec<u32> = (0..10).map(|_| straight.step().unwrap().train_loss.to_bits()).collect();
    let mut first = resume(state).unwrap();
    let mut losses: Vec<u32> = (0..6).map(|_| first.step().unwrap().train_loss.to_bits()).collect();
    let saved = block_on(first.resume_state()).unwrap();
    let skipped = saved.progress.loss_scale.unwrap().skipped_steps;
    assert!(skipped > 0 && skipped < 6, "{:?}", saved.progress.loss_scale);
    let mut second = resume(saved).unwrap();
    assert_eq!(second.optimizer().step() as usize, 6 - skipped);
    losses.extend((0..4).map(|_| second.step().unwrap().train_loss.to_bits()));
    assert_eq!(losses, expected);
    let (a, b) = (block_on(straight.resume_state()).unwrap(), block_on(second.resume_state()).unwrap());
    assert_eq!(a.progress, b.progress);
    let bits = |v: &[f32]| v.iter().map(|x| x.to_bits()).collect::<Vec<_>>();
    assert_eq!(bits(&a.weights), bits(&b.weights));
    assert_eq!(bits(&a.adam_v), bits(&b.adam_v));
}

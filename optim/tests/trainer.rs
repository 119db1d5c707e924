//! The training step: reproducibility, exact resume, and the optimizer's documented rules.

use tinygpt_kernels_cpu::{CpuBackend, KernelVariant};
use tinygpt_model::{Dataset, ModelConfig, Preset};
use tinygpt_optim::{AdamW, ParamGroup, TrainedSet, Trainer, TrainingConfig};
use tinygpt_tensor::{block_on, Tensor};

const TEXT: &[u8] = include_bytes!("../../data/tinyshakespeare.txt");

fn setup(steps: usize) -> (ModelConfig, TrainingConfig, Dataset) {
    let model = Preset::by_name("tiny").unwrap().model;
    let training = TrainingConfig {
        batch_size: 4,
        max_steps: steps,
        warmup_steps: 3,
        eval_interval: 4,
        ..Default::default()
    };
    let dataset = Dataset::new("shakespeare", &TEXT[..200_000], model.context_length, training.seed).unwrap();
    (model, training, dataset)
}

fn run(trainer: &mut Trainer<CpuBackend>, steps: usize) -> Vec<f32> {
    (0..steps).map(|_| trainer.step().unwrap().train_loss).collect()
}

#[test]
fn same_seed_gives_the_same_losses_bit_for_bit_at_any_thread_count() {
    let (model, training, dataset) = setup(6);
    let mut a = Trainer::new(
        TrainedSet::whole_model(&CpuBackend::new(1), model.clone()),
        training.clone(),
        dataset.clone(),
        None,
    )
    .unwrap();
    let mut b = Trainer::new(
        TrainedSet::whole_model(&CpuBackend::new(2), model.clone()),
        training.clone(),
        dataset.clone(),
        None,
    )
    .unwrap();
    let (la, lb) = (run(&mut a, 6), run(&mut b, 6));
    assert_eq!(
        la.iter().map(|l| l.to_bits()).collect::<Vec<_>>(),
        lb.iter().map(|l| l.to_bits()).collect::<Vec<_>>()
    );
    let other = TrainingConfig { seed: 1, ..training };
    let mut c =
        Trainer::new(TrainedSet::whole_model(&CpuBackend::new(1), model), other, dataset, None).unwrap();
    assert_ne!(run(&mut c, 6), la, "another seed should draw other weights and batches");
}

#[test]
fn every_kernel_variant_trains_like_the_reference_for_20_steps() {
    let (model, training, dataset) = setup(20);
    let on = |variant| {
        let backend = CpuBackend::new(2).with_variant(variant).unwrap();
        let mut trainer = Trainer::new(
            TrainedSet::whole_model(&backend, model.clone()),
            training.clone(),
            dataset.clone(),
            None,
        )
        .unwrap();
        run(&mut trainer, 20)
    };
    let reference = on(KernelVariant::Reference);
    for variant in
        KernelVariant::ALL.into_iter().filter(|v| *v != KernelVariant::Reference && v.is_supported())
    {
        for (step, (got, want)) in on(variant).iter().zip(&reference).enumerate() {
            let rel = ((got - want) / want).abs();
            assert!(
                rel <= 1e-4,
                "{variant}, step {}: loss {got} vs reference {want} ({rel:.1e} relative)",
                step + 1
            );
        }
    }
}

#[test]
fn n_plus_m_steps_equal_n_steps_saved_resumed_and_m_more() {
    let backend = CpuBackend::new(2);
    let (model, training, dataset) = setup(10);
    let mut straight = Trainer::new(
        TrainedSet::whole_model(&backend, model.clone()),
        training.clone(),
        dataset.clone(),
        None,
    )
    .unwrap();
    for _ in 0..10 {
        let r = straight.step().unwrap();
        if r.eval_due {
            let val = straight.evaluate(tinygpt_model::Split::Val).unwrap();
            straight.record_eval(r.train_loss, val);
        }
    }

    let mut first = Trainer::new(
        TrainedSet::whole_model(&backend, model.clone()),
        training.clone(),
        dataset.clone(),
        None,
    )
    .unwrap();
    let steps_run = |t: &mut Trainer<CpuBackend>, n: usize| {
        for _ in 0..n {
            let r = t.step().unwrap();
            if r.eval_due {
                let val = t.evaluate(tinygpt_model::Split::Val).unwrap();
                t.record_eval(r.train_loss, val);
            }
        }
    };
    steps_run(&mut first, 6);
    let saved = tinygpt_tensor::block_on(first.resume_state()).unwrap();
    drop(first);
    let mut resumed =
        Trainer::new(TrainedSet::whole_model(&backend, model), training, dataset, Some(saved)).unwrap();
    steps_run(&mut resumed, 4);

    let a = tinygpt_tensor::block_on(straight.resume_state()).unwrap();
    let b = tinygpt_tensor::block_on(resumed.resume_state()).unwrap();
    let bits = |v: &[f32]| v.iter().map(|x| x.to_bits()).collect::<Vec<_>>();
    assert_eq!(bits(&a.weights), bits(&b.weights), "weights");
    assert_eq!(bits(&a.adam_m), bits(&b.adam_m), "adam_m");
    assert_eq!(bits(&a.adam_v), bits(&b.adam_v), "adam_v");
    assert_eq!(a.history, b.history, "loss history");
    assert_eq!(a.progress.step, 10);
    assert_eq!(a.progress.rng_state, b.progress.rng_state);
    assert_eq!(
        a.history.iter().map(|p| p.step).collect::<Vec<_>>(),
        (1..=10).collect::<Vec<_>>(),
        "every step"
    );
    let evals: Vec<usize> = a.history.iter().filter(|p| p.val_loss.is_some()).map(|p| p.step).collect();
    assert_eq!(evals, [4, 8, 10], "eval points");
}

#[test]
fn weight_decay_touches_matrices_only() {
    // With a zero gradient AdamW's step is 0/(0+eps) = 0, so only decay moves a parameter:
    // rank-2 tensors shrink by (1 - lr·wd); biases and LayerNorm stay exactly as they were.
    let backend = CpuBackend::new(1);
    let model = tinygpt_model::Gpt::init(&backend, setup(1).0, &mut tinygpt_tensor::Rng::new(1)).unwrap();
    let params = model.params().tensors();
    let grads: Vec<_> = params.iter().map(|p| Some(Tensor::zeros(&backend, p.dims()))).collect();
    let config = TrainingConfig { weight_decay: 0.5, ..TrainingConfig::default() };
    let before = block_on(model.params().to_flat()).unwrap();
    let mut adamw = AdamW::new(params, ParamGroup::decay_split(params, model.trainable(), &config));
    adamw.update(params, &grads, 0.1, &config);
    let after = block_on(model.params().to_flat()).unwrap();
    for spec in model.config().tensor_specs() {
        let decays = spec.shape.len() >= 2;
        for i in spec.offset..spec.offset + spec.numel() {
            let expected = if decays { before[i] * (1.0 - 0.1 * 0.5) } else { before[i] };
            assert!((after[i] - expected).abs() <= 1e-7 * expected.abs().max(1.0), "{}[{i}]", spec.name);
        }
    }
}

#[test]
fn clipping_scales_the_gradient_to_the_global_norm() {
    // One step of Adam is invariant to gradient scale (m/sqrt(v) = sign), so clipping shows in
    // the moments: m = (1 - b1) · g · clip with clip = max_norm / ‖g‖.
    let backend = CpuBackend::new(1);
    let p = Tensor::from_slice(&backend, &[1.0, 1.0], [2]);
    let g = Tensor::from_slice(&backend, &[30.0, 40.0], [2]); // ‖g‖ = 50
    let config = TrainingConfig { grad_clip: 1.0, ..TrainingConfig::default() };
    let params = std::slice::from_ref(&p);
    let mut adamw = AdamW::new(params, ParamGroup::decay_split(params, &[true], &config));
    adamw.update(params, &[Some(g)], 1e-3, &config);
    let (m, _) = block_on(adamw.to_flat()).unwrap();
    let expected = [0.1 * 30.0 / 50.0, 0.1 * 40.0 / 50.0];
    for (a, e) in m.iter().zip(expected) {
        assert!((a - e).abs() < 1e-6, "m = {m:?}, expected {expected:?}");
    }
}

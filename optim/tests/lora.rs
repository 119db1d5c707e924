//! Adapter runs: only the adapter trains, the base stays bit-identical, resume is exact.

use tinygpt_kernels_cpu::CpuBackend;
use tinygpt_model::{Dataset, Gpt, Lora, LoraConfig, Preset, DEFAULT_LORA_LEARNING_RATE};
use tinygpt_optim::{GroupOptions, TrainedSet, Trainer, TrainingConfig};
use tinygpt_tensor::{block_on, Rng};

const TEXT: &[u8] = include_bytes!("../../data/tinyshakespeare.txt");

/// A tiny base (random: the test is about who trains, not about quality) and an adapter run
/// on it with the LoRA defaults (learning rate 1e-3, no weight decay).
fn adapter_run(steps: usize) -> (Trainer<CpuBackend>, Vec<f32>) {
    let b = CpuBackend::new(1);
    let model = Preset::by_name("tiny").unwrap().model;
    let base = Gpt::init(&b, model.clone(), &mut Rng::new(1)).unwrap();
    let base_weights = block_on(base.params().to_flat()).unwrap();
    let config = TrainingConfig {
        batch_size: 4,
        max_steps: steps,
        warmup_steps: 2,
        learning_rate: DEFAULT_LORA_LEARNING_RATE,
        ..Default::default()
    };
    let lora =
        Lora::init(&b, &model, LoraConfig::preset("qvo-r8").unwrap(), &mut Rng::new(config.seed)).unwrap();
    let dataset = Dataset::new("text", &TEXT[..100_000], model.context_length, config.seed).unwrap();
    let options = GroupOptions { weight_decay: 0.0, lr_scale: 1.0 };
    (
        Trainer::new(TrainedSet::Adapter { base, adapter: lora, options }, config, dataset, None).unwrap(),
        base_weights,
    )
}

#[test]
fn the_default_adapter_learning_rate_is_1e_3() {
    assert_eq!(DEFAULT_LORA_LEARNING_RATE, 1e-3);
}

#[test]
fn adapter_training_moves_the_adapter_only_and_keeps_the_base_bit_identical() {
    let (mut t, base_before) = adapter_run(30);
    let adapter_before = block_on(t.adapter().unwrap().to_flat()).unwrap();
    let first = t.evaluate(tinygpt_model::Split::Val).unwrap();
    for _ in 0..30 {
        t.step().unwrap();
    }
    let last = t.evaluate(tinygpt_model::Split::Val).unwrap();
    assert!(last < first, "val loss {first} → {last}: the adapter learned nothing");
    let base_after = block_on(t.model().params().to_flat()).unwrap();
    let bits = |v: &[f32]| v.iter().map(|x| x.to_bits()).collect::<Vec<_>>();
    assert_eq!(bits(&base_after), bits(&base_before), "the frozen base changed");
    let adapter_after = block_on(t.adapter().unwrap().to_flat()).unwrap();
    assert_ne!(adapter_after, adapter_before);
    // One group, the adapter's; moments for the adapter's values only.
    let groups: Vec<_> = t.optimizer().groups().cloned().collect();
    assert_eq!(groups.len(), 1);
    assert_eq!((groups[0].name.as_str(), groups[0].options.weight_decay), ("lora", 0.0));
    let (m, v) = block_on(t.moments()).unwrap();
    assert_eq!((m.len(), v.len()), (adapter_after.len(), adapter_after.len()));
    let state = block_on(t.resume_state()).unwrap();
    assert_eq!(state.weights, adapter_after, "a checkpoint holds the adapter, not the base");
}

#[test]
fn an_adapter_run_resumed_takes_the_same_steps() {
    let (mut whole, _) = adapter_run(8);
    let expected: Vec<f32> = (0..8).map(|_| whole.step().unwrap().train_loss).collect();

    let (mut first, _) = adapter_run(8);
    let mut losses: Vec<f32> = (0..5).map(|_| first.step().unwrap().train_loss).collect();
    let state = block_on(first.resume_state()).unwrap();
    let b = CpuBackend::new(1);
    let lora = first.adapter().unwrap();
    let lora = Lora::from_flat(&b, first.model().config(), lora.config().clone(), &state.weights).unwrap();
    let options = GroupOptions { weight_decay: 0.0, lr_scale: 1.0 };
    let (base, config, data) = (first.model().clone(), first.config().clone(), first.dataset().clone());
    let mut resumed =
        Trainer::new(TrainedSet::Adapter { base, adapter: lora, options }, config, data, Some(state))
            .unwrap();
    losses.extend((0..3).map(|_| resumed.step().unwrap().train_loss));
    let bits = |v: &[f32]| v.iter().map(|x| x.to_bits()).collect::<Vec<_>>();
    assert_eq!(bits(&losses), bits(&expected));
}

//! LoRA adapters on a frozen base: step-0 equality, gradients, merging, configs.

use tinygpt_autograd::gradcheck::{GradCheck, Tolerance};
use tinygpt_autograd::Tape;
use tinygpt_kernels_cpu::CpuBackend;
use tinygpt_model::lora::merge;
use tinygpt_model::{Gpt, Lora, LoraConfig, ModelConfig, Params};
use tinygpt_tensor::{block_on, Indices, Rng};

fn micro() -> ModelConfig {
    ModelConfig {
        context_length: 6,
        n_layers: 2,
        n_heads: 2,
        d_model: 8,
        d_mlp: 16,
        ..ModelConfig::reference()
    }
}

fn tokens(seed: u64, n: usize) -> Vec<u32> {
    let mut rng = Rng::new(seed);
    (0..n).map(|_| rng.below(256) as u32).collect()
}

fn logits(model: &Gpt<CpuBackend>, lora: Option<&Lora<CpuBackend>>, ids: &[u32], batch: usize) -> Vec<f32> {
    let b = model.params().tensors()[0].backend().clone();
    let tape = Tape::no_grad();
    let ids = Indices::new(&b, ids);
    let seq = ids.len() / batch;
    let out = match lora {
        Some(l) => l.forward(model, &tape, &ids, batch, seq, None).logits,
        None => model.forward(&tape, &ids, batch, seq).logits,
    };
    block_on(out.value().read()).unwrap()
}

/// An adapter whose B is no longer zero (as after training), so its term is visible.
fn trained_like(b: &CpuBackend, model: &ModelConfig, config: LoraConfig, seed: u64) -> Lora<CpuBackend> {
    let fresh = Lora::init(b, model, config.clone(), &mut Rng::new(seed)).unwrap();
    let mut rng = Rng::new(seed + 1);
    let flat: Vec<f32> =
        block_on(fresh.to_flat()).unwrap().iter().map(|&a| a + 0.3 * rng.normal() as f32).collect();
    Lora::from_flat(b, model, config, &flat).unwrap()
}

#[test]
fn an_untrained_adapter_gives_the_base_logits_bit_for_bit() {
    let b = CpuBackend::new(2);
    let config = ModelConfig::reference();
    let model = Gpt::init(&b, config.clone(), &mut Rng::new(5)).unwrap();
    let ids = tokens(1, 2 * 40);
    let base = logits(&model, None, &ids, 2);
    for preset in ["qv-r4", "qvo-r8"] {
        let lora = Lora::init(&b, &config, LoraConfig::preset(preset).unwrap(), &mut Rng::new(9)).unwrap();
        let adapted = logits(&model, Some(&lora), &ids, 2);
        let differ = base.iter().zip(&adapted).filter(|(x, y)| x.to_bits() != y.to_bits()).count();
        assert_eq!(differ, 0, "{preset}: {differ} logits differ from the base's");
    }
    let all = LoraConfig::new(2, 4.0, &["q_proj", "k_proj", "v_proj", "o_proj", "fc_in", "fc_out"]).unwrap();
    let lora = Lora::init(&b, &config, all, &mut Rng::new(9)).unwrap();
    assert_eq!(logits(&model, Some(&lora), &ids, 2), base);
}

/// The loss as a function of the adapter's A and B on every linear, with the base frozen,
/// against central differences. Tolerance |a-n| <= 1e-3 + 5e-2·|n| with eps 1e-2 (as the
/// whole-model check: an f32 mean over 12 positions, f64 sums in the checker).
#[test]
fn adapter_gradients_match_finite_differences() {
    let b = CpuBackend::new(1);
    let config = micro();
    // Larger-than-init base weights so every path carries a visible gradient.
    let params = Params::init(&b, &config, &mut Rng::new(3));
    let big: Vec<f32> = block_on(params.to_flat()).unwrap().iter().map(|v| v * 4.0).collect();
    let model = Gpt::new(config.clone(), Params::from_flat(&b, &config, &big).unwrap()).unwrap();
    let targets_all = ["q_proj", "k_proj", "v_proj", "o_proj", "fc_in", "fc_out"];
    let lora = trained_like(&b, &config, LoraConfig::new(2, 3.0, &targets_all).unwrap(), 21);
    let (batch, seq) = (2, 6);
    let ids = Indices::new(&b, &tokens(4, batch * seq));
    let targets = Indices::new(&b, &tokens(5, batch * seq));
    let check =
        GradCheck { eps: 1e-2, tolerance: Tolerance { abs: 1e-3, rel: 5e-2 }, max_elements: 6, seed: 9 };
    let mismatches = check.run(lora.tensors(), |tape, vars| {
        let base: Vec<_> = model.params().tensors().iter().map(|t| tape.leaf(t, false)).collect();
        let logits = lora.forward_with(&model, tape, &base, vars, &ids, batch, seq, None);
        tape.cross_entropy(&logits, &targets)
    });
    let named: Vec<_> = mismatches.iter().map(|m| (&lora.specs()[m.input].name, m)).collect();
    assert!(named.is_empty(), "gradient mismatches: {named:#?}");
}

#[test]
fn frozen_base_gets_no_gradient_and_earlier_adapters_get_one_through_frozen_layers() {
    let b = CpuBackend::new(1);
    let config = micro();
    let model = Gpt::init(&b, config.clone(), &mut Rng::new(3)).unwrap();
    // q_proj only: block 0's adapter reaches the loss through all of block 1, frozen.
    let lora = trained_like(&b, &config, LoraConfig::new(2, 4.0, &["q_proj"]).unwrap(), 4);
    let tape = Tape::new();
    let ids = Indices::new(&b, &tokens(4, 12));
    let base: Vec<_> = model.params().tensors().iter().map(|t| tape.leaf(t, false)).collect();
    let adapter: Vec<_> = lora.tensors().iter().map(|t| tape.leaf(t, true)).collect();
    let logits = lora.forward_with(&model, &tape, &base, &adapter, &ids, 2, 6, None);
    let loss = tape.cross_entropy(&logits, &Indices::new(&b, &tokens(5, 12)));
    let grads = tape.backward(&loss);
    for (var, spec) in adapter.iter().zip(lora.specs()) {
        let g = block_on(grads.get(var).expect("every adapter tensor has a gradient").read()).unwrap();
        assert!(g.iter().any(|&x| x != 0.0), "{}: all-zero gradient", spec.name);
    }
    assert!(base.iter().all(|v| grads.get(v).is_none()), "no base tensor gets a gradient buffer");
}

#[test]
fn merging_folds_the_adapter_into_the_weights() {
    let b = CpuBackend::new(2);
    let config = ModelConfig { n_layers: 2, ..ModelConfig::reference() };
    let model = Gpt::init(&b, config.clone(), &mut Rng::new(5)).unwrap();
    let lora = trained_like(&b, &config, LoraConfig::preset("qvo-r8").unwrap(), 8);
    let base = block_on(model.params().to_flat()).unwrap();
    let merged = merge(&config, lora.config(), &base, &block_on(lora.to_flat()).unwrap()).unwrap();
    let merged_model = Gpt::new(config.clone(), Params::from_flat(&b, &config, &merged).unwrap()).unwrap();
    let ids = tokens(2, 64);
    let (adapted, plain) = (logits(&model, Some(&lora), &ids, 1), logits(&merged_model, None, &ids, 1));
    // The two compute the same function, rounded differently: |logit| is O(1) here.
    let worst = adapted.iter().zip(&plain).map(|(a, b)| (a - b).abs()).fold(0.0, f32::max);
    assert!(worst < 1e-4, "merged logits differ from base + adapter by {worst:e}");
    let untouched =
        config.tensor_specs().into_iter().find(|s| s.name == "blocks.0.attn.k_proj.weight").unwrap();
    let range = untouched.offset..untouched.offset + untouched.numel();
    assert_eq!(merged[range.clone()], base[range], "k_proj is no target: unchanged");
    assert_ne!(merged, base);
}

#[test]
fn presets_sizes_and_bad_configs() {
    let qv = LoraConfig::preset("qv-r4").unwrap();
    assert_eq!(
        (qv.rank, qv.alpha, qv.target_modules.clone()),
        (4, 8.0, vec!["q_proj".into(), "v_proj".into()])
    );
    let qvo = LoraConfig::preset("qvo-r8").unwrap();
    assert_eq!((qvo.rank, qvo.alpha, qvo.target_modules.len()), (8, 16.0, 3));
    assert_eq!(qvo.scale(), 2.0);
    let config = ModelConfig::reference();
    // Per block and target: A [4, 128] + B [128, 4].
    assert_eq!(qv.param_count(&config), 4 * 2 * 2 * 4 * 128);
    let names: Vec<_> = qv.tensor_specs(&config).into_iter().take(3).map(|s| s.name).collect();
    assert_eq!(
        names,
        [
            "blocks.0.attn.q_proj.lora_A.weight",
            "blocks.0.attn.q_proj.lora_B.weight",
            "blocks.0.attn.v_proj.lora_A.weight"
        ]
    );
    // Targets in any order come out in canonical order.
    assert_eq!(LoraConfig::new(4, 8.0, &["v_proj", "q_proj"]).unwrap(), qv);
    for (rank, alpha, targets, needle) in [
        (4, 8.0, vec!["x_proj"], "x_proj"),
        (0, 8.0, vec!["q_proj"], "rank"),
        (4, -1.0, vec!["q_proj"], "alpha"),
        (4, 8.0, vec![], "target_modules"),
    ] {
        let err = LoraConfig::new(rank, alpha, &targets).unwrap_err().to_string();
        assert!(err.contains(needle), "{err}");
    }
    assert!(LoraConfig::preset("qkv-r99").unwrap_err().to_string().contains("qv-r4"));
    let too_wide = LoraConfig::new(200, 8.0, &["q_proj"]).unwrap();
    assert!(too_wide.validate(&config).unwrap_err().to_string().contains("rank"));
    let b = CpuBackend::new(1);
    let err = Lora::from_flat(&b, &config, qv, &[0.0; 3]).unwrap_err().to_string();
    assert!(err.contains("adapter") && err.contains("3"), "{err}");
}

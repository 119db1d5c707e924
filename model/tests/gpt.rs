//! The whole model: gradients, initial loss, and that it can learn.

use tinygpt_autograd::gradcheck::{GradCheck, Tolerance};
use tinygpt_autograd::Tape;
use tinygpt_kernels_cpu::CpuBackend;
use tinygpt_model::{DropoutDraw, Gpt, ModelConfig, Params};
use tinygpt_tensor::{AdamWStep, Backend, Indices, Rng, Tensor};

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

/// The loss as a function of every parameter tensor, checked element-sampled against
/// finite differences. Tolerance |a-n| <= 1e-3 + 5e-2·|n| with eps 1e-2 (the loss is an
/// f32 mean over 12 positions; f64 accumulation in the checker).
#[test]
fn whole_model_loss_gradient_matches_finite_differences() {
    check_whole_model_gradient(micro(), None);
}

/// The same with dropout 0.3 at every site, the masks held fixed (one draw): the gradient
/// flows through the kept elements, scaled, and through the dropped attention probabilities
/// not at all.
#[test]
fn whole_model_gradient_with_dropout_matches_finite_differences() {
    let draw = DropoutDraw { seed: 11, step: 4, first_row: 3 };
    check_whole_model_gradient(ModelConfig { dropout: 0.3, ..micro() }, Some(draw));
}

fn check_whole_model_gradient(config: ModelConfig, draw: Option<DropoutDraw>) {
    let b = CpuBackend::new(1);
    let mut rng = Rng::new(3);
    let params = Params::init(&b, &config, &mut rng);
    // Larger-than-init weights so every path carries a visible gradient.
    let inputs: Vec<Tensor<CpuBackend>> = params.tensors().iter().map(|t| t.scale(4.0)).collect();
    let (batch, seq) = (2, 6);
    let ids = Indices::new(&b, &tokens(4, batch * seq));
    let targets = Indices::new(&b, &tokens(5, batch * seq));
    let check =
        GradCheck { eps: 1e-2, tolerance: Tolerance { abs: 1e-3, rel: 5e-2 }, max_elements: 6, seed: 9 };
    let specs = config.tensor_specs();
    let mismatches = check.run(&inputs, |tape, vars| {
        let params = Params::from_flat(&b, &config, &vec![0.0; config.param_count()]).unwrap();
        let model = Gpt::new(config.clone(), params).unwrap();
        // Forward with the checker's vars in place of the model's own leaves.
        let forward = model.forward_with_dropout(tape, vars, &ids, batch, seq, draw);
        tape.cross_entropy(&forward, &targets)
    });
    let named: Vec<_> = mismatches.iter().map(|m| (&specs[m.input].name, m)).collect();
    assert!(named.is_empty(), "gradient mismatches: {named:#?}");
}

#[test]
fn a_fresh_model_predicts_uniformly() {
    let b = CpuBackend::new(2);
    let config = ModelConfig::reference();
    let model = Gpt::init(&b, config, &mut Rng::new(1337)).unwrap();
    let (batch, seq) = (4, 128);
    let tape = Tape::no_grad();
    let text = include_bytes!("../../data/tinyshakespeare.txt");
    let ids: Vec<u32> = text[..batch * seq + 1].iter().map(|&c| c as u32).collect();
    let (loss, _) =
        model.loss(&tape, &Indices::new(&b, &ids[..batch * seq]), &Indices::new(&b, &ids[1..]), batch, seq);
    let loss = loss.value().to_scalar().unwrap();
    let uniform = (256f32).ln();
    assert!((loss - uniform).abs() < 0.1, "initial loss {loss}, expected within 0.1 of ln 256 = {uniform}");
}

#[test]
fn a_fixed_batch_overfits_below_0_1() {
    let b = CpuBackend::new(2);
    let config =
        ModelConfig { context_length: 32, n_layers: 2, n_heads: 2, d_model: 32, d_mlp: 128, ..micro() };
    let model = Gpt::init(&b, config, &mut Rng::new(7)).unwrap();
    let text = b"First Citizen:\nBefore we proceed any further, hear me speak.\nAll: Speak, speak.\n";
    let (batch, seq) = (2, 32);
    let mut inputs = Vec::new();
    let mut targets = Vec::new();
    for r in 0..batch {
        inputs.extend(text[r * 20..r * 20 + seq].iter().map(|&c| c as u32));
        targets.extend(text[r * 20 + 1..r * 20 + seq + 1].iter().map(|&c| c as u32));
    }
    let (inputs, targets) = (Indices::new(&b, &inputs), Indices::new(&b, &targets));
    let params = model.params().tensors();
    let moments: Vec<_> =
        params.iter().map(|p| (Tensor::zeros(&b, p.dims()), Tensor::zeros(&b, p.dims()))).collect();
    let mut loss = f32::INFINITY;
    for step in 1..=300u32 {
        let tape = Tape::new();
        let (l, fwd) = model.loss(&tape, &inputs, &targets, batch, seq);
        loss = l.value().to_scalar().unwrap();
        if loss < 0.1 {
            break;
        }
        let grads = tape.backward(&l);
        let zero = Tensor::zeros(&b, [1]);
        for ((p, var), (m, v)) in params.iter().zip(&fwd.params).zip(&moments) {
            let g = grads.get(var).unwrap();
            let hp = AdamWStep {
                lr: 1e-2,
                beta1: 0.9,
                beta2: 0.95,
                eps: 1e-8,
                weight_decay: 0.0,
                step,
                max_grad_norm: None,
            };
            b.adamw(p.storage(), g.storage(), m.storage(), v.storage(), zero.storage(), &hp, p.numel());
        }
    }
    assert!(loss < 0.1, "a fixed batch should overfit below 0.1, got {loss}");
}

//! Cutting a base to a shorter window (`windowed_weights`): what an adapter trains on.

use tinygpt_autograd::Tape;
use tinygpt_kernels_cpu::CpuBackend;
use tinygpt_model::{windowed_weights, Gpt, ModelConfig, Params};
use tinygpt_tensor::{block_on, Indices, Rng};

/// A model cut to a window gives the full model's logits on that many tokens (learned
/// positions, causal attention), so an adapter trained on windows adapts the full base.
#[test]
fn a_windowed_base_gives_the_full_bases_logits_on_a_window() {
    let full = ModelConfig { context_length: 64, ..ModelConfig::reference() };
    let mut rng = Rng::new(5);
    let weights: Vec<f32> = (0..full.param_count()).map(|_| (rng.normal() * 0.3) as f32).collect();
    let (config, cut) = windowed_weights(&full, &weights, 16);
    assert_eq!(config.context_length, 16);
    assert_eq!(cut.len(), config.param_count());
    assert_eq!(full.param_count() - cut.len(), 48 * full.d_model);
    let backend = CpuBackend::new(1);
    let logits = |config: &ModelConfig, weights: &[f32]| {
        let model = Gpt::new(config.clone(), Params::from_flat(&backend, config, weights).unwrap()).unwrap();
        let ids: Vec<u32> = b"a window of 16 b".iter().map(|&b| b as u32).collect();
        let tape = Tape::no_grad();
        block_on(model.forward(&tape, &Indices::new(&backend, &ids), 1, 16).logits.value().read()).unwrap()
    };
    assert_eq!(logits(&full, &weights), logits(&config, &cut));
    assert_eq!(windowed_weights(&full, &weights, 64).1, weights);
}

//! The model's parameters: one tensor per [`TensorSpec`], in canonical order.

use tinygpt_tensor::{Backend, Rng, Tensor, TensorError};

use crate::error::ModelError;
use crate::{GptParts, Init};
use crate::{ModelConfig, TensorSpec};

/// All parameters of a model, in the canonical order of [`ModelConfig::tensor_specs`].
#[derive(Clone, Debug)]
pub struct Params<B: Backend> {
    specs: Vec<TensorSpec>,
    tensors: Vec<Tensor<B>>,
}

impl<B: Backend> Params<B> {
    /// GPT-2 style initialisation: weights `N(0, 0.02)`, residual projections (`o_proj`,
    /// `fc_out`) `N(0, 0.02/sqrt(2·n_layers))`, biases 0, LayerNorm gains 1. Normals are drawn
    /// from `rng` element by element in canonical parameter order; zeros and ones draw nothing.
    pub fn init(backend: &B, config: &ModelConfig, rng: &mut Rng) -> Self {
        let specs = config.tensor_specs();
        let mut tensors = Vec::with_capacity(specs.len());
        GptParts::build(config, |decl| {
            let n = decl.numel_u64() as usize;
            let values: Vec<f32> = match decl.init {
                Init::Zeros => vec![0.0; n],
                Init::Ones => vec![1.0; n],
                Init::Normal(std) => (0..n).map(|_| (rng.normal() * std) as f32).collect(),
            };
            tensors.push(Tensor::from_slice(backend, &values, decl.shape.to_vec()));
        });
        Params { specs, tensors }
    }

    /// Parameters from the concatenation of all tensors in canonical order (`weights.f32`).
    pub fn from_flat(backend: &B, config: &ModelConfig, flat: &[f32]) -> Result<Self, ModelError> {
        let specs = config.tensor_specs();
        let expected = config.param_count();
        if flat.len() != expected {
            return Err(ModelError::WeightsMismatch {
                name: "all parameters".into(),
                expected,
                got: flat.len(),
            });
        }
        let tensors = specs
            .iter()
            .map(|s| Tensor::from_slice(backend, &flat[s.offset..s.offset + s.numel()], s.shape.clone()))
            .collect();
        Ok(Params { specs, tensors })
    }

    /// Every parameter concatenated in canonical order (the layout of `weights.f32`).
    pub async fn to_flat(&self) -> Result<Vec<f32>, TensorError> {
        let mut flat = Vec::with_capacity(self.specs.last().map_or(0, |s| s.offset + s.numel()));
        for t in &self.tensors {
            flat.extend(t.read().await?);
        }
        Ok(flat)
    }

    /// Each tensor's name, shape and offset, canonical order.
    pub fn specs(&self) -> &[TensorSpec] {
        &self.specs
    }

    /// The tensors, in `specs` order.
    pub fn tensors(&self) -> &[Tensor<B>] {
        &self.tensors
    }

    /// The number of tensors.
    pub fn len(&self) -> usize {
        self.tensors.len()
    }

    /// Whether there are no tensors.
    pub fn is_empty(&self) -> bool {
        self.tensors.is_empty()
    }

    /// The index of a parameter by its canonical name.
    pub fn index_of(&self, name: &str) -> Option<usize> {
        self.specs.iter().position(|s| s.name == name)
    }

    /// A parameter by its canonical name. Panics on an unknown name (a programming error).
    pub fn get(&self, name: &str) -> &Tensor<B> {
        let i = self.index_of(name).unwrap_or_else(|| panic!("no parameter named {name}"));
        &self.tensors[i]
    }
}

/// `full`'s config at a context of `window` (at most its own), and `weights` cut to it: every
/// tensor as it is but the position table, `[context, d_model]` row-major, whose first
/// `window` rows are its first `window · d_model` values.
///
/// Why: an adapter on a GPT-2 base trains on windows shorter than its 1,024 tokens (memory
/// grows with the window), and with learned positions and causal attention the cut model's
/// logits on a window are the full model's, so what trains on the cut model adapts the full
/// one (the CLI's `lora train --context` and the page's `trainAdapter.context`).
pub fn windowed_weights(full: &ModelConfig, weights: &[f32], window: usize) -> (ModelConfig, Vec<f32>) {
    let config = ModelConfig { context_length: window.min(full.context_length), ..full.clone() };
    let mut out = Vec::with_capacity(config.param_count());
    for (from, to) in full.tensor_specs().iter().zip(config.tensor_specs()) {
        debug_assert_eq!(from.name, to.name);
        out.extend_from_slice(&weights[from.offset..from.offset + to.numel()]);
    }
    (config, out)
}

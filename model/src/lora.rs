//! LoRA adapters: a frozen base plus a low-rank term on chosen linears,
//! `y = x·Wᵀ + b + (alpha/r)·(x·Aᵀ)·Bᵀ`, A `[r, in]`, B `[out, r]`.
//!
//! The term is composed from existing tape ops (a `linear` without bias, a `scale`, and a
//! `linear_onto` that adds it to the base's output, see [`crate::LinearDelta`]), so adapters
//! train and sample on every backend (cpu, wgpu, WASM) with no kernel of their own. A
//! starts small and random, B at zero, so an untrained adapter adds exactly zero and the
//! model's logits are the base's, bit for bit.
//!
//! Tensor names follow PEFT's (`blocks.{i}.attn.q_proj.lora_A.weight`), in canonical order:
//! block by block, within a block the targets in [`LinearKind::ALL`] order, A before B.

use tinygpt_autograd::{Tape, Var};
use tinygpt_tensor::{Backend, Indices, Rng, Tensor, TensorError};

use crate::dropout::DropoutDraw;
use crate::error::ModelError;
use crate::gpt::{Forward, Gpt, LinearDelta};
use crate::{LinearKind, LoraConfig, ModelConfig, TensorSpec};

/// The adapter learning rate a LoRA run uses unless told otherwise (PEFT's usual 1e-4 is
/// for large models; these small ones train their adapters well at 1e-3).
pub const DEFAULT_LORA_LEARNING_RATE: f32 = 1e-3;

/// An adapter's tensors on a backend, for one base model shape.
#[derive(Clone, Debug)]
pub struct Lora<B: Backend> {
    config: LoraConfig,
    specs: Vec<TensorSpec>,
    tensors: Vec<Tensor<B>>,
    /// Per block: where each target's A sits in `tensors` (its B follows it).
    places: Vec<[Option<usize>; 6]>,
}

impl<B: Backend> Lora<B> {
    /// A fresh adapter: A uniform in `±1/sqrt(in)` (PEFT's Kaiming-uniform bound), drawn
    /// from `rng` element by element in canonical order; B zero.
    pub fn init(
        backend: &B,
        model: &ModelConfig,
        config: LoraConfig,
        rng: &mut Rng,
    ) -> Result<Self, ModelError> {
        config.validate(model)?;
        let specs = config.tensor_specs(model);
        let tensors = specs
            .iter()
            .map(|s| {
                let values: Vec<f32> = if s.name.contains("lora_A") {
                    let bound = 1.0 / (s.shape[1] as f64).sqrt();
                    (0..s.numel()).map(|_| ((rng.uniform() * 2.0 - 1.0) * bound) as f32).collect()
                } else {
                    vec![0.0; s.numel()]
                };
                Tensor::from_slice(backend, &values, s.shape.clone())
            })
            .collect();
        Ok(Self::assemble(model, config, specs, tensors))
    }

    /// An adapter from its concatenation in canonical order (`adapter.f32`).
    pub fn from_flat(
        backend: &B,
        model: &ModelConfig,
        config: LoraConfig,
        flat: &[f32],
    ) -> Result<Self, ModelError> {
        config.validate(model)?;
        let specs = config.tensor_specs(model);
        let expected = specs.iter().map(TensorSpec::numel).sum();
        if flat.len() != expected {
            return Err(ModelError::WeightsMismatch { name: "adapter".into(), expected, got: flat.len() });
        }
        let tensors = specs
            .iter()
            .map(|s| Tensor::from_slice(backend, &flat[s.offset..][..s.numel()], s.shape.clone()))
            .collect();
        Ok(Self::assemble(model, config, specs, tensors))
    }

    fn assemble(
        model: &ModelConfig,
        config: LoraConfig,
        specs: Vec<TensorSpec>,
        tensors: Vec<Tensor<B>>,
    ) -> Self {
        let targets = config.targets();
        let places = (0..model.n_layers)
            .map(|layer| {
                let mut place = [None; 6];
                for (t, kind) in targets.iter().enumerate() {
                    place[*kind as usize] = Some(2 * (layer * targets.len() + t));
                }
                place
            })
            .collect();
        Lora { config, specs, tensors, places }
    }

    /// The adapter's config.
    pub fn config(&self) -> &LoraConfig {
        &self.config
    }

    /// Each adapter tensor's name, shape and offset.
    pub fn specs(&self) -> &[TensorSpec] {
        &self.specs
    }

    /// The adapter tensors, in `specs` order.
    pub fn tensors(&self) -> &[Tensor<B>] {
        &self.tensors
    }

    /// Every adapter tensor concatenated in canonical order (the layout of `adapter.f32`).
    pub async fn to_flat(&self) -> Result<Vec<f32>, TensorError> {
        let mut flat = Vec::with_capacity(self.specs.iter().map(TensorSpec::numel).sum());
        for t in &self.tensors {
            flat.extend(t.read().await?);
        }
        Ok(flat)
    }

    /// Logits of `model` with this adapter: the base's parameters go on the tape frozen
    /// (no gradient buffers), the adapter's as trainable leaves; `Forward::params` holds the
    /// adapter's vars (canonical adapter order), whose gradients backward fills.
    pub fn forward(
        &self,
        model: &Gpt<B>,
        tape: &Tape<B>,
        tokens: &Indices<B>,
        batch: usize,
        seq: usize,
        draw: Option<DropoutDraw>,
    ) -> Forward<B> {
        let base: Vec<Var<B>> = model.params().tensors().iter().map(|t| tape.leaf(t, false)).collect();
        let params: Vec<Var<B>> = self.tensors.iter().map(|t| tape.leaf(t, true)).collect();
        let logits = self.forward_with(model, tape, &base, &params, tokens, batch, seq, draw);
        Forward { logits, params }
    }

    /// The forward pass over caller-provided vars: `base` for the model's parameters
    /// (canonical order), `adapter` for this adapter's (e.g. a gradient checker's).
    #[allow(clippy::too_many_arguments)]
    pub fn forward_with(
        &self,
        model: &Gpt<B>,
        tape: &Tape<B>,
        base: &[Var<B>],
        adapter: &[Var<B>],
        tokens: &Indices<B>,
        batch: usize,
        seq: usize,
        draw: Option<DropoutDraw>,
    ) -> Var<B> {
        model.forward_adapted(tape, base, tokens, batch, seq, draw, Some(&self.delta(adapter)))
    }

    /// This adapter's term over `adapter`, its vars on a tape (canonical adapter order).
    pub(crate) fn delta<'a>(&'a self, adapter: &'a [Var<B>]) -> impl LinearDelta<B> + 'a {
        assert_eq!(adapter.len(), self.tensors.len(), "one var per adapter tensor");
        LoraDelta { vars: adapter, places: &self.places, scale: self.config.scale() }
    }
}

/// The adapter's term on a tape: `(scale·(x·Aᵀ))·Bᵀ` for the linears it targets, added
/// onto the linear's output in the up-projection's last pass.
///
/// The scale is taken on the `r`-wide middle and the add is the product's (`linear_onto`),
/// not a `scale` and an `add` over the `out`-wide term: at the GPT-2-124M shape those two
/// passes took 1.6% of a two-thread LoRA step (1,024 × 768 values each, three targets a
/// block, forward and backward). The values are PEFT's `lora_B(lora_A(x)) · scaling`
/// bit for bit where the scale is a power of two (alpha/r = 2 in both presets), and within
/// a rounding otherwise.
struct LoraDelta<'a, B: Backend> {
    vars: &'a [Var<B>],
    places: &'a [[Option<usize>; 6]],
    scale: f32,
}

impl<B: Backend> LinearDelta<B> for LoraDelta<'_, B> {
    fn add_onto(
        &self,
        tape: &Tape<B>,
        layer: usize,
        kind: LinearKind,
        x: &Var<B>,
        y: &Var<B>,
    ) -> Option<Var<B>> {
        let a = self.places[layer][kind as usize]?;
        let low = tape.scale(&tape.linear(x, &self.vars[a], None), self.scale);
        Some(tape.linear_onto(y, &low, &self.vars[a + 1], None))
    }
}

/// The base weights with the adapter folded in, `W' = W + (alpha/r)·B·A` on every target
/// (in W's own `[out, in]` layout; products summed in f64): a plain model that samples
/// like base + adapter. `base` and `adapter` are the canonical concatenations.
pub fn merge(
    model: &ModelConfig,
    config: &LoraConfig,
    base: &[f32],
    adapter: &[f32],
) -> Result<Vec<f32>, ModelError> {
    config.validate(model)?;
    let (base_specs, specs) = (model.tensor_specs(), config.tensor_specs(model));
    for (name, got, expected) in [
        ("base weights", base.len(), model.param_count()),
        ("adapter", adapter.len(), specs.iter().map(TensorSpec::numel).sum()),
    ] {
        if got != expected {
            return Err(ModelError::WeightsMismatch { name: name.into(), expected, got });
        }
    }
    let scale = config.scale() as f64;
    let mut merged = base.to_vec();
    for pair in specs.chunks(2) {
        let (a, b) = (&pair[0], &pair[1]);
        let weight_name = a.name.replace(".lora_A.weight", ".weight");
        let w = base_specs.iter().find(|s| s.name == weight_name).expect("a target's weight exists");
        let (r, inp, out) = (a.shape[0], a.shape[1], b.shape[0]);
        let (av, bv) = (&adapter[a.offset..][..r * inp], &adapter[b.offset..][..out * r]);
        for o in 0..out {
            for i in 0..inp {
                let dot: f64 = (0..r).map(|k| bv[o * r + k] as f64 * av[k * inp + i] as f64).sum();
                let at = w.offset + o * inp + i;
                merged[at] = (merged[at] as f64 + scale * dot) as f32;
            }
        }
    }
    Ok(merged)
}

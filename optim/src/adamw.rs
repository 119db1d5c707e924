//! AdamW over a model's parameters, with global-norm clipping computed on the device.

use tinygpt_tensor::{AdamWStep, Backend, Tensor, TensorError};

use crate::config::TrainingConfig;

/// First and second moments for every parameter (canonical order) and the step count.
#[derive(Clone, Debug)]
pub struct AdamW<B: Backend> {
    m: Vec<Tensor<B>>,
    v: Vec<Tensor<B>>,
    /// Updates applied so far (bias correction uses `step + 1` for the next one).
    step: u32,
}

impl<B: Backend> AdamW<B> {
    /// Zero moments shaped like `params`.
    pub fn new(params: &[Tensor<B>]) -> Self {
        let zeros = |p: &Tensor<B>| Tensor::zeros(p.backend(), p.shape().clone());
        AdamW { m: params.iter().map(zeros).collect(), v: params.iter().map(zeros).collect(), step: 0 }
    }

    /// Moments from their flat, canonical-order concatenations (`adam_m.f32`, `adam_v.f32`).
    pub fn from_flat(params: &[Tensor<B>], m: &[f32], v: &[f32], step: u32) -> Self {
        let split = |flat: &[f32]| {
            let mut offset = 0;
            params
                .iter()
                .map(|p| {
                    let t =
                        Tensor::from_slice(p.backend(), &flat[offset..offset + p.numel()], p.shape().clone());
                    offset += p.numel();
                    t
                })
                .collect()
        };
        AdamW { m: split(m), v: split(v), step }
    }

    /// `(m, v)` concatenated in canonical order.
    pub async fn to_flat(&self) -> Result<(Vec<f32>, Vec<f32>), TensorError> {
        let mut m = Vec::new();
        let mut v = Vec::new();
        for (a, b) in self.m.iter().zip(&self.v) {
            m.extend(a.read().await?);
            v.extend(b.read().await?);
        }
        Ok((m, v))
    }

    pub fn step(&self) -> u32 {
        self.step
    }

    /// One update. `grads[i]` is `None` for frozen parameters, which are left untouched
    /// (moments included). Weight decay applies to tensors of rank ≥ 2 only; clipping uses
    /// the global norm over every gradient present.
    pub fn update(
        &mut self,
        params: &[Tensor<B>],
        grads: &[Option<Tensor<B>>],
        lr: f32,
        config: &TrainingConfig,
    ) {
        assert_eq!(params.len(), grads.len(), "one gradient slot per parameter");
        let present: Vec<&Tensor<B>> = grads.iter().flatten().collect();
        let Some(first) = present.first() else { return };
        let sumsq = present[1..].iter().fold(first.sum_squares(), |acc, g| acc.add(&g.sum_squares()));
        self.step += 1;
        let backend = first.backend();
        for (i, (p, g)) in params.iter().zip(grads).enumerate() {
            let Some(g) = g else { continue };
            let hp = AdamWStep {
                lr,
                beta1: config.beta1,
                beta2: config.beta2,
                eps: config.eps,
                weight_decay: if p.shape().rank() >= 2 { config.weight_decay } else { 0.0 },
                step: self.step,
                max_grad_norm: (config.grad_clip > 0.0).then_some(config.grad_clip),
            };
            backend.adamw(
                p.storage(),
                g.storage(),
                self.m[i].storage(),
                self.v[i].storage(),
                sumsq.storage(),
                &hp,
                p.numel(),
            );
        }
    }
}

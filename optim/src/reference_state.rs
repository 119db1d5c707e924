//! The reference state of one training step, as llm.c's `test_gpt2` uses it: the input
//! batch, the logits, the loss and every parameter's gradient, plus the losses of the
//! next steps, so that another implementation (another backend, PyTorch) can diff
//! against it.
//!
//! The contract (what `examples/pytorch/check.py` reproduces):
//! - Forward without dropout (evaluation mode), whatever the config's `dropout`.
//! - `loss` is the mean next-token cross-entropy over the `[B, T]` batch; `grads` are its
//!   gradients (the tied embedding's sums the input and output uses, as PyTorch's does).
//! - `losses[k]` is the loss on the same batch after `k + 1` AdamW updates, each at the
//!   constant learning rate `training.learning_rate` (no warm-up, no schedule) with the
//!   config's betas, eps, gradient clipping and weight decay on rank ≥ 2 tensors
//!   (nanoGPT's groups), from zero moments.

use tinygpt_autograd::Tape;
use tinygpt_model::{Batch, Gpt};
use tinygpt_tensor::{Backend, Indices, Tensor};

use crate::adamw::AdamW;
use crate::error::TrainError;
use crate::groups::ParamGroup;
use tinygpt_run::TrainingConfig;

/// What [`reference_state`] measured (see the module docs).
#[derive(Clone, Debug, PartialEq)]
pub struct ReferenceState {
    /// `[B, T, V]`, row-major.
    pub logits: Vec<f32>,
    /// The loss at this state.
    pub loss: f32,
    /// Every parameter's gradient, concatenated in canonical order (the layout of
    /// `weights.f32`).
    pub grads: Vec<f32>,
    /// The losses after 1, 2, …, `steps` updates.
    pub losses: Vec<f32>,
}

/// One step's state on `batch`, then `steps` AdamW updates on the same batch; the
/// model's weights are those after the updates when this returns. Every parameter must
/// be trainable (a frozen one has no gradient to report).
pub async fn reference_state<B: Backend>(
    model: &Gpt<B>,
    training: &TrainingConfig,
    batch: &Batch,
    steps: usize,
) -> Result<ReferenceState, TrainError> {
    let backend = model.params().tensors()[0].backend().clone();
    let inputs = Indices::new(&backend, &batch.inputs);
    let targets = Indices::new(&backend, &batch.targets);
    let params = model.params().tensors();
    let mut optimizer = AdamW::new(params, ParamGroup::decay_split(params, model.trainable(), training));

    let mut state = None;
    let mut losses = Vec::with_capacity(steps);
    for step in 0..=steps {
        let learn = step == 0 || step < steps;
        let tape = if learn { Tape::new() } else { Tape::no_grad() };
        let (loss, fwd) = model.loss(&tape, &inputs, &targets, batch.batch, batch.seq);
        let value = loss.value().read().await?[0];
        if !value.is_finite() {
            return Err(TrainError::Diverged { step, loss: value });
        }
        if step > 0 {
            losses.push(value);
        }
        if !learn {
            break;
        }
        let mut grads = tape.backward(&loss);
        let grads: Vec<Option<Tensor<B>>> = fwd.params.iter().map(|p| grads.take(p)).collect();
        if step == 0 {
            let logits = fwd.logits.value().read().await?;
            let mut flat = Vec::with_capacity(model.config().param_count());
            for g in &grads {
                flat.extend(g.as_ref().expect("every parameter trains here").read().await?);
            }
            state = Some((logits, value, flat));
        }
        if step < steps {
            optimizer.update(params, &grads, training.learning_rate, training);
        }
    }
    let (logits, loss, grads) = state.expect("step 0 ran");
    Ok(ReferenceState { logits, loss, grads, losses })
}

use std::collections::HashMap;

use tinygpt_tensor::{Backend, Tensor};

use crate::tape::Var;

/// The gradients one [`crate::Tape::backward`] produced, keyed by the vars they belong to.
/// Vars that did not require a gradient (frozen, or unconnected to the loss) have none.
#[derive(Debug)]
pub struct Gradients<B: Backend> {
    pub(crate) grads: HashMap<usize, Tensor<B>>,
}

impl<B: Backend> Gradients<B> {
    /// The gradient of `var`, if it required one and the loss depends on it.
    pub fn get(&self, var: &Var<B>) -> Option<&Tensor<B>> {
        self.grads.get(&var.id)
    }

    /// Removes and returns a gradient (avoids a clone when handing it to an optimizer).
    pub fn take(&mut self, var: &Var<B>) -> Option<Tensor<B>> {
        self.grads.remove(&var.id)
    }

    /// Removes and returns the gradient `id` has gathered so far, for an op that adds its
    /// own part onto it in one pass ([`Tensor::matmul_onto`]) rather than have
    /// [`Gradients::accumulate`] add it after: the same `existing + part`.
    pub(crate) fn take_prior(&mut self, id: usize) -> Option<Tensor<B>> {
        self.grads.remove(&id)
    }

    pub(crate) fn accumulate(&mut self, id: usize, grad: Tensor<B>) {
        match self.grads.remove(&id) {
            Some(existing) => {
                self.grads.insert(id, existing.add(&grad));
            }
            None => {
                self.grads.insert(id, grad);
            }
        }
    }
}

use tinygpt_tensor::{Backend, Tensor};

use crate::tape::Var;

/// The gradients one [`crate::Tape::backward`] produced, by the vars they belong to.
/// Vars that did not require a gradient (frozen, or unconnected to the loss) have none.
///
/// One slot per var on the tape, so a training loop that keeps its `Gradients` and passes
/// it to [`crate::Tape::backward_into`] each step reuses the slots instead of allocating.
#[derive(Debug)]
pub struct Gradients<B: Backend> {
    slots: Vec<Option<Tensor<B>>>,
}

impl<B: Backend> Default for Gradients<B> {
    fn default() -> Self {
        Gradients { slots: Vec::new() }
    }
}

impl<B: Backend> Gradients<B> {
    /// No gradients yet.
    pub fn new() -> Self {
        Self::default()
    }

    /// The gradient of `var`, if it required one and the loss depends on it.
    pub fn get(&self, var: &Var<B>) -> Option<&Tensor<B>> {
        self.slots.get(var.id).and_then(Option::as_ref)
    }

    /// Removes and returns a gradient (avoids a clone when handing it to an optimizer).
    pub fn take(&mut self, var: &Var<B>) -> Option<Tensor<B>> {
        self.slots.get_mut(var.id).and_then(Option::take)
    }

    /// Drops every gradient, keeping the allocation for the next backward pass.
    pub fn clear(&mut self) {
        self.slots.clear();
    }

    /// Empties every slot and makes one for each of `vars` vars, keeping the allocation.
    pub(crate) fn reset(&mut self, vars: usize) {
        self.clear();
        self.slots.resize_with(vars, || None);
    }

    pub(crate) fn set(&mut self, id: usize, grad: Tensor<B>) {
        self.slots[id] = Some(grad);
    }

    /// The gradient `id` has gathered so far, left in place.
    pub(crate) fn peek(&self, id: usize) -> Option<&Tensor<B>> {
        self.slots[id].as_ref()
    }

    /// Removes and returns the gradient `id` has gathered so far, for an op that adds its
    /// own part onto it in one pass ([`Tensor::matmul_onto`]) rather than have
    /// [`Gradients::accumulate`] add it after: the same `existing + part`.
    pub(crate) fn take_prior(&mut self, id: usize) -> Option<Tensor<B>> {
        self.slots[id].take()
    }

    pub(crate) fn accumulate(&mut self, id: usize, grad: Tensor<B>) {
        let slot = &mut self.slots[id];
        *slot = Some(match slot.take() {
            Some(existing) => existing.add(&grad),
            None => grad,
        });
    }
}

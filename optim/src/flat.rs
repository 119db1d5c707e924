//! One parameter group's optimizer state on the device, in llm.c's layout: the group's
//! parameters, gradients and both AdamW moments are each ONE contiguous buffer, and every
//! member tensor has a named place (a [`Slot`]) at the same offset in all four.
//!
//! Why: clipping and AdamW then cost one `sum_squares` and one `adamw` per group instead
//! of per tensor (about 200 tensors at the `huge` preset), a GPU backend runs them as a
//! couple of large dispatches, and a checkpoint reads a group back in one readback.
//!
//! The model keeps its own per-tensor buffers (the forward pass reads those). The flat
//! `param` buffer is the master copy: it is gathered from the model once, updated in place
//! by AdamW, and copied back into the model's tensors after every update. Nothing else
//! writes a model's parameters, so the two stay equal between updates.

use tinygpt_tensor::{Backend, CopyRange, Tensor};

use crate::groups::ParamGroup;

/// Where one member tensor lives.
#[derive(Clone, Debug, PartialEq)]
pub struct Slot {
    /// The tensor's position in the parameter list (its name is the model's
    /// `tensor_specs()[index].name`).
    pub index: usize,
    /// Start of the tensor in the group's flat buffers.
    pub offset: usize,
    /// Start of the tensor in the canonical concatenation (`weights.f32`, `adam_*.f32`).
    pub canonical: usize,
    /// Its element count.
    pub len: usize,
}

/// A group's flat buffers, each `[len]`, and the slots of its members (ascending offsets).
#[derive(Clone, Debug)]
pub(crate) struct FlatGroup<B: Backend> {
    pub group: ParamGroup,
    pub slots: Vec<Slot>,
    pub param: Tensor<B>,
    pub grad: Tensor<B>,
    pub m: Tensor<B>,
    pub v: Tensor<B>,
}

impl<B: Backend> FlatGroup<B> {
    /// Buffers for `group` over `params`: parameters gathered from the model's tensors;
    /// moments taken from their canonical concatenations `(adam_m, adam_v)`, or zero.
    pub fn new(params: &[Tensor<B>], group: ParamGroup, moments: Option<(&[f32], &[f32])>) -> Self {
        assert!(!group.members.is_empty(), "parameter group {:?} has no members", group.name);
        let mut canonical = 0;
        let starts: Vec<usize> = params
            .iter()
            .map(|p| {
                canonical += p.numel();
                canonical - p.numel()
            })
            .collect();
        let mut len = 0;
        let slots: Vec<Slot> = group
            .members
            .iter()
            .map(|&index| {
                let slot = Slot { index, offset: len, canonical: starts[index], len: params[index].numel() };
                len += slot.len;
                slot
            })
            .collect();
        let backend = params[slots[0].index].backend();
        let flat_moment = |canonical: &[f32]| {
            let mut flat = Vec::with_capacity(len);
            for slot in &slots {
                flat.extend_from_slice(&canonical[slot.canonical..][..slot.len]);
            }
            Tensor::from_slice(backend, &flat, [len])
        };
        let (m, v) = match moments {
            Some((m, v)) => (flat_moment(m), flat_moment(v)),
            None => (Tensor::zeros(backend, [len]), Tensor::zeros(backend, [len])),
        };
        let param = Tensor::zeros(backend, [len]);
        for slot in &slots {
            backend.copy(params[slot.index].storage(), 0, param.storage(), slot.offset, slot.len);
        }
        FlatGroup { group, slots, param, grad: Tensor::zeros(backend, [len]), m, v }
    }

    pub fn len(&self) -> usize {
        self.param.numel()
    }

    /// Copies every member's gradient into the flat gradient buffer (`copy_many`).
    pub fn gather_grads(&self, grads: &[Option<Tensor<B>>]) {
        copy_slots(self.grad.backend(), &self.slots, |slot| {
            let grad = grads[slot.index].as_ref().unwrap_or_else(|| {
                panic!("parameter {} is in group {:?} but has no gradient", slot.index, self.group.name)
            });
            assert_eq!(grad.numel(), slot.len, "gradient of parameter {} has the wrong size", slot.index);
            CopyRange {
                src: grad.storage(),
                src_offset: 0,
                dst: self.grad.storage(),
                dst_offset: slot.offset,
                len: slot.len,
            }
        });
    }

    /// Copies the updated parameters back into the model's tensors (`copy_many`).
    pub fn scatter_params(&self, params: &[Tensor<B>]) {
        copy_slots(self.param.backend(), &self.slots, |slot| CopyRange {
            src: self.param.storage(),
            src_offset: slot.offset,
            dst: params[slot.index].storage(),
            dst_offset: 0,
            len: slot.len,
        });
    }
}

/// Copies per `copy_many` call: a chunk's ranges sit in a stack buffer, so a training step
/// allocates nothing for its copies (see `tests/allocations.rs`).
const COPY_CHUNK: usize = 32;

/// `backend.copy_many` of `range(slot)` for every slot, [`COPY_CHUNK`] at a time.
fn copy_slots<'a, B: Backend>(
    backend: &B,
    slots: &[Slot],
    range: impl Fn(&Slot) -> CopyRange<'a, B::Storage>,
) {
    for chunk in slots.chunks(COPY_CHUNK) {
        let mut buf = [range(&chunk[0]); COPY_CHUNK];
        for (b, slot) in buf.iter_mut().zip(chunk).skip(1) {
            *b = range(slot);
        }
        backend.copy_many(&buf[..chunk.len()]);
    }
}

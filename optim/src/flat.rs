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
//!
//! Buffer sharding: one buffer of a backend holds at most [`Backend::max_tensor_len`]
//! values (WebGPU binds every buffer whole, and one binding is 128 MiB by default), and a
//! group of a few hundred million parameters is past that long before any one tensor is.
//! A group therefore lives in one or more *shards* ([`FlatGroup::shards`]): members in
//! order, each shard as many as fit, a member never split across two. Each shard is a
//! [`FlatGroup`] of its own (same `group`, its own slots and four buffers), so AdamW and
//! the global norm's sum of squares run once per shard. A group that fits one buffer is
//! one shard, exactly the unsharded layout. Splitting one tensor larger than a buffer is
//! not supported: [`FlatGroup::shards`] refuses it.

use tinygpt_tensor::{Backend, CopyRange, Tensor};

use crate::groups::ParamGroup;

/// Where one member tensor lives.
#[derive(Clone, Debug, PartialEq)]
pub struct Slot {
    /// The tensor's position in the parameter list (its name is the model's
    /// `tensor_specs()[index].name`).
    pub index: usize,
    /// Which shard of its group holds the tensor (0 unless the group is sharded).
    pub shard: usize,
    /// Start of the tensor in its shard's flat buffers.
    pub offset: usize,
    /// Start of the tensor in the canonical concatenation (`weights.f32`, `adam_*.f32`).
    pub canonical: usize,
    /// Its element count.
    pub len: usize,
}

/// One shard of a group: its flat buffers, each `[len]`, and the slots of the members it
/// holds (ascending offsets).
#[derive(Clone, Debug)]
pub(crate) struct FlatGroup<B: Backend> {
    pub group: ParamGroup,
    /// This shard's position in its group (the group's first shard is 0).
    pub shard: usize,
    /// Every member of the group, in all its shards (what `AdamW::slots` answers).
    pub members: Vec<Slot>,
    /// The members this shard holds.
    pub slots: Vec<Slot>,
    pub param: Tensor<B>,
    pub grad: Tensor<B>,
    pub m: Tensor<B>,
    pub v: Tensor<B>,
}

impl<B: Backend> FlatGroup<B> {
    /// The shards of `group` over `params`, each at most the backend's
    /// [`Backend::max_tensor_len`] long: parameters gathered from the model's tensors;
    /// moments taken from their canonical concatenations `(adam_m, adam_v)`, or zero.
    ///
    /// Panics, naming the tensor, its size and the limit, when one member alone is larger
    /// than one buffer (splitting a tensor across buffers is not supported).
    pub fn shards(params: &[Tensor<B>], group: ParamGroup, moments: Option<(&[f32], &[f32])>) -> Vec<Self> {
        assert!(!group.members.is_empty(), "parameter group {:?} has no members", group.name);
        let mut canonical = 0;
        let starts: Vec<usize> = params
            .iter()
            .map(|p| {
                canonical += p.numel();
                canonical - p.numel()
            })
            .collect();
        let backend = params[group.members[0]].backend();
        let max = backend.max_tensor_len();
        let (mut shard, mut len) = (0, 0);
        let members: Vec<Slot> = group
            .members
            .iter()
            .map(|&index| {
                let n = params[index].numel();
                assert!(
                    n <= max,
                    "parameter {index} (group {:?}) has {n} values ({:.1} MiB), more than one buffer of \
                     the {} backend holds ({max} values, {:.1} MiB): splitting one tensor across \
                     buffers is not supported; use a smaller model or a device with larger bindings",
                    group.name,
                    mib(n),
                    backend.name(),
                    mib(max),
                );
                if len + n > max {
                    (shard, len) = (shard + 1, 0);
                }
                let slot = Slot { index, shard, offset: len, canonical: starts[index], len: n };
                len += n;
                slot
            })
            .collect();
        (0..=shard)
            .map(|shard| {
                let slots: Vec<Slot> = members.iter().filter(|s| s.shard == shard).cloned().collect();
                Self::new(params, group.clone(), shard, members.clone(), slots, moments)
            })
            .collect()
    }

    /// One shard's buffers for `slots` (consecutive offsets from 0).
    fn new(
        params: &[Tensor<B>],
        group: ParamGroup,
        shard: usize,
        members: Vec<Slot>,
        slots: Vec<Slot>,
        moments: Option<(&[f32], &[f32])>,
    ) -> Self {
        let len = slots.iter().map(|s| s.len).sum();
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
            params[slot.index].copy_into(0, &param, slot.offset, slot.len);
        }
        FlatGroup { group, shard, members, slots, param, grad: Tensor::zeros(backend, [len]), m, v }
    }

    /// How many shards this shard's group has.
    pub fn shard_count(&self) -> usize {
        self.members.last().map_or(1, |s| s.shard + 1)
    }

    pub fn len(&self) -> usize {
        self.param.numel()
    }

    /// Copies every member's gradient into the flat gradient buffer (`Backend::copy`).
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

    /// Copies the updated parameters back into the model's tensors (`Backend::copy`).
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

/// Ranges per `copy` call: a chunk's ranges sit in a stack buffer, so a training step
/// allocates nothing for its copies (see `tests/allocations.rs`).
const COPY_CHUNK: usize = 32;

/// `backend.copy` of `range(slot)` for every slot, [`COPY_CHUNK`] at a time.
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
        backend.copy(&buf[..chunk.len()]);
    }
}

/// `values` f32s in MiB, for messages.
fn mib(values: usize) -> f64 {
    values as f64 * 4.0 / (1024.0 * 1024.0)
}

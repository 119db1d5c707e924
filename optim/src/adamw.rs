//! AdamW over parameter groups, with global-norm clipping computed on the device.
//!
//! Each group keeps its parameters, gradients and moments in flat buffers (`crate::flat`),
//! so a step is, whatever the number of tensors: one gradient copy per trainable tensor,
//! one `sum_squares` per group (added into the global norm), one `adamw` per group, and
//! one copy per trainable tensor back into the model. The per-element update is the one
//! documented on [`AdamWStep`].
//!
//! The squared global norm is each group's sum of squares (one reduction over the group's
//! flat gradient) added group by group. The sum is the same as summing tensor by tensor,
//! but it is rounded at other places, so the clip factor (and so a run) may differ from
//! a per-tensor sum in the last bits of f32.
//!
//! A group larger than one buffer of the backend ([`Backend::max_tensor_len`]) is kept in
//! several shards (`crate::flat`): each shard has its own `sum_squares` and `adamw`, and the
//! global norm is summed shard by shard, so a sharded run matches an unsplit one within
//! f32 rounding of that sum (`kernels-wgsl/tests/sharding.rs`). A group that fits is one
//! shard, and its run is bit for bit what it was.

use tinygpt_tensor::{AdamWStep, Backend, Tensor, TensorError};

use crate::flat::{FlatGroup, Slot};
use crate::groups::ParamGroup;
use tinygpt_run::TrainingConfig;

/// AdamW state: the flat buffers of every parameter group and the step count.
#[derive(Clone, Debug)]
pub struct AdamW<B: Backend> {
    /// Every group's shards, group by group (one per group unless a group is larger than
    /// one buffer: see `crate::flat`).
    groups: Vec<FlatGroup<B>>,
    /// Values in the whole parameter list (the length of `weights.f32`).
    total: usize,
    /// Updates applied so far (bias correction uses `step + 1` for the next one).
    step: u32,
}

fn total<B: Backend>(params: &[Tensor<B>]) -> usize {
    params.iter().map(Tensor::numel).sum()
}

fn check_groups<B: Backend>(params: &[Tensor<B>], groups: &[ParamGroup]) {
    let mut seen = vec![false; params.len()];
    for group in groups {
        assert!(
            group.members.windows(2).all(|w| w[0] < w[1]),
            "group {:?}: members not ascending",
            group.name
        );
        for &i in &group.members {
            assert!(i < params.len(), "group {:?}: no parameter {i}", group.name);
            assert!(!seen[i], "parameter {i} is in two groups");
            seen[i] = true;
        }
    }
}

impl<B: Backend> AdamW<B> {
    /// Zero moments for the members of `groups` (tensors in no group are frozen).
    pub fn new(params: &[Tensor<B>], groups: Vec<ParamGroup>) -> Self {
        check_groups(params, &groups);
        let groups = groups.into_iter().flat_map(|g| FlatGroup::shards(params, g, None)).collect();
        AdamW { groups, total: total(params), step: 0 }
    }

    /// Moments from their canonical concatenations (`adam_m.f32`, `adam_v.f32`); the values
    /// of tensors in no group are ignored.
    pub fn from_flat(params: &[Tensor<B>], groups: Vec<ParamGroup>, m: &[f32], v: &[f32], step: u32) -> Self {
        check_groups(params, &groups);
        let n = total(params);
        assert!(
            m.len() == n && v.len() == n,
            "moments of {} and {} values for {n} parameters",
            m.len(),
            v.len()
        );
        let groups = groups.into_iter().flat_map(|g| FlatGroup::shards(params, g, Some((m, v)))).collect();
        AdamW { groups, total: n, step }
    }

    /// The groups being trained, in order.
    pub fn groups(&self) -> impl Iterator<Item = &ParamGroup> {
        self.groups.iter().filter(|g| g.shard == 0).map(|g| &g.group)
    }

    /// Where each member of group `g` lives in that group's flat buffers (its shard, and
    /// its offset there).
    pub fn slots(&self, g: usize) -> &[Slot] {
        &self.groups.iter().filter(|s| s.shard == 0).nth(g).expect("no such group").members
    }

    /// How many buffers (shards) each group's flat state takes, in order: all 1 unless a
    /// group is larger than one buffer of the backend.
    pub fn shards(&self) -> Vec<usize> {
        self.groups.iter().filter(|s| s.shard == 0).map(FlatGroup::shard_count).collect()
    }

    /// Trains `groups` from now on (e.g. after a tensor was frozen or unfrozen). A tensor
    /// that stays trainable keeps its moments (copied on the device); one that joins starts
    /// from zero moments; one that leaves loses its moments.
    pub fn regroup(&mut self, params: &[Tensor<B>], groups: Vec<ParamGroup>) {
        check_groups(params, &groups);
        let old = std::mem::take(&mut self.groups);
        self.groups = groups.into_iter().flat_map(|g| FlatGroup::shards(params, g, None)).collect();
        for new in &self.groups {
            for slot in &new.slots {
                let found =
                    old.iter().find_map(|o| o.slots.iter().find(|s| s.index == slot.index).map(|s| (o, s)));
                if let Some((o, s)) = found {
                    o.m.copy_into(s.offset, &new.m, slot.offset, slot.len);
                    o.v.copy_into(s.offset, &new.v, slot.offset, slot.len);
                }
            }
        }
    }

    /// `(m, v)` concatenated in canonical order, zeros for frozen tensors: one readback per
    /// group and moment.
    pub async fn to_flat(&self) -> Result<(Vec<f32>, Vec<f32>), TensorError> {
        let (mut m, mut v) = (vec![0.0; self.total], vec![0.0; self.total]);
        for g in &self.groups {
            let (gm, gv) = (g.m.read().await?, g.v.read().await?);
            for s in &g.slots {
                m[s.canonical..][..s.len].copy_from_slice(&gm[s.offset..][..s.len]);
                v[s.canonical..][..s.len].copy_from_slice(&gv[s.offset..][..s.len]);
            }
        }
        Ok((m, v))
    }

    /// Every parameter concatenated in canonical order (`weights.f32`): one readback per
    /// group, plus one per frozen tensor.
    pub async fn weights(&self, params: &[Tensor<B>]) -> Result<Vec<f32>, TensorError> {
        assert_eq!(total(params), self.total, "the parameters this optimizer was built for");
        let mut flat = vec![0.0; self.total];
        let mut trained = vec![false; params.len()];
        for g in &self.groups {
            let values = g.param.read().await?;
            for s in &g.slots {
                flat[s.canonical..][..s.len].copy_from_slice(&values[s.offset..][..s.len]);
                trained[s.index] = true;
            }
        }
        let mut start = 0;
        for (p, trained) in params.iter().zip(trained) {
            if !trained {
                flat[start..][..p.numel()].copy_from_slice(&p.read().await?);
            }
            start += p.numel();
        }
        Ok(flat)
    }

    /// Updates done (AdamW's bias-correction step).
    pub fn step(&self) -> u32 {
        self.step
    }

    /// One update at learning rate `lr` (times each group's `lr_scale`). `grads[i]` is the
    /// gradient of `params[i]`: present for every group member, `None` for every other
    /// tensor (a mismatch panics: call [`AdamW::regroup`] after changing what trains).
    /// Clipping uses the global norm over all groups; weight decay is each group's own.
    pub fn update(
        &mut self,
        params: &[Tensor<B>],
        grads: &[Option<Tensor<B>>],
        lr: f32,
        config: &TrainingConfig,
    ) {
        let Some(sumsq) = self.gather(params, grads) else { return };
        self.apply(params, &sumsq, lr, config);
    }

    /// [`AdamW::update`]'s first half: copies `grads` into the groups' flat gradient buffers
    /// and returns their squared global norm `[1]`, still on the device (`None` when
    /// nothing trains). `crate::loss_scale` looks at it before [`AdamW::apply`].
    pub(crate) fn gather(&self, params: &[Tensor<B>], grads: &[Option<Tensor<B>>]) -> Option<Tensor<B>> {
        assert_eq!(params.len(), grads.len(), "one gradient slot per parameter");
        assert_eq!(total(params), self.total, "the parameters this optimizer was built for");
        let members: usize = self.groups.iter().map(|g| g.slots.len()).sum();
        let present = grads.iter().flatten().count();
        assert_eq!(
            present, members,
            "gradients for {present} tensors, {members} in groups (regroup after freezing)"
        );
        let first = self.groups.first()?;
        for g in &self.groups {
            g.gather_grads(grads);
        }
        Some(self.groups[1..].iter().fold(first.grad.sum_squares(), |acc, g| acc.add(&g.grad.sum_squares())))
    }

    /// Multiplies the gathered gradients by `factor` (loss scaling's unscale, exact for a
    /// power of two).
    pub(crate) fn scale_gathered(&mut self, factor: f32) {
        for g in &mut self.groups {
            g.grad = g.grad.scale(factor);
        }
    }

    /// [`AdamW::update`]'s second half: one AdamW step of every group from the gathered
    /// gradients, clipped by `sumsq` (their squared global norm), and the parameters copied
    /// back into the model.
    pub(crate) fn apply(
        &mut self,
        params: &[Tensor<B>],
        sumsq: &Tensor<B>,
        lr: f32,
        config: &TrainingConfig,
    ) {
        let Some(first) = self.groups.first() else { return };
        self.step += 1;
        let backend = first.param.backend();
        for g in &self.groups {
            let hp = AdamWStep {
                lr: lr * g.group.options.lr_scale,
                beta1: config.beta1,
                beta2: config.beta2,
                eps: config.eps,
                weight_decay: g.group.options.weight_decay,
                step: self.step,
                max_grad_norm: (config.grad_clip > 0.0).then_some(config.grad_clip),
            };
            let (p, gr, m, v) = (g.param.storage(), g.grad.storage(), g.m.storage(), g.v.storage());
            backend.adamw(p, gr, m, v, sumsq.storage(), &hp, g.len());
            g.scatter_params(params);
        }
    }
}

//! Parameter groups: which tensors an optimizer trains, and with which options.
//!
//! nanoGPT's split is the default: matrices and embeddings (rank ≥ 2) decay, biases and
//! LayerNorm parameters do not. A group is also the unit the optimizer's flat buffers are
//! made of (see `crate::flat`), so a set of adapters with their own learning rate is one
//! more group, and a frozen tensor, in no group, costs no optimizer memory at all.

use tinygpt_tensor::{Backend, Tensor};

use tinygpt_run::TrainingConfig;

/// What a group trains with besides the run-wide settings (betas, eps, clipping and the
/// learning-rate schedule, which every group shares).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct GroupOptions {
    /// Decoupled weight decay for every tensor of the group.
    pub weight_decay: f32,
    /// Multiplies the scheduled learning rate, so a group can train faster or slower than
    /// the rest while following the same warm-up and decay. 1 is the schedule's own rate.
    pub lr_scale: f32,
}

/// A named set of tensors trained with the same [`GroupOptions`].
#[derive(Clone, Debug, PartialEq)]
pub struct ParamGroup {
    /// The group's name (`decay`, `no_decay`, `lora`).
    pub name: String,
    /// Positions of the member tensors in the parameter list (canonical order), ascending.
    /// A tensor belongs to at most one group; a tensor in none is frozen.
    pub members: Vec<usize>,
    /// Its optimizer settings.
    pub options: GroupOptions,
}

impl ParamGroup {
    /// nanoGPT's groups over the trainable tensors (`trainable[i]` false freezes tensor
    /// `i`): `"decay"`, rank ≥ 2, with the config's weight decay, and `"no_decay"`, rank < 2,
    /// with none; both at the scheduled learning rate. An empty group is left out.
    pub fn decay_split<B: Backend>(
        params: &[Tensor<B>],
        trainable: &[bool],
        config: &TrainingConfig,
    ) -> Vec<ParamGroup> {
        assert_eq!(params.len(), trainable.len(), "one trainable flag per parameter");
        let pick = |decays: bool| -> Vec<usize> {
            (0..params.len()).filter(|&i| trainable[i] && (params[i].shape().rank() >= 2) == decays).collect()
        };
        let group = |name: &str, members: Vec<usize>, weight_decay: f32| ParamGroup {
            name: name.to_string(),
            members,
            options: GroupOptions { weight_decay, lr_scale: 1.0 },
        };
        [group("decay", pick(true), config.weight_decay), group("no_decay", pick(false), 0.0)]
            .into_iter()
            .filter(|g| !g.members.is_empty())
            .collect()
    }
}

//! What a run trains: the whole model, or a LoRA adapter on a frozen base. Everything that
//! differs between the two lives here (the tensors AdamW updates, their parameter groups,
//! how a fresh run draws them); stepping, evaluation and the run loop are the same code.

use tinygpt_model::{Gpt, Lora, LoraConfig, ModelConfig};
use tinygpt_tensor::{Backend, Rng, Tensor};

use crate::adapter_run::ADAPTER_INIT_SALT;
use crate::error::TrainError;
use crate::groups::{GroupOptions, ParamGroup};
use tinygpt_run::TrainingConfig;

/// What [`crate::Trainer::new`] trains. (One per run, so the variants' sizes do not matter.)
#[allow(clippy::large_enum_variant)]
#[derive(Clone, Debug)]
pub enum TrainedSet<B: Backend> {
    /// The whole model (its parameters not frozen), of shape `model` on `backend`: drawn
    /// from the run's seed (`Rng::new(seed)`, see `Params::init`) when fresh, the resume
    /// state's `weights` when resuming.
    WholeModel {
        /// Where the model lives.
        backend: B,
        /// Its shape.
        model: ModelConfig,
    },
    /// A LoRA adapter's tensors on the frozen `base`, trained in one parameter group
    /// `"lora"` with `options`; the resume state's `weights` are ignored (the adapter holds
    /// them: [`TrainedSet::saved_adapter`]).
    Adapter {
        /// The frozen base; it never changes.
        base: Gpt<B>,
        /// The adapter as the run starts.
        adapter: Lora<B>,
        /// Its group's weight decay and learning-rate scale.
        options: GroupOptions,
    },
}

impl<B: Backend> TrainedSet<B> {
    /// The whole model of shape `model` on `backend`.
    pub fn whole_model(backend: &B, model: ModelConfig) -> Self {
        TrainedSet::WholeModel { backend: backend.clone(), model }
    }

    /// A fresh adapter of shape `lora` on `base`, as the CLI's `lora train` and the page's
    /// `trainAdapter` start one: A drawn from `config.seed ^ ADAPTER_INIT_SALT` (B zero, so
    /// step 0 is the base exactly), the group taking `config`'s weight decay.
    pub fn fresh_adapter(
        base: Gpt<B>,
        lora: LoraConfig,
        config: &TrainingConfig,
    ) -> Result<Self, TrainError> {
        let backend = base.params().tensors()[0].backend().clone();
        let mut rng = Rng::new(config.seed ^ ADAPTER_INIT_SALT);
        let adapter = Lora::init(&backend, base.config(), lora, &mut rng)?;
        Ok(TrainedSet::Adapter { base, adapter, options: adapter_options(config) })
    }

    /// A saved adapter (`weights`, canonical order) of shape `lora` on `base`, its group
    /// taking `config`'s weight decay as a fresh one does.
    pub fn saved_adapter(
        base: Gpt<B>,
        lora: LoraConfig,
        weights: &[f32],
        config: &TrainingConfig,
    ) -> Result<Self, TrainError> {
        let backend = base.params().tensors()[0].backend().clone();
        let adapter = Lora::from_flat(&backend, base.config(), lora, weights)?;
        Ok(TrainedSet::Adapter { base, adapter, options: adapter_options(config) })
    }
}

/// An adapter's group: the run's weight decay, the run's learning rate.
fn adapter_options(config: &TrainingConfig) -> GroupOptions {
    GroupOptions { weight_decay: config.weight_decay, lr_scale: 1.0 }
}

/// The tensors the optimizer updates: the adapter's, or the model's parameters.
pub(super) fn trained_tensors<'a, B: Backend>(
    model: &'a Gpt<B>,
    adapter: &'a Option<(Lora<B>, GroupOptions)>,
) -> &'a [Tensor<B>] {
    match adapter {
        Some((lora, _)) => lora.tensors(),
        None => model.params().tensors(),
    }
}

/// The optimizer's groups for the trained set as it is now: the adapter's one group, or
/// the model's decay split (which follows the parameters frozen since).
pub(super) fn trained_groups<B: Backend>(
    model: &Gpt<B>,
    adapter: &Option<(Lora<B>, GroupOptions)>,
    config: &TrainingConfig,
) -> Vec<ParamGroup> {
    match adapter {
        Some((lora, options)) => {
            vec![ParamGroup {
                name: "lora".into(),
                members: (0..lora.tensors().len()).collect(),
                options: *options,
            }]
        }
        None => ParamGroup::decay_split(model.params().tensors(), model.trainable(), config),
    }
}

//! The plain-data snapshot the trainer hands to a store and gets back (the trainer side,
//! `Trainer::checkpoint` and `ResumeState::from_checkpoint`, is in `tinygpt-optim`'s `ckpt` feature).

use tinygpt_run::{DatasetManifest, LossPoint, ModelConfig, TensorSpec, TrainerProgress, TrainingConfig};

use crate::error::{CkptError, Result};
use crate::layout::{self, ADAM_M, ADAM_V, LOSS_HISTORY, TRAINER_STATE, WEIGHTS};

/// Everything needed to resume a run exactly.
///
/// `weights`, `adam_m` and `adam_v` are the concatenation of all parameters in canonical
/// order ([`ModelConfig::tensor_specs`] gives each tensor's offset and shape), each of
/// length [`ModelConfig::param_count`]. A *weights-only* checkpoint (an export for
/// sampling, or an import of one) has both moment vectors empty; it is stored without
/// `adam_m.f32`/`adam_v.f32`, and a trainer resuming from it starts the moments at zero.
#[derive(Clone, Debug, PartialEq)]
pub struct Checkpoint {
    /// The model's shape.
    pub model_config: ModelConfig,
    /// How the run trains.
    pub training_config: TrainingConfig,
    /// The data it trains on.
    pub dataset: DatasetManifest,
    /// Where it stands.
    pub progress: TrainerProgress,
    /// Its learning curve.
    pub loss_history: Vec<LossPoint>,
    /// All parameters, flat, canonical order.
    pub weights: Vec<f32>,
    /// AdamW's first moments (empty for weights only).
    pub adam_m: Vec<f32>,
    /// AdamW's second moments (empty for weights only).
    pub adam_v: Vec<f32>,
}

impl Checkpoint {
    /// Whether the AdamW moments are present (see the type docs for weights-only).
    pub fn has_moments(&self) -> bool {
        !self.adam_m.is_empty()
    }

    /// This checkpoint without the AdamW moments.
    pub fn weights_only(&self) -> Checkpoint {
        Checkpoint { adam_m: Vec::new(), adam_v: Vec::new(), ..self.clone() }
    }

    /// Refuses what could not be loaded back: invalid configs, vectors of the wrong length,
    /// and non-finite numbers (JSON has no NaN, and a NaN model is no checkpoint worth
    /// pruning a good one for).
    pub(crate) fn check(&self) -> Result<()> {
        let invalid = |reason: String| Err(CkptError::InvalidCheckpoint { reason });
        let params = layout::check_model_config(layout::MODEL_CONFIG, &self.model_config)?;
        if let Err(e) = self.training_config.validate() {
            return invalid(e.to_string());
        }
        if self.weights.len() != params {
            return invalid(format!("weights has {} values, the config needs {params}", self.weights.len()));
        }
        let moments = (self.adam_m.len(), self.adam_v.len());
        if moments != (0, 0) && moments != (params, params) {
            return invalid(format!(
                "adam_m and adam_v have {} and {} values; both must be {params}, or both empty for weights only",
                moments.0, moments.1
            ));
        }
        let specs = self.model_config.tensor_specs();
        for (file, values) in [(WEIGHTS, &self.weights), (ADAM_M, &self.adam_m), (ADAM_V, &self.adam_v)] {
            check_finite(file, values, &specs)?;
        }
        let p = &self.progress;
        let non_finite = |file: &str, tensor: String, index: usize, value: f32| {
            Err(CkptError::NonFinite { file: file.to_string(), tensor, index, value })
        };
        if let Some(v) = p.best_val_loss.filter(|v| !v.is_finite()) {
            return non_finite(TRAINER_STATE, "best_val_loss".into(), 0, v);
        }
        if !p.wall_time_sec.is_finite() || p.wall_time_sec < 0.0 {
            return invalid(format!("wall_time_sec is {}", p.wall_time_sec));
        }
        for (i, point) in self.loss_history.iter().enumerate() {
            for (name, v) in [("train_loss", Some(point.train_loss)), ("val_loss", point.val_loss)] {
                if let Some(v) = v.filter(|v| !v.is_finite()) {
                    return non_finite(LOSS_HISTORY, format!("step {} {name}", point.step), i, v);
                }
            }
        }
        Ok(())
    }
}

/// The first NaN or infinity in `values` (laid out as `specs`), named by tensor.
pub(crate) fn check_finite(file: &str, values: &[f32], specs: &[TensorSpec]) -> Result<()> {
    let Some(at) = values.iter().position(|v| !v.is_finite()) else {
        return Ok(());
    };
    let spec = specs.iter().rev().find(|s| s.offset <= at);
    let (tensor, index) = spec.map_or(("?".to_string(), at), |s| (s.name.clone(), at - s.offset));
    Err(CkptError::NonFinite { file: file.to_string(), tensor, index, value: values[at] })
}

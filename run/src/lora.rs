//! `adapter_config.json`'s LoRA part: which linears an adapter adapts, its rank and scale,
//! and the names and shapes of its tensors (PEFT's, `blocks.{i}.attn.q_proj.lora_A.weight`,
//! block by block, within a block the targets in [`LinearKind::ALL`] order, A before B).
//! The tensors themselves and their forward pass are `tinygpt_model::Lora`.

use serde::{Deserialize, Serialize};

use crate::error::ConfigError;
use crate::model_config::{ModelConfig, TensorSpec};
use crate::structure::LinearKind;

/// Presets: `(name, rank, alpha, targets)`.
const PRESETS: [(&str, usize, f32, &[LinearKind]); 2] = [
    ("qv-r4", 4, 8.0, &[LinearKind::QProj, LinearKind::VProj]),
    ("qvo-r8", 8, 16.0, &[LinearKind::QProj, LinearKind::VProj, LinearKind::OProj]),
];

/// What an adapter adapts and how strongly. Serialized inside `adapter_config.json`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct LoraConfig {
    /// The adapters' rank `r`.
    pub rank: usize,
    /// The scale numerator: the update is `(alpha / r) · B·A`.
    pub alpha: f32,
    /// Module names (`q_proj k_proj v_proj o_proj fc_in fc_out`), in [`LinearKind::ALL`] order.
    pub target_modules: Vec<String>,
}

impl LoraConfig {
    /// `rank`, `alpha` and targets by name (any order; a repeated name is refused).
    pub fn new(rank: usize, alpha: f32, targets: &[&str]) -> Result<Self, ConfigError> {
        let mut kinds = Vec::new();
        for name in targets {
            let kind = LinearKind::from_name(name.trim()).ok_or_else(|| ConfigError::InvalidConfig {
                field: "target_modules",
                reason: format!(
                    "names unknown module {name:?} (known: {})",
                    LinearKind::ALL.map(LinearKind::name).join(", ")
                ),
            })?;
            // A repeat is a mistake (a typo for another target, most likely), not a request
            // to adapt the linear twice: refused, not silently dropped.
            if kinds.contains(&kind) {
                return Err(ConfigError::InvalidConfig {
                    field: "target_modules",
                    reason: format!("names {:?} twice; name each module once", kind.name()),
                });
            }
            kinds.push(kind);
        }
        kinds.sort();
        let config =
            LoraConfig { rank, alpha, target_modules: kinds.iter().map(|k| k.name().to_string()).collect() };
        config.check()?;
        Ok(config)
    }

    /// `qv-r4` (rank 4, alpha 8, q_proj v_proj) or `qvo-r8` (rank 8, alpha 16, q_proj v_proj o_proj).
    pub fn preset(name: &str) -> Result<Self, ConfigError> {
        let (_, rank, alpha, targets) =
            PRESETS.iter().find(|p| p.0 == name).ok_or_else(|| ConfigError::UnknownPreset {
                name: name.to_string(),
                known: PRESETS.iter().map(|p| p.0).collect::<Vec<_>>().join(", "),
            })?;
        Self::new(*rank, *alpha, &targets.iter().map(|k| k.name()).collect::<Vec<_>>())
    }

    /// The names of the built-in target presets.
    pub fn preset_names() -> impl Iterator<Item = &'static str> {
        PRESETS.iter().map(|p| p.0)
    }

    /// `alpha / rank`, the factor on `(x·Aᵀ)·Bᵀ`.
    pub fn scale(&self) -> f32 {
        self.alpha / self.rank as f32
    }

    /// The targets, typed (call on a checked config).
    pub fn targets(&self) -> Vec<LinearKind> {
        self.target_modules.iter().filter_map(|n| LinearKind::from_name(n)).collect()
    }

    fn check(&self) -> Result<(), ConfigError> {
        let bad = |field, reason: String| Err(ConfigError::InvalidConfig { field, reason });
        if self.rank == 0 || self.rank > 4096 {
            return bad("rank", format!("is {}, it must be 1 to 4096", self.rank));
        }
        if !(self.alpha.is_finite() && self.alpha > 0.0) {
            return bad("alpha", format!("is {}, it must be a positive number", self.alpha));
        }
        if self.target_modules.is_empty() {
            return bad("target_modules", "is empty: name at least one linear (e.g. q_proj,v_proj)".into());
        }
        let kinds = self.targets();
        if kinds.len() != self.target_modules.len() || !kinds.windows(2).all(|w| w[0] < w[1]) {
            return bad(
                "target_modules",
                format!("{:?} must name distinct known modules in q_proj..fc_out order", self.target_modules),
            );
        }
        Ok(())
    }

    /// Refuses an adapter that cannot sit on `model` (including a rank above a target's width).
    pub fn validate(&self, model: &ModelConfig) -> Result<(), ConfigError> {
        self.check()?;
        if let Some(kind) =
            self.targets().into_iter().find(|k| self.rank > k.dims(model).0.min(k.dims(model).1))
        {
            let (out, inp) = kind.dims(model);
            return Err(ConfigError::InvalidConfig {
                field: "rank",
                reason: format!(
                    "{} is above {}'s smaller side ({out}×{inp}): no low rank left",
                    self.rank,
                    kind.name()
                ),
            });
        }
        Ok(())
    }

    /// Every adapter tensor in canonical order, with its offset in the adapter's concatenation
    /// (`adapter.f32`).
    pub fn tensor_specs(&self, model: &ModelConfig) -> Vec<TensorSpec> {
        let mut specs = Vec::new();
        let mut offset = 0;
        for layer in 0..model.n_layers {
            for kind in self.targets() {
                let (out, inp) = kind.dims(model);
                for (ab, shape) in [("A", vec![self.rank, inp]), ("B", vec![out, self.rank])] {
                    let spec = TensorSpec {
                        name: format!("blocks.{layer}.{}.lora_{ab}.weight", kind.path()),
                        shape,
                        offset,
                    };
                    offset += spec.numel();
                    specs.push(spec);
                }
            }
        }
        specs
    }

    /// Adapter parameters this config adds to `model`.
    pub fn param_count(&self, model: &ModelConfig) -> usize {
        self.tensor_specs(model).iter().map(TensorSpec::numel).sum()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_repeated_target_is_refused_naming_it() {
        let err = LoraConfig::new(4, 8.0, &["q_proj", "v_proj", " q_proj"]).unwrap_err().to_string();
        assert!(err.contains("\"q_proj\" twice"), "{err}");
        assert_eq!(
            LoraConfig::new(4, 8.0, &["v_proj", "q_proj"]).unwrap(),
            LoraConfig::preset("qv-r4").unwrap()
        );
    }
}

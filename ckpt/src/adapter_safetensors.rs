//! An adapter as one `.safetensors` file in PEFT's names and layouts, so PEFT-style tools
//! read it: `base_model.model.blocks.0.attn.q_proj.lora_A.weight` `[r, in]` and
//! `….lora_B.weight` `[out, r]`, F32; `__metadata__` holds `format: pt` and this adapter's
//! `adapter_config.json` (base reference, rank, alpha, targets, tensor table) as a string.
//! Weights only: moments and training state stay in the adapter folder.
//! The module names are ours, so `peft` itself cannot load this file onto a Hugging Face
//! GPT-2; `crate::peft` writes the folder it does load (`c_attn`, `c_proj`, … names).

use ::safetensors::tensor::TensorView;
use ::safetensors::{Dtype, SafeTensors};
use tinygpt_run::{LoraConfig, ModelConfig, TensorSpec};

use crate::adapter::{named_tensors, AdapterCheckpoint, AdapterConfigFile, ADAPTER_CONFIG};
use crate::encode::f32_le_bytes;
use crate::error::{CkptError, Result};
use crate::json::{from_json, to_json};
use crate::safetensors::{canonical_header, check_names, header, scan_header};

/// PEFT's prefix before a module path.
pub const PEFT_PREFIX: &str = "base_model.model.";
const FILE: &str = "adapter safetensors";

fn st_error(reason: impl ToString) -> CkptError {
    CkptError::Safetensors { file: FILE.to_string(), reason: reason.to_string() }
}

/// `ckpt`'s adapter weights as a PEFT-named `.safetensors` file (same checkpoint, same bytes).
pub fn export_adapter_safetensors(ckpt: &AdapterCheckpoint) -> Result<Vec<u8>> {
    let config = AdapterConfigFile {
        base_model: ckpt.base.clone(),
        rank: ckpt.lora.rank,
        alpha: ckpt.lora.alpha,
        target_modules: ckpt.lora.target_modules.clone(),
        params: ckpt.lora.tensor_specs(&ckpt.model_config),
        // Weights for sampling and merging: the window a run trained on is not part of them.
        context_length: None,
    };
    let config_text = String::from_utf8(to_json(ADAPTER_CONFIG, &config, 1)?).expect("JSON is UTF-8");
    let named = named_tensors(ckpt);
    let bytes: Vec<(String, Vec<usize>, Vec<u8>)> =
        named.into_iter().map(|(name, (shape, values))| (name, shape, f32_le_bytes(values))).collect();
    let mut views = Vec::with_capacity(bytes.len());
    for (name, shape, data) in &bytes {
        views.push((
            format!("{PEFT_PREFIX}{name}"),
            TensorView::new(Dtype::F32, shape.clone(), data).map_err(st_error)?,
        ));
    }
    let metadata = [("format".to_string(), "pt".to_string()), (ADAPTER_CONFIG.to_string(), config_text)];
    let out = ::safetensors::serialize(views, Some(metadata.into_iter().collect())).map_err(st_error)?;
    canonical_header(out)
}

/// An adapter read from a PEFT-named file for a base of shape `model`: its config (with the
/// base reference it was trained on) and its weights in canonical order. Every tensor must
/// be present, F32 and of the shape rank, targets and the base imply; nothing else may be.
pub fn import_adapter_safetensors(
    bytes: &[u8],
    model: &ModelConfig,
) -> Result<(AdapterConfigFile, LoraConfig, Vec<f32>)> {
    // The header is walked (bounded: one name at a time) for the config, and its names are
    // checked against the config's, before the safetensors crate builds its structure.
    let header = header(bytes).map_err(st_error)?;
    let metadata = scan_header(header, |_, _| Ok(())).map_err(st_error)?;
    let text = metadata
        .get(ADAPTER_CONFIG)
        .ok_or_else(|| st_error(format!("__metadata__ has no {ADAPTER_CONFIG}")))?;
    let config: AdapterConfigFile = from_json(ADAPTER_CONFIG, text.as_bytes())?;
    let targets: Vec<&str> = config.target_modules.iter().map(String::as_str).collect();
    let lora = LoraConfig::new(config.rank, config.alpha, &targets)
        .and_then(|l| l.validate(model).map(|()| l))
        .map_err(|source| CkptError::InvalidConfig { file: ADAPTER_CONFIG.into(), source })?;
    let specs = lora.tensor_specs(model);
    let names: std::collections::HashSet<&str> = specs.iter().map(|s| s.name.as_str()).collect();
    let known = |n: &str| n.strip_prefix(PEFT_PREFIX).is_some_and(|n| names.contains(n));
    check_names(header, known, |n| format!("tensor {n:?} is not a tensor of this adapter"))
        .map_err(st_error)?;
    let tensors = SafeTensors::deserialize(bytes).map_err(st_error)?;
    if tensors.len() != specs.len() {
        let extra = tensors
            .names()
            .into_iter()
            .find(|n| !specs.iter().any(|s| **n == format!("{PEFT_PREFIX}{}", s.name)));
        return Err(st_error(match extra {
            Some(name) => format!("tensor {name:?} is not a tensor of this adapter"),
            None => format!("{} tensors, expected {}", tensors.len(), specs.len()),
        }));
    }
    let mut weights = Vec::with_capacity(specs.iter().map(TensorSpec::numel).sum());
    for spec in &specs {
        let name = format!("{PEFT_PREFIX}{}", spec.name);
        let view = tensors.tensor(&name).map_err(|_| st_error(format!("tensor {name:?} is missing")))?;
        if view.dtype() != Dtype::F32 || view.shape() != spec.shape.as_slice() {
            return Err(st_error(format!(
                "tensor {name:?} is {:?} {:?}, expected F32 {:?}",
                view.dtype(),
                view.shape(),
                spec.shape
            )));
        }
        weights
            .extend(view.data().chunks_exact(4).map(|c| f32::from_le_bytes(c.try_into().expect("4 bytes"))));
    }
    if let Some(at) = weights.iter().position(|v| !v.is_finite()) {
        return Err(st_error(format!("value {at} of the adapter is {}", weights[at])));
    }
    Ok((config, lora, weights))
}

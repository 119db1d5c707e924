//! Reading and writing a trained model's folder: `model_config.json`,
//! `training_config.json`, `dataset_manifest.json` and `weights.f32` (little-endian f32,
//! canonical order). The full checkpoint (moments, history, checksums, generations) is
//! `tinygpt-ckpt`'s.

use std::path::{Path, PathBuf};

use serde::de::DeserializeOwned;
use serde::Serialize;
use tinygpt_model::{DatasetManifest, ModelConfig};
use tinygpt_optim::TrainingConfig;

use crate::error::CliError;

/// What `sample` and `eval` need from a model folder.
pub struct SavedModel {
    pub model: ModelConfig,
    pub training: TrainingConfig,
    pub weights: Vec<f32>,
}

fn io(what: &'static str, path: &Path) -> impl FnOnce(std::io::Error) -> CliError {
    let path = path.to_path_buf();
    move |source| CliError::Io { what, path, source }
}

fn write_json(dir: &Path, name: &str, value: &impl Serialize) -> Result<(), CliError> {
    let path = dir.join(name);
    let text = serde_json::to_string_pretty(value).expect("configs serialize");
    std::fs::write(&path, text).map_err(io("cannot write", &path))
}

fn read_json<T: DeserializeOwned>(dir: &Path, name: &str, what: &'static str) -> Result<T, CliError> {
    let path: PathBuf = dir.join(name);
    let text = std::fs::read_to_string(&path).map_err(io("cannot read model file", &path))?;
    serde_json::from_str(&text).map_err(|source| CliError::Json { what, path, source })
}

pub fn save(
    dir: &Path,
    model: &ModelConfig,
    training: &TrainingConfig,
    dataset: &DatasetManifest,
    weights: &[f32],
) -> Result<(), CliError> {
    std::fs::create_dir_all(dir).map_err(io("cannot create output folder", dir))?;
    write_json(dir, "model_config.json", model)?;
    write_json(dir, "training_config.json", training)?;
    write_json(dir, "dataset_manifest.json", dataset)?;
    let bytes: Vec<u8> = weights.iter().flat_map(|w| w.to_le_bytes()).collect();
    let path = dir.join("weights.f32");
    std::fs::write(&path, bytes).map_err(io("cannot write", &path))
}

pub fn load(dir: &Path) -> Result<SavedModel, CliError> {
    if !dir.is_dir() {
        return Err(CliError::Usage(format!(
            "model folder {} does not exist or is not a folder",
            dir.display()
        )));
    }
    let model: ModelConfig = read_json(dir, "model_config.json", "a model config")?;
    model.validate()?;
    let training: TrainingConfig = read_json(dir, "training_config.json", "a training config")?;
    let path = dir.join("weights.f32");
    let bytes = std::fs::read(&path).map_err(io("cannot read model file", &path))?;
    if bytes.len() != model.param_count() * 4 {
        return Err(CliError::Usage(format!(
            "{}: {} bytes, but the config needs {} parameters ({} bytes)",
            path.display(),
            bytes.len(),
            model.param_count(),
            model.param_count() * 4
        )));
    }
    let weights = bytes.chunks_exact(4).map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]])).collect();
    Ok(SavedModel { model, training, weights })
}

//! The frozen base a LoRA command works on (`--base DIR` or `--base builtin`, also accepted
//! by `--model`), and the adapters stored beside it.
//!
//! `builtin` is a `medium` model trained by `tinygpt train` on TinyShakespeare and shipped
//! in this binary as a weights-only `.safetensors` (cli/assets; the command, steps and
//! final validation loss are in docs/benchmarks-log.md), so LoRA works without pretraining first.
//! Adapters of a base folder live in `<base>/adapters/<name>/`; `--adapter` takes a path,
//! or a name looked up there.

use std::path::{Path, PathBuf};

use tinygpt_ckpt::{
    base_weights_sha256, import_safetensors, AdapterCheckpoint, AdapterStore, Checkpoint, DirStore,
    LoadOptions, BUILTIN_BASE_NAME,
};
use tinygpt_tensor::block_on;

use crate::checkpoint::load;
use crate::error::CliError;

/// The `--base` / `--model` value naming the bundled base.
pub const BUILTIN: &str = "builtin";

/// The bundled base's weights-only export.
const BUILTIN_BASE: &[u8] = include_bytes!("../assets/base-medium-shakespeare.safetensors");

/// Where a base's adapters are stored, beside it.
pub const ADAPTERS_DIR: &str = "adapters";

/// A base model: what the adapter's `base_model.name` calls it, its checkpoint (moments
/// dropped), and the folder it came from (`None` for builtin).
pub struct Base {
    pub name: String,
    pub ckpt: Checkpoint,
    pub dir: Option<PathBuf>,
}

impl Base {
    pub fn weights_sha256(&self) -> String {
        base_weights_sha256(&self.ckpt.weights)
    }
}

/// `builtin`, or a checkpoint folder (its `generation`, default the latest).
pub fn load_base(arg: &Path, generation: Option<&str>) -> Result<Base, CliError> {
    if arg == Path::new(BUILTIN) && !arg.exists() {
        if let Some(generation) = generation {
            return Err(CliError::Usage(format!(
                "--generation {generation}: the builtin model has no generations; give a checkpoint folder as --model to pick one"
            )));
        }
        let ckpt = import_safetensors(BUILTIN_BASE, &LoadOptions::default())?;
        return Ok(Base { name: BUILTIN_BASE_NAME.into(), ckpt, dir: None });
    }
    let ckpt = load(arg, generation)?.weights_only();
    Ok(Base { name: arg.display().to_string(), ckpt, dir: Some(arg.to_path_buf()) })
}

/// The folder `--adapter` names: a path that exists, else `<base>/adapters/<name>`.
pub fn adapter_dir(base: &Base, arg: &Path) -> PathBuf {
    if arg.exists() {
        return arg.to_path_buf();
    }
    match &base.dir {
        Some(dir) if arg.components().count() == 1 => dir.join(ADAPTERS_DIR).join(arg),
        _ => arg.to_path_buf(),
    }
}

/// The adapter stored in `dir`, checked against `base` (a different base's weights are
/// refused in one line naming both).
pub fn load_adapter(base: &Base, dir: &Path) -> Result<AdapterCheckpoint, CliError> {
    if dir.is_file() {
        return Err(CliError::Usage(format!(
            "--adapter {} is a file, not an adapter folder; a .safetensors adapter is read into a folder by \
             `tinygpt lora import --base … --in {} --out <folder>` first",
            dir.display(),
            dir.display()
        )));
    }
    if !dir.is_dir() {
        let hint = match &base.dir {
            Some(b) => format!(" (`tinygpt lora list --base {}` lists this base's adapters)", b.display()),
            None => String::new(),
        };
        return Err(CliError::Usage(format!("adapter folder {} does not exist{hint}", dir.display())));
    }
    let store = AdapterStore::new(DirStore::open(dir)?);
    let adapter = block_on(store.load_latest(&base.ckpt.model_config))?;
    adapter.check_base(&base.name, &base.ckpt.weights)?;
    Ok(adapter)
}

/// The base's weights with `adapter` folded in (`W' = W + (alpha/r)·B·A`).
pub fn merged_weights(base: &Base, adapter: &AdapterCheckpoint) -> Result<Vec<f32>, CliError> {
    let config = &base.ckpt.model_config;
    Ok(tinygpt_model::lora::merge(config, &adapter.lora, &base.ckpt.weights, &adapter.weights)?)
}

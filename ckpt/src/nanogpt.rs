//! nanoGPT's `.safetensors` layout: the way to PyTorch and back.
//!
//! nanoGPT (karpathy/nanoGPT, `model.py`) names its parameters `transformer.wte.weight`,
//! `transformer.h.{i}.attn.c_attn.weight`, … and stores `nn.Linear` weights as
//! `[out_features, in_features]`, which is our layout too, so no tensor is transposed:
//! the one change is that q, k and v are fused into `c_attn` (rows `[q; k; v]`, that
//! order), and that `lm_head.weight` is written as a copy of the tied `wte` so loaders
//! that expect it find it. [`nanogpt_tensors`] is the only place the two naming schemes
//! meet; export and import both walk it.
//!
//! `__metadata__` (string values, as the format requires) holds nanoGPT's `GPTConfig`:
//! `n_layer`, `n_head`, `n_embd`, `block_size`, `vocab_size`, `bias` (`"true"`) and
//! `dropout`, plus `format: "pt"` (what PyTorch loaders look for). Our own run documents
//! ride along under `tinygpt.*` (`tinygpt.model_name`, `tinygpt.training_config.json`,
//! `tinygpt.dataset_manifest.json`, `tinygpt.loss_history.json`, `tinygpt.progress.json`),
//! which PyTorch ignores and which make ours → nanoGPT → ours bit-exact for a
//! weights-only checkpoint. A file without them (written by PyTorch) imports as a new
//! run at step 0 with the caller's training config and dataset manifest.
//!
//! Import refuses what TinyGPT cannot run, naming what differs: a vocabulary other than
//! 256 bytes, `bias: false`, an MLP other than 4 × n_embd, a dtype other than F32, a
//! tensor of another shape, a missing or unknown tensor, and an `lm_head.weight` that is
//! not bit-for-bit `wte` (an untied head).

use std::collections::{BTreeMap, HashMap, HashSet};

use ::safetensors::tensor::TensorView;
use ::safetensors::{Dtype, SafeTensors};
use serde::de::DeserializeOwned;
use tinygpt_run::{
    DatasetManifest, LossPoint, ModelConfig, TensorSpec, TrainerProgress, TrainingConfig, BATCH_SALT,
};
use tinygpt_tensor::Rng;

use crate::checkpoint::{check_finite, Checkpoint};
use crate::encode::f32_le_bytes;
use crate::error::{CkptError, Result};
use crate::layout::{check_model_config, WEIGHTS};
use crate::safetensors::{canonical_header, check_names, header, scan_header};

/// nanoGPT's tied output head, written as a copy of `wte`.
pub const LM_HEAD: &str = "lm_head.weight";
/// The metadata prefix of our own run documents.
const OURS: &str = "tinygpt.";
const MODEL_NAME: &str = "tinygpt.model_name";
const TRAINING: &str = "tinygpt.training_config.json";
const DATASET: &str = "tinygpt.dataset_manifest.json";
const HISTORY: &str = "tinygpt.loss_history.json";
const PROGRESS: &str = "tinygpt.progress.json";

/// `__metadata__`, key → string value.
type Metadata = BTreeMap<String, String>;

fn refuse(reason: impl ToString) -> CkptError {
    CkptError::NanoGpt { reason: reason.to_string() }
}

/// One nanoGPT tensor: its name and the canonical parameters it is made of, concatenated
/// along the first dimension in this order. `tied` marks `lm_head.weight`, a copy of its
/// one part that import checks instead of storing.
#[derive(Clone, Debug, PartialEq)]
pub struct NanoTensor {
    /// Our tensor's name.
    pub name: String,
    /// The nanoGPT tensors it is made of (q, k, v split from `c_attn`).
    pub parts: Vec<String>,
    /// Whether it is tied to another (the output head to the token embedding).
    pub tied: bool,
}

/// The name table, in nanoGPT's `state_dict` order.
pub fn nanogpt_tensors(n_layers: usize) -> Vec<NanoTensor> {
    let one = |name: String, ours: String| NanoTensor { name, parts: vec![ours], tied: false };
    let mut out = vec![
        one("transformer.wte.weight".into(), "token_embedding".into()),
        one("transformer.wpe.weight".into(), "position_embedding".into()),
    ];
    for i in 0..n_layers {
        let (theirs, ours) = (format!("transformer.h.{i}"), format!("blocks.{i}"));
        for kind in ["weight", "bias"] {
            out.push(one(format!("{theirs}.ln_1.{kind}"), format!("{ours}.ln1.{kind}")));
        }
        for kind in ["weight", "bias"] {
            let parts = ["q_proj", "k_proj", "v_proj"].map(|p| format!("{ours}.attn.{p}.{kind}")).to_vec();
            out.push(NanoTensor { name: format!("{theirs}.attn.c_attn.{kind}"), parts, tied: false });
        }
        for (t, o, kind) in [
            ("attn.c_proj", "attn.o_proj", "weight"),
            ("attn.c_proj", "attn.o_proj", "bias"),
            ("ln_2", "ln2", "weight"),
            ("ln_2", "ln2", "bias"),
            ("mlp.c_fc", "mlp.fc_in", "weight"),
            ("mlp.c_fc", "mlp.fc_in", "bias"),
            ("mlp.c_proj", "mlp.fc_out", "weight"),
            ("mlp.c_proj", "mlp.fc_out", "bias"),
        ] {
            out.push(one(format!("{theirs}.{t}.{kind}"), format!("{ours}.{o}.{kind}")));
        }
    }
    for kind in ["weight", "bias"] {
        out.push(one(format!("transformer.ln_f.{kind}"), format!("ln_final.{kind}")));
    }
    out.push(NanoTensor { name: LM_HEAD.into(), parts: vec!["token_embedding".into()], tied: true });
    out
}

/// A nanoGPT tensor's parts as specs, and its shape (the parts stacked along dim 0).
fn resolve<'a>(
    tensor: &NanoTensor,
    specs: &'a HashMap<&str, &TensorSpec>,
) -> (Vec<&'a TensorSpec>, Vec<usize>) {
    let parts: Vec<&TensorSpec> = tensor
        .parts
        .iter()
        .map(|p| *specs.get(p.as_str()).expect("the table names canonical parameters"))
        .collect();
    let mut shape = parts[0].shape.clone();
    shape[0] = parts.iter().map(|s| s.shape[0]).sum();
    (parts, shape)
}

/// nanoGPT's MLP is always 4 × n_embd wide; anything else has no nanoGPT form.
fn check_mlp(config: &ModelConfig) -> Result<()> {
    if config.d_mlp != 4 * config.d_model {
        return Err(refuse(format!(
            "d_mlp is {}, but nanoGPT's MLP is 4 × n_embd = {}",
            config.d_mlp,
            4 * config.d_model
        )));
    }
    Ok(())
}

/// One tensor in nanoGPT's layout.
#[derive(Clone, Debug, PartialEq)]
pub struct NanoValues {
    /// The nanoGPT name.
    pub name: String,
    /// Its shape.
    pub shape: Vec<usize>,
    /// Its values.
    pub values: Vec<f32>,
}

/// `flat` (any vector in the layout of `weights.f32`: weights, gradients) as nanoGPT's
/// tensors, in its `state_dict` order; `lm_head.weight` (a copy of `wte`) only if
/// `with_tied_head`. Gradients leave it out: the tied `wte`'s gradient already sums both
/// uses, as PyTorch's does.
pub fn to_nanogpt_layout(config: &ModelConfig, flat: &[f32], with_tied_head: bool) -> Vec<NanoValues> {
    let all_specs = config.tensor_specs();
    let specs: HashMap<&str, &TensorSpec> = all_specs.iter().map(|s| (s.name.as_str(), s)).collect();
    nanogpt_tensors(config.n_layers)
        .into_iter()
        .filter(|t| with_tied_head || !t.tied)
        .map(|tensor| {
            let (parts, shape) = resolve(&tensor, &specs);
            let values = parts.iter().flat_map(|s| &flat[s.offset..s.offset + s.numel()]).copied().collect();
            NanoValues { name: tensor.name, shape, values }
        })
        .collect()
}

/// `ckpt`'s weights in nanoGPT's names and layout, with its config (and our run
/// documents) in `__metadata__`. The AdamW moments are not exported (nanoGPT keeps them
/// in a separate optimizer state). The same checkpoint always gives the same bytes.
pub fn export_nanogpt(ckpt: &Checkpoint) -> Result<Vec<u8>> {
    ckpt.weights_only().check()?;
    let c = &ckpt.model_config;
    check_mlp(c)?;
    let data: Vec<(String, Vec<u8>, Vec<usize>)> = to_nanogpt_layout(c, &ckpt.weights, true)
        .into_iter()
        .map(|t| (t.name, f32_le_bytes(&t.values), t.shape))
        .collect();
    let mut views = Vec::with_capacity(data.len());
    for (name, bytes, shape) in &data {
        let view = TensorView::new(Dtype::F32, shape.clone(), bytes).map_err(refuse)?;
        views.push((name.clone(), view));
    }
    let metadata = [
        ("format", "pt".to_string()),
        ("n_layer", c.n_layers.to_string()),
        ("n_head", c.n_heads.to_string()),
        ("n_embd", c.d_model.to_string()),
        ("block_size", c.context_length.to_string()),
        ("vocab_size", c.vocab_size.to_string()),
        ("bias", "true".to_string()),
        ("dropout", c.dropout.to_string()),
        (MODEL_NAME, c.model_name.clone()),
        (TRAINING, json(&ckpt.training_config)),
        (DATASET, json(&ckpt.dataset)),
        (HISTORY, json(&ckpt.loss_history)),
        (PROGRESS, json(&ckpt.progress)),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_string(), v));
    let file = ::safetensors::serialize(views, Some(metadata.collect())).map_err(refuse)?;
    canonical_header(file)
}

/// What an import takes from the caller when the file does not carry our run documents
/// (a file PyTorch wrote): the training config and the dataset the run is tied to.
#[derive(Clone, Debug)]
pub struct ImportDefaults {
    /// The training config to record.
    pub training: TrainingConfig,
    /// The data to record.
    pub dataset: DatasetManifest,
}

/// Where an imported run without our progress document stands: step 0, its batches
/// drawn from `training.seed` as a fresh `Trainer` would draw them.
pub(crate) fn fresh_progress(training: &TrainingConfig) -> TrainerProgress {
    TrainerProgress {
        step: 0,
        tokens_seen: 0,
        best_val_loss: None,
        wall_time_sec: 0.0,
        rng_state: Rng::new(training.seed ^ BATCH_SALT).state(),
        loss_scale: None,
    }
}

/// A nanoGPT `.safetensors` file as a weights-only checkpoint (see the module docs for
/// what is refused). Our run documents in `__metadata__` are used when present;
/// otherwise the run starts at step 0 with `defaults`.
pub fn import_nanogpt(bytes: &[u8], defaults: ImportDefaults) -> Result<Checkpoint> {
    // The header is walked (bounded: one name at a time) for the config, and its names are
    // checked against the config's, before the safetensors crate builds its structure.
    let header = header(bytes).map_err(refuse)?;
    let meta = &scan_header(header, |_, _| Ok(())).map_err(refuse)?;
    let config = config_from_metadata(meta)?;
    let params = check_model_config("nanoGPT __metadata__", &config)?;
    check_mlp(&config)?;

    let table = nanogpt_tensors(config.n_layers);
    let all_specs = config.tensor_specs();
    let specs: HashMap<&str, &TensorSpec> = all_specs.iter().map(|s| (s.name.as_str(), s)).collect();
    let names: HashSet<&str> = table.iter().map(|t| t.name.as_str()).collect();
    let known = |n: &str| names.contains(n) || is_causal_mask(n, config.n_layers);
    let unknown = |n: &str| {
        format!(
            "tensor {n:?} is not a parameter of nanoGPT's GPT with these sizes (n_layer {})",
            config.n_layers
        )
    };
    check_names(header, known, unknown).map_err(refuse)?;
    let tensors = SafeTensors::deserialize(bytes).map_err(refuse)?;
    // Every tensor is checked (F32, its shape) before the weights are allocated.
    let mut views = Vec::with_capacity(table.len());
    for tensor in &table {
        let (parts, shape) = resolve(tensor, &specs);
        let view = match tensors.tensor(&tensor.name) {
            Ok(view) => view,
            Err(_) if tensor.tied => continue,
            Err(_) => return Err(refuse(format!("tensor {:?} is missing", tensor.name))),
        };
        if view.dtype() != Dtype::F32 || view.shape() != shape.as_slice() {
            return Err(refuse(format!(
                "tensor {:?} is {:?} {:?}, expected F32 {:?}",
                tensor.name,
                view.dtype(),
                view.shape(),
                shape
            )));
        }
        views.push((tensor, parts, view));
    }
    let mut weights = vec![0f32; params];
    for (tensor, parts, view) in &views {
        let values = view.data().chunks_exact(4).map(|b| f32::from_le_bytes(b.try_into().expect("4 bytes")));
        if tensor.tied {
            let wte = parts[0];
            let own = &weights[wte.offset..wte.offset + wte.numel()];
            if let Some(at) = values.zip(own).position(|(a, b)| a.to_bits() != b.to_bits()) {
                return Err(refuse(format!(
                    "{LM_HEAD} differs from transformer.wte.weight (first at element {at}); TinyGPT ties them, so an untied head cannot be imported"
                )));
            }
            continue;
        }
        let mut values = values;
        for s in parts {
            for (w, v) in weights[s.offset..s.offset + s.numel()].iter_mut().zip(values.by_ref()) {
                *w = v;
            }
        }
    }
    check_finite(WEIGHTS, &weights, &all_specs)?;

    let training: TrainingConfig = doc(meta, TRAINING)?.unwrap_or(defaults.training);
    let dataset = doc(meta, DATASET)?.unwrap_or(defaults.dataset);
    let loss_history: Vec<LossPoint> = doc(meta, HISTORY)?.unwrap_or_default();
    let progress = doc(meta, PROGRESS)?.unwrap_or_else(|| fresh_progress(&training));
    let ckpt = Checkpoint {
        model_config: config,
        training_config: training,
        dataset,
        progress,
        loss_history,
        weights,
        adam_m: Vec::new(),
        adam_v: Vec::new(),
    };
    ckpt.check()?;
    Ok(ckpt)
}

/// nanoGPT registers a causal-mask buffer `attn.bias` (`[1, 1, T, T]`) in each of its
/// `n_layers` blocks when PyTorch lacks flash attention; `state_dict()` includes it, but it
/// is no parameter, so import skips it.
fn is_causal_mask(name: &str, n_layers: usize) -> bool {
    name.strip_prefix("transformer.h.")
        .and_then(|rest| rest.split_once('.'))
        .is_some_and(|(i, rest)| i.parse::<usize>().is_ok_and(|i| i < n_layers) && rest == "attn.bias")
}

/// The model config from nanoGPT's `GPTConfig` keys, refusing what TinyGPT cannot run.
fn config_from_metadata(meta: &Metadata) -> Result<ModelConfig> {
    let get = |key: &str| {
        meta.get(key).ok_or_else(|| {
            refuse(format!("__metadata__ has no {key:?}; nanoGPT's config (n_layer, n_head, n_embd, block_size, vocab_size, bias) is needed"))
        })
    };
    let int = |key: &str| -> Result<usize> {
        let text = get(key)?;
        text.trim().parse().map_err(|_| refuse(format!("__metadata__ {key} is {text:?}, not a whole number")))
    };
    let vocab_size = int("vocab_size")?;
    if vocab_size != 256 {
        return Err(refuse(format!(
            "vocab_size is {vocab_size}, but TinyGPT's byte tokenizer has 256 tokens (one per byte)"
        )));
    }
    let bias = get("bias")?;
    if !bias.trim().eq_ignore_ascii_case("true") {
        return Err(refuse(format!(
            "bias is {bias:?}, but TinyGPT's Linear and LayerNorm layers have biases"
        )));
    }
    let dropout = match meta.get("dropout") {
        None => 0.0,
        Some(text) => text
            .trim()
            .parse()
            .map_err(|_| refuse(format!("__metadata__ dropout is {text:?}, not a number")))?,
    };
    let d_model = int("n_embd")?;
    Ok(ModelConfig {
        model_name: meta.get(MODEL_NAME).cloned().unwrap_or_else(|| "nanogpt-import".into()),
        vocab_size,
        context_length: int("block_size")?,
        n_layers: int("n_layer")?,
        n_heads: int("n_head")?,
        d_model,
        d_mlp: d_model.saturating_mul(4),
        dropout,
        ..ModelConfig::reference()
    })
}

/// One of our run documents from `__metadata__`, if present.
fn doc<T: DeserializeOwned>(meta: &Metadata, key: &str) -> Result<Option<T>> {
    debug_assert!(key.starts_with(OURS));
    meta.get(key)
        .map(|text| serde_json::from_str(text).map_err(|e| refuse(format!("__metadata__ {key}: {e}"))))
        .transpose()
}

/// A run document as compact JSON (plain data: serializing cannot fail).
fn json<T: serde::Serialize>(value: &T) -> String {
    serde_json::to_string(value).expect("run documents serialize")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_table_covers_every_parameter_once_plus_the_tied_head() {
        let config = ModelConfig::reference();
        let table = nanogpt_tensors(config.n_layers);
        let mut covered: Vec<&str> =
            table.iter().filter(|t| !t.tied).flat_map(|t| t.parts.iter().map(String::as_str)).collect();
        covered.sort_unstable();
        let mut ours: Vec<String> = config.tensor_specs().into_iter().map(|s| s.name).collect();
        ours.sort_unstable();
        assert_eq!(covered, ours);
        assert_eq!(table.iter().filter(|t| t.tied).count(), 1);
    }

    #[test]
    fn the_causal_mask_buffer_is_recognised() {
        assert!(is_causal_mask("transformer.h.3.attn.bias", 4));
        assert!(!is_causal_mask("transformer.h.4.attn.bias", 4));
        assert!(!is_causal_mask("transformer.h.3.attn.c_attn.bias", 4));
        assert!(!is_causal_mask("transformer.h.x.attn.bias", 4));
    }
}

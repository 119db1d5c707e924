//! LoRA adapters in PEFT's folder for GPT-2 (`adapter_config.json` +
//! `adapter_model.safetensors`), so an adapter trained here loads in Python with
//! `PeftModel.from_pretrained` on the Hugging Face GPT-2 its base was imported from, and
//! one trained with `peft` loads here.
//!
//! PEFT adapts GPT-2's `Conv1D`s with `fan_in_fan_out`: `lora_A.weight` is `[r, in]`,
//! `lora_B.weight` `[out, r]`, and the layer computes `x·W + b + s·(x·Aᵀ)·Bᵀ` with
//! `s = lora_alpha / r` (`/ sqrt(r)` with `use_rslora`), which is our
//! `x·Wᵀ + b + s·(x·Aᵀ)·Bᵀ`: A and B are copied as they are. Names are
//! `base_model.model.transformer.h.{i}.{module}.lora_{A,B}.weight`, modules mapping to ours:
//!
//! | GPT-2          | ours                         |
//! |----------------|------------------------------|
//! | `attn.c_attn`  | `q_proj` `k_proj` `v_proj`   |
//! | `attn.c_proj`  | `o_proj`                     |
//! | `mlp.c_fc`     | `fc_in`                      |
//! | `mlp.c_proj`   | `fc_out`                     |
//!
//! `c_attn` is q, k and v fused (rows `[q | k | v]` of B). Export stacks the As of the
//! targeted ones (`n` of them, rank `r` each) into one `[n·r, d]` A and places each B in
//! its rows and its own `r` columns of a `[3d, n·r]` B (zeros elsewhere): the same
//! function at rank `n·r` and alpha `n·alpha` (`rank_pattern`/`alpha_pattern` say so
//! when other modules keep `r`). The safetensors `__metadata__` carries our
//! `adapter_config.json` (base name and weights hash, rank, alpha, targets) under
//! [`TINYGPT_METADATA`], so import gives back exactly the tensors exported.
//!
//! An adapter `peft` saved has no such record, and is re-expressed as one of ours, the
//! same function: `c_attn` becomes q, k and v (each with `c_attn`'s A and its rows of B);
//! modules of a smaller rank are padded with zeros to the largest; where modules' scales
//! differ, B is multiplied by its module's scale over the one kept; a module absent from
//! a layer (`layers_to_transform`) is zeros there. Refused, named: another `peft_type`,
//! DoRA, bias training, `modules_to_save` and the other options that change what is
//! computed, a LoRA on anything but those four modules (`wte`, `lm_head`, …), a rank that
//! disagrees with the config, a pattern key that is a regular expression beyond a plain
//! module name.

use std::collections::BTreeMap;

use ::safetensors::tensor::TensorView;
use ::safetensors::{Dtype, SafeTensors};
use serde_json::{json, Map, Value};
use tinygpt_run::{LinearKind, LoraConfig, ModelConfig, TensorSpec};

use crate::adapter::{AdapterCheckpoint, AdapterConfigFile, BaseRef, ADAPTER_CONFIG};
use crate::checkpoint::check_finite;
use crate::encode::f32_le_bytes;
use crate::error::{CkptError, Result};
use crate::hf_gpt2::values;
use crate::json::from_json;
use crate::safetensors::{canonical_header, check_names, header, scan_header};

/// PEFT's config file.
pub const PEFT_CONFIG: &str = "adapter_config.json";
/// PEFT's weights file.
pub const PEFT_WEIGHTS: &str = "adapter_model.safetensors";
/// The `__metadata__` key holding our `adapter_config.json` in an exported file.
pub const TINYGPT_METADATA: &str = "tinygpt_adapter_config";
/// What precedes `h.{i}.…` in PEFT's names for a `GPT2LMHeadModel`.
const PREFIX: &str = "base_model.model.transformer.";

fn refuse(file: &'static str, reason: impl ToString) -> CkptError {
    CkptError::Peft { file, reason: reason.to_string() }
}

/// A GPT-2 block linear that a LoRA adapter of ours maps to.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
enum Module {
    CAttn,
    AttnCProj,
    CFc,
    MlpCProj,
}

impl Module {
    const ALL: [Module; 4] = [Self::CAttn, Self::AttnCProj, Self::CFc, Self::MlpCProj];

    /// The path inside a block, `attn.c_attn`, … (also what `target_modules` names).
    fn path(self) -> &'static str {
        match self {
            Self::CAttn => "attn.c_attn",
            Self::AttnCProj => "attn.c_proj",
            Self::CFc => "mlp.c_fc",
            Self::MlpCProj => "mlp.c_proj",
        }
    }

    /// The module a kind of ours lives in, and its part of `c_attn`'s rows (q 0, k 1, v 2).
    fn of(kind: LinearKind) -> (Module, usize) {
        match kind {
            LinearKind::QProj => (Self::CAttn, 0),
            LinearKind::KProj => (Self::CAttn, 1),
            LinearKind::VProj => (Self::CAttn, 2),
            LinearKind::OProj => (Self::AttnCProj, 0),
            LinearKind::FcIn => (Self::CFc, 0),
            LinearKind::FcOut => (Self::MlpCProj, 0),
        }
    }

    /// Our kinds it holds.
    fn kinds(self) -> &'static [LinearKind] {
        match self {
            Self::CAttn => &[LinearKind::QProj, LinearKind::KProj, LinearKind::VProj],
            Self::AttnCProj => &[LinearKind::OProj],
            Self::CFc => &[LinearKind::FcIn],
            Self::MlpCProj => &[LinearKind::FcOut],
        }
    }

    /// `(out, in)` of the module for `model`.
    fn dims(self, model: &ModelConfig) -> (usize, usize) {
        let (d, f) = (model.d_model, model.d_mlp);
        match self {
            Self::CAttn => (3 * d, d),
            Self::AttnCProj => (d, d),
            Self::CFc => (f, d),
            Self::MlpCProj => (d, f),
        }
    }
}

fn tensor_name(layer: usize, module: Module, ab: char) -> String {
    format!("{PREFIX}h.{layer}.{}.lora_{ab}.weight", module.path())
}

/// `(layer, module, 'A' | 'B')` of a PEFT tensor name, for a model of `n_layers`.
fn parse_name(name: &str, n_layers: usize) -> Option<(usize, Module, char)> {
    let rest = name.strip_prefix(PREFIX)?.strip_prefix("h.")?;
    let (layer, rest) = rest.split_once('.')?;
    let layer: usize = layer.parse().ok().filter(|&l| l < n_layers)?;
    let (path, ab) = rest
        .strip_suffix(".lora_A.weight")
        .map(|p| (p, 'A'))
        .or_else(|| rest.strip_suffix(".lora_B.weight").map(|p| (p, 'B')))?;
    let module = Module::ALL.into_iter().find(|m| m.path() == path)?;
    (tensor_name(layer, module, ab) == name).then_some((layer, module, ab))
}

/// A JSON number for `v`: whole numbers as integers (as PEFT writes `r` and `lora_alpha`).
fn number(v: f64) -> Value {
    if v.fract() == 0.0 && v.abs() < 1e15 {
        json!(v as i64)
    } else {
        json!(v)
    }
}

/// PEFT's two files.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PeftFiles {
    /// `adapter_config.json`.
    pub config_json: Vec<u8>,
    /// `adapter_model.safetensors`.
    pub safetensors: Vec<u8>,
}

/// `ckpt` in PEFT's folder for GPT-2, `base_model_name_or_path` written as given (where
/// `PeftModel.from_pretrained` would fetch the base if not handed one). Every adapter of
/// ours has a PEFT equivalent; see the module docs for how q, k and v share `c_attn`.
pub fn export_peft(ckpt: &AdapterCheckpoint, base_model_name_or_path: &str) -> Result<PeftFiles> {
    let (model, lora) = (&ckpt.model_config, &ckpt.lora);
    lora.validate(model)
        .map_err(|source| CkptError::InvalidConfig { file: ADAPTER_CONFIG.into(), source })?;
    let specs = lora.tensor_specs(model);
    let expected: usize = specs.iter().map(TensorSpec::numel).sum();
    if ckpt.weights.len() != expected {
        return Err(CkptError::InvalidCheckpoint {
            reason: format!("the adapter has {} values, its config {expected}", ckpt.weights.len()),
        });
    }
    let by_name: BTreeMap<&str, &[f32]> =
        specs.iter().map(|s| (s.name.as_str(), &ckpt.weights[s.offset..][..s.numel()])).collect();
    let targets = lora.targets();
    let r = lora.rank;
    let qkv: Vec<LinearKind> =
        targets.iter().copied().filter(|k| Module::of(*k).0 == Module::CAttn).collect();
    let n = qkv.len();
    let modules: Vec<Module> =
        Module::ALL.into_iter().filter(|m| m.kinds().iter().any(|k| targets.contains(k))).collect();
    let ours = |layer: usize, kind: LinearKind, ab: char| {
        by_name[format!("blocks.{layer}.{}.lora_{ab}.weight", kind.path()).as_str()]
    };

    let mut tensors: Vec<(String, Vec<usize>, Vec<f32>)> = Vec::new();
    for layer in 0..model.n_layers {
        for &module in &modules {
            let (out, inp) = module.dims(model);
            let (a, b, rank) = if module == Module::CAttn {
                let d = model.d_model;
                let rank = n * r;
                let a: Vec<f32> = qkv.iter().flat_map(|&k| ours(layer, k, 'A').iter().copied()).collect();
                let mut b = vec![0f32; out * rank];
                for (j, &kind) in qkv.iter().enumerate() {
                    let (_, part) = Module::of(kind);
                    let bp = ours(layer, kind, 'B');
                    for o in 0..d {
                        let row = (part * d + o) * rank + j * r;
                        b[row..row + r].copy_from_slice(&bp[o * r..(o + 1) * r]);
                    }
                }
                (a, b, rank)
            } else {
                let kind = module.kinds()[0];
                (ours(layer, kind, 'A').to_vec(), ours(layer, kind, 'B').to_vec(), r)
            };
            tensors.push((tensor_name(layer, module, 'A'), vec![rank, inp], a));
            tensors.push((tensor_name(layer, module, 'B'), vec![out, rank], b));
        }
    }

    // One rank and alpha for all when c_attn is all there is (or holds one part); else
    // c_attn's own by pattern, the same scale alpha/r either way.
    let alpha = lora.alpha as f64;
    let (global_r, global_alpha, patterns) = if modules == [Module::CAttn] {
        (n * r, n as f64 * alpha, None)
    } else if n > 1 {
        (r, alpha, Some((n * r, n as f64 * alpha)))
    } else {
        (r, alpha, None)
    };
    let (rank_pattern, alpha_pattern) = match patterns {
        Some((pr, pa)) => (json!({ Module::CAttn.path(): pr }), json!({ Module::CAttn.path(): number(pa) })),
        None => (json!({}), json!({})),
    };
    let config = json!({
        "peft_type": "LORA",
        "task_type": "CAUSAL_LM",
        "base_model_name_or_path": base_model_name_or_path,
        "r": global_r,
        "lora_alpha": number(global_alpha),
        "target_modules": modules.iter().map(|m| m.path()).collect::<Vec<_>>(),
        "rank_pattern": rank_pattern,
        "alpha_pattern": alpha_pattern,
        "fan_in_fan_out": true,
        "bias": "none",
        "lora_dropout": 0.0,
        "use_rslora": false,
        "use_dora": false,
        "modules_to_save": null,
        "layers_to_transform": null,
        "layers_pattern": null,
        "init_lora_weights": true,
        "inference_mode": true,
        "revision": null,
    });
    let mut config_json = serde_json::to_vec_pretty(&config).expect("JSON values serialize");
    config_json.push(b'\n');

    let ours_config = AdapterConfigFile {
        base_model: ckpt.base.clone(),
        rank: lora.rank,
        alpha: lora.alpha,
        target_modules: lora.target_modules.clone(),
        params: specs,
        context_length: None,
    };
    let ours_text = serde_json::to_string(&ours_config).expect("the config serializes");
    let st_error = |e: ::safetensors::SafeTensorError| refuse(PEFT_WEIGHTS, e);
    let bytes: Vec<(String, Vec<usize>, Vec<u8>)> =
        tensors.into_iter().map(|(name, shape, v)| (name, shape, f32_le_bytes(&v))).collect();
    let mut views = Vec::with_capacity(bytes.len());
    for (name, shape, data) in &bytes {
        views.push((name.clone(), TensorView::new(Dtype::F32, shape.clone(), data).map_err(st_error)?));
    }
    let metadata = [("format".to_string(), "pt".to_string()), (TINYGPT_METADATA.to_string(), ours_text)];
    let out = ::safetensors::serialize(views, Some(metadata.into_iter().collect())).map_err(st_error)?;
    Ok(PeftFiles { config_json, safetensors: canonical_header(out)? })
}

/// An adapter read from PEFT's files, as one of ours for a base of shape `model`.
#[derive(Clone, Debug, PartialEq)]
pub struct PeftImport {
    /// Its rank, alpha and targets.
    pub lora: LoraConfig,
    /// Its tensors, concatenated in canonical order (`adapter.f32`).
    pub weights: Vec<f32>,
    /// The base TinyGPT exported it from (name, weights hash), where the file records
    /// one; `None` for an adapter saved by `peft`.
    pub base: Option<BaseRef>,
    /// How it was read, in words: exactly as exported, or re-expressed (see the module docs).
    pub note: String,
}

/// LoRA's options, as read from PEFT's `adapter_config.json`.
struct PeftConfig {
    r: usize,
    alpha: f64,
    rslora: bool,
    rank_pattern: Vec<(String, usize)>,
    alpha_pattern: Vec<(String, f64)>,
}

impl PeftConfig {
    /// `(rank, scale)` PEFT gives module `name` (`transformer.h.0.attn.c_attn`).
    fn rank_and_scale(&self, name: &str) -> (usize, f64) {
        let r = self.rank_pattern.iter().find(|(k, _)| pattern_matches(k, name)).map_or(self.r, |p| p.1);
        let alpha =
            self.alpha_pattern.iter().find(|(k, _)| pattern_matches(k, name)).map_or(self.alpha, |p| p.1);
        let scale = if self.rslora { alpha / (r as f64).sqrt() } else { alpha / r as f64 };
        (r, scale)
    }
}

/// PEFT's `re.match(rf"(.*\.)?({key})$", name)` for a key of plain name characters, where
/// `.` matches any one character (keys were checked to be such by [`parse_config`]).
fn pattern_matches(key: &str, name: &str) -> bool {
    let whole = |tail: &str| {
        tail.len() == key.len() && tail.bytes().zip(key.bytes()).all(|(t, k)| k == b'.' || t == k)
    };
    whole(name) || name.match_indices('.').any(|(at, _)| whole(&name[at + 1..]))
}

/// Reads and checks `adapter_config.json`.
fn parse_config(bytes: &[u8]) -> Result<PeftConfig> {
    let bad = |reason: String| refuse(PEFT_CONFIG, reason);
    let json: Value = serde_json::from_slice(bytes).map_err(|e| bad(format!("not JSON: {e}")))?;
    let get = |key: &str| json.get(key).filter(|v| !v.is_null());
    match get("peft_type").and_then(Value::as_str) {
        Some("LORA") => {}
        other => {
            return Err(bad(format!(
                "peft_type is {}; TinyGPT reads LoRA adapters (\"LORA\")",
                other.map_or("missing".into(), |t| format!("{t:?}"))
            )))
        }
    }
    let set = |key: &str| match get(key) {
        None | Some(Value::Bool(false)) => false,
        Some(Value::Array(a)) => !a.is_empty(),
        Some(Value::Object(o)) => !o.is_empty(),
        Some(_) => true,
    };
    // Options that change what the adapter computes or holds, which TinyGPT's LoRA lacks.
    for (key, what) in [
        ("use_dora", "DoRA (a learned magnitude per output)"),
        ("lora_bias", "a trained bias on lora_B"),
        ("modules_to_save", "fully trained copies of other modules"),
        ("layer_replication", "replicated layers"),
        ("alora_invocation_tokens", "activated LoRA (after invocation tokens only)"),
        ("trainable_token_indices", "trainable token embeddings"),
        ("target_parameters", "LoRA on parameters rather than modules"),
        ("use_qalora", "QA-LoRA's pooled inputs"),
        ("use_bdlora", "block-diagonal LoRA"),
    ] {
        if set(key) {
            return Err(bad(format!("{key} is {}: {what} has no TinyGPT equivalent", get(key).unwrap())));
        }
    }
    if let Some(bias) = get("bias").filter(|b| b.as_str() != Some("none")) {
        return Err(bad(format!(
            "bias is {bias}: trained biases have no TinyGPT equivalent (the base's stay frozen; \"none\" is readable)"
        )));
    }
    let r = get("r")
        .and_then(Value::as_u64)
        .filter(|&r| r > 0)
        .ok_or_else(|| bad(format!("r is {}, not a positive whole number", json["r"])))? as usize;
    let positive = |v: &Value| v.as_f64().filter(|a| a.is_finite() && *a > 0.0);
    let alpha = get("lora_alpha")
        .and_then(positive)
        .ok_or_else(|| bad(format!("lora_alpha is {}, not a positive number", json["lora_alpha"])))?;
    let rslora = get("use_rslora").is_some_and(|v| v.as_bool() == Some(true));
    let pattern = |key: &str| -> Result<Vec<(String, Value)>> {
        let Some(map) = get(key) else { return Ok(Vec::new()) };
        let map: &Map<String, Value> =
            map.as_object().ok_or_else(|| bad(format!("{key} is not an object")))?;
        map.iter()
            .map(|(k, v)| {
                let plain = !k.is_empty() && k.bytes().all(|c| c.is_ascii_alphanumeric() || b"._-".contains(&c));
                if !plain {
                    return Err(bad(format!(
                        "{key} key {k:?} is a regular expression; TinyGPT reads plain module names (\"c_attn\", \"h.0.mlp.c_fc\")"
                    )));
                }
                Ok((k.clone(), v.clone()))
            })
            .collect()
    };
    let rank_pattern = pattern("rank_pattern")?
        .into_iter()
        .map(|(k, v)| match v.as_u64().filter(|&r| r > 0) {
            Some(r) => Ok((k, r as usize)),
            None => Err(bad(format!("rank_pattern gives {k:?} rank {v}, not a positive whole number"))),
        })
        .collect::<Result<_>>()?;
    let alpha_pattern = pattern("alpha_pattern")?
        .into_iter()
        .map(|(k, v)| match positive(&v) {
            Some(a) => Ok((k, a)),
            None => Err(bad(format!("alpha_pattern gives {k:?} alpha {v}, not a positive number"))),
        })
        .collect::<Result<_>>()?;
    Ok(PeftConfig { r, alpha, rslora, rank_pattern, alpha_pattern })
}

/// One module's adapter in one layer, as read: A `[rank, in]`, B `[out, rank]`, its scale.
struct Read {
    rank: usize,
    scale: f64,
    a: Vec<f32>,
    b: Vec<f32>,
}

/// PEFT's `adapter_config.json` and `adapter_model.safetensors` (read whole, with bounds,
/// by the caller) as an adapter of ours for a base of shape `model`. Every tensor must be
/// an A or B of one of GPT-2's four block linears in a layer the base has, F32, F16 or
/// BF16, and of the shape the base and the config's rank give; see the module docs for
/// what is refused and how an adapter `peft` saved is re-expressed.
pub fn import_peft(config_json: &[u8], safetensors: &[u8], model: &ModelConfig) -> Result<PeftImport> {
    let config = parse_config(config_json)?;
    let st = |reason: String| refuse(PEFT_WEIGHTS, reason);
    // The header is walked (bounded: one name at a time) and its names checked before the
    // safetensors crate builds its structure.
    let header = header(safetensors).map_err(st)?;
    let metadata = scan_header(header, |_, _| Ok(())).map_err(st)?;
    let n_layers = model.n_layers;
    check_names(
        header,
        |n| parse_name(n, n_layers).is_some(),
        |n| {
            format!(
                "tensor {n:?} is not a LoRA A or B of GPT-2's block linears ({PREFIX}h.N.{{attn.c_attn, attn.c_proj, \
                 mlp.c_fc, mlp.c_proj}}.lora_A/lora_B.weight, N below n_layer {n_layers}): TinyGPT has no equivalent"
            )
        },
    )
    .map_err(st)?;
    let tensors = SafeTensors::deserialize(safetensors).map_err(|e| st(e.to_string()))?;

    let mut read: BTreeMap<(usize, Module), Read> = BTreeMap::new();
    for layer in 0..n_layers {
        for module in Module::ALL {
            let (na, nb) = (tensor_name(layer, module, 'A'), tensor_name(layer, module, 'B'));
            let (a, b) = match (tensors.tensor(&na).ok(), tensors.tensor(&nb).ok()) {
                (None, None) => continue,
                (Some(a), Some(b)) => (a, b),
                (Some(_), None) => return Err(st(format!("tensor {na:?} has no {nb:?} beside it"))),
                (None, Some(_)) => return Err(st(format!("tensor {nb:?} has no {na:?} beside it"))),
            };
            let (rank, scale) = config.rank_and_scale(&format!("transformer.h.{layer}.{}", module.path()));
            let (out, inp) = module.dims(model);
            for (name, view, shape) in [(&na, &a, [rank, inp]), (&nb, &b, [out, rank])] {
                if !matches!(view.dtype(), Dtype::F32 | Dtype::F16 | Dtype::BF16) {
                    return Err(st(format!(
                        "tensor {name:?} is {:?}; F32, F16 or BF16 can be read",
                        view.dtype()
                    )));
                }
                if view.shape() != shape {
                    return Err(st(format!(
                        "tensor {name:?} has shape {:?}, but the base and {PEFT_CONFIG}'s rank {rank} give {shape:?}",
                        view.shape()
                    )));
                }
            }
            let (a, b) = (values(&a), values(&b));
            for (name, v) in [(&na, &a), (&nb, &b)] {
                if let Some(at) = v.iter().position(|x| !x.is_finite()) {
                    return Err(st(format!("tensor {name:?}: value {at} is {}", v[at])));
                }
            }
            read.insert((layer, module), Read { rank, scale, a, b });
        }
    }
    if read.is_empty() {
        return Err(st("it holds no LoRA tensors".into()));
    }

    let recorded = match metadata.get(TINYGPT_METADATA) {
        Some(text) => Some(from_json::<AdapterConfigFile>(TINYGPT_METADATA, text.as_bytes())?),
        None => None,
    };
    if let Some(ours) = &recorded {
        if let Some((lora, weights)) = as_exported(ours, model, &read) {
            let note = format!("read exactly as TinyGPT exported it (base {})", ours.base_model.name);
            return Ok(PeftImport { lora, weights, base: Some(ours.base_model.clone()), note });
        }
    }
    let (lora, weights, note) = re_expressed(model, &read)?;
    let note = match &recorded {
        Some(_) => {
            format!("{note} (the file's TinyGPT record no longer matches its tensors, so it was not used)")
        }
        None => note,
    };
    Ok(PeftImport { lora, weights, base: recorded.map(|r| r.base_model), note })
}

/// The adapter our export wrote, if `read` is still exactly that: every module in every
/// layer at the rank and scale export gives it, and `c_attn`'s B zero outside its blocks.
fn as_exported(
    ours: &AdapterConfigFile,
    model: &ModelConfig,
    read: &BTreeMap<(usize, Module), Read>,
) -> Option<(LoraConfig, Vec<f32>)> {
    let names: Vec<&str> = ours.target_modules.iter().map(String::as_str).collect();
    let lora = LoraConfig::new(ours.rank, ours.alpha, &names).ok().filter(|l| l.validate(model).is_ok())?;
    let (r, scale) = (lora.rank, lora.alpha as f64 / lora.rank as f64);
    let targets = lora.targets();
    let qkv: Vec<LinearKind> =
        targets.iter().copied().filter(|k| Module::of(*k).0 == Module::CAttn).collect();
    let modules: Vec<Module> =
        Module::ALL.into_iter().filter(|m| m.kinds().iter().any(|k| targets.contains(k))).collect();
    let expected = model.n_layers * modules.len();
    if read.len() != expected || read.iter().any(|((_, m), _)| !modules.contains(m)) {
        return None;
    }
    let d = model.d_model;
    let mut weights = Vec::with_capacity(lora.param_count(model));
    for layer in 0..model.n_layers {
        for &kind in &targets {
            let (module, part) = Module::of(kind);
            let m = read.get(&(layer, module))?;
            // Scales are compared as PEFT computes them: n·alpha / (n·r) is alpha / r exactly.
            if m.scale != scale {
                return None;
            }
            if module != Module::CAttn {
                if m.rank != r {
                    return None;
                }
                weights.extend_from_slice(&m.a);
                weights.extend_from_slice(&m.b);
                continue;
            }
            let rank = qkv.len() * r;
            if m.rank != rank {
                return None;
            }
            let j = qkv.iter().position(|&k| k == kind).expect("a c_attn target");
            weights.extend_from_slice(&m.a[j * r * d..(j + 1) * r * d]);
            for o in 0..d {
                let row = (part * d + o) * rank + j * r;
                weights.extend_from_slice(&m.b[row..row + r]);
            }
        }
    }
    // Every entry of c_attn's B outside the blocks placed above must be zero.
    for layer in 0..model.n_layers {
        if let Some(m) = read.get(&(layer, Module::CAttn)) {
            for (row, values) in m.b.chunks_exact(m.rank).enumerate() {
                let part = row / d;
                let own = qkv.iter().position(|k| Module::of(*k).1 == part);
                let outside = values.iter().enumerate().any(|(col, &v)| v != 0.0 && Some(col / r) != own);
                if outside {
                    return None;
                }
            }
        }
    }
    Some((lora, weights))
}

/// Any PEFT adapter as one of ours computing the same function (module docs).
fn re_expressed(
    model: &ModelConfig,
    read: &BTreeMap<(usize, Module), Read>,
) -> Result<(LoraConfig, Vec<f32>, String)> {
    let rank = read.values().map(|m| m.rank).max().expect("at least one module");
    let top = read.values().map(|m| m.scale).fold(0f64, f64::max);
    let alpha = (top * rank as f64) as f32;
    let mut kinds: Vec<&str> = Vec::new();
    for module in Module::ALL {
        if read.keys().any(|(_, m)| *m == module) {
            kinds.extend(module.kinds().iter().map(|k| k.name()));
        }
    }
    let lora = LoraConfig::new(rank, alpha, &kinds)
        .and_then(|l| l.validate(model).map(|()| l))
        .map_err(|e| refuse(PEFT_CONFIG, format!("as a TinyGPT adapter: {e}")))?;
    let ours_scale = lora.scale() as f64;
    let specs = lora.tensor_specs(model);
    let mut weights = vec![0f32; lora.param_count(model)];
    let d = model.d_model;
    let mut padded = false;
    let mut rescaled = false;
    for layer in 0..model.n_layers {
        for kind in lora.targets() {
            let (module, part) = Module::of(kind);
            let Some(m) = read.get(&(layer, module)) else { continue };
            let name = |ab: char| format!("blocks.{layer}.{}.lora_{ab}.weight", kind.path());
            let spec = |ab: char| specs.iter().find(|s| s.name == name(ab)).expect("a target's tensor");
            let (sa, sb) = (spec('A'), spec('B'));
            let inp = sa.shape[1];
            // A's rows past the module's rank stay zero, as do B's columns.
            weights[sa.offset..][..m.rank * inp].copy_from_slice(&m.a);
            let factor = m.scale / ours_scale;
            padded |= m.rank != rank;
            rescaled |= factor != 1.0;
            let out = sb.shape[0];
            let first = if module == Module::CAttn { part * d } else { 0 };
            for o in 0..out {
                for k in 0..m.rank {
                    let v = m.b[(first + o) * m.rank + k];
                    weights[sb.offset + o * rank + k] =
                        if factor == 1.0 { v } else { (v as f64 * factor) as f32 };
                }
            }
        }
    }
    check_finite(PEFT_WEIGHTS, &weights, &specs)?;
    let mut how = vec![];
    if read.keys().any(|(_, m)| *m == Module::CAttn) {
        how.push("c_attn as q_proj, k_proj and v_proj sharing its A".to_string());
    }
    if padded {
        how.push(format!("ranks padded with zeros to {rank}"));
    }
    if rescaled {
        how.push(format!("B scaled to one scale ({})", lora.scale()));
    }
    if read.len()
        != model.n_layers * read.keys().map(|k| k.1).collect::<std::collections::BTreeSet<_>>().len()
    {
        how.push("zeros where a layer had no adapter".into());
    }
    let note = if how.is_empty() {
        "read from a PEFT adapter".to_string()
    } else {
        format!("read from a PEFT adapter: {}", how.join("; "))
    };
    Ok((lora, weights, note))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pattern_keys_match_as_peft_matches_them() {
        let name = "transformer.h.10.attn.c_attn";
        for key in ["c_attn", "attn.c_attn", "h.10.attn.c_attn", name] {
            assert!(pattern_matches(key, name), "{key}");
        }
        for key in ["attn", "h.1.attn.c_attn", "0.attn.c_attn", "c_att", "mlp.c_attn"] {
            assert!(!pattern_matches(key, name), "{key}");
        }
        // PEFT's `.` is a regular expression's: any one character.
        assert!(pattern_matches("mlp.c.fc", "transformer.h.0.mlp.c_fc"));
    }

    #[test]
    fn names_parse_only_as_written() {
        let model = 2;
        assert_eq!(
            parse_name("base_model.model.transformer.h.1.mlp.c_proj.lora_B.weight", model),
            Some((1, Module::MlpCProj, 'B'))
        );
        for bad in [
            "base_model.model.transformer.h.2.attn.c_attn.lora_A.weight",
            "base_model.model.transformer.h.01.attn.c_attn.lora_A.weight",
            "base_model.model.transformer.h.+1.attn.c_attn.lora_A.weight",
            "base_model.model.transformer.wte.lora_embedding_A",
            "base_model.model.transformer.h.0.attn.c_attn.lora_A.default.weight",
            "base_model.model.transformer.h.0.attn.c_attn.lora_B.bias",
            "base_model.model.lm_head.lora_A.weight",
        ] {
            assert_eq!(parse_name(bad, model), None, "{bad}");
        }
    }

    #[test]
    fn options_without_an_equivalent_are_refused_by_name() {
        let base = json!({"peft_type": "LORA", "r": 4, "lora_alpha": 8, "bias": "none", "use_dora": false,
                          "modules_to_save": null, "rank_pattern": {}, "alpha_pattern": {}});
        let with = |key: &str, v: Value| {
            let mut c = base.clone();
            c[key] = v;
            match parse_config(&serde_json::to_vec(&c).unwrap()) {
                Ok(_) => String::new(),
                Err(e) => e.to_string(),
            }
        };
        assert_eq!(with("r", json!(4)), "");
        for (key, v, says) in [
            ("use_dora", json!(true), "DoRA"),
            ("bias", json!("lora_only"), "bias"),
            ("modules_to_save", json!(["lm_head"]), "modules_to_save"),
            ("peft_type", json!("IA3"), "\"IA3\""),
            ("r", json!(0), "r is 0"),
            ("lora_alpha", json!(-1), "lora_alpha"),
            ("rank_pattern", json!({"^transformer.*c_fc$": 2}), "regular expression"),
        ] {
            let err = with(key, v);
            assert!(err.contains(says) && err.contains(PEFT_CONFIG), "{key}: {err}");
        }
        let rs = parse_config(
            &serde_json::to_vec(&json!({"peft_type": "LORA", "r": 4, "lora_alpha": 8,
            "use_rslora": true, "rank_pattern": {"c_fc": 16}, "alpha_pattern": {"mlp.c_fc": 2}}))
            .unwrap(),
        )
        .unwrap();
        assert_eq!(rs.rank_and_scale("transformer.h.0.attn.c_attn"), (4, 4.0));
        assert_eq!(rs.rank_and_scale("transformer.h.0.mlp.c_fc"), (16, 0.5));
    }
}

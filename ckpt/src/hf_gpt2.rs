//! Hugging Face's GPT-2 folder (`config.json` + `model.safetensors`): gpt2, distilgpt2,
//! gpt2-medium or a user's own fine-tune, as a weights-only checkpoint.
//!
//! GPT-2 is our architecture (pre-LayerNorm blocks, a tanh-GELU MLP, learned positions,
//! biases, the head tied to the token embedding); what differs is the layout. Its linears
//! are `Conv1D`s, stored `[in, out]`, so each is transposed into our `[out, in]`; `c_attn`
//! holds q, k and v side by side along `out` (columns `[q | k | v]`) and is split; names
//! are `transformer.wte.weight`, `transformer.h.{i}.attn.c_attn.weight`, … (the
//! `transformer.` prefix may be absent, as in files saved from a bare `GPT2Model`). The
//! causal-mask buffers `attn.bias` / `attn.masked_bias` of older files are skipped, and an
//! `lm_head.weight`, if present, must be bit-for-bit `wte` (tied).
//!
//! `config.json` gives `n_layer`, `n_head`, `n_embd`, `n_positions`, `vocab_size`,
//! `n_inner` (null: 4 × n_embd), `layer_norm_epsilon` and `activation_function`. Import
//! refuses, naming it, what TinyGPT would not compute the same way: an activation other
//! than the tanh GELU (`gelu_new`, `gelu_pytorch_tanh`), an epsilon other than 1e-5,
//! `scale_attn_weights: false`, `scale_attn_by_inverse_layer_idx: true`, untied
//! embeddings, a `model_type` other than `gpt2`, a vocabulary other than the tokenizer's
//! (the caller reads `vocab.json` + `merges.txt` and passes its name and size), a missing
//! or unknown tensor, and a tensor whose shape disagrees with `config.json`. Tensors may
//! be F32, F16 or BF16 (widened to f32 exactly).

use std::collections::{HashMap, HashSet};

use ::safetensors::{Dtype, SafeTensors};
use serde_json::Value;
use tinygpt_run::{ModelConfig, TensorSpec};

use crate::checkpoint::{check_finite, Checkpoint};
use crate::error::{CkptError, Result};
use crate::layout::{check_model_config, WEIGHTS};
use crate::nanogpt::{fresh_progress, ImportDefaults};
use crate::safetensors::{check_names, header, scan_header};

fn refuse(reason: impl ToString) -> CkptError {
    CkptError::HfGpt2 { reason: reason.to_string() }
}

/// The tokenizer the folder's `vocab.json` + `merges.txt` make, as the caller read it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct HfTokenizer {
    /// Its name (`bpe-…`), recorded in `model_config.json`.
    pub name: String,
    /// Tokens in `vocab.json`.
    pub vocab_size: usize,
}

/// How one of our parameters is read from a GPT-2 tensor.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Take {
    /// As stored.
    Whole,
    /// A Conv1D weight `[in, out]`, transposed to `[out, in]`.
    Transposed,
    /// Columns `part·C .. (part+1)·C` of `c_attn`'s `[C, 3C]` weight, transposed.
    AttnWeight(usize),
    /// Elements `part·C .. (part+1)·C` of `c_attn`'s `[3C]` bias.
    AttnBias(usize),
}

/// One GPT-2 tensor: its name without the `transformer.` prefix, its shape, and the
/// parameters of ours it fills.
struct HfTensor {
    name: String,
    shape: Vec<usize>,
    parts: Vec<(String, Take)>,
}

/// The name table, for `config`'s sizes.
fn hf_tensors(c: &ModelConfig) -> Vec<HfTensor> {
    let (v, t, d, f) = (c.vocab_size, c.context_length, c.d_model, c.d_mlp);
    let one = |name: String, shape: Vec<usize>, ours: String, take| HfTensor {
        name,
        shape,
        parts: vec![(ours, take)],
    };
    let mut out = vec![
        one("wte.weight".into(), vec![v, d], "token_embedding".into(), Take::Whole),
        one("wpe.weight".into(), vec![t, d], "position_embedding".into(), Take::Whole),
    ];
    for i in 0..c.n_layers {
        let (h, b) = (format!("h.{i}"), format!("blocks.{i}"));
        for (theirs, ours) in [("ln_1", "ln1"), ("ln_2", "ln2")] {
            for kind in ["weight", "bias"] {
                out.push(one(
                    format!("{h}.{theirs}.{kind}"),
                    vec![d],
                    format!("{b}.{ours}.{kind}"),
                    Take::Whole,
                ));
            }
        }
        let qkv = ["q_proj", "k_proj", "v_proj"];
        out.push(HfTensor {
            name: format!("{h}.attn.c_attn.weight"),
            shape: vec![d, 3 * d],
            parts: (0..3).map(|p| (format!("{b}.attn.{}.weight", qkv[p]), Take::AttnWeight(p))).collect(),
        });
        out.push(HfTensor {
            name: format!("{h}.attn.c_attn.bias"),
            shape: vec![3 * d],
            parts: (0..3).map(|p| (format!("{b}.attn.{}.bias", qkv[p]), Take::AttnBias(p))).collect(),
        });
        for (theirs, ours, din, dout) in [
            ("attn.c_proj", "attn.o_proj", d, d),
            ("mlp.c_fc", "mlp.fc_in", d, f),
            ("mlp.c_proj", "mlp.fc_out", f, d),
        ] {
            out.push(one(
                format!("{h}.{theirs}.weight"),
                vec![din, dout],
                format!("{b}.{ours}.weight"),
                Take::Transposed,
            ));
            out.push(one(format!("{h}.{theirs}.bias"), vec![dout], format!("{b}.{ours}.bias"), Take::Whole));
        }
    }
    for kind in ["weight", "bias"] {
        out.push(one(format!("ln_f.{kind}"), vec![d], format!("ln_final.{kind}"), Take::Whole));
    }
    out
}

/// The tied head's name.
const LM_HEAD: &str = "lm_head.weight";
/// The prefix a `GPT2LMHeadModel` puts on its body's tensors.
const PREFIX: &str = "transformer.";

/// A name without the `transformer.` prefix.
fn bare(name: &str) -> &str {
    name.strip_prefix(PREFIX).unwrap_or(name)
}

/// `h.{i}.attn.bias` / `h.{i}.attn.masked_bias`: causal-mask buffers, not parameters.
fn is_mask_buffer(name: &str, n_layers: usize) -> bool {
    bare(name).strip_prefix("h.").and_then(|rest| rest.split_once('.')).is_some_and(|(i, rest)| {
        i.parse::<usize>().is_ok_and(|i| i < n_layers) && matches!(rest, "attn.bias" | "attn.masked_bias")
    })
}

/// The model config from `config.json`, refusing what TinyGPT cannot run.
pub fn config_from_hf_json(config_json: &[u8], tokenizer: &HfTokenizer) -> Result<ModelConfig> {
    let json: Value = serde_json::from_slice(config_json).map_err(|e| refuse(format!("config.json: {e}")))?;
    let get = |key: &str| json.get(key).filter(|v| !v.is_null());
    let int = |key: &str| -> Result<usize> {
        let v = get(key).ok_or_else(|| {
            refuse(format!("config.json has no {key:?}; GPT-2's config (n_layer, n_head, n_embd, n_positions, vocab_size) is needed"))
        })?;
        v.as_u64()
            .and_then(|n| usize::try_from(n).ok())
            .ok_or_else(|| refuse(format!("config.json: {key} is {v}, not a whole number")))
    };
    if let Some(kind) = get("model_type") {
        if kind.as_str() != Some("gpt2") {
            return Err(refuse(format!(
                "config.json: model_type is {kind}, but only \"gpt2\" is GPT-2's layout"
            )));
        }
    }
    let activation = get("activation_function").and_then(Value::as_str).unwrap_or("gelu_new");
    if !matches!(activation, "gelu_new" | "gelu_pytorch_tanh" | "gelu_fast") {
        return Err(refuse(format!(
            "config.json: activation_function is {activation:?}, but TinyGPT's MLP uses the tanh GELU (\"gelu_new\", as GPT-2)"
        )));
    }
    if let Some(eps) = get("layer_norm_epsilon") {
        if eps.as_f64().is_none_or(|e| (e - 1e-5).abs() > 1e-12) {
            return Err(refuse(format!(
                "config.json: layer_norm_epsilon is {eps}, but TinyGPT's LayerNorm uses 1e-5"
            )));
        }
    }
    for (key, want) in [
        ("scale_attn_weights", true),
        ("scale_attn_by_inverse_layer_idx", false),
        ("tie_word_embeddings", true),
    ] {
        if let Some(v) = get(key) {
            if v.as_bool() != Some(want) {
                return Err(refuse(format!("config.json: {key} is {v}, but TinyGPT computes it as {want}")));
            }
        }
    }
    let vocab_size = int("vocab_size")?;
    if vocab_size != tokenizer.vocab_size {
        return Err(refuse(format!(
            "config.json: vocab_size is {vocab_size}, but vocab.json has {} tokens",
            tokenizer.vocab_size
        )));
    }
    let d_model = int("n_embd")?;
    let d_mlp = match get("n_inner") {
        None => d_model.saturating_mul(4),
        Some(_) => int("n_inner")?,
    };
    Ok(ModelConfig {
        model_name: get("_name_or_path")
            .and_then(Value::as_str)
            .filter(|s| !s.is_empty())
            .unwrap_or("gpt2-import")
            .to_string(),
        vocab_size,
        tokenizer: tokenizer.name.clone(),
        context_length: int("n_positions")?,
        n_layers: int("n_layer")?,
        n_heads: int("n_head")?,
        d_model,
        d_mlp,
        dropout: 0.0,
        ..ModelConfig::reference()
    })
}

/// A tensor's values widened to f32 (F32, F16 or BF16; others are refused before reading).
pub(crate) fn values(view: &::safetensors::tensor::TensorView<'_>) -> Vec<f32> {
    let data = view.data();
    match view.dtype() {
        Dtype::F32 => {
            data.chunks_exact(4).map(|b| f32::from_le_bytes(b.try_into().expect("4 bytes"))).collect()
        }
        Dtype::BF16 => data
            .chunks_exact(2)
            .map(|b| f32::from_bits((u16::from_le_bytes([b[0], b[1]]) as u32) << 16))
            .collect(),
        Dtype::F16 => data.chunks_exact(2).map(|b| f16_to_f32(u16::from_le_bytes([b[0], b[1]]))).collect(),
        _ => unreachable!("dtypes are checked before reading"),
    }
}

/// IEEE half → single, exactly.
fn f16_to_f32(h: u16) -> f32 {
    let sign = ((h >> 15) as u32) << 31;
    let exp = ((h >> 10) & 0x1f) as u32;
    let frac = (h & 0x3ff) as u32;
    let bits = match (exp, frac) {
        (0, 0) => sign,
        (0, _) => {
            // Subnormal: normalise.
            let shift = frac.leading_zeros() - 21;
            sign | ((113 - shift) << 23) | ((frac << shift) & 0x3ff) << 13
        }
        (0x1f, _) => sign | 0x7f80_0000 | (frac << 13),
        _ => sign | ((exp + 112) << 23) | (frac << 13),
    };
    f32::from_bits(bits)
}

/// A Hugging Face GPT-2 folder's `config.json` and `model.safetensors` (read whole, with
/// bounds, by the caller) as a weights-only checkpoint at step 0 with `defaults`' training
/// config and dataset. See the module docs for what is refused.
pub fn import_hf_gpt2(
    config_json: &[u8],
    safetensors: &[u8],
    tokenizer: &HfTokenizer,
    defaults: ImportDefaults,
) -> Result<Checkpoint> {
    let config = config_from_hf_json(config_json, tokenizer)?;
    let params = check_model_config("config.json", &config)?;
    let table = hf_tensors(&config);
    let all_specs = config.tensor_specs();
    let specs: HashMap<&str, &TensorSpec> = all_specs.iter().map(|s| (s.name.as_str(), s)).collect();

    // The header is walked (bounded: one name at a time) and its names checked before the
    // safetensors crate builds its structure.
    let header = header(safetensors).map_err(|e| refuse(format!("model.safetensors: {e}")))?;
    scan_header(header, |_, _| Ok(())).map_err(|e| refuse(format!("model.safetensors: {e}")))?;
    let names: HashSet<&str> = table.iter().map(|t| t.name.as_str()).collect();
    let known = |n: &str| names.contains(bare(n)) || n == LM_HEAD || is_mask_buffer(n, config.n_layers);
    let unknown = |n: &str| {
        format!(
            "model.safetensors: tensor {n:?} is not a parameter of GPT-2 with these sizes (n_layer {})",
            config.n_layers
        )
    };
    check_names(header, known, unknown).map_err(refuse)?;
    let tensors =
        SafeTensors::deserialize(safetensors).map_err(|e| refuse(format!("model.safetensors: {e}")))?;
    let find = |name: &str| tensors.tensor(&format!("{PREFIX}{name}")).or_else(|_| tensors.tensor(name)).ok();
    // Every tensor is checked (dtype, shape) before the weights are allocated.
    let check = |name: &str, view: &::safetensors::tensor::TensorView<'_>, shape: &[usize]| {
        if !matches!(view.dtype(), Dtype::F32 | Dtype::F16 | Dtype::BF16) {
            return Err(refuse(format!(
                "model.safetensors: tensor {name:?} is {:?}; F32, F16 or BF16 can be read",
                view.dtype()
            )));
        }
        if view.shape() != shape {
            return Err(refuse(format!(
                "model.safetensors: tensor {name:?} has shape {:?}, but config.json gives {shape:?}",
                view.shape()
            )));
        }
        Ok(())
    };
    let mut views = Vec::with_capacity(table.len());
    for tensor in &table {
        let view = find(&tensor.name).ok_or_else(|| {
            refuse(format!("model.safetensors has no tensor {:?} (or {PREFIX}{})", tensor.name, tensor.name))
        })?;
        check(&tensor.name, &view, &tensor.shape)?;
        views.push((tensor, view));
    }
    let head = tensors.tensor(LM_HEAD).ok();
    if let Some(view) = &head {
        check(LM_HEAD, view, &[config.vocab_size, config.d_model])?;
    }

    let mut weights = vec![0f32; params];
    let d = config.d_model;
    for (tensor, view) in &views {
        let src = values(view);
        let cols = tensor.shape.last().copied().unwrap_or(1);
        for (ours, take) in &tensor.parts {
            let spec = specs.get(ours.as_str()).expect("the table names canonical parameters");
            let dst = &mut weights[spec.offset..spec.offset + spec.numel()];
            match *take {
                Take::Whole => dst.copy_from_slice(&src),
                Take::AttnBias(p) => dst.copy_from_slice(&src[p * d..(p + 1) * d]),
                Take::Transposed | Take::AttnWeight(_) => {
                    // ours[o][i] = theirs[i][first + o]; theirs is [rows = in, cols].
                    let first = if let Take::AttnWeight(p) = *take { p * d } else { 0 };
                    let (outs, ins) = (spec.shape[0], spec.shape[1]);
                    for o in 0..outs {
                        for i in 0..ins {
                            dst[o * ins + i] = src[i * cols + first + o];
                        }
                    }
                }
            }
        }
    }
    if let Some(view) = &head {
        let wte = specs["token_embedding"];
        let own = &weights[wte.offset..wte.offset + wte.numel()];
        if let Some(at) = values(view).iter().zip(own).position(|(a, b)| a.to_bits() != b.to_bits()) {
            return Err(refuse(format!(
                "{LM_HEAD} differs from transformer.wte.weight (first at element {at}); TinyGPT ties them, so an untied head cannot be imported"
            )));
        }
    }
    check_finite(WEIGHTS, &weights, &all_specs)?;

    let ImportDefaults { training, dataset } = defaults;
    let progress = fresh_progress(&training);
    let ckpt = Checkpoint {
        model_config: config,
        training_config: training,
        dataset,
        progress,
        loss_history: Vec::new(),
        weights,
        adam_m: Vec::new(),
        adam_v: Vec::new(),
    };
    ckpt.check()?;
    Ok(ckpt)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_table_covers_every_parameter_once() {
        let config = ModelConfig { n_layers: 3, ..ModelConfig::reference() };
        let mut covered: Vec<String> =
            hf_tensors(&config).into_iter().flat_map(|t| t.parts.into_iter().map(|p| p.0)).collect();
        covered.sort_unstable();
        let mut ours: Vec<String> = config.tensor_specs().into_iter().map(|s| s.name).collect();
        ours.sort_unstable();
        assert_eq!(covered, ours);
    }

    #[test]
    fn half_floats_widen_exactly() {
        for (h, f) in
            [(0x3c00, 1.0f32), (0xc000, -2.0), (0x0001, 5.960_464_5e-8), (0x7bff, 65504.0), (0x0000, 0.0)]
        {
            assert_eq!(f16_to_f32(h), f, "{h:#x}");
        }
        assert!(f16_to_f32(0x7e00).is_nan());
        assert_eq!(f16_to_f32(0x7c00), f32::INFINITY);
    }

    #[test]
    fn mask_buffers_are_recognised_with_or_without_the_prefix() {
        assert!(is_mask_buffer("transformer.h.1.attn.bias", 2));
        assert!(is_mask_buffer("h.0.attn.masked_bias", 2));
        assert!(!is_mask_buffer("h.2.attn.bias", 2));
        assert!(!is_mask_buffer("h.0.attn.c_attn.bias", 2));
    }
}

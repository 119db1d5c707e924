//! LoRA adapters and Python's `peft`: `tinygpt lora export --format peft OUT_DIR`,
//! `tinygpt lora import --format peft --in DIR`, and `tinygpt lora logits`, which writes
//! the logits of base + adapter on a text for another implementation to compare with.
//!
//! A PEFT folder is `adapter_config.json` + `adapter_model.safetensors` in the names `peft`
//! uses for GPT-2 (`tinygpt_ckpt::export_peft`, whose docs give the mapping): it loads
//! with `PeftModel.from_pretrained(GPT2LMHeadModel.from_pretrained(GPT2_DIR), DIR)` on the
//! Hugging Face GPT-2 the base was imported from (`tinygpt import --format hf-gpt2`), and
//! one saved by `peft`'s `save_pretrained` imports here. The adapter folder itself keeps
//! its own crash-safe generations; a PEFT folder is weights only.

use std::path::Path;

use safetensors::tensor::TensorView;
use safetensors::Dtype;
use tinygpt_ckpt::{
    create_dir_durably, export_peft, import_peft, write_file_atomically, AdapterCheckpoint, AdapterStore,
    BaseRef, DirStore, PEFT_CONFIG, PEFT_WEIGHTS,
};
use tinygpt_model::{Gpt, KvCache, Params};
use tinygpt_optim::TrainingConfig;
use tinygpt_tensor::{block_on, Backend};

use crate::args::{LoraExportArgs, LoraImportArgs, LoraLogitsArgs};
use crate::base::{adapter_dir, load_adapter, load_base, merged_weights};
use crate::commands::lora::check_adapter_out;
use crate::commands::transfer::read_safetensors;
use crate::compute::{dispatch, WithBackend};
use crate::error::CliError;
use crate::tokenizer;

/// The largest `adapter_config.json` read (PEFT's is about 1 KiB).
const MAX_CONFIG_BYTES: u64 = 1 << 20;
/// The largest `adapter_model.safetensors` read (1 GiB, as `lora import` of our own file).
const MAX_WEIGHTS_BYTES: u64 = 1 << 30;

fn io<'a>(what: &'static str, path: &'a Path) -> impl FnOnce(std::io::Error) -> CliError + 'a {
    move |source| CliError::Io { what, path: path.to_path_buf(), source }
}

/// `tinygpt lora export --format peft`: the adapter as a PEFT folder `--out` (created; an
/// existing one must hold nothing but PEFT's two files, which are replaced).
pub fn export(args: LoraExportArgs) -> Result<(), CliError> {
    let base = load_base(&args.base, None)?;
    let adapter = load_adapter(&base, &adapter_dir(&base, &args.adapter))?;
    let name =
        args.base_model_name_or_path.clone().unwrap_or_else(|| base.ckpt.model_config.model_name.clone());
    let files = export_peft(&adapter, &name)?;
    let out = &args.out;
    if out.exists() {
        let entries = std::fs::read_dir(out).map_err(|_| {
            CliError::Usage(format!("--out {}: is a file; --format peft writes a folder", out.display()))
        })?;
        for entry in entries {
            let entry = entry.map_err(io("cannot read", out))?;
            let file = entry.file_name();
            if file != PEFT_CONFIG && file != PEFT_WEIGHTS {
                return Err(CliError::Usage(format!(
                    "--out {} holds {}: a PEFT folder holds only {PEFT_CONFIG} and {PEFT_WEIGHTS}; choose another --out",
                    out.display(),
                    file.to_string_lossy()
                )));
            }
        }
    }
    create_dir_durably(out).map_err(io("cannot create", out))?;
    // Weights first: a folder whose config exists has its weights beside it.
    for (file, bytes) in [(PEFT_WEIGHTS, &files.safetensors), (PEFT_CONFIG, &files.config_json)] {
        let path = out.join(file);
        write_file_atomically(&path, bytes).map_err(io("cannot write", &path))?;
    }
    eprintln!(
        "wrote {} ({PEFT_CONFIG}, {PEFT_WEIGHTS}: {} bytes; rank {}, alpha {}, {}); in Python: \
         PeftModel.from_pretrained(GPT2LMHeadModel.from_pretrained(<the GPT-2 folder>), {:?})",
        out.display(),
        files.safetensors.len(),
        adapter.lora.rank,
        adapter.lora.alpha,
        adapter.lora.target_modules.join(","),
        out.display().to_string()
    );
    Ok(())
}

/// `tinygpt lora import --format peft`: a PEFT folder (from `save_pretrained`, or our
/// export) into a new adapter folder `--out` on `--base`. An adapter our export wrote is
/// checked against the base it was trained on; one `peft` wrote is checked by shape and
/// recorded as this base's.
pub fn import(args: LoraImportArgs) -> Result<(), CliError> {
    let base = load_base(&args.base, None)?;
    check_adapter_out(&args.out)?;
    let dir = &args.input;
    if !dir.is_dir() {
        return Err(CliError::Usage(format!(
            "--in {}: --format peft reads a folder ({PEFT_CONFIG}, {PEFT_WEIGHTS}: what save_pretrained writes)",
            dir.display()
        )));
    }
    let config =
        tokenizer::read_bounded(&dir.join(PEFT_CONFIG), MAX_CONFIG_BYTES, "PEFT's config is needed")?;
    let weights_path = dir.join(PEFT_WEIGHTS);
    if !weights_path.exists() {
        return Err(CliError::Usage(format!(
            "{} is missing: the weights are read from {PEFT_WEIGHTS} (an adapter_model.bin is not read; \
             save with safe_serialization=True)",
            weights_path.display()
        )));
    }
    let weights = read_safetensors(&weights_path, MAX_WEIGHTS_BYTES)?;
    let imported = import_peft(&config, &weights, &base.ckpt.model_config)
        .map_err(|source| CliError::Import { path: dir.clone(), source })?;
    let here = BaseRef { name: base.name.clone(), weights_sha256: base.weights_sha256() };
    let ckpt = AdapterCheckpoint {
        base: imported.base.clone().unwrap_or(here),
        model_config: base.ckpt.model_config.clone(),
        lora: imported.lora,
        context_length: None,
        training_config: TrainingConfig::default(),
        dataset: base.ckpt.dataset.clone(),
        progress: base.ckpt.progress.clone(),
        loss_history: Vec::new(),
        weights: imported.weights,
        adam_m: Vec::new(),
        adam_v: Vec::new(),
    };
    ckpt.check_base(&base.name, &base.ckpt.weights)?;
    if args.out.join("latest.json").exists() {
        return Err(CliError::Usage(format!(
            "{} holds an adapter already; choose another --out",
            args.out.display()
        )));
    }
    block_on(AdapterStore::new(DirStore::open(&args.out)?).save(&ckpt))?;
    eprintln!(
        "imported {} into {}: rank {}, alpha {}, {}; {}",
        dir.display(),
        args.out.display(),
        ckpt.lora.rank,
        ckpt.lora.alpha,
        ckpt.lora.target_modules.join(","),
        imported.note
    );
    Ok(())
}

/// `tinygpt lora logits`: the base's tokenizer reads `--text` (or `--ids` are given), and
/// `--out` gets, as
/// `.safetensors`, `ids` (I64 `[T]`) and the logits at every position (F32 `[T, vocab]`) of
/// the base with `--adapter` folded in, computed as `sample --adapter` computes them (merged
/// weights, the key/value cache, one position at a time).
pub fn logits(args: LoraLogitsArgs) -> Result<(), CliError> {
    let base = load_base(&args.base, None)?;
    let weights = match &args.adapter {
        Some(a) => merged_weights(&base, &load_adapter(&base, &adapter_dir(&base, a))?)?,
        None => base.ckpt.weights.clone(),
    };
    let ids = match (&args.ids, &args.text) {
        (Some(ids), _) => ids.clone(),
        (None, text) => tokenizer::for_model(&base.ckpt.model_config, base.dir.as_deref())?
            .encode(text.as_deref().unwrap_or_default().as_bytes()),
    };
    let (context, vocab) = (base.ckpt.model_config.context_length, base.ckpt.model_config.vocab_size);
    if ids.is_empty() || ids.len() > context {
        return Err(CliError::Usage(format!(
            "the text is {} tokens; give 1 to {context} (the base's context length)",
            ids.len()
        )));
    }
    if let Some(id) = ids.iter().find(|&&id| id as usize >= vocab) {
        return Err(CliError::Usage(format!("--ids: {id} is not below the vocabulary size {vocab}")));
    }
    let config = tinygpt_model::ModelConfig { dropout: 0.0, ..base.ckpt.model_config.clone() };
    let compute = args.compute.clone();
    dispatch(&compute, Logits { args, config, weights, ids })
}

struct Logits {
    args: LoraLogitsArgs,
    config: tinygpt_model::ModelConfig,
    weights: Vec<f32>,
    ids: Vec<u32>,
}

impl WithBackend for Logits {
    type Output = ();

    fn run<B: Backend>(self, backend: B, _threads: usize) -> Result<(), CliError> {
        let Logits { args, config, weights, ids } = self;
        let model = Gpt::new(config.clone(), Params::from_flat(&backend, &config, &weights)?)?;
        let mut cache = KvCache::new(&model);
        let mut values = Vec::with_capacity(ids.len() * config.vocab_size);
        for &id in &ids {
            values.extend(block_on(model.forward_cached_ids(&mut cache, &[id]).read())?);
        }
        let id_bytes: Vec<u8> = ids.iter().flat_map(|&t| (t as i64).to_le_bytes()).collect();
        let value_bytes: Vec<u8> = values.iter().flat_map(|v| v.to_le_bytes()).collect();
        let st = |e: safetensors::SafeTensorError| CliError::Usage(format!("cannot write the logits: {e}"));
        let views = vec![
            ("ids", TensorView::new(Dtype::I64, vec![ids.len()], &id_bytes).map_err(st)?),
            (
                "logits",
                TensorView::new(Dtype::F32, vec![ids.len(), config.vocab_size], &value_bytes).map_err(st)?,
            ),
        ];
        let bytes = safetensors::serialize(views, None).map_err(st)?;
        write_file_atomically(&args.out, &bytes).map_err(io("cannot write", &args.out))?;
        println!(
            "{}",
            serde_json::json!({ "tokens": ids.len(), "vocab": config.vocab_size, "out": args.out })
        );
        Ok(())
    }
}

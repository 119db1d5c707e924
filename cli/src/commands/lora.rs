//! `tinygpt lora …`: adapters on a frozen base.
//!
//! - `train`: trains an adapter (a preset, or `--rank/--alpha/--targets`) on `--data` with
//!   the run loop every run uses (`tinygpt_optim::TrainingRun`): evaluating every
//!   `--eval-interval` steps, saving into `--out` (an adapter folder, e.g.
//!   `<base>/adapters/<name>`) every `checkpoint_interval` steps and at the end, and
//!   stopping early under `early_stop_patience`, as the page's adapter runs do; `--resume`
//!   continues the one there exactly, under its own config. It ends with one JSON line: the validation loss of the base alone
//!   (a fresh adapter adds exactly zero, so that is the run's first evaluation) and with
//!   the adapter, the reduction, and the adapter's file size (`adapter.f32`) against the
//!   base's (`weights.f32`).
//! - `merge`: writes base + adapter as a plain checkpoint (`W' = W + (alpha/r)·B·A`).
//! - `list`: the adapters stored beside a base.
//! - `export` / `import`: an adapter as a PEFT-named `.safetensors` file.

use std::path::Path;
use std::time::Instant;

use tinygpt_ckpt::{
    check_placement, export_adapter_safetensors, import_adapter_safetensors, AdapterCheckpoint, AdapterStore,
    BaseRef, Checkpoint, CheckpointDir, DirStore, StoreRole,
};
use tinygpt_model::{count_model_losses, windowed_weights, Dataset, Gpt, LoraConfig, Params, Split};
use tinygpt_optim::{
    adapter_training_config, ResumeState, RunEvent, TrainedSet, Trainer, TrainingConfig, TrainingRun,
    Unhurried, DEFAULT_ADAPTER_STEPS,
};
use tinygpt_tensor::{block_on, Backend};

use crate::args::{LoraExportArgs, LoraImportArgs, LoraListArgs, LoraMergeArgs, LoraTrainArgs};
use crate::base::{adapter_dir, load_adapter, load_base, merged_weights, Base, ADAPTERS_DIR};
use crate::compute::{dispatch_at, matmul_path, WithBackend};
use crate::error::CliError;
use crate::{memory, run_config, text, tokenizer};

struct TrainAdapter {
    args: LoraTrainArgs,
    /// The base cut to the run's window.
    base: Base,
    /// The full base, which the adapter names.
    base_ref: BaseRef,
    lora: LoraConfig,
    resume: Option<AdapterCheckpoint>,
    dataset: Dataset,
    training: TrainingConfig,
}

/// The adapter's shape from `--preset` or `--rank/--alpha/--targets`.
fn lora_config(args: &LoraTrainArgs) -> Result<LoraConfig, CliError> {
    let custom = args.rank.is_some() || args.alpha.is_some() || args.targets.is_some();
    match (&args.preset, custom) {
        (Some(_), true) => Err(CliError::Usage("give --preset or --rank/--alpha/--targets, not both".into())),
        (Some(name), false) => Ok(LoraConfig::preset(name)?),
        (None, false) => Ok(LoraConfig::preset("qv-r4")?),
        (None, true) => {
            let rank = args.rank.unwrap_or(4);
            let alpha = args.alpha.unwrap_or(2.0 * rank as f32);
            let targets = args.targets.as_deref().unwrap_or("q_proj,v_proj");
            Ok(LoraConfig::new(rank, alpha, &targets.split(',').collect::<Vec<_>>())?)
        }
    }
}

pub fn train(args: LoraTrainArgs) -> Result<(), CliError> {
    crate::compute::threads(&args.compute)?;
    let mut base = load_base(&args.base, None)?;
    let (name, bytes) = text::load(Some(&args.data))?;
    // The folder is checked before a step is trained: never inside a run or a generation,
    // never over a base, and holding nothing but this adapter's generations.
    check_adapter_out(&args.out)?;
    let store_has_adapter = args.out.join("latest.json").exists();
    let resume = match (store_has_adapter, args.resume) {
        (true, true) => Some(load_adapter(&base, &args.out)?),
        (true, false) => {
            return Err(CliError::Usage(format!(
                "{} holds an adapter already: pass --resume to continue it, or choose another --out",
                args.out.display()
            )))
        }
        (false, true) => {
            return Err(CliError::Usage(format!("--resume: {} holds no adapter", args.out.display())))
        }
        (false, false) => None,
    };
    let window = adapter_window(&args, &base, resume.as_ref())?;
    let (lora, training) = match &resume {
        Some(ckpt) => {
            let mut training = ckpt.training_config.clone();
            training.max_steps =
                args.steps.map_or(Ok(training.max_steps), |s| run_config::positive("--steps", s))?;
            training.precision = args.precision.unwrap_or(training.precision);
            (ckpt.lora.clone(), training)
        }
        None => {
            let lora = lora_config(&args)?;
            lora.validate(&base.ckpt.model_config)?;
            let steps = run_config::positive("--steps", args.steps.unwrap_or(DEFAULT_ADAPTER_STEPS as i64))?;
            let mut fields = serde_json::json!({
                "max_steps": steps,
                "weight_decay": args.weight_decay,
                "eval_interval": args.eval_interval.min(steps).max(1),
                // `--eval-interval` evaluates and, unless --checkpoint-interval is given, saves.
                "checkpoint_interval": args.checkpoint_interval.unwrap_or(args.eval_interval).max(1),
            });
            let named = [
                ("early_stop_patience", args.early_stop_patience.map(serde_json::Value::from)),
                ("learning_rate", args.lr.map(serde_json::Value::from)),
                ("batch_size", args.batch.map(serde_json::Value::from)),
                ("seed", args.seed.map(serde_json::Value::from)),
                ("precision", args.precision.map(|p| serde_json::Value::from(p.as_str()))),
            ];
            for (name, value) in named {
                if let Some(v) = value {
                    fields[name] = v;
                }
            }
            let fields = fields.as_object().cloned().unwrap_or_default();
            let training = adapter_training_config(&base.ckpt.training_config, fields)?;
            (lora, training)
        }
    };
    // The adapter names the full base (its weights' hash); it trains on the base cut to the
    // window, which gives the full base's logits on a window (`windowed_weights`).
    let base_ref = BaseRef { name: base.name.clone(), weights_sha256: base.weights_sha256() };
    if window < base.ckpt.model_config.context_length {
        let (config, weights) = windowed_weights(&base.ckpt.model_config, &base.ckpt.weights, window);
        (base.ckpt.model_config, base.ckpt.weights) = (config, weights);
    }
    memory::check_fits(&base.ckpt.model_config, training.batch_size)?;
    // The base's own tokens: bytes for byte-v1, its BPE for an imported GPT-2.
    let tokenizer = tokenizer::for_model(&base.ckpt.model_config, base.dir.as_deref())?;
    let dataset = Dataset::with_tokenizer(&name, &bytes, &tokenizer, window, training.seed)?;
    let compute = args.compute.clone();
    let precision = training.precision;
    dispatch_at(&compute, precision, TrainAdapter { args, base, base_ref, lora, resume, dataset, training })
}

/// The window `lora train` trains on: `--context`, else the one a resumed adapter recorded,
/// else the base's context. A resumed adapter continues only on its own window (on another,
/// its batches would differ from the run it continues); one recorded before windows were
/// (no `context_length`) took the base's context.
fn adapter_window(
    args: &LoraTrainArgs,
    base: &Base,
    resume: Option<&AdapterCheckpoint>,
) -> Result<usize, CliError> {
    let context = base.ckpt.model_config.context_length;
    let recorded = resume.map(|ckpt| ckpt.context_length.unwrap_or(context));
    let window = args.context.or(recorded).unwrap_or(context);
    if window > context {
        return Err(CliError::Usage(format!(
            "--context {window} is longer than the base's context ({context} tokens): give at most {context}"
        )));
    }
    if let Some(trained) = recorded.filter(|&w| w != window) {
        return Err(CliError::Usage(format!(
            "--resume: {} was trained on windows of {trained} tokens, not the {window} asked for, so it cannot \
             continue as it trained: leave --context out to continue it, or train a new adapter with another --out",
            args.out.display()
        )));
    }
    Ok(window)
}

impl WithBackend for TrainAdapter {
    type Output = ();

    fn run<B: Backend>(self, backend: B, _threads: usize) -> Result<(), CliError> {
        let TrainAdapter { args, base, base_ref, lora, resume, dataset, training } = self;
        let model_config = base.ckpt.model_config.clone();
        let model =
            Gpt::new(model_config.clone(), Params::from_flat(&backend, &model_config, &base.ckpt.weights)?)?;
        let fresh = resume.is_none();
        let trainer = match resume {
            Some(ckpt) => {
                let (trained, state) = ResumeState::from_adapter_checkpoint(model, ckpt, &training)?;
                Trainer::new(trained, training, dataset, Some(state))?
            }
            None => {
                let trained = TrainedSet::fresh_adapter(model, lora, &training)?;
                Trainer::new(trained, training, dataset, None)?
            }
        };
        let store = AdapterStore::new(DirStore::open(&args.out)?);
        let start_val = trainer.evaluate(Split::Val)?;
        // What any model learns from this text's token counts alone: the bar the adapter's
        // gain is read against.
        let data = trainer.dataset();
        let counts =
            count_model_losses(data.split(Split::Train), data.split(Split::Val), model_config.vocab_size);
        let adapter_params = trainer.adapter().expect("an adapter run").config().param_count(&model_config);
        eprintln!(
            "training a LoRA adapter ({} parameters: rank {}, alpha {}, {}) on base {} ({} parameters, frozen), \
             data {} ({} bytes), from step {}; val loss now {start_val:.4}; saving to {}",
            adapter_params,
            trainer.adapter().unwrap().config().rank,
            trainer.adapter().unwrap().config().alpha,
            trainer.adapter().unwrap().config().target_modules.join(","),
            base.name,
            model_config.param_count(),
            trainer.dataset().manifest().name,
            trainer.dataset().manifest().raw_bytes,
            trainer.progress().step,
            args.out.display()
        );
        let (path, reason) = matmul_path(&backend);
        eprintln!("precision {}: matmul {path}: {reason}", trainer.config().precision);
        if let Some(c) = counts {
            eprintln!(
                "count models on this text's val split: unigram {:.4}, bigram {:.4}",
                c.unigram, c.bigram
            );
        }
        // The run loop the page's adapter runs use: evaluations every eval_interval steps,
        // saves every checkpoint_interval steps and at the end, early stopping.
        let mut run = TrainingRun::new(trainer);
        let rows = run.trainer().config().batch_size;
        let mut last_val = start_val;
        let mut stopped_early = None;
        let started = Instant::now();
        while !run.is_over() {
            let lap = Instant::now();
            let evaluating = run.is_evaluating();
            let events = block_on(run.advance(rows, &Unhurried))?;
            if !evaluating {
                run.trainer_mut().add_wall_time(lap.elapsed().as_secs_f64());
            }
            for event in events {
                match event {
                    RunEvent::Evaluated { step, train_loss, val_loss, .. } => {
                        last_val = val_loss;
                        eprintln!("step {step:6}  train {train_loss:.4}  val {val_loss:.4}");
                    }
                    RunEvent::SaveDue { .. } => save(&store, run.trainer(), &base_ref)?,
                    RunEvent::StoppedEarly { step } => stopped_early = Some(step),
                    RunEvent::StepDone(_) | RunEvent::Finished { .. } => {}
                }
            }
        }
        let trainer = run.into_trainer();
        let full = if args.compare_full {
            let steps = trainer.progress().step;
            let dataset = trainer.dataset().clone();
            Some(full_fine_tune(&backend, &base, trainer.config(), steps, args.full_lr, dataset)?)
        } else {
            None
        };
        if let Some(step) = stopped_early {
            let patience = trainer.config().early_stop_patience.unwrap_or(0);
            eprintln!(
                "stopped early at step {step}: the validation loss has not improved for {patience} evaluations \
                 in a row (early_stop_patience {patience})"
            );
        }
        let adapter_bytes = trainer.adapter().unwrap().config().param_count(&model_config) as u64 * 4;
        let base_bytes = model_config.param_count() as u64 * 4;
        // A fresh adapter adds exactly zero, so the run's first evaluation is the base's.
        let base_val = fresh.then_some(start_val);
        println!(
            "{}",
            serde_json::json!({
                "base_val_loss": base_val,
                "start_val_loss": start_val,
                "adapter_val_loss": last_val,
                "val_loss_reduction": 1.0 - last_val / start_val,
                "full_val_loss": full.as_ref().map(|f| f.val_loss),
                "full_learning_rate": full.as_ref().map(|f| f.learning_rate),
                "full_trainable_params": full.as_ref().map(|_| model_config.param_count()),
                "unigram_val_loss": counts.map(|c| c.unigram),
                "bigram_val_loss": counts.map(|c| c.bigram),
                "steps": trainer.progress().step,
                "train_seconds": started.elapsed().as_secs_f64(),
                "adapter_file_bytes": adapter_bytes,
                "base_weights_bytes": base_bytes,
                "adapter_over_base": adapter_bytes as f64 / base_bytes as f64,
            })
        );
        Ok(())
    }
}

/// The whole-model fine-tuning `lora train --compare-full` runs beside the adapter.
struct FullFineTune {
    val_loss: f32,
    learning_rate: f32,
}

/// Fine-tunes every parameter of a copy of `base` for `steps` steps on `dataset` under the
/// adapter run's `config` (same batches, schedule and evaluations; `lr` replaces its peak
/// learning rate, a tenth of it the floor), through the same run loop, and returns its last
/// validation loss. Nothing is saved.
fn full_fine_tune<B: Backend>(
    backend: &B,
    base: &Base,
    config: &TrainingConfig,
    steps: usize,
    lr: Option<f64>,
    dataset: Dataset,
) -> Result<FullFineTune, CliError> {
    let learning_rate = lr.map_or(config.learning_rate, |lr| lr as f32);
    let min_lr = if lr.is_some() { tinygpt_optim::min_lr_for(learning_rate) } else { config.min_lr };
    let config = TrainingConfig { max_steps: steps, learning_rate, min_lr, ..config.clone() };
    crate::memory::check_fits(&base.ckpt.model_config, config.batch_size)?;
    let state = ResumeState::from_weights(base.ckpt.weights.clone(), &config);
    let trained = TrainedSet::whole_model(backend, base.ckpt.model_config.clone());
    let mut run = TrainingRun::new(Trainer::new(trained, config, dataset, Some(state))?);
    let rows = run.trainer().config().batch_size;
    let mut val_loss = f32::NAN;
    eprintln!("fine-tuning the whole base for {steps} steps to compare (learning rate {learning_rate})");
    while !run.is_over() {
        for event in block_on(run.advance(rows, &Unhurried))? {
            if let RunEvent::Evaluated { step, train_loss, val_loss: val, .. } = event {
                val_loss = val;
                eprintln!("full   {step:6}  train {train_loss:.4}  val {val:.4}");
            }
        }
    }
    Ok(FullFineTune { val_loss, learning_rate })
}

/// Refuses an adapter `--out` folder that would break a run or hold something else, before
/// any work is done (see `tinygpt_ckpt::check_placement`).
pub fn check_adapter_out(out: &Path) -> Result<(), CliError> {
    check_placement(out, StoreRole::Adapter)?;
    Ok(block_on(AdapterStore::new(DirStore::open(out)?).check_writable())?)
}

fn save<B: Backend>(
    store: &AdapterStore<DirStore>,
    trainer: &Trainer<B>,
    base: &BaseRef,
) -> Result<(), CliError> {
    let ckpt = block_on(trainer.adapter_checkpoint(base.clone()))?;
    let report = block_on(store.save(&ckpt))?;
    eprintln!("checkpoint {} at step {} ({} bytes)", report.id, report.step, report.bytes);
    Ok(())
}

/// `tinygpt lora merge`: base + adapter → a plain weights-only checkpoint folder.
pub fn merge(args: LoraMergeArgs) -> Result<(), CliError> {
    let base = load_base(&args.base, None)?;
    let adapter = load_adapter(&base, &adapter_dir(&base, &args.adapter))?;
    let weights = merged_weights(&base, &adapter)?;
    let ckpt = Checkpoint { weights, dataset: adapter.dataset.clone(), ..base.ckpt.clone() };
    if args.out.join("latest.json").exists() {
        return Err(CliError::Usage(format!(
            "{} holds a checkpoint already; choose another --out",
            args.out.display()
        )));
    }
    check_placement(&args.out, StoreRole::Run)?;
    let out = CheckpointDir::open(&args.out)?;
    out.check_writable()?;
    let report = out.save(&ckpt)?;
    eprintln!(
        "wrote {} (base {} + adapter {}: rank {}, {}), {} bytes",
        args.out.display(),
        base.name,
        args.adapter.display(),
        adapter.lora.rank,
        adapter.lora.target_modules.join(","),
        report.bytes
    );
    Ok(())
}

/// `tinygpt lora list`: one line per adapter in `<base>/adapters/`; anything else there is
/// named on stderr, not a reason to list nothing.
pub fn list(args: LoraListArgs) -> Result<(), CliError> {
    let base = load_base(&args.base, None)?;
    let dir = args.base.join(ADAPTERS_DIR);
    let mut entries: Vec<(String, bool)> = match std::fs::read_dir(&dir) {
        Ok(entries) => entries
            .filter_map(|e| e.ok())
            .map(|e| (e.file_name().to_string_lossy().into_owned(), e.path().is_dir()))
            .filter(|(name, _)| !name.starts_with('.'))
            .collect(),
        Err(_) => Vec::new(),
    };
    entries.sort();
    let (folders, stray): (Vec<_>, Vec<_>) = entries.into_iter().partition(|(_, is_dir)| *is_dir);
    if folders.is_empty() {
        eprintln!("no adapters in {}", dir.display());
    }
    let sha = base.weights_sha256();
    for (name, _) in folders {
        let store = AdapterStore::new(DirStore::open(dir.join(&name))?);
        match block_on(store.config()) {
            Ok(c) => println!(
                "{name}  rank {}  alpha {}  targets {}  {}",
                c.rank,
                c.alpha,
                c.target_modules.join(","),
                if c.base_model.weights_sha256 == sha { "fits this base" } else { "trained on another base" }
            ),
            Err(e) => println!("{name}  unreadable: {e}"),
        }
    }
    for (name, _) in stray {
        eprintln!("{}: not an adapter folder (a file); left as it is", dir.join(name).display());
    }
    Ok(())
}

/// `tinygpt lora export`: the adapter as a PEFT-named `.safetensors`.
pub fn export(args: LoraExportArgs) -> Result<(), CliError> {
    let base = load_base(&args.base, None)?;
    let adapter = load_adapter(&base, &adapter_dir(&base, &args.adapter))?;
    let bytes = export_adapter_safetensors(&adapter)?;
    write(&args.out, &bytes)?;
    eprintln!("wrote {} ({} bytes)", args.out.display(), bytes.len());
    Ok(())
}

/// The largest adapter file `lora import` reads (1 GiB): it is read whole, and an adapter
/// is a small fraction of its base.
const MAX_ADAPTER_FILE_BYTES: u64 = 1 << 30;

/// `tinygpt lora import`: a PEFT-named `.safetensors` into an adapter folder (weights only);
/// the file's reads are bounded and its header checked first (`transfer::read_safetensors`).
pub fn import(args: LoraImportArgs) -> Result<(), CliError> {
    let base = load_base(&args.base, None)?;
    check_adapter_out(&args.out)?;
    let bytes = crate::commands::transfer::read_safetensors(&args.input, MAX_ADAPTER_FILE_BYTES)?;
    let (config, lora, weights) = import_adapter_safetensors(&bytes, &base.ckpt.model_config)
        .map_err(|source| CliError::Import { path: args.input.clone(), source })?;
    let ckpt = AdapterCheckpoint {
        base: config.base_model,
        model_config: base.ckpt.model_config.clone(),
        lora,
        context_length: None,
        training_config: TrainingConfig::default(),
        dataset: base.ckpt.dataset.clone(),
        progress: base.ckpt.progress.clone(),
        loss_history: Vec::new(),
        weights,
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
    eprintln!("imported into {}", args.out.display());
    Ok(())
}

fn write(path: &Path, bytes: &[u8]) -> Result<(), CliError> {
    tinygpt_ckpt::write_file_atomically(path, bytes).map_err(|source| CliError::Io {
        what: "cannot write",
        path: path.to_path_buf(),
        source,
    })
}

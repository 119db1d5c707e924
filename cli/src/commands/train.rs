//! `tinygpt train`: drives the run loop (`tinygpt_optim::TrainingRun`, the page's too) with
//! a progress bar and saves where it says: it evaluates every `eval_interval` steps and
//! checkpoints to `--out` every `checkpoint_interval` steps, at least once a minute, at the
//! end and on Ctrl-C or SIGTERM. `--resume DIR` continues a checkpointed run exactly.
//! With `early_stop_patience` it stops once that many evaluations in a row have not improved
//! on the best validation loss. At the end it prints the best validation loss, its step and
//! the training seconds that reached it (one JSON line on stdout).
//!
//! Before anything trains: the configs and data are checked, training memory is estimated
//! against what the machine has, and the `--out` folder is created and locked (one writer
//! per folder); a folder holding another run is refused unless `--overwrite` is given.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use indicatif::{ProgressBar, ProgressStyle};
use tinygpt_ckpt::{
    check_compatible, check_placement, Checkpoint, CheckpointDir, CkptError, StoreRole, WriterLock,
    ADAPTERS_GROUP, BEST_POINTER, POINTER,
};
use tinygpt_model::{Dataset, ModelConfig};
use tinygpt_optim::{
    BestEval, ResumeState, RunEvent, TrainedSet, Trainer, TrainerProgress, TrainingConfig, TrainingRun,
    Unhurried,
};
use tinygpt_tensor::{block_on, Backend};

use crate::args::TrainArgs;
use crate::checkpoint::load;
use crate::compute::{check_precision, dispatch_at, matmul_path, WithBackend};
use crate::error::CliError;
use crate::{memory, run_config, text};

/// Steps queued on the device between two loss reads (and progress updates).
const READ_EVERY: usize = 10;

/// A checkpoint is written at least this often, whatever `checkpoint_interval` says.
const MAX_TIME_BETWEEN_CHECKPOINTS: Duration = Duration::from_secs(60);

/// Where a run starts: fresh configs, or a checkpoint to continue. (One per process, so
/// the variants' sizes do not matter.)
#[allow(clippy::large_enum_variant)]
enum Start {
    Fresh { model: ModelConfig, training: TrainingConfig },
    Resume { ckpt: Box<Checkpoint> },
}

struct Train {
    start: Start,
    /// The step to stop at: max_steps, or (with --resume --steps N) N past the checkpoint.
    stop_at: Option<usize>,
    dataset: Dataset,
    out: PathBuf,
    /// Held until the process ends: no second writer saves into `out` meanwhile.
    _lock: WriterLock,
}

pub fn run(args: TrainArgs) -> Result<(), CliError> {
    crate::compute::threads(&args.compute)?;
    let (name, bytes) = text::load(args.data.as_deref())?;
    // A fresh run's configs and data are checked before the folder is touched.
    let fresh = match &args.resume {
        None => {
            let (model, training) = run_config::resolve(&args)?;
            check_precision(args.compute.backend, training.precision)?;
            memory::check_fits(&model, training.batch_size)?;
            let dataset = Dataset::new(&name, &bytes, model.context_length, training.seed)?;
            Some((Start::Fresh { model, training }, dataset))
        }
        Some(dir) if !dir.is_dir() => {
            return Err(CliError::Usage(format!("checkpoint folder {} does not exist", dir.display())))
        }
        Some(_) => None,
    };
    let steps = match (&args.resume, args.steps) {
        (Some(_), Some(s)) => Some(run_config::positive("--steps", s)?),
        _ => None,
    };

    // Everything cheap is checked; now the folder, before any training can be lost.
    let out = args.out.clone().or(args.resume.clone()).unwrap_or_else(|| PathBuf::from("out"));
    check_placement(&out, StoreRole::Run)?;
    let lock = WriterLock::acquire(&out)?;
    let resuming_here = args.resume.as_deref().is_some_and(|r| same_folder(r, &out));
    check_out_folder(&out, resuming_here, args.overwrite)?;
    // What the first save would refuse (foreign files, another kind's generations) is
    // refused now, before a step is trained.
    CheckpointDir::open(&out)?.check_writable()?;

    let (start, dataset) = match (fresh, &args.resume) {
        (Some(fresh), _) => fresh,
        (None, dir) => {
            let dir = dir.as_deref().expect("not fresh: resuming");
            let mut ckpt = load(dir, args.generation.as_deref())?;
            // The run's precision, unless --precision changes it from here on.
            if let Some(precision) = args.precision {
                ckpt.training_config.precision = precision;
            }
            check_precision(args.compute.backend, ckpt.training_config.precision)?;
            memory::check_fits(&ckpt.model_config, ckpt.training_config.batch_size)?;
            let (context, seed) = (ckpt.model_config.context_length, ckpt.training_config.seed);
            let dataset = Dataset::new(&name, &bytes, context, seed)?;
            (Start::Resume { ckpt: Box::new(ckpt) }, dataset)
        }
    };
    let mut stop_at = None;
    if let Start::Resume { ckpt } = &start {
        match check_compatible(ckpt, &ckpt.model_config, dataset.manifest()) {
            Err(CkptError::DatasetMismatch { .. }) if args.force => {
                eprintln!("--force: continuing on different data ({})", dataset.manifest().dataset_id)
            }
            Err(CkptError::DatasetMismatch { field, checkpoint, current }) => {
                return Err(CliError::Usage(format!(
                    "the data differs from the checkpoint's ({field}: {checkpoint} there, {current} here); \
                     pass the same --data, or --force to continue on this data"
                )))
            }
            other => other?,
        }
        let (step, max_steps) = (ckpt.progress.step, ckpt.training_config.max_steps);
        stop_at = Some(match steps {
            Some(n) => step.checked_add(n).ok_or_else(|| {
                CliError::Usage(format!("--steps {n}: step {step} + {n} is past the largest step count"))
            })?,
            None if step >= max_steps => {
                return Err(CliError::Usage(format!(
                    "the run in {} already finished (step {step} of max_steps {max_steps}); \
                     pass --steps N to train N more steps",
                    args.resume.as_deref().unwrap_or(&out).display()
                )))
            }
            None => max_steps,
        });
    }
    let precision = match &start {
        Start::Fresh { training, .. } => training.precision,
        Start::Resume { ckpt } => ckpt.training_config.precision,
    };
    dispatch_at(&args.compute, precision, Train { start, stop_at, dataset, out, _lock: lock })
}

/// Whether two paths name one folder (both exist: `out` was just created).
fn same_folder(a: &Path, b: &Path) -> bool {
    match (a.canonicalize(), b.canonicalize()) {
        (Ok(a), Ok(b)) => a == b,
        _ => a == b,
    }
}

/// A new run needs an empty folder; one holding a run is kept unless the user resumes it
/// or asks for `--overwrite` (which deletes it here, latest.json first, so that an
/// interruption never leaves a pointer to a half-deleted generation).
fn check_out_folder(out: &Path, resuming_here: bool, overwrite: bool) -> Result<(), CliError> {
    let io = |source| CliError::Io { what: "cannot read", path: out.to_path_buf(), source };
    let mut entries: Vec<String> = Vec::new();
    for entry in std::fs::read_dir(out).map_err(io)? {
        let name = entry.map_err(io)?.file_name().to_string_lossy().into_owned();
        if !name.starts_with('.') {
            entries.push(name);
        }
    }
    entries.sort();
    if entries.is_empty() || resuming_here {
        return Ok(());
    }
    let is_run = entries
        .iter()
        .all(|n| n == POINTER || n == BEST_POINTER || n == ADAPTERS_GROUP || n.starts_with("gen-"));
    if !is_run {
        return Err(CliError::Usage(format!(
            "--out {} holds files that are not a TinyGPT run ({}); choose an empty or new folder",
            out.display(),
            entries.iter().take(3).cloned().collect::<Vec<_>>().join(", ")
        )));
    }
    if !overwrite {
        return Err(CliError::Usage(format!(
            "--out {0} already holds a run ({1}); continue it with --resume {0}, replace it with \
             --overwrite, or choose another --out",
            out.display(),
            entries.join(", ")
        )));
    }
    if entries.iter().any(|n| n == ADAPTERS_GROUP) {
        return Err(CliError::Usage(format!(
            "--overwrite: {} holds adapters trained on this run ({}); --overwrite never deletes them: \
             move them out first, or choose another --out",
            out.display(),
            out.join(ADAPTERS_GROUP).display()
        )));
    }
    let remove = |name: &str| -> Result<(), CliError> {
        let path = out.join(name);
        let result = if path.is_dir() { std::fs::remove_dir_all(&path) } else { std::fs::remove_file(&path) };
        result.map_err(|source| CliError::Io { what: "cannot delete", path, source })
    };
    for pointer in [POINTER, BEST_POINTER] {
        if entries.iter().any(|n| n == pointer) {
            remove(pointer)?;
        }
    }
    for name in entries.iter().filter(|n| *n != POINTER && *n != BEST_POINTER) {
        remove(name)?;
    }
    eprintln!("--overwrite: deleted the run in {}", out.display());
    Ok(())
}

fn progress_bar(start: usize, max_steps: usize) -> ProgressBar {
    let bar = ProgressBar::new(max_steps as u64);
    bar.set_style(
        ProgressStyle::with_template("{bar:30.cyan/blue} step {pos}/{len} {msg} ETA {eta}")
            .expect("static template")
            .progress_chars("=> "),
    );
    bar.set_position(start as u64);
    bar.reset_eta();
    bar.enable_steady_tick(Duration::from_millis(250));
    bar
}

/// Prints above the bar; a hidden bar (output not a terminal) drops `println`, so log plainly.
fn log(bar: &ProgressBar, line: String) {
    if bar.is_hidden() {
        eprintln!("{line}");
    } else {
        bar.println(line);
    }
}

impl WithBackend for Train {
    type Output = ();

    fn run<B: Backend>(self, backend: B, threads: usize) -> Result<(), CliError> {
        let Train { start, stop_at, dataset, out, _lock } = self;
        let store = CheckpointDir::open(&out)?;
        // --steps on a resume moves the stop, never the schedule: the learning rates stay
        // those of the original run (min_lr past its max_steps).
        let trainer = match start {
            Start::Fresh { model, training } => {
                Trainer::new(TrainedSet::whole_model(&backend, model), training, dataset, None)?
            }
            Start::Resume { ckpt } => {
                let (trained, training, state) = ResumeState::from_checkpoint(&backend, *ckpt);
                Trainer::new(trained, training, dataset, Some(state))?
            }
        };
        let stop_at = stop_at.unwrap_or(trainer.config().max_steps);
        let mut run = TrainingRun::new(trainer).stopping_at(stop_at);
        let interrupted = Arc::new(AtomicBool::new(false));
        let flag = interrupted.clone();
        // Ctrl-C and SIGTERM alike; a second one while saving is ignored, the save finishes.
        let _ = ctrlc::set_handler(move || flag.store(true, Ordering::SeqCst));

        let trainer = run.trainer();
        let model = trainer.model().config();
        eprintln!(
            "training {} ({} parameters) on {} ({} bytes) from step {}, backend {} with {threads} thread(s), checkpoints in {}",
            model.model_name,
            model.param_count(),
            trainer.dataset().manifest().name,
            trainer.dataset().manifest().raw_bytes,
            trainer.progress().step,
            backend.name(),
            out.display(),
        );
        let (path, reason) = matmul_path(&backend);
        eprintln!("precision {}: matmul {path}: {reason}", trainer.config().precision);
        let bar = progress_bar(trainer.progress().step, stop_at);
        let mut last_val = trainer.history().last().and_then(|p| p.val_loss);
        let mut train_loss = f32::NAN;
        let mut tokens_per_s = 0.0;
        let mut last_save = Instant::now();
        let save = |trainer: &Trainer<B>, bar: &ProgressBar| -> Result<(), CliError> {
            let step = trainer.progress().step;
            let report = store.save(&block_on(trainer.checkpoint())?).map_err(|source| {
                CliError::SaveFailed { step, dir: out.clone(), source: Box::new(source) }
            })?;
            log(bar, format!("checkpoint {} at step {} ({} bytes)", report.id, report.step, report.bytes));
            Ok(())
        };
        let mut stopped_early = None;
        let batch = run.trainer().config().batch_size;
        // Steps are queued without waiting for the device, and their losses read (which
        // waits) every READ_EVERY steps and where a value or a finished step is needed:
        // a GPU runs one step while the next is recorded. Training time is measured from
        // read to read, so it counts the device's work but not evaluations or saves. Nor
        // the session's first step, read at once: its time is setup (on a GPU the kernels
        // compile then, about 2 s at the nanoGPT recipe on an H200 without a warm driver
        // cache), as a tokens/s figure leaves setup out.
        let mut window = Instant::now();
        let mut window_tokens = 0;
        let mut setup_step = true;
        while !run.is_over() {
            if last_save.elapsed() >= MAX_TIME_BETWEEN_CHECKPOINTS {
                run.request_save();
            }
            let evaluating = run.is_evaluating();
            let (mut stepped, mut save_due) = (false, false);
            for event in block_on(run.advance(batch, &Unhurried))? {
                match event {
                    RunEvent::StepDone(done) => {
                        window_tokens += done.tokens;
                        stepped = true;
                    }
                    RunEvent::Evaluated { step, train_loss, val_loss, .. } => {
                        last_val = Some(val_loss);
                        let scaling = match run.trainer().progress().loss_scale {
                            Some(s) => {
                                format!("  loss scale {} ({} steps skipped)", s.scale, s.skipped_steps)
                            }
                            None => String::new(),
                        };
                        log(
                            &bar,
                            format!("step {step:>6}  train {train_loss:.4}  val {val_loss:.4}{scaling}"),
                        );
                    }
                    RunEvent::SaveDue { .. } => save_due = true,
                    RunEvent::StoppedEarly { step } => stopped_early = Some(step),
                    RunEvent::Finished { .. } => {}
                }
            }
            if evaluating {
                // An evaluation's time is not training time.
                window = Instant::now();
            }
            let stop_requested = interrupted.load(Ordering::SeqCst);
            let read_due = save_due
                || run.is_over()
                || stepped
                    && (setup_step
                        || stop_requested
                        || run.is_evaluating()
                        || run.unread_losses() >= READ_EVERY);
            if read_due {
                let points = block_on(run.read_losses())?;
                let seconds = window.elapsed().as_secs_f64();
                // The setup step's window counts toward neither the training time nor the rate.
                if !std::mem::take(&mut setup_step) {
                    run.trainer_mut().add_wall_time(seconds);
                    // An exponential moving average keeps the rate readable between noisy windows.
                    let rate = window_tokens as f64 / seconds.max(1e-9);
                    tokens_per_s = if tokens_per_s == 0.0 { rate } else { 0.9 * tokens_per_s + 0.1 * rate };
                }
                train_loss = points.last().map_or(train_loss, |p| p.train_loss);
                let val = last_val.map_or("-".to_string(), |v| format!("{v:.4}"));
                bar.set_message(format!("loss {train_loss:.4} val {val} {tokens_per_s:.0} tok/s"));
                bar.set_position(run.trainer().progress().step as u64);
                window = Instant::now();
                window_tokens = 0;
            }
            if stop_requested && run.at_step_boundary() {
                let step = run.trainer().progress().step;
                save(run.trainer(), &bar)?;
                bar.abandon();
                eprintln!("interrupted at step {step}; resume with --resume {}", out.display());
                std::process::exit(130);
            }
            if save_due {
                save(run.trainer(), &bar)?;
                last_save = Instant::now();
                window = Instant::now();
            }
        }
        bar.finish();
        let best = run.best();
        if let Some(step) = stopped_early {
            let patience = run.trainer().config().early_stop_patience.unwrap_or(0);
            eprintln!(
                "stopped early at step {step}: the validation loss has not improved on {} for \
                 {patience} evaluations in a row (early_stop_patience {patience})",
                describe(best)
            );
        }
        if let Some(best) = best {
            eprintln!("{}", describe(Some(best)));
            println!("{}", summary(&best, run.trainer().progress()));
        }
        Ok(())
    }
}

/// The run's best evaluation in words: what a recipe's result is judged by (its training
/// seconds leave out evaluation, checkpointing and each session's first step).
fn describe(best: Option<BestEval>) -> String {
    match best {
        None => "no validation loss yet".into(),
        Some(BestEval { val_loss, step, train_seconds: Some(s) }) => {
            format!("best val {val_loss:.4} at step {step} after {s:.1} s of training")
        }
        Some(BestEval { val_loss, step, train_seconds: None }) => {
            format!("best val {val_loss:.4} at step {step} (in an earlier session)")
        }
    }
}

/// One JSON line for scripts: best_val_loss, best_step, train_seconds_to_best (null when
/// the best was reached in an earlier session), the run's step and train_seconds.
fn summary(best: &BestEval, progress: &TrainerProgress) -> String {
    serde_json::json!({
        "best_val_loss": best.val_loss,
        "best_step": best.step,
        "train_seconds_to_best": best.train_seconds,
        "step": progress.step,
        "train_seconds": progress.wall_time_sec,
    })
    .to_string()
}

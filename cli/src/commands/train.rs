//! `tinygpt train`: trains with a progress bar, evaluates every `eval_interval` steps and
//! checkpoints to `--out` every `checkpoint_interval` steps, at least once a minute, at the
//! end and on Ctrl-C. `--resume DIR` continues a checkpointed run exactly.

use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use indicatif::{ProgressBar, ProgressStyle};
use tinygpt_ckpt::{check_compatible, Checkpoint, CheckpointDir, CkptError};
use tinygpt_model::{Dataset, ModelConfig, Split};
use tinygpt_optim::{Trainer, TrainingConfig};
use tinygpt_tensor::{block_on, Backend};

use crate::args::TrainArgs;
use crate::checkpoint::load_latest;
use crate::compute::{dispatch, WithBackend};
use crate::error::CliError;
use crate::{run_config, text};

/// A checkpoint is written at least this often, whatever `checkpoint_interval` says.
const MAX_TIME_BETWEEN_CHECKPOINTS: Duration = Duration::from_secs(60);

/// Where a run starts: fresh configs, or a checkpoint to continue.
enum Start {
    Fresh { model: ModelConfig, training: TrainingConfig },
    Resume { ckpt: Box<Checkpoint>, steps: Option<usize> },
}

struct Train {
    start: Start,
    dataset: Dataset,
    out: PathBuf,
}

pub fn run(args: TrainArgs) -> Result<(), CliError> {
    let (name, bytes) = text::load(args.data.as_deref())?;
    let (start, context, seed) = match &args.resume {
        None => {
            let (model, training) = run_config::resolve(&args)?;
            let (context, seed) = (model.context_length, training.seed);
            (Start::Fresh { model, training }, context, seed)
        }
        Some(dir) => {
            let ckpt = load_latest(dir)?;
            let steps = args.steps.map(|s| run_config::positive("--steps", s)).transpose()?;
            let (context, seed) = (ckpt.model_config.context_length, ckpt.training_config.seed);
            (Start::Resume { ckpt: Box::new(ckpt), steps }, context, seed)
        }
    };
    let dataset = Dataset::new(&name, &bytes, context, seed)?;
    if let Start::Resume { ckpt, .. } = &start {
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
    }
    let out = args.out.clone().or(args.resume.clone()).unwrap_or_else(|| PathBuf::from("out"));
    dispatch(&args.compute, Train { start, dataset, out })
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
        let Train { start, dataset, out } = self;
        let store = CheckpointDir::open(&out)?;
        let mut trainer = match start {
            Start::Fresh { model, training } => Trainer::new(&backend, model, training, dataset)?,
            Start::Resume { ckpt, steps } => {
                let mut t = ckpt.resume(&backend, dataset)?;
                if let Some(steps) = steps {
                    t.set_max_steps(t.progress().step + steps);
                }
                t
            }
        };
        let interrupted = Arc::new(AtomicBool::new(false));
        let flag = interrupted.clone();
        // A second Ctrl-C while saving is ignored; the save finishes first.
        let _ = ctrlc::set_handler(move || flag.store(true, Ordering::SeqCst));

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
        let bar = progress_bar(trainer.progress().step, trainer.config().max_steps);
        let mut last_val = trainer.history().last().and_then(|p| p.val_loss);
        let mut tokens_per_s = 0.0;
        let mut last_save = Instant::now();
        let save = |trainer: &Trainer<B>, bar: &ProgressBar| -> Result<(), CliError> {
            let report = store.save(&block_on(Checkpoint::capture(trainer))?)?;
            log(bar, format!("checkpoint {} at step {} ({} bytes)", report.id, report.step, report.bytes));
            Ok(())
        };
        while !trainer.is_finished() {
            let started = Instant::now();
            let report = trainer.step()?;
            let seconds = started.elapsed().as_secs_f64();
            trainer.add_wall_time(seconds);
            // An exponential moving average keeps the rate readable between noisy steps.
            let rate = report.tokens as f64 / seconds.max(1e-9);
            tokens_per_s = if tokens_per_s == 0.0 { rate } else { 0.9 * tokens_per_s + 0.1 * rate };
            if report.eval_due {
                let val = trainer.evaluate(Split::Val)?;
                trainer.record_eval(report.train_loss, val);
                last_val = Some(val);
                log(&bar, format!("step {:>6}  train {:.4}  val {val:.4}", report.step, report.train_loss));
            }
            let val = last_val.map_or("-".to_string(), |v| format!("{v:.4}"));
            bar.set_message(format!("loss {:.4} val {val} {:.0} tok/s", report.train_loss, tokens_per_s));
            bar.set_position(report.step as u64);
            if interrupted.load(Ordering::SeqCst) {
                save(&trainer, &bar)?;
                bar.abandon();
                eprintln!("interrupted at step {}; resume with --resume {}", report.step, out.display());
                std::process::exit(130);
            }
            let due = report.step % trainer.config().checkpoint_interval == 0
                || last_save.elapsed() >= MAX_TIME_BETWEEN_CHECKPOINTS;
            if due && !trainer.is_finished() {
                save(&trainer, &bar)?;
                last_save = Instant::now();
            }
        }
        save(&trainer, &bar)?;
        bar.finish();
        Ok(())
    }
}

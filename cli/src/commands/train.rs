//! `tinygpt train`: trains with a progress bar, evaluates every `eval_interval` steps and
//! writes the model to `--out`.

use std::time::{Duration, Instant};

use indicatif::{ProgressBar, ProgressStyle};
use tinygpt_model::{Dataset, ModelConfig, Split};
use tinygpt_optim::{Trainer, TrainingConfig};
use tinygpt_tensor::{block_on, Backend};

use crate::args::TrainArgs;
use crate::compute::{dispatch, WithBackend};
use crate::error::CliError;
use crate::{model_dir, run_config, text};

struct Train {
    args: TrainArgs,
    model: ModelConfig,
    training: TrainingConfig,
    dataset: Dataset,
}

pub fn run(args: TrainArgs) -> Result<(), CliError> {
    let (model, training) = run_config::resolve(&args)?;
    let (name, bytes) = text::load(args.data.as_deref())?;
    let dataset = Dataset::new(&name, &bytes, model.context_length, training.seed)?;
    let compute = args.compute.clone();
    dispatch(&compute, Train { args, model, training, dataset })
}

fn progress_bar(max_steps: usize) -> ProgressBar {
    let bar = ProgressBar::new(max_steps as u64);
    bar.set_style(
        ProgressStyle::with_template("{bar:30.cyan/blue} step {pos}/{len} {msg} ETA {eta}")
            .expect("static template")
            .progress_chars("=> "),
    );
    bar.enable_steady_tick(Duration::from_millis(250));
    bar
}

impl WithBackend for Train {
    type Output = ();

    fn run<B: Backend>(self, backend: B, threads: usize) -> Result<(), CliError> {
        let Train { args, model, training, dataset } = self;
        eprintln!(
            "training {} ({} parameters) on {} ({} bytes), backend {} with {threads} thread(s)",
            model.model_name,
            model.param_count(),
            dataset.manifest().name,
            dataset.manifest().raw_bytes,
            backend.name(),
        );
        let mut trainer = Trainer::new(&backend, model, training, dataset)?;
        let bar = progress_bar(trainer.config().max_steps);
        let mut last_val = None;
        let mut tokens_per_s = 0.0;
        while !trainer.is_finished() {
            let started = Instant::now();
            let report = trainer.step()?;
            let seconds = started.elapsed().as_secs_f64();
            trainer.add_wall_time(seconds);
            // Exponential moving average keeps the rate readable between noisy steps.
            let rate = report.tokens as f64 / seconds.max(1e-9);
            tokens_per_s = if tokens_per_s == 0.0 { rate } else { 0.9 * tokens_per_s + 0.1 * rate };
            if report.eval_due {
                let val = trainer.evaluate(Split::Val)?;
                trainer.record_eval(report.train_loss, val);
                last_val = Some(val);
                let line = format!("step {:>6}  train {:.4}  val {val:.4}", report.step, report.train_loss);
                // A hidden bar (output not a terminal) drops println; logs still want the line.
                if bar.is_hidden() {
                    eprintln!("{line}");
                } else {
                    bar.println(line);
                }
            }
            let val = last_val.map_or("-".to_string(), |v| format!("{v:.4}"));
            bar.set_message(format!("loss {:.4} val {val} {:.0} tok/s", report.train_loss, tokens_per_s));
            bar.set_position(report.step as u64);
        }
        bar.finish();
        let weights = block_on(trainer.model().params().to_flat())?;
        model_dir::save(
            &args.out,
            trainer.model().config(),
            trainer.config(),
            trainer.dataset().manifest(),
            &weights,
        )?;
        eprintln!("wrote {}", args.out.display());
        Ok(())
    }
}

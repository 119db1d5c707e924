//! Training with checkpoints in a dozen lines: `tinygpt-optim` (feature `ckpt`), a kernel
//! crate and `tinygpt-ckpt`'s crash-safe folder. Run it twice: the second run resumes
//! where the first stopped (or was killed) and trains on to `max_steps`. The loop is the
//! CLI's and the browser's: a [`TrainingRun`] says when to save, the caller saves.
//!
//! ```sh
//! cargo run --release -p tinygpt-optim --features ckpt --example train_with_checkpoints -- /tmp/tiny-run
//! ```

use tinygpt_ckpt::{CheckpointDir, CkptError};
use tinygpt_kernels_cpu::CpuBackend;
use tinygpt_model::{Dataset, Preset};
use tinygpt_optim::{ResumeState, RunEvent, TrainedSet, Trainer, TrainingConfig, TrainingRun, Unhurried};
use tinygpt_tensor::block_on;

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let out = std::env::args().nth(1).unwrap_or_else(|| "runs/example".into());
    let model = Preset::by_name("tiny")?.model;
    let text = include_bytes!("../../data/tinyshakespeare.txt");
    let dataset = Dataset::new("shakespeare", text, model.context_length, 1337)?;
    let config =
        TrainingConfig { max_steps: 60, batch_size: 8, checkpoint_interval: 20, ..TrainingConfig::default() };
    let backend = CpuBackend::new(std::thread::available_parallelism().map_or(1, |n| n.get()));
    let store = CheckpointDir::open(&out)?;
    let trainer = match store.load_latest() {
        Ok(ckpt) => {
            let (trained, config, state) = ResumeState::from_checkpoint(&backend, ckpt);
            Trainer::new(trained, config, dataset, Some(state))?
        }
        Err(CkptError::NoCheckpoint { .. }) => {
            Trainer::new(TrainedSet::whole_model(&backend, model), config, dataset, None)?
        }
        Err(e) => return Err(e.into()),
    };
    let mut run = TrainingRun::new(trainer);
    let rows = run.trainer().config().batch_size;
    while !run.is_over() {
        for event in block_on(run.advance(rows, &Unhurried))? {
            match event {
                RunEvent::Evaluated { step, val_loss, .. } => println!("step {step}: val loss {val_loss:.3}"),
                RunEvent::SaveDue { step } => {
                    store.save(&block_on(run.trainer().checkpoint())?)?;
                    println!("step {step}: saved in {out}");
                }
                _ => {}
            }
        }
    }
    Ok(())
}

//! Training with checkpoints in a dozen lines: `tinygpt-optim` (feature `ckpt`), a kernel
//! crate and `tinygpt-ckpt`'s crash-safe folder. Run it twice: the second run resumes
//! where the first stopped (or was killed) and trains on to `max_steps`.
//!
//! ```sh
//! cargo run --release -p tinygpt-optim --features ckpt --example train_with_checkpoints -- /tmp/tiny-run
//! ```

use tinygpt_ckpt::{CheckpointDir, CkptError};
use tinygpt_kernels_cpu::CpuBackend;
use tinygpt_model::{Dataset, Preset};
use tinygpt_optim::{Trainer, TrainingConfig};
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
    let mut trainer = match store.load_latest() {
        Ok(ckpt) => Trainer::from_checkpoint(&backend, ckpt, dataset)?,
        Err(CkptError::NoCheckpoint { .. }) => Trainer::new(&backend, model, config, dataset)?,
        Err(e) => return Err(e.into()),
    };
    while !trainer.is_finished() {
        let report = trainer.step()?;
        if trainer.progress().step % trainer.config().checkpoint_interval == 0 || trainer.is_finished() {
            store.save(&block_on(trainer.checkpoint())?)?;
            println!("step {}: loss {:.3}, saved in {out}", trainer.progress().step, report.train_loss);
        }
    }
    Ok(())
}

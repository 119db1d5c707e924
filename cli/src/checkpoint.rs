//! Loading a checkpoint folder for the commands that read one (`--model`, `--resume`),
//! with `--generation` to pick an older one (or `best`, the lowest validation loss). Readers take no lock: a save never changes a
//! generation that latest.json names.

use std::path::Path;

use tinygpt_ckpt::{Checkpoint, CheckpointDir};
use tinygpt_tensor::block_on;

use crate::error::CliError;

/// The `--generation` value that names the best generation (best.json).
pub const BEST: &str = "best";

/// `gen-000003` or `3` → `gen-000003`.
pub fn generation_id(arg: &str) -> Result<String, CliError> {
    if let Some(digits) = arg.strip_prefix("gen-") {
        if digits.len() >= 6 && digits.bytes().all(|b| b.is_ascii_digit()) {
            return Ok(arg.to_string());
        }
    }
    match arg.parse::<u64>() {
        Ok(n) => Ok(format!("gen-{n:06}")),
        Err(_) => Err(CliError::Usage(format!(
            "--generation {arg:?} is not a generation: use its number (3), its name (gen-000003) or best"
        ))),
    }
}

/// The checkpoint `generation` names (default: the latest). When the latest cannot be
/// loaded, the error names the newest generation that can, and how to use it.
pub fn load(dir: &Path, generation: Option<&str>) -> Result<Checkpoint, CliError> {
    if !dir.exists() {
        return Err(CliError::Usage(format!("checkpoint folder {} does not exist", dir.display())));
    }
    let store = CheckpointDir::open(dir)?;
    if generation == Some(BEST) {
        return load_best(&store);
    }
    if let Some(arg) = generation {
        return Ok(store.load(&generation_id(arg)?)?);
    }
    // A writer may prune the generation being read once two newer saves completed; the
    // store then reads the new latest (see tinygpt_ckpt's generations).
    store.load_latest().map_err(|source| {
        let latest = block_on(store.store().latest_id()).ok().flatten();
        match block_on(store.store().newest_intact(latest.as_deref())) {
            Ok(Some(intact)) => CliError::IntactGeneration {
                source: Box::new(source),
                id: intact.id,
                step: intact.step,
                dir: dir.to_path_buf(),
            },
            _ => source.into(),
        }
    })
}

/// The best generation; says on stderr which one it is, and why best.json was not used when
/// the best had to be recomputed from the generations that verify.
fn load_best(store: &CheckpointDir) -> Result<Checkpoint, CliError> {
    let loaded = store.load_best()?;
    if let Some(why) = &loaded.fallback {
        eprintln!("{why}");
    }
    let best = &loaded.best;
    eprintln!("best generation: {} (step {}, val loss {:.4})", best.id, best.step, best.val_loss);
    Ok(loaded.checkpoint)
}

//! `tinygpt checkpoints DIR`: a run folder's generations, each with its step, latest
//! validation loss, size and whether it loads with every check (sizes, checksums, values);
//! `(latest)` and `(best)` mark what latest.json and best.json name.

use tinygpt_ckpt::CheckpointDir;

use crate::args::CheckpointsArgs;
use crate::error::CliError;

pub fn run(args: CheckpointsArgs) -> Result<(), CliError> {
    if !args.dir.is_dir() {
        return Err(CliError::Usage(format!("checkpoint folder {} does not exist", args.dir.display())));
    }
    let dir = CheckpointDir::open(&args.dir)?;
    let generations = dir.list()?;
    // Generations whose trainer_state.json cannot be read are not listed by the store;
    // they are shown here as corrupt rather than hidden.
    let mut unreadable: Vec<String> = std::fs::read_dir(&args.dir)
        .map_err(|source| CliError::Io { what: "cannot read", path: args.dir.clone(), source })?
        .filter_map(|e| e.ok().map(|e| e.file_name().to_string_lossy().into_owned()))
        .filter(|name| name.starts_with("gen-") && !generations.iter().any(|g| &g.id == name))
        .collect();
    unreadable.sort();
    if generations.is_empty() && unreadable.is_empty() {
        println!("{}: no checkpoint generations", args.dir.display());
        return Ok(());
    }
    println!("{:<12} {:>8} {:>10} {:>12}  status", "generation", "step", "val_loss", "bytes");
    for g in generations {
        let (val, status) = match dir.load(&g.id) {
            Ok(ckpt) => {
                let val = ckpt.loss_history.iter().rev().find_map(|p| p.val_loss);
                (val.map_or("-".into(), |v| format!("{v:.4}")), "verified".to_string())
            }
            Err(e) => ("-".into(), format!("CORRUPT: {e}")),
        };
        let latest = if g.latest { " (latest)" } else { "" };
        let best = if g.best { " (best)" } else { "" };
        println!("{:<12} {:>8} {:>10} {:>12}  {status}{latest}{best}", g.id, g.step, val, g.bytes);
    }
    for id in unreadable {
        println!(
            "{id:<12} {:>8} {:>10} {:>12}  CORRUPT or incomplete: trainer_state.json cannot be read",
            "-", "-", "-"
        );
    }
    Ok(())
}

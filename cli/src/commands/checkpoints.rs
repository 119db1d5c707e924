//! `tinygpt checkpoints DIR`: a run folder's generations, each with its step, latest
//! validation loss, size and whether it loads with every check (sizes, checksums, values);
//! `(latest)` and `(best)` mark what latest.json and best.json name. A pointer that cannot
//! be followed does not stop the listing: every generation is shown with its verdict, and
//! a line under the table says what is wrong with the pointer and which generation to use
//! (the same words `--generation best` prints).

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
    let unreadable: Vec<String> =
        block_on_ids(&dir)?.into_iter().filter(|id| !generations.iter().any(|g| &g.id == id)).collect();
    let problems = dir.pointer_problems()?;
    if generations.is_empty() && unreadable.is_empty() {
        println!("{}: no checkpoint generations", args.dir.display());
        return Ok(());
    }
    let recomputed_best = problems.recomputed_best.as_ref().map(|b| b.id.as_str());
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
        let best = match (g.best, recomputed_best == Some(g.id.as_str())) {
            (true, _) => " (best)",
            (false, true) => " (best, recomputed: best.json is not used)",
            _ => "",
        };
        println!("{:<12} {:>8} {:>10} {:>12}  {status}{latest}{best}", g.id, g.step, val, g.bytes);
    }
    for id in unreadable {
        println!(
            "{id:<12} {:>8} {:>10} {:>12}  CORRUPT or incomplete: trainer_state.json cannot be read",
            "-", "-", "-"
        );
    }
    for problem in [problems.latest, problems.best].into_iter().flatten() {
        println!("note: {problem}");
    }
    Ok(())
}

fn block_on_ids(dir: &CheckpointDir) -> Result<Vec<String>, CliError> {
    Ok(tinygpt_tensor::block_on(dir.store().generation_ids())?)
}

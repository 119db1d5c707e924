//! `tinygpt export` / `tinygpt import`: a checkpoint as one `.safetensors` file and back.

use tinygpt_ckpt::{export_safetensors, import_safetensors, CheckpointDir, LoadOptions};

use crate::args::{ExportArgs, ImportArgs};
use crate::checkpoint::load_latest;
use crate::error::CliError;

pub fn export(args: ExportArgs) -> Result<(), CliError> {
    let ckpt = load_latest(&args.model)?;
    let bytes = export_safetensors(&ckpt, !args.weights_only)?;
    std::fs::write(&args.out, &bytes).map_err(|source| CliError::Io {
        what: "cannot write",
        path: args.out.clone(),
        source,
    })?;
    eprintln!("wrote {} ({} bytes, step {})", args.out.display(), bytes.len(), ckpt.progress.step);
    Ok(())
}

pub fn import(args: ImportArgs) -> Result<(), CliError> {
    let bytes = std::fs::read(&args.input).map_err(|source| CliError::Io {
        what: "cannot read",
        path: args.input.clone(),
        source,
    })?;
    let ckpt = import_safetensors(&bytes, &LoadOptions::default())
        .map_err(|source| CliError::Import { path: args.input.clone(), source })?;
    let report = CheckpointDir::open(&args.out)?.save(&ckpt)?;
    eprintln!("imported step {} into {} as {}", report.step, args.out.display(), report.id);
    Ok(())
}

//! `tinygpt export` / `tinygpt import`: a checkpoint as one `.safetensors` file and back,
//! in our layout or nanoGPT's (`--format`).

use std::path::Path;

use tinygpt_ckpt::{
    export_nanogpt, export_safetensors, import_nanogpt, import_safetensors, write_file_atomically,
    CheckpointDir, ImportDefaults, LoadOptions, WriterLock,
};
use tinygpt_model::Dataset;
use tinygpt_optim::TrainingConfig;

use crate::args::{ExportArgs, FileFormat, ImportArgs};
use crate::checkpoint::load;
use crate::error::CliError;
use crate::text;

pub fn export(args: ExportArgs) -> Result<(), CliError> {
    let ckpt = load(&args.model, args.generation.as_deref())?;
    let bytes = match args.format {
        FileFormat::Tinygpt => export_safetensors(&ckpt, !args.weights_only)?,
        FileFormat::Nanogpt => export_nanogpt(&ckpt)?,
    };
    // All or nothing: a full disk leaves an existing file as it was.
    write_file_atomically(&args.out, &bytes).map_err(|source| CliError::Io {
        what: "cannot write",
        path: args.out.clone(),
        source,
    })?;
    eprintln!("wrote {} ({} bytes, step {})", args.out.display(), bytes.len(), ckpt.progress.step);
    Ok(())
}

pub fn import(args: ImportArgs) -> Result<(), CliError> {
    let bytes = read_safetensors(&args.input, MAX_IMPORT_BYTES)?;
    let ckpt = match args.format {
        FileFormat::Tinygpt => import_safetensors(&bytes, &LoadOptions::default()),
        FileFormat::Nanogpt => import_nanogpt(&bytes, nanogpt_defaults()?),
    }
    .map_err(|source| CliError::Import { path: args.input.clone(), source })?;
    let _lock = WriterLock::acquire(&args.out)?;
    let report = CheckpointDir::open(&args.out)?.save(&ckpt)?;
    eprintln!("imported step {} into {} as {}", report.step, args.out.display(), report.id);
    Ok(())
}

/// What a nanoGPT file from PyTorch (without our run documents) is tied to: the default
/// training config and the embedded TinyShakespeare, as a fresh `tinygpt train` would be.
fn nanogpt_defaults() -> Result<ImportDefaults, CliError> {
    let training = TrainingConfig::default();
    let (name, bytes) = text::load(None)?;
    let dataset = Dataset::new(&name, &bytes, 1, training.seed)?.manifest().clone();
    Ok(ImportDefaults { training, dataset })
}

/// The largest checkpoint file `import` reads (4 GiB): the file is held in memory whole.
pub const MAX_IMPORT_BYTES: u64 = 4 << 30;

/// A `.safetensors` file read whole, with every read bounded: a file that is not a regular
/// file (`/dev/zero`, a pipe) or is larger than `limit` is refused unread, and the header
/// is read and checked before the tensors (`tinygpt_ckpt::read_safetensors`), so a bad
/// header costs no read of the rest. `import` and `lora import` both read through here.
pub(crate) fn read_safetensors(path: &Path, limit: u64) -> Result<Vec<u8>, CliError> {
    let io = |source| CliError::Io { what: "cannot read", path: path.to_path_buf(), source };
    let mut file = std::fs::File::open(path).map_err(io)?;
    let meta = file.metadata().map_err(io)?;
    if !meta.is_file() {
        return Err(CliError::Usage(format!(
            "{} is not a regular file; give a .safetensors file (at most {limit} bytes)",
            path.display()
        )));
    }
    Ok(tinygpt_ckpt::read_safetensors(&mut file, &path.display().to_string(), meta.len(), limit)?)
}

//! `tinygpt export` / `tinygpt import`: a checkpoint as one `.safetensors` file and back,
//! in our layout or nanoGPT's (`--format`).

use std::io::{Read, Seek, SeekFrom};
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

/// The largest header `import` reads (the safetensors crate's own limit): the header is
/// read and checked against the file's size before the tensors are.
const MAX_HEADER_BYTES: u64 = 100 << 20;

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
    let bytes = read_safetensors(&args.input)?;
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

/// The file, after its 8-byte header length and the header size were checked against the
/// file's size, so a bad header costs no read of the rest.
fn read_safetensors(path: &Path) -> Result<Vec<u8>, CliError> {
    let io = |source| CliError::Io { what: "cannot read", path: path.to_path_buf(), source };
    let invalid =
        |reason: String| CliError::Usage(format!("{}: not a safetensors file: {reason}", path.display()));
    let mut file = std::fs::File::open(path).map_err(io)?;
    let size = file.metadata().map_err(io)?.len();
    let mut len = [0u8; 8];
    if size < 8 {
        return Err(invalid(format!("{size} bytes, shorter than the 8-byte header length")));
    }
    file.read_exact(&mut len).map_err(io)?;
    let header = u64::from_le_bytes(len);
    if header > MAX_HEADER_BYTES || header > size - 8 {
        return Err(invalid(format!(
            "the header length is {header} bytes, but the file has {} after it (and headers are at most {MAX_HEADER_BYTES})",
            size - 8
        )));
    }
    file.seek(SeekFrom::Start(0)).map_err(io)?;
    let mut bytes = Vec::with_capacity(usize::try_from(size).unwrap_or(0));
    file.read_to_end(&mut bytes).map_err(io)?;
    Ok(bytes)
}

//! `tinygpt export` / `tinygpt import`: a checkpoint as one `.safetensors` file and back.

use std::io::{Read, Seek, SeekFrom};
use std::path::Path;

use tinygpt_ckpt::{
    export_safetensors, import_safetensors, write_file_atomically, CheckpointDir, LoadOptions, WriterLock,
};

use crate::args::{ExportArgs, ImportArgs};
use crate::checkpoint::load;
use crate::error::CliError;

/// The largest header `import` reads (the safetensors crate's own limit): the header is
/// read and checked against the file's size before the tensors are.
const MAX_HEADER_BYTES: u64 = 100 << 20;

pub fn export(args: ExportArgs) -> Result<(), CliError> {
    let ckpt = load(&args.model, args.generation.as_deref())?;
    let bytes = export_safetensors(&ckpt, !args.weights_only)?;
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
    let ckpt = import_safetensors(&bytes, &LoadOptions::default())
        .map_err(|source| CliError::Import { path: args.input.clone(), source })?;
    let _lock = WriterLock::acquire(&args.out)?;
    let report = CheckpointDir::open(&args.out)?.save(&ckpt)?;
    eprintln!("imported step {} into {} as {}", report.step, args.out.display(), report.id);
    Ok(())
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

//! `tinygpt export` / `tinygpt import`: a checkpoint as one `.safetensors` file and back,
//! in our layout or nanoGPT's (`--format`); `import --format hf-gpt2` also reads a Hugging
//! Face GPT-2 folder.

use std::path::Path;

use tinygpt_ckpt::{
    create_dir_durably, export_nanogpt, export_safetensors, import_hf_gpt2, import_nanogpt,
    import_safetensors, write_file_atomically, Checkpoint, CheckpointDir, HfTokenizer, ImportDefaults,
    LoadOptions, WriterLock,
};
use tinygpt_model::{Dataset, Tokenizer};
use tinygpt_optim::TrainingConfig;

use crate::args::{ExportArgs, FileFormat, ImportArgs, ImportFormat};
use crate::checkpoint::load;
use crate::error::CliError;
use crate::{text, tokenizer};

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
    if args.format == ImportFormat::HfGpt2 {
        return import_hf_gpt2_dir(&args);
    }
    let bytes = read_safetensors(&args.input, MAX_IMPORT_BYTES)?;
    let ckpt = match args.format {
        ImportFormat::Tinygpt => import_safetensors(&bytes, &LoadOptions::default()),
        ImportFormat::Nanogpt => import_nanogpt(&bytes, defaults(&Tokenizer::Byte)?),
        ImportFormat::HfGpt2 => unreachable!("read above"),
    }
    .map_err(|source| CliError::Import { path: args.input.clone(), source })?;
    let _lock = WriterLock::acquire(&args.out)?;
    if ckpt.model_config.tokenizer != tinygpt_model::tokenizer::BYTE_V1 {
        // A BPE model's file (exported from an imported GPT-2) needs its tokenizer beside it.
        tokenizer::for_model(&ckpt.model_config, Some(&args.out))?;
    }
    save(&args, &ckpt)
}

fn save(args: &ImportArgs, ckpt: &Checkpoint) -> Result<(), CliError> {
    let report = CheckpointDir::open(&args.out)?.save(ckpt)?;
    eprintln!("imported step {} into {} as {}", report.step, args.out.display(), report.id);
    Ok(())
}

/// The largest `config.json` read (GPT-2's is under 1 KiB).
const MAX_CONFIG_BYTES: u64 = 1 << 20;

/// `import --format hf-gpt2 DIR`: config.json, model.safetensors and the tokenizer's
/// vocab.json + merges.txt, each refused by name if missing; the tokenizer files are
/// copied into the run folder's `tokenizer/` (an existing run must have the same one)
/// before the checkpoint is saved, so a saved model never lacks its tokenizer.
fn import_hf_gpt2_dir(args: &ImportArgs) -> Result<(), CliError> {
    let dir = &args.input;
    if !dir.is_dir() {
        return Err(CliError::Usage(format!(
            "--in {}: --format hf-gpt2 reads a folder (config.json, model.safetensors, vocab.json, merges.txt)",
            dir.display()
        )));
    }
    let tok = tokenizer::read_bpe(dir)?;
    let config =
        tokenizer::read_bounded(&dir.join("config.json"), MAX_CONFIG_BYTES, "GPT-2's config.json is needed")?;
    let weights = dir.join("model.safetensors");
    if !weights.exists() {
        return Err(CliError::Usage(format!(
            "{} is missing: the weights are read from model.safetensors (a pytorch_model.bin is not read; save with safe_serialization=True)",
            weights.display()
        )));
    }
    let bytes = read_safetensors(&weights, MAX_IMPORT_BYTES)?;
    let hf = HfTokenizer { name: tok.name().to_string(), vocab_size: tok.vocab_size() };
    let ckpt = import_hf_gpt2(&config, &bytes, &hf, defaults(&tok)?)
        .map_err(|source| CliError::Import { path: dir.clone(), source })?;
    let _lock = WriterLock::acquire(&args.out)?;
    let into = tokenizer::dir_of(&args.out);
    if into.exists() {
        let existing = tokenizer::read_bpe(&into)?;
        tokenizer::check(&ckpt.model_config, &existing, &into)?;
    } else {
        create_dir_durably(&into).map_err(|source| CliError::Io {
            what: "cannot create",
            path: into.clone(),
            source,
        })?;
        for name in tokenizer::FILES {
            let text = tokenizer::read_bounded(&dir.join(name), tokenizer::MAX_FILE_BYTES, "read above")?;
            let path = into.join(name);
            write_file_atomically(&path, &text).map_err(|source| CliError::Io {
                what: "cannot write",
                path,
                source,
            })?;
        }
    }
    save(args, &ckpt)
}

/// What a file without our run documents (nanoGPT's from PyTorch, a GPT-2 folder) is tied
/// to: the default training config and the embedded TinyShakespeare in `tokenizer`'s
/// tokens, as a fresh `tinygpt train` would be.
fn defaults(tokenizer: &Tokenizer) -> Result<ImportDefaults, CliError> {
    let training = TrainingConfig::default();
    let (name, bytes) = text::load(None)?;
    let dataset = Dataset::with_tokenizer(&name, &bytes, tokenizer, 1, training.seed)?.manifest().clone();
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

//! A model's tokenizer: byte-v1, or a byte-level BPE whose `vocab.json` + `merges.txt` live
//! in the run folder's `tokenizer/` (written by `tinygpt import --format hf-gpt2`), checked
//! against the name `model_config.json` records.

use std::io::Read;
use std::path::{Path, PathBuf};

use tinygpt_model::{ModelConfig, Tokenizer};

use crate::error::CliError;

/// The folder of a run that holds its BPE files.
pub const TOKENIZER_DIR: &str = tinygpt_ckpt::TOKENIZER_GROUP;
/// GPT-2's tokenizer files, in the order [`Tokenizer::bpe`] takes them.
pub const FILES: [&str; 2] = ["vocab.json", "merges.txt"];
/// The largest tokenizer file read (GPT-2's vocab.json is about 1 MiB, merges.txt 0.5 MiB).
pub const MAX_FILE_BYTES: u64 = 64 << 20;

/// `path` read whole, refused unread if it is not a regular file or is over `limit` bytes.
pub fn read_bounded(path: &Path, limit: u64, what: &str) -> Result<Vec<u8>, CliError> {
    let io = |source| CliError::Io { what: "cannot read", path: path.to_path_buf(), source };
    let file = std::fs::File::open(path).map_err(|source| match source.kind() {
        std::io::ErrorKind::NotFound => CliError::Usage(format!("{} is missing: {what}", path.display())),
        _ => io(source),
    })?;
    let meta = file.metadata().map_err(io)?;
    if !meta.is_file() || meta.len() > limit {
        return Err(CliError::Usage(format!(
            "{} is not a regular file of at most {limit} bytes: {what}",
            path.display()
        )));
    }
    let mut bytes = Vec::with_capacity(meta.len() as usize);
    file.take(limit + 1).read_to_end(&mut bytes).map_err(io)?;
    if bytes.len() as u64 > limit {
        return Err(CliError::Usage(format!("{} grew past {limit} bytes while read", path.display())));
    }
    Ok(bytes)
}

/// The BPE in `dir` (`vocab.json` + `merges.txt`), each file refused by name if missing or
/// malformed.
pub fn read_bpe(dir: &Path) -> Result<Tokenizer, CliError> {
    let [vocab, merges] = FILES.map(|f| {
        read_bounded(&dir.join(f), MAX_FILE_BYTES, "a GPT-2 byte-level BPE needs vocab.json and merges.txt")
    });
    Tokenizer::bpe(&vocab?, &merges?).map_err(|e| CliError::Usage(format!("{}: {e}", dir.display())))
}

/// Where a run keeps its BPE files.
pub fn dir_of(run: &Path) -> PathBuf {
    run.join(TOKENIZER_DIR)
}

/// The tokenizer `config` names: byte-v1, or the BPE in `run`'s `tokenizer/` (which must
/// be the one the model was made with).
pub fn for_model(config: &ModelConfig, run: Option<&Path>) -> Result<Tokenizer, CliError> {
    if config.tokenizer == tinygpt_model::tokenizer::BYTE_V1 {
        return Ok(Tokenizer::Byte);
    }
    let run = run.ok_or_else(|| {
        CliError::Usage(format!(
            "the model uses the tokenizer {:?}, whose files only a run folder holds",
            config.tokenizer
        ))
    })?;
    let tokenizer = read_bpe(&dir_of(run))?;
    check(config, &tokenizer, &dir_of(run))?;
    Ok(tokenizer)
}

/// `tokenizer` is the one `config` was made with, and covers its vocabulary.
pub fn check(config: &ModelConfig, tokenizer: &Tokenizer, dir: &Path) -> Result<(), CliError> {
    if tokenizer.name() != config.tokenizer || tokenizer.vocab_size() != config.vocab_size {
        return Err(CliError::Usage(format!(
            "{} holds the tokenizer {} ({} tokens), but the model was made with {} ({} tokens)",
            dir.display(),
            tokenizer.name(),
            tokenizer.vocab_size(),
            config.tokenizer,
            config.vocab_size
        )));
    }
    Ok(())
}

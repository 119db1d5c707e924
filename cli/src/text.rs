//! The training text: a file, or the embedded TinyShakespeare.

use std::path::Path;

use crate::error::CliError;

/// TinyShakespeare (Karpathy's char-rnn data, 1,115,394 bytes), the default dataset.
pub const TINY_SHAKESPEARE: &[u8] = include_bytes!("../../data/tinyshakespeare.txt");

/// `(name, bytes)` of the dataset; an empty file is refused here with its path.
pub fn load(path: Option<&Path>) -> Result<(String, Vec<u8>), CliError> {
    let Some(path) = path else {
        return Ok(("tinyshakespeare".to_string(), TINY_SHAKESPEARE.to_vec()));
    };
    let bytes = std::fs::read(path).map_err(|source| CliError::Io {
        what: "cannot read data file",
        path: path.to_path_buf(),
        source,
    })?;
    if bytes.is_empty() {
        return Err(CliError::Usage(format!("data file {} is empty", path.display())));
    }
    let name = path.file_stem().map_or("data".into(), |s| s.to_string_lossy().into_owned());
    Ok((name, bytes))
}

//! The training text: a file, or the embedded TinyShakespeare.

use std::io::Read;
use std::path::Path;

use crate::error::CliError;

/// TinyShakespeare (Karpathy's char-rnn data, 1,115,394 bytes), the default dataset.
pub const TINY_SHAKESPEARE: &[u8] = include_bytes!("../../data/tinyshakespeare.txt");

/// The largest data file `--data` reads (512 MiB): the whole text is held in memory, so a
/// larger one (or an endless one, like `/dev/zero`) is refused instead of read until
/// memory runs out.
pub const MAX_DATA_BYTES: u64 = 512 << 20;

/// `(name, bytes)` of the dataset; an empty or oversized file is refused here with its path.
pub fn load(path: Option<&Path>) -> Result<(String, Vec<u8>), CliError> {
    let Some(path) = path else {
        return Ok(("tinyshakespeare".to_string(), TINY_SHAKESPEARE.to_vec()));
    };
    let io = |source| CliError::Io { what: "cannot read data file", path: path.to_path_buf(), source };
    let too_large = || {
        CliError::Usage(format!(
            "data file {} is larger than {} MiB, the most --data reads; use a shorter text",
            path.display(),
            MAX_DATA_BYTES >> 20
        ))
    };
    let file = std::fs::File::open(path).map_err(io)?;
    if file.metadata().map_err(io)?.len() > MAX_DATA_BYTES {
        return Err(too_large());
    }
    // Devices and pipes report no size: the cap is enforced while reading too.
    let mut bytes = Vec::new();
    file.take(MAX_DATA_BYTES + 1).read_to_end(&mut bytes).map_err(io)?;
    if bytes.len() as u64 > MAX_DATA_BYTES {
        return Err(too_large());
    }
    if bytes.is_empty() {
        return Err(CliError::Usage(format!("data file {} is empty", path.display())));
    }
    let name = path.file_stem().map_or("data".into(), |s| s.to_string_lossy().into_owned());
    Ok((name, bytes))
}

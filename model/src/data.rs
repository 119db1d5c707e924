//! Text → training batches, reproducibly.
//!
//! Tokenization is "byte-v1": one token per UTF-8 byte. The bytes split at
//! `train_len = len * 9 / 10` (integer division): `[0, train_len)` trains, the rest
//! validates. A batch row is a window drawn with [`Rng::below`]: `i = rng.below(split_len -
//! ctx)`, `x = t[i .. i+ctx]`, `y = t[i+1 .. i+ctx+1]`, rows drawn in order. Any backend
//! that follows this and [`Rng`]'s contract draws the very same batches.

use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};
use tinygpt_tensor::Rng;

use crate::error::ModelError;
use crate::DatasetManifest;

/// The tokenizer name stored in manifests.
pub const TOKENIZER: &str = "byte-v1";

/// Which part of the text a batch comes from.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Split {
    /// The first 90% of the text.
    Train,
    /// The last 10% of the text.
    Val,
}

/// A token stream split into train and validation parts.
#[derive(Clone, Debug)]
pub struct Dataset {
    tokens: Vec<u8>,
    train_len: usize,
    manifest: DatasetManifest,
}

/// Inputs and next-token targets, `[batch, seq]` each, row-major.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Batch {
    /// Token ids, `[batch, seq]` row-major.
    pub inputs: Vec<u32>,
    /// The next token after each input, `[batch, seq]`.
    pub targets: Vec<u32>,
    /// Sequences.
    pub batch: usize,
    /// Positions per sequence.
    pub seq: usize,
}

/// Lower-case hex SHA-256 of `bytes`, the `dataset_id`.
pub fn dataset_id(bytes: &[u8]) -> String {
    Sha256::digest(bytes).iter().map(|b| format!("{b:02x}")).collect()
}

/// Both splits of a `len`-byte text must hold one window of `context` + 1 bytes. The
/// validation split has `len - len*9/10` bytes, so the shortest text that fits is
/// `10·context + 1` bytes; the error suggests the round `10·(context + 1)`.
fn check_splits(len: usize, context: usize) -> Result<(), ModelError> {
    let train_len = len * 9 / 10;
    if train_len.min(len - train_len) < context + 1 {
        return Err(ModelError::DatasetTooShort { bytes: len, context, needed: 10 * (context + 1) });
    }
    Ok(())
}

impl Dataset {
    /// Tokenizes `text` and checks both splits can hold a window of `context` + 1 bytes.
    /// `seed` is the sampler's seed, recorded in the manifest.
    pub fn new(name: &str, text: &[u8], context: usize, seed: u64) -> Result<Self, ModelError> {
        if text.is_empty() {
            return Err(ModelError::EmptyDataset);
        }
        check_splits(text.len(), context)?;
        let train_len = text.len() * 9 / 10;
        let manifest = DatasetManifest {
            dataset_id: dataset_id(text),
            name: name.to_string(),
            raw_bytes: text.len(),
            token_count: text.len(),
            tokenizer: TOKENIZER.to_string(),
            train_split: 0.9,
            val_split: 0.1,
            seed,
        };
        Ok(Dataset { tokens: text.to_vec(), train_len, manifest })
    }

    /// Whether both splits hold a window of `context` + 1 bytes (a model with another
    /// context than the one this dataset was made for may not fit).
    pub fn fits_context(&self, context: usize) -> Result<(), ModelError> {
        check_splits(self.tokens.len(), context)
    }

    /// The dataset's identity, as checkpoints record it.
    pub fn manifest(&self) -> &DatasetManifest {
        &self.manifest
    }

    /// The tokens of one split.
    pub fn split(&self, split: Split) -> &[u8] {
        match split {
            Split::Train => &self.tokens[..self.train_len],
            Split::Val => &self.tokens[self.train_len..],
        }
    }

    /// Draws `batch` windows of `seq` tokens from `split` (see the module docs for the rule).
    pub fn batch(&self, split: Split, batch: usize, seq: usize, rng: &mut Rng) -> Batch {
        let mut out = Batch {
            inputs: Vec::with_capacity(batch * seq),
            targets: Vec::with_capacity(batch * seq),
            batch,
            seq,
        };
        self.batch_into(split, batch, seq, rng, &mut out);
        out
    }

    /// [`Dataset::batch`] into `out`, reusing its lists (a training loop's steady step
    /// allocates nothing).
    pub fn batch_into(&self, split: Split, batch: usize, seq: usize, rng: &mut Rng, out: &mut Batch) {
        let t = self.split(split);
        assert!(t.len() > seq, "split shorter than the context (checked in Dataset::new)");
        let Batch { inputs, targets, .. } = out;
        inputs.clear();
        targets.clear();
        for _ in 0..batch {
            let i = rng.below((t.len() - seq) as u64) as usize;
            inputs.extend(t[i..i + seq].iter().map(|&b| b as u32));
            targets.extend(t[i + 1..i + seq + 1].iter().map(|&b| b as u32));
        }
        (out.batch, out.seq) = (batch, seq);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn windows_are_shifted_by_one_and_reproducible() {
        let text: Vec<u8> = (0..200u32).map(|i| (i % 251) as u8).collect();
        let d = Dataset::new("t", &text, 8, 1).unwrap();
        let b1 = d.batch(Split::Train, 4, 8, &mut Rng::new(5));
        let b2 = d.batch(Split::Train, 4, 8, &mut Rng::new(5));
        assert_eq!(b1, b2);
        for r in 0..4 {
            assert_eq!(b1.inputs[r * 8 + 1..r * 8 + 8], b1.targets[r * 8..r * 8 + 7]);
        }
        assert_eq!(d.split(Split::Train).len(), 180);
    }

    #[test]
    fn empty_and_short_texts_are_refused() {
        assert_eq!(Dataset::new("e", b"", 8, 1).unwrap_err(), ModelError::EmptyDataset);
        let err = Dataset::new("s", b"hello world", 8, 1).unwrap_err();
        assert!(matches!(err, ModelError::DatasetTooShort { bytes: 11, .. }), "{err}");
        // The split rule's minimum: 10·context + 1 bytes fit, one fewer does not.
        assert!(Dataset::new("m", &[b'a'; 81], 8, 1).is_ok());
        assert!(Dataset::new("m", &[b'a'; 80], 8, 1).is_err());
    }

    #[test]
    fn dataset_id_is_sha256() {
        assert_eq!(dataset_id(b"abc"), "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
    }
}

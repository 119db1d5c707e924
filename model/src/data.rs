//! Text → training batches, reproducibly.
//!
//! Tokenization is "byte-v1" (one token per UTF-8 byte; [`Dataset::new`]) or a byte-level
//! BPE ([`Dataset::with_tokenizer`]). The tokens split at `train_len = len * 9 / 10`
//! (integer division): `[0, train_len)` trains, the rest validates. A batch row is a window drawn with [`Rng::below`]: `i = rng.below(split_len -
//! ctx)`, `x = t[i .. i+ctx]`, `y = t[i+1 .. i+ctx+1]`, rows drawn in order. Any backend
//! that follows this and [`Rng`]'s contract draws the very same batches.

use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};
use tinygpt_tensor::Rng;

use crate::error::ModelError;
use crate::tokenizer::Tokenizer;
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
    tokens: Tokens,
    train_len: usize,
    manifest: DatasetManifest,
}

/// The token stream: a byte per token for byte-v1 (the text itself, no wider copy), u32
/// ids for a BPE.
#[derive(Clone, Debug)]
enum Tokens {
    Bytes(Vec<u8>),
    Ids(Vec<u32>),
}

/// One split's tokens.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SplitTokens<'a> {
    /// byte-v1: the bytes are the ids.
    Bytes(&'a [u8]),
    /// A BPE's ids.
    Ids(&'a [u32]),
}

impl SplitTokens<'_> {
    /// Tokens in the split.
    pub fn len(&self) -> usize {
        match self {
            SplitTokens::Bytes(t) => t.len(),
            SplitTokens::Ids(t) => t.len(),
        }
    }

    /// Whether the split has no tokens.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Appends tokens `from..to` as ids to `out`.
    fn extend_into(&self, from: usize, to: usize, out: &mut Vec<u32>) {
        match self {
            SplitTokens::Bytes(t) => out.extend(t[from..to].iter().map(|&b| b as u32)),
            SplitTokens::Ids(t) => out.extend_from_slice(&t[from..to]),
        }
    }
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

impl Tokens {
    fn len(&self) -> usize {
        match self {
            Tokens::Bytes(t) => t.len(),
            Tokens::Ids(t) => t.len(),
        }
    }
}

/// [`check_splits`] for `tokens` tokens of a `bytes`-byte text: byte-v1's rule as it was;
/// for a BPE the same rule on tokens, reported in bytes at this text's bytes per token.
fn check_tokens(bytes: usize, tokens: usize, context: usize) -> Result<(), ModelError> {
    match check_splits(tokens, context) {
        Err(ModelError::DatasetTooShort { needed, .. }) if tokens != bytes => {
            let per_token = bytes as f64 / tokens.max(1) as f64;
            Err(ModelError::DatasetTooShort {
                bytes,
                context,
                needed: (needed as f64 * per_token).ceil() as usize,
            })
        }
        other => other,
    }
}

impl Dataset {
    /// Tokenizes `text` (byte-v1) and checks both splits can hold a window of `context` + 1
    /// bytes. `seed` is the sampler's seed, recorded in the manifest.
    pub fn new(name: &str, text: &[u8], context: usize, seed: u64) -> Result<Self, ModelError> {
        Self::with_tokenizer(name, text, &Tokenizer::Byte, context, seed)
    }

    /// Tokenizes `text` with `tokenizer` (byte-v1 keeps the bytes as they are; a BPE holds
    /// u32 ids) and checks both splits can hold a window of `context` + 1 tokens. The
    /// manifest records the tokenizer's name and the token count.
    pub fn with_tokenizer(
        name: &str,
        text: &[u8],
        tokenizer: &Tokenizer,
        context: usize,
        seed: u64,
    ) -> Result<Self, ModelError> {
        if text.is_empty() {
            return Err(ModelError::EmptyDataset);
        }
        let tokens = match tokenizer {
            Tokenizer::Byte => Tokens::Bytes(text.to_vec()),
            Tokenizer::Bpe(_) => Tokens::Ids(tokenizer.encode(text)),
        };
        let token_count = tokens.len();
        check_tokens(text.len(), token_count, context)?;
        let manifest = DatasetManifest {
            dataset_id: dataset_id(text),
            name: name.to_string(),
            raw_bytes: text.len(),
            token_count,
            tokenizer: tokenizer.name().to_string(),
            train_split: 0.9,
            val_split: 0.1,
            seed,
        };
        Ok(Dataset { tokens, train_len: token_count * 9 / 10, manifest })
    }

    /// Whether both splits hold a window of `context` + 1 tokens (a model with another
    /// context than the one this dataset was made for may not fit).
    pub fn fits_context(&self, context: usize) -> Result<(), ModelError> {
        check_tokens(self.manifest.raw_bytes, self.tokens.len(), context)
    }

    /// The dataset's identity, as checkpoints record it.
    pub fn manifest(&self) -> &DatasetManifest {
        &self.manifest
    }

    /// The tokens of one split.
    pub fn split(&self, split: Split) -> SplitTokens<'_> {
        let range = match split {
            Split::Train => 0..self.train_len,
            Split::Val => self.train_len..self.tokens.len(),
        };
        match &self.tokens {
            Tokens::Bytes(t) => SplitTokens::Bytes(&t[range]),
            Tokens::Ids(t) => SplitTokens::Ids(&t[range]),
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
            t.extend_into(i, i + seq, inputs);
            t.extend_into(i + 1, i + seq + 1, targets);
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
    fn a_bpe_dataset_holds_ids_wider_than_a_byte() {
        let vocab = include_bytes!("../tests/fixtures/bpe/vocab.json");
        let merges = include_bytes!("../tests/fixtures/bpe/merges.txt");
        let tok = Tokenizer::bpe(vocab, merges).unwrap();
        let text = "First Citizen:\nBefore we proceed any further, hear me speak.\n".repeat(20);
        let d = Dataset::with_tokenizer("t", text.as_bytes(), &tok, 8, 1).unwrap();
        let ids = tok.encode(text.as_bytes());
        assert_eq!(d.manifest().token_count, ids.len());
        assert_eq!(d.manifest().raw_bytes, text.len());
        assert_eq!(d.manifest().tokenizer, tok.name());
        assert!(matches!(d.split(Split::Val), SplitTokens::Ids(_)));
        assert!(ids.iter().any(|&i| i > 255));
        let b = d.batch(Split::Train, 3, 8, &mut Rng::new(2));
        for r in 0..3 {
            let row = &b.inputs[r * 8..r * 8 + 8];
            assert!(ids.windows(8).any(|w| w == row));
            assert_eq!(b.inputs[r * 8 + 1..r * 8 + 8], b.targets[r * 8..r * 8 + 7]);
        }
        // Too short, reported in bytes at the text's bytes per token.
        let err = Dataset::with_tokenizer("s", b"the king", &tok, 8, 1).unwrap_err();
        assert!(matches!(err, ModelError::DatasetTooShort { bytes: 8, .. }), "{err}");
    }

    #[test]
    fn byte_v1_batches_are_what_they_were() {
        let text: Vec<u8> = (0..300u32).map(|i| (i * 7 % 256) as u8).collect();
        let a = Dataset::new("t", &text, 8, 1).unwrap();
        let b = Dataset::with_tokenizer("t", &text, &Tokenizer::Byte, 8, 1).unwrap();
        assert_eq!(a.manifest(), b.manifest());
        assert_eq!(a.manifest().tokenizer, "byte-v1");
        assert_eq!(a.split(Split::Val), SplitTokens::Bytes(&text[270..]));
        let batch = a.batch(Split::Train, 2, 8, &mut Rng::new(9));
        let mut rng = Rng::new(9);
        let i = rng.below(270 - 8) as usize;
        assert_eq!(batch.inputs[..8], text[i..i + 8].iter().map(|&x| x as u32).collect::<Vec<_>>()[..]);
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

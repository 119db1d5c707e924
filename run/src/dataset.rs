//! `dataset_manifest.json`: which text a run trained on (the text itself, its tokenizer and
//! its batches live in `tinygpt_model::data`).

use serde::{Deserialize, Serialize};

/// `dataset_manifest.json`: identifies the exact text a run trained on.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "ts", derive(ts_rs::TS))]
pub struct DatasetManifest {
    /// Lower-case hex SHA-256 of the raw bytes.
    pub dataset_id: String,
    /// A name for the data (a file name).
    pub name: String,
    /// Size of the text in bytes.
    pub raw_bytes: usize,
    /// Tokens after tokenization (bytes, for the byte tokenizer).
    pub token_count: usize,
    /// The tokenizer's name: `byte-v1`, or a byte-level BPE's `bpe-<16 hex>` (the model
    /// config's `tokenizer`).
    pub tokenizer: String,
    /// Fraction of tokens for training.
    pub train_split: f64,
    /// Fraction of tokens for validation.
    pub val_split: f64,
    /// Seed the dataset was made with.
    pub seed: u64,
}

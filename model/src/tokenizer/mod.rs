//! Tokenizers, named in `model_config.json`'s `tokenizer` and in dataset manifests.
//!
//! - `byte-v1` (the default): one token per UTF-8 byte, vocabulary 256. Encoding is the
//!   identity on bytes; decoding a stream needs care only because a character may span
//!   several tokens ([`Utf8Stream`]).
//! - `bpe-…`: GPT-2's byte-level BPE from its `vocab.json` + `merges.txt` ([`Bpe`]); the
//!   name carries a hash of the vocabulary and merges ([`Bpe::id`]).
//!
//! Both decode token ids to bytes, never to text: a sample can stop inside a character.

mod bpe;

use std::sync::Arc;

pub use bpe::{byte_to_char, pieces, Bpe, MAX_VOCAB};

/// The byte tokenizer's name.
pub use tinygpt_run::BYTE_V1;

/// A tokenizer file that cannot be used, naming the file and what is wrong.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum TokenizerError {
    /// `vocab.json` or `merges.txt` is malformed or inconsistent.
    #[error("{file}: {reason}")]
    Invalid {
        /// `vocab.json` or `merges.txt`.
        file: &'static str,
        /// What is wrong.
        reason: String,
    },
}

/// Either tokenizer; cheap to clone (a BPE's tables are shared).
#[derive(Clone, Debug, Default)]
pub enum Tokenizer {
    /// `byte-v1`.
    #[default]
    Byte,
    /// A byte-level BPE.
    Bpe(Arc<Bpe>),
}

impl Tokenizer {
    /// GPT-2-style BPE from the contents of `vocab.json` and `merges.txt`.
    pub fn bpe(vocab_json: &[u8], merges_txt: &[u8]) -> Result<Self, TokenizerError> {
        Ok(Tokenizer::Bpe(Arc::new(Bpe::from_files(vocab_json, merges_txt)?)))
    }

    /// The name checkpoints and dataset manifests record: `byte-v1` or `bpe-<hash>`.
    pub fn name(&self) -> &str {
        match self {
            Tokenizer::Byte => BYTE_V1,
            Tokenizer::Bpe(b) => b.id(),
        }
    }

    /// Tokens in the vocabulary (256 for bytes).
    pub fn vocab_size(&self) -> usize {
        match self {
            Tokenizer::Byte => 256,
            Tokenizer::Bpe(b) => b.vocab_size(),
        }
    }

    /// Bytes → token ids (for BPE, invalid UTF-8 becomes one-byte tokens:
    /// [`Bpe::encode_bytes`]).
    pub fn encode(&self, text: &[u8]) -> Vec<u32> {
        match self {
            Tokenizer::Byte => text.iter().map(|&b| u32::from(b)).collect(),
            Tokenizer::Bpe(b) => b.encode_bytes(text),
        }
    }

    /// Token ids → bytes; an id outside the vocabulary gives none.
    pub fn decode(&self, ids: &[u32]) -> Vec<u8> {
        let mut out = Vec::new();
        for &id in ids {
            self.push_bytes(id, &mut out);
        }
        out
    }

    /// One token's bytes appended to `out`.
    pub fn push_bytes(&self, id: u32, out: &mut Vec<u8>) {
        match self {
            Tokenizer::Byte => out.extend(u8::try_from(id).ok()),
            Tokenizer::Bpe(b) => out.extend_from_slice(b.token_bytes(id)),
        }
    }
}

/// Text → token ids (byte-v1).
pub fn encode(text: &str) -> Vec<u32> {
    text.bytes().map(u32::from).collect()
}

/// Token ids → text (byte-v1); invalid UTF-8 (a model can emit any byte) becomes U+FFFD.
pub fn decode(tokens: &[u8]) -> String {
    String::from_utf8_lossy(tokens).into_owned()
}

/// Turns a stream of sampled bytes into text pieces without splitting a character:
/// incomplete sequences wait for their remaining bytes, invalid ones become U+FFFD.
#[derive(Debug, Default, Clone)]
pub struct Utf8Stream {
    pending: Vec<u8>,
}

impl Utf8Stream {
    /// The byte tokenizer.
    pub fn new() -> Self {
        Self::default()
    }

    /// Adds one byte; returns the text it completes (possibly empty). An invalid sequence
    /// becomes one U+FFFD per maximal invalid run (as `String::from_utf8_lossy` does), and a
    /// byte that starts the next character stays pending.
    pub fn push(&mut self, byte: u8) -> String {
        self.pending.push(byte);
        let mut out = String::new();
        loop {
            match std::str::from_utf8(&self.pending) {
                Ok(s) => {
                    out.push_str(s);
                    self.pending.clear();
                    return out;
                }
                Err(e) => {
                    let valid = e.valid_up_to();
                    out.push_str(std::str::from_utf8(&self.pending[..valid]).expect("valid prefix"));
                    match e.error_len() {
                        // An incomplete character at the end: wait for its remaining bytes.
                        None => {
                            self.pending.drain(..valid);
                            return out;
                        }
                        Some(bad) => {
                            out.push(char::REPLACEMENT_CHARACTER);
                            self.pending.drain(..valid + bad);
                        }
                    }
                }
            }
        }
    }

    /// Whatever is still pending, decoded lossily (end of stream).
    pub fn finish(&mut self) -> String {
        let out = decode(&self.pending);
        self.pending.clear();
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn multi_byte_characters_are_not_split() {
        let mut s = Utf8Stream::new();
        let text: String = "héllo ✓".bytes().map(|b| s.push(b)).collect();
        assert_eq!(text + &s.finish(), "héllo ✓");
    }

    #[test]
    fn a_broken_sequence_does_not_swallow_the_next_character() {
        let mut s = Utf8Stream::new();
        let bytes = [0xE2, 0x82, 0xE2, 0x82, 0xAC];
        let text: String = bytes.iter().map(|&b| s.push(b)).collect::<String>() + &s.finish();
        assert_eq!(text, String::from_utf8_lossy(&bytes));
        assert_eq!(text, "\u{FFFD}€");
    }

    #[test]
    fn invalid_bytes_become_replacement_characters() {
        let mut s = Utf8Stream::new();
        let text: String = [b'a', 0xFF, b'b'].iter().map(|&b| s.push(b)).collect();
        assert_eq!(text, "a\u{FFFD}b");
    }
}

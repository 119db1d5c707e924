//! GPT-2's byte-level BPE: `vocab.json` + `merges.txt`, the pre-tokenisation pattern and the
//! byte↔unicode mapping, giving the same ids as Hugging Face `tokenizers`' ByteLevel BPE
//! (`add_prefix_space = false`, no special-token splitting: `<|endoftext|>` written in a
//! text is encoded as the characters it is, as tiktoken's `encode_ordinary` does).
//!
//! Encoding: the text is cut into pieces by [`pieces`]; each piece's UTF-8 bytes become the
//! vocabulary's one-byte tokens, then merges apply lowest rank first (the leftmost of equal
//! ranks first), as `tokenizers`' `Word::merge_all` does, in O(n log n) per piece. Decoding
//! returns bytes: a sample can stop inside a character, and the caller decides how to show
//! the incomplete or invalid UTF-8 (lossily, or by waiting for the rest: `Utf8Stream`).

use std::cmp::Reverse;
use std::collections::{BinaryHeap, HashMap};
use std::sync::OnceLock;

use regex::Regex;
use sha2::{Digest, Sha256};

use super::TokenizerError;

/// GPT-2's pattern less its last-but-one alternative `\s+(?!\S)`, whose lookahead the
/// `regex` crate has no syntax for; [`pieces`] applies it by hand (see there).
const PATTERN: &str = r"'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+";

fn pattern() -> &'static Regex {
    static RE: OnceLock<Regex> = OnceLock::new();
    RE.get_or_init(|| Regex::new(PATTERN).expect("the GPT-2 pattern compiles"))
}

/// GPT-2's pre-tokenisation: the matches of
/// `'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+`, in order.
///
/// Every character starts a match of some alternative, so the pieces tile the text. The
/// lookahead is the one part done by hand: where the first alternatives fail, a backtracking
/// engine's `\s+(?!\S)` takes a whitespace run up to the end of the text, or, when a
/// non-space follows, the run less its last character (so that " word" keeps its space),
/// and plain `\s+` takes a run of one. So a whitespace match of two or more characters that
/// a non-space follows gives back its last character, which starts the next piece.
pub fn pieces(text: &str) -> impl Iterator<Item = &str> + '_ {
    let mut at = 0;
    std::iter::from_fn(move || {
        let m = pattern().find_at(text, at)?;
        debug_assert_eq!(m.start(), at, "every character starts a match");
        let mut end = m.end();
        let piece = m.as_str();
        if end < text.len() && piece.chars().all(char::is_whitespace) {
            let last = piece.chars().next_back().expect("a match is not empty");
            if piece.len() > last.len_utf8() {
                end -= last.len_utf8();
            }
        }
        let piece = &text[at..end];
        at = end;
        Some(piece)
    })
}

/// GPT-2's byte → character table: printable Latin-1 bytes stand for themselves, the other
/// 68 map to U+0100 onwards, in byte order, so that every token is printable text.
pub fn byte_to_char() -> [char; 256] {
    let printable = |b: u8| matches!(b, b'!'..=b'~' | 0xA1..=0xAC | 0xAE..=0xFF);
    let mut table = ['\0'; 256];
    let mut next = 256u32;
    for b in 0..=255u8 {
        table[b as usize] = if printable(b) {
            char::from(b)
        } else {
            next += 1;
            char::from_u32(next - 1).expect("below U+0200")
        };
    }
    table
}

/// A byte-level BPE vocabulary and its merges.
#[derive(Clone)]
pub struct Bpe {
    /// Each byte's one-byte token.
    byte_ids: [u32; 256],
    /// `(left, right)` → `(rank, merged)`.
    merges: HashMap<(u32, u32), (u32, u32)>,
    /// Each id's bytes.
    bytes: Vec<Vec<u8>>,
    id: String,
}

impl std::fmt::Debug for Bpe {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Bpe")
            .field("id", &self.id)
            .field("vocab", &self.bytes.len())
            .field("merges", &self.merges.len())
            .finish()
    }
}

/// The most tokens a vocabulary may have (ids are u32 on every backend; 2^24 is far above
/// any GPT-2-family vocabulary and keeps a hostile file from sizing tables at will).
pub const MAX_VOCAB: usize = 1 << 24;

impl Bpe {
    /// Reads GPT-2's `vocab.json` (token → id, ids `0..n` each once) and `merges.txt`
    /// (`#version` line optional, then one `left right` pair a line, highest priority
    /// first). Refuses, naming it, a vocabulary without all 256 one-byte tokens, duplicate
    /// or gapped ids, and a merge of tokens the vocabulary lacks.
    pub fn from_files(vocab_json: &[u8], merges_txt: &[u8]) -> Result<Self, TokenizerError> {
        let bad = |file: &'static str, reason: String| TokenizerError::Invalid { file, reason };
        let vocab: HashMap<String, u32> =
            serde_json::from_slice(vocab_json).map_err(|e| bad("vocab.json", e.to_string()))?;
        if vocab.len() > MAX_VOCAB {
            return Err(bad("vocab.json", format!("has {} tokens, more than {MAX_VOCAB}", vocab.len())));
        }
        let mut tokens: Vec<Option<&str>> = vec![None; vocab.len()];
        for (token, &id) in &vocab {
            let slot = tokens.get_mut(id as usize).ok_or_else(|| {
                bad("vocab.json", format!("token {token:?} has id {id}, but ids must run 0..{}", vocab.len()))
            })?;
            if let Some(other) = slot.replace(token) {
                return Err(bad("vocab.json", format!("id {id} is given to both {other:?} and {token:?}")));
            }
        }
        let tokens: Vec<&str> = tokens.into_iter().map(|t| t.expect("n distinct ids below n")).collect();

        let to_char = byte_to_char();
        let from_char: HashMap<char, u8> = (0..=255u8).map(|b| (to_char[b as usize], b)).collect();
        let mut byte_ids = [0u32; 256];
        for (b, c) in to_char.iter().enumerate() {
            byte_ids[b] = *vocab.get(c.encode_utf8(&mut [0; 4]) as &str).ok_or_else(|| {
                bad(
                    "vocab.json",
                    format!("has no token for byte {b:#04x} ({c:?}); a byte-level BPE has all 256"),
                )
            })?;
        }
        // A character outside the byte alphabet (in a special token) stands for its UTF-8.
        let bytes: Vec<Vec<u8>> = tokens
            .iter()
            .map(|t| {
                let mut out = Vec::with_capacity(t.len());
                for c in t.chars() {
                    match from_char.get(&c) {
                        Some(&b) => out.push(b),
                        None => out.extend_from_slice(c.encode_utf8(&mut [0; 4]).as_bytes()),
                    }
                }
                out
            })
            .collect();

        let text = std::str::from_utf8(merges_txt).map_err(|e| bad("merges.txt", e.to_string()))?;
        let (mut merges, mut rank) = (HashMap::new(), 0u32);
        let mut hash = Sha256::new();
        for token in &tokens {
            hash.update((token.len() as u64).to_le_bytes());
            hash.update(token.as_bytes());
        }
        let lines = text.lines().enumerate().filter(|(i, l)| !(*i == 0 && l.starts_with("#version")));
        for (i, line) in lines.filter(|(_, l)| !l.is_empty()) {
            let at = |reason: String| bad("merges.txt", format!("line {}: {reason}", i + 1));
            let (left, right) = line
                .split_once(' ')
                .filter(|(l, r)| !l.is_empty() && !r.is_empty() && !r.contains(' '))
                .ok_or_else(|| at(format!("{line:?} is not two tokens separated by one space")))?;
            let id = |t: &str| vocab.get(t).copied().ok_or_else(|| at(format!("{t:?} is not in vocab.json")));
            let merged = format!("{left}{right}");
            let pair = (id(left)?, id(right)?);
            let new = id(&merged)?;
            // A repeated pair takes its last line's rank, as `tokenizers` (which collects
            // the lines into a map) does.
            merges.insert(pair, (rank, new));
            rank += 1;
            hash.update((line.len() as u64).to_le_bytes());
            hash.update(line.as_bytes());
        }
        let digest: String = hash.finalize().iter().take(8).map(|b| format!("{b:02x}")).collect();
        Ok(Bpe { byte_ids, merges, bytes, id: format!("bpe-{digest}") })
    }

    /// `bpe-` and 16 hex digits of SHA-256 over the tokens (by id) and the merges (in
    /// order): two files that tokenize alike whatever their JSON formatting get the same id,
    /// which datasets and checkpoints record.
    pub fn id(&self) -> &str {
        &self.id
    }

    /// Tokens in the vocabulary.
    pub fn vocab_size(&self) -> usize {
        self.bytes.len()
    }

    /// Text → token ids.
    pub fn encode(&self, text: &str) -> Vec<u32> {
        let mut out = Vec::with_capacity(text.len() / 3 + 1);
        for piece in pieces(text) {
            self.encode_piece(piece.as_bytes(), &mut out);
        }
        out
    }

    /// Bytes → token ids: valid UTF-8 as [`Bpe::encode`]; each byte of an invalid sequence
    /// (a text file need not be UTF-8) becomes its one-byte token and cuts the text there.
    pub fn encode_bytes(&self, bytes: &[u8]) -> Vec<u32> {
        let mut out = Vec::with_capacity(bytes.len() / 3 + 1);
        for chunk in bytes.utf8_chunks() {
            for piece in pieces(chunk.valid()) {
                self.encode_piece(piece.as_bytes(), &mut out);
            }
            out.extend(chunk.invalid().iter().map(|&b| self.byte_ids[b as usize]));
        }
        out
    }

    /// Token ids → bytes (an id outside the vocabulary gives none).
    pub fn decode(&self, ids: &[u32]) -> Vec<u8> {
        let mut out = Vec::new();
        for &id in ids {
            out.extend_from_slice(self.token_bytes(id));
        }
        out
    }

    /// One token's bytes (none for an id outside the vocabulary).
    pub fn token_bytes(&self, id: u32) -> &[u8] {
        self.bytes.get(id as usize).map_or(&[], Vec::as_slice)
    }

    /// One piece's bytes through the merges, appended to `out`.
    fn encode_piece(&self, piece: &[u8], out: &mut Vec<u32>) {
        const NONE: usize = usize::MAX;
        struct Symbol {
            id: u32,
            prev: usize,
            next: usize,
            alive: bool,
        }
        let n = piece.len();
        let mut symbols: Vec<Symbol> = piece
            .iter()
            .enumerate()
            .map(|(i, &b)| Symbol {
                id: self.byte_ids[b as usize],
                prev: if i == 0 { NONE } else { i - 1 },
                next: if i + 1 == n { NONE } else { i + 1 },
                alive: true,
            })
            .collect();
        let mut queue: BinaryHeap<Reverse<(u32, usize)>> = BinaryHeap::new();
        let push = |queue: &mut BinaryHeap<_>, symbols: &[Symbol], at: usize| {
            let next = symbols[at].next;
            if next != NONE {
                if let Some(&(rank, _)) = self.merges.get(&(symbols[at].id, symbols[next].id)) {
                    queue.push(Reverse((rank, at)));
                }
            }
        };
        for at in 0..n.saturating_sub(1) {
            push(&mut queue, &symbols, at);
        }
        while let Some(Reverse((rank, at))) = queue.pop() {
            let next = symbols[at].next;
            if !symbols[at].alive || next == NONE {
                continue;
            }
            // Stale: one side was merged since this pair was queued.
            let Some(&(r, merged)) = self.merges.get(&(symbols[at].id, symbols[next].id)) else { continue };
            if r != rank {
                continue;
            }
            let after = symbols[next].next;
            symbols[at].id = merged;
            symbols[at].next = after;
            symbols[next].alive = false;
            if after != NONE {
                symbols[after].prev = at;
            }
            let prev = symbols[at].prev;
            if prev != NONE {
                push(&mut queue, &symbols, prev);
            }
            push(&mut queue, &symbols, at);
        }
        let mut at = if n == 0 { NONE } else { 0 };
        while at != NONE {
            out.push(symbols[at].id);
            at = symbols[at].next;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_byte_table_is_gpt2s() {
        let t = byte_to_char();
        assert_eq!((t[b'A' as usize], t[b' ' as usize], t[b'\n' as usize]), ('A', 'Ġ', 'Ċ'));
        assert_eq!((t[0], t[0xAD]), ('\u{100}', 'Ń'));
        let mut all: Vec<char> = t.to_vec();
        all.sort_unstable();
        all.dedup();
        assert_eq!(all.len(), 256);
    }

    #[test]
    fn pieces_follow_the_lookahead() {
        fn cut(t: &str) -> Vec<&str> {
            pieces(t).collect()
        }
        assert_eq!(cut("a  b"), ["a", " ", " b"]);
        assert_eq!(cut("a \nb"), ["a", " ", "\n", "b"]);
        assert_eq!(cut("x   "), ["x", "   "]);
        assert_eq!(cut("I'm 42!"), ["I", "'m", " 42", "!"]);
        assert_eq!(cut(""), Vec::<&str>::new());
    }
}

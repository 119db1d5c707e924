//! "byte-v1": one token per UTF-8 byte, vocabulary 256. Encoding is the identity on bytes;
//! decoding a stream needs care only because a character may span several tokens.

/// Text → token ids.
pub fn encode(text: &str) -> Vec<u32> {
    text.bytes().map(u32::from).collect()
}

/// Token ids → text; invalid UTF-8 (a model can emit any byte) becomes U+FFFD.
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

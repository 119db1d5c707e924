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
    pub fn new() -> Self {
        Self::default()
    }

    /// Adds one byte; returns the text it completes (possibly empty).
    pub fn push(&mut self, byte: u8) -> String {
        self.pending.push(byte);
        match std::str::from_utf8(&self.pending) {
            Ok(s) => {
                let out = s.to_string();
                self.pending.clear();
                out
            }
            Err(e) if e.error_len().is_none() && self.pending.len() < 4 => String::new(),
            Err(_) => {
                let out = decode(&self.pending);
                self.pending.clear();
                out
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
    fn invalid_bytes_become_replacement_characters() {
        let mut s = Utf8Stream::new();
        let text: String = [b'a', 0xFF, b'b'].iter().map(|&b| s.push(b)).collect();
        assert_eq!(text, "a\u{FFFD}b");
    }
}

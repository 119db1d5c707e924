//! JSON as ckpt writes it: indented at the top, one line per record below, so a tensor
//! table or a loss history reads as a list. The output depends only on the value (struct
//! field order, `BTreeMap` key order, serde_json's shortest round-trip floats), so native
//! and WASM builds write the same bytes.

use std::io::{self, Write};

use serde::de::DeserializeOwned;
use serde::Serialize;
use serde_json::ser::{CompactFormatter, Formatter, PrettyFormatter};

use crate::error::{CkptError, Result};

/// Pretty-prints containers up to `open_depth` levels deep (1 = the outermost) and
/// writes deeper ones on one line, followed by a final newline.
pub(crate) fn to_json<T: Serialize>(file: &str, value: &T, open_depth: usize) -> Result<Vec<u8>> {
    let mut out = Vec::new();
    let formatter = Layered { pretty: PrettyFormatter::new(), depth: 0, open_depth };
    let mut ser = serde_json::Serializer::with_formatter(&mut out, formatter);
    value
        .serialize(&mut ser)
        .map_err(|e| CkptError::InvalidCheckpoint { reason: format!("{file} cannot be written: {e}") })?;
    out.push(b'\n');
    Ok(out)
}

/// Parses `bytes`, naming `file` in the error.
pub(crate) fn from_json<T: DeserializeOwned>(file: &str, bytes: &[u8]) -> Result<T> {
    serde_json::from_slice(bytes)
        .map_err(|e| CkptError::InvalidJson { file: file.to_string(), reason: e.to_string() })
}

struct Layered {
    pretty: PrettyFormatter<'static>,
    depth: usize,
    open_depth: usize,
}

impl Layered {
    fn open(&self) -> bool {
        self.depth <= self.open_depth
    }
}

/// Calls the pretty formatter while `open()`, the compact one otherwise.
macro_rules! layered {
    ($self:ident, $method:ident($($arg:expr),*)) => {
        if $self.open() {
            $self.pretty.$method($($arg),*)
        } else {
            CompactFormatter.$method($($arg),*)
        }
    };
}

impl Formatter for Layered {
    fn begin_array<W: ?Sized + Write>(&mut self, w: &mut W) -> io::Result<()> {
        self.depth += 1;
        layered!(self, begin_array(w))
    }

    fn end_array<W: ?Sized + Write>(&mut self, w: &mut W) -> io::Result<()> {
        let r = layered!(self, end_array(w));
        self.depth -= 1;
        r
    }

    fn begin_array_value<W: ?Sized + Write>(&mut self, w: &mut W, first: bool) -> io::Result<()> {
        layered!(self, begin_array_value(w, first))
    }

    fn end_array_value<W: ?Sized + Write>(&mut self, w: &mut W) -> io::Result<()> {
        layered!(self, end_array_value(w))
    }

    fn begin_object<W: ?Sized + Write>(&mut self, w: &mut W) -> io::Result<()> {
        self.depth += 1;
        layered!(self, begin_object(w))
    }

    fn end_object<W: ?Sized + Write>(&mut self, w: &mut W) -> io::Result<()> {
        let r = layered!(self, end_object(w));
        self.depth -= 1;
        r
    }

    fn begin_object_key<W: ?Sized + Write>(&mut self, w: &mut W, first: bool) -> io::Result<()> {
        layered!(self, begin_object_key(w, first))
    }

    fn begin_object_value<W: ?Sized + Write>(&mut self, w: &mut W) -> io::Result<()> {
        layered!(self, begin_object_value(w))
    }

    fn end_object_value<W: ?Sized + Write>(&mut self, w: &mut W) -> io::Result<()> {
        layered!(self, end_object_value(w))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn records_below_the_open_depth_stay_on_one_line() {
        let v = json!({"a": 1, "rows": [{"x": [1, 2]}, {"x": []}]});
        let text = String::from_utf8(to_json("t", &v, 2).unwrap()).unwrap();
        assert_eq!(text, "{\n  \"a\": 1,\n  \"rows\": [\n    {\"x\":[1,2]},\n    {\"x\":[]}\n  ]\n}\n");
        let back: serde_json::Value = from_json("t", text.as_bytes()).unwrap();
        assert_eq!(back, v);
    }

    #[test]
    fn floats_round_trip_bit_for_bit() {
        let mut rng = tinygpt_tensor::Rng::new(3);
        for _ in 0..20_000 {
            let x = f32::from_bits(rng.next_u64() as u32);
            let y = f64::from_bits(rng.next_u64());
            if !x.is_finite() || !y.is_finite() {
                continue;
            }
            let text = to_json("t", &(x, y), 1).unwrap();
            let (x2, y2): (f32, f64) = from_json("t", &text).unwrap();
            assert_eq!((x.to_bits(), y.to_bits()), (x2.to_bits(), y2.to_bits()), "{x} {y}");
        }
    }
}

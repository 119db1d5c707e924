//! One buffer an op reads or writes, with the part of it that matters and its rule.

use crate::hooked::Rule;

/// `buffer[offset .. offset + len]` as an op's input or output, named as the trait names
/// the argument (`"a"`, `"probs"`, …). `len: None` means the whole buffer (an embedding
/// table, whose row count the op is not told; a backend's opaque saved state).
#[derive(Clone, Debug)]
pub struct Operand<S> {
    /// The argument's or output's name in the trait.
    pub name: &'static str,
    /// A handle to the buffer (a clone: handles share their buffer).
    pub buffer: S,
    /// First value that matters.
    pub offset: usize,
    /// Values that matter from `offset`; `None`: all of the buffer.
    pub len: Option<usize>,
    /// What those values must satisfy.
    pub rule: Rule,
}

impl<S: Clone> Operand<S> {
    /// The first `len` values of `buffer`, which must be finite.
    pub fn finite(name: &'static str, buffer: &S, len: usize) -> Self {
        Self::ruled(name, buffer, len, Rule::Finite)
    }

    /// The first `len` values of `buffer`, under `rule`.
    pub fn ruled(name: &'static str, buffer: &S, len: usize, rule: Rule) -> Self {
        Operand { name, buffer: buffer.clone(), offset: 0, len: Some(len), rule }
    }

    /// Every value of `buffer`, which must be finite.
    pub fn whole(name: &'static str, buffer: &S) -> Self {
        Operand { name, buffer: buffer.clone(), offset: 0, len: None, rule: Rule::Finite }
    }

    /// `buffer[offset .. offset + len]`, any values (only its length matters).
    pub fn range(name: &'static str, buffer: &S, offset: usize, len: usize) -> Self {
        Operand { name, buffer: buffer.clone(), offset, len: Some(len), rule: Rule::Any }
    }

    /// Why `values` (the whole buffer, as read back) is too short for the op's sizes, if it is.
    pub fn length_error(&self, values: &[f32]) -> Option<String> {
        let end = self.offset.checked_add(self.len.unwrap_or(0));
        match end {
            Some(end) if end <= values.len() => None,
            Some(end) => Some(format!("holds {} values, the sizes given need {end}", values.len())),
            None => Some(format!("offset {} plus length overflows", self.offset)),
        }
    }

    /// Which values break the rule, if any (`values` long enough: see [`Self::length_error`]).
    pub fn breach(&self, values: &[f32]) -> Option<String> {
        let end = self.len.map_or(values.len(), |len| self.offset + len);
        self.rule.breach(&values[self.offset..end], self.offset)
    }
}

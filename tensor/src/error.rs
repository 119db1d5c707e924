use thiserror::Error;

/// Failures a backend can report at run time. Shape mistakes are programming errors and
/// panic with a message naming the op; these are the errors a caller can meet with
/// correct code (a lost device, a failed readback).
#[derive(Debug, Error, Clone, PartialEq)]
// The variants' fields are the values their messages show.
#[allow(missing_docs)]
pub enum TensorError {
    /// A read back to host memory failed.
    #[error("reading a tensor back from the {backend} device failed: {reason}")]
    Readback { backend: String, reason: String },
    /// The device went away (lost, reset, or never there).
    #[error("the {backend} device is unavailable: {reason}")]
    DeviceLost { backend: String, reason: String },
    /// An allocation or a kernel failed for lack of device memory (reported by `read` or
    /// `flush`, since ops themselves do not wait).
    #[error("the {backend} device ran out of memory: {reason} (a smaller preset or batch size needs less)")]
    OutOfMemory { backend: String, reason: String },
    /// An op met or made a value that breaks its contract (NaN, infinity, a probability
    /// outside [0, 1], a buffer shorter than its shape): found by a checking backend such as
    /// `tinygpt-kernels-checked`, which names the first op that went wrong.
    #[error("{0}")]
    BadValue(Box<BadValue>),
}

/// Where a checking backend found a bad value: the op (its name, its call number counted
/// from 0 since the backend was made, its sizes), which operand, and what was wrong.
#[derive(Debug, Error, Clone, PartialEq)]
#[error("the checked backend stopped at op #{index} `{op}` ({shape}): {operand}: {detail}")]
pub struct BadValue {
    /// The op's name.
    pub op: String,
    /// The op's call number, counted from 0 since the backend was made.
    pub index: u64,
    /// The op's sizes.
    pub shape: String,
    /// Which operand (input or output) was bad.
    pub operand: String,
    /// What was wrong, with the offending values.
    pub detail: String,
}

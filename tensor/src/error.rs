use thiserror::Error;

/// Failures a backend can report at run time. Shape mistakes are programming errors and
/// panic with a message naming the op; these are the errors a caller can meet with
/// correct code (a lost device, a failed readback).
#[derive(Debug, Error, Clone, PartialEq)]
pub enum TensorError {
    #[error("reading a tensor back from the {backend} device failed: {reason}")]
    Readback { backend: String, reason: String },
    #[error("the {backend} device is unavailable: {reason}")]
    DeviceLost { backend: String, reason: String },
    /// An allocation or a kernel failed for lack of device memory (reported by `read` or
    /// `flush`, since ops themselves do not wait).
    #[error("the {backend} device ran out of memory: {reason} (a smaller preset or batch size needs less)")]
    OutOfMemory { backend: String, reason: String },
}

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
}

//! A third TinyGPT backend, useful on its own: [`Checked`] wraps any backend and checks
//! every op's inputs and outputs — buffer lengths against the op's sizes, NaN and
//! infinities, probabilities in [0, 1], variances, losses and second moments ≥ 0 — and
//! reports the first op that went wrong, with its name, sizes and offending values. It is
//! the tool for "my loss turned to NaN": wrap the backend, run the same step, read the error.
//!
//! ```
//! use tinygpt_kernels_checked::Checked;
//! use tinygpt_kernels_cpu::CpuBackend;
//! use tinygpt_tensor::{block_on, read_vec, Backend, TensorError};
//!
//! let backend = Checked::new(CpuBackend::new(1));
//! let x = backend.upload(&[1.0, f32::NAN, 3.0]);
//! let y = backend.scale(&x, 2.0, 3);
//! let Err(TensorError::BadValue(bad)) = block_on(read_vec(&backend, &y)) else { panic!() };
//! assert_eq!((bad.op.as_str(), bad.operand.as_str()), ("scale", "input a"));
//! ```
//!
//! It is a [`Hook`](tinygpt_tensor::Hook) on the one wrapper backend,
//! [`Hooked`](tinygpt_tensor::Hooked), which forwards every op; this crate only says what
//! to check around each, and passes the conformance kit (`tests/conformance.rs`).
#![warn(missing_docs)]

mod checked;

pub use checked::{Checked, Checks};
pub use tinygpt_tensor::Rule;

/// The README's examples, compiled and run as doctests.
#[cfg(doctest)]
#[doc = include_str!("../README.md")]
pub struct ReadmeDoctests;

//! The CPU backend of TinyGPT: [`CpuBackend`] implements [`tinygpt_tensor::Backend`]
//! with plain scalar Rust kernels (one file per op family under `kernels/`), and beside
//! them fast SIMD variants (`fast/`) chosen at run time ([`KernelVariant`], [`Kernels`]).
//!
//! The scalar kernels are the reference every SIMD or GPU kernel is compared with, through
//! the conformance kit in `tinygpt_tensor::conformance`; keep them obviously correct.
//! They are also meant to train real models, so the hot loops are written for the
//! auto-vectorizer and spread over a rayon pool, always in a way that gives the same
//! bits on any number of threads (see `parallel.rs`).
//!
//! Reductions: matmul and attention dot products accumulate in f32 in ascending index
//! order (as a GPU kernel would); row statistics (LayerNorm mean/variance, softmax
//! normalisers, cross-entropy sums) and `sum_rows`/`sum_squares` accumulate in f64.
#![warn(missing_docs)]

mod backend;
#[cfg(feature = "counting")]
pub mod counting;
mod error;
mod fast;
mod kernels;
mod ops;
mod parallel;
mod pool;
mod spin_pool;
mod storage;
mod variant;

pub use backend::CpuBackend;
pub use error::CpuBackendError;
pub use spin_pool::AwakeHold;
pub use storage::CpuBuffer;
pub use variant::{KernelVariant, Kernels};

/// The README's examples, compiled and run as doctests.
#[cfg(doctest)]
#[doc = include_str!("../README.md")]
pub struct ReadmeDoctests;

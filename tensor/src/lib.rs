//! The bottom layer of TinyGPT: a [`Tensor`] (shape + device handle) and the [`Backend`]
//! trait that kernel crates implement.
//!
//! Everything above this crate (autograd, model, optimizer) is generic over `B: Backend`
//! and never names a kernel crate; a composition root (the CLI, the web worker, tests)
//! picks one. Storage is a backend handle, so a GPU backend keeps a whole training step
//! on the device: the only way back to host memory is the explicit, async-capable
//! [`Backend::read`].
#![warn(missing_docs)]

mod backend;
#[cfg(feature = "conformance")]
pub mod conformance;
mod dims;
pub mod dropout;
mod error;
mod executor;
mod hooked;
mod precision;
mod rng;
mod shape;
mod tensor;

pub use backend::{assert_copy_in_bounds, layer_norm_backward_unfused, matmul_unfused, read_vec, Backend};
pub use dims::{
    AdamWStep, AttentionCache, AttentionDims, AttentionGrads, AttentionKeep, AttentionOut,
    CachedAttentionDims, CopyRange, CrossEntropyOut, LayerNormGrads, LayerNormOut, MatmulDims, MatmulFused,
    MatmulOut,
};
pub use dropout::DropoutMask;
pub use error::{BadValue, TensorError};
pub use executor::block_on;
pub use hooked::{Effect, Flow, Hook, Hooked, Op, Operand, Rule};
pub use precision::Precision;
pub use rng::Rng;
pub use shape::Shape;
pub use tensor::{Indices, Tensor};

/// The README's examples, compiled and run as doctests.
#[cfg(doctest)]
#[doc = include_str!("../README.md")]
pub struct ReadmeDoctests;

//! Reverse-mode automatic differentiation on a tape, over any [`Backend`].
//!
//! A [`Tape`] records each op as it runs forward; [`Tape::backward`] walks the records in
//! reverse and applies each op's derivative (all of them in `backward.rs`, one `match`
//! arm each). Leaves created with `requires_grad = false` are frozen: no gradient flows
//! into them and no work is spent on them, which is what LoRA fine-tuning needs. A tape
//! made with [`Tape::no_grad`] records nothing, for inference.
//!
//! [`Backend`]: tinygpt_tensor::Backend
#![warn(missing_docs)]

mod backward;
pub mod gradcheck;
mod gradients;
mod ops;
mod tape;

pub use gradients::Gradients;
pub use tape::{Tape, Var};

/// The README's examples, compiled and run as doctests.
#[cfg(doctest)]
#[doc = include_str!("../README.md")]
pub struct ReadmeDoctests;

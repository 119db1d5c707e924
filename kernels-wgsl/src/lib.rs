//! The GPU backend of TinyGPT: [`WgpuBackend`] implements [`tinygpt_tensor::Backend`] with
//! WGSL compute kernels through wgpu (Vulkan and Metal natively, WebGPU in a browser).
//!
//! How a training step stays on the device:
//! - **Recording.** Ops encode dispatches into one pending command encoder
//!   (`recorder.rs`); nothing is submitted until [`tinygpt_tensor::Backend::read`] (or
//!   [`tinygpt_tensor::Backend::flush`]) needs it, so a step's only host sync is its loss readback.
//! - **No allocation in steady state.** Op results come from a buffer pool keyed by size
//!   class (`pool.rs`): a buffer goes back to the pool when its last handle drops, and
//!   GPU order on the one queue makes reusing it in later commands safe. Kernel
//!   parameters go into slots of one uniform arena (dynamic offsets); pipelines, layouts
//!   and bind groups are cached (`pipelines.rs`, `recorder.rs`). [`WgpuStats`] counts
//!   what was created, so tests can check that a second training step creates nothing.
//! - **Errors.** Validation, out-of-memory and device-loss reports are caught (never the
//!   default panic) and come back as [`tinygpt_tensor::TensorError`] from the next read.
//!
//! Kernels live in `src/shaders/*.wgsl`, forward and backward side by side with their
//! shapes at the top, like `kernels-cpu/src/kernels/`; `common.wgsl` (and
//! `block_reduce.wgsl` where a kernel reduces over a workgroup) is prepended, and matmul's
//! tile, transpose, split and batch variants are generated constants (`matmul.rs`; attention's
//! per-head products are batched matmuls too).
//!
//! Precision: every buffer is f32 and every kernel computes in f32, except the matmul under
//! [`tinygpt_tensor::Precision::Mixed`] ([`WgpuBackend::new_with_precision`]): on an adapter
//! with `shader-f16`, and once its start-up self-test against the f32 matmul passed on the
//! device (`self_test.rs`), its generated variants round op(A) and op(B) to f16 as they are
//! staged and accumulate in f32 (`precision.rs`, `shaders/matmul.wgsl`); attention's
//! products narrow with it, its softmax does not, and the training pair runs flash
//! attention (`flash_attention.rs`: no `[B, H, T, T]` probabilities). Otherwise, and always
//! for `f32`, the kernels are the f32 ones, bit for bit; [`WgpuBackend::matmul_precision`] says which ran
//! and why. Where the adapter offers 16×16×16 f16×f16→f32 cooperative matrices (tensor
//! cores) and wgpu the features, mixed runs its products on them instead
//! (`coop.rs`, `shaders/matmul_coop.wgsl`; the only kernel using subgroups), again only
//! after its own start-up self-test; the f32 paths run on any adapter.
//!
//! Where the time goes: [`WgpuBackend::new_profiled`] times every dispatch
//! (`examples/step_profile.rs` prints a training step's breakdown); `tuning.rs` holds the
//! few speed knobs.
#![warn(missing_docs)]
// On wasm32 wgpu's WebGPU handles are neither `Send` nor `Sync`, so clippy flags the `Arc`s
// around them; there the backend lives on the one thread that made it (the worker's), and
// `Arc` keeps one type for both targets.
#![cfg_attr(target_arch = "wasm32", allow(clippy::arc_with_non_send_sync))]

mod backend;
mod coop;
mod copy_many;
mod error;
mod flash_attention;
mod matmul;
mod ops;
mod pipelines;
mod pool;
mod precision;
mod profile;
mod recorder;
mod reductions;
mod self_test;
#[cfg(not(target_arch = "wasm32"))]
pub mod testing;
mod tuning;

pub use backend::{AdapterSummary, MatmulPath, WgpuBackend, WgpuStats};
pub use error::WgpuBackendError;
pub use flash_attention::FlashAttention;
pub use pool::GpuBuffer;
pub use precision::{MatmulKernels, MatmulPrecision};
pub use profile::KernelTime;
pub use reductions::RowReductions;

/// The README's examples, compiled and run as doctests.
#[cfg(doctest)]
#[doc = include_str!("../README.md")]
pub struct ReadmeDoctests;

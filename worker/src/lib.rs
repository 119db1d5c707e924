//! The TinyGPT Web Worker: the page's messages in, training, sampling and checkpoints out.
//!
//! Layout: [`protocol`] (the messages, plain serde), [`session`] (one run, advanced in
//! time-budgeted ticks; it trains and evaluates in [`row_parts`] of a batch),
//! [`sampler`] (a `tinygpt_model::Generation` streamed as text, a token at a time),
//! [`presets`] (what the picker shows), [`fits`] (what a tab or a GPU buffer can hold), [`adapters`] (LoRA: the frozen base and the adapter
//! store; the adapter runs themselves are sessions' runs, `session/lora.rs`; [`hf_base`] a
//! Hugging Face GPT-2 folder as the base, [`base_cache`] where one fetched by URL is kept,
//! [`fetch`] the downloads' platform trait), [`engine`] (the session on the CPU or WebGPU backend
//! `init` chose; on the CPU through [`abandon`], which lets a page message give a whole step
//! up), [`self_test`] (the numerics check a GPU must pass first) and [`router`] (each page message to
//! the session, the stores and the Web [`locks`], over small platform traits). Everything above
//! compiles and is tested natively; `web` (wasm32 only) is the thin shim that binds the router
//! to JavaScript, the browser's stores and its Web Locks. The JS
//! side is `www/worker.js`; the protocol is documented in `PROTOCOL.md`.

pub mod abandon;
pub mod adapters;
pub mod base_cache;
pub mod checkpoints;
pub mod clock;
pub mod engine;
pub mod error;
pub mod fetch;
pub mod fits;
pub mod hf_base;
pub mod incoming;
pub mod interrupt;
pub mod locks;
pub mod presets;
pub mod protocol;
pub mod router;
pub mod row_parts;
pub mod sampler;
pub mod self_test;
pub mod session;
#[cfg(target_arch = "wasm32")]
mod web;

/// `initThreadPool(n)` for the page's JS (the `threads` build only): starts rayon's global
/// pool of `n` Web Workers sharing this module's memory; `worker.js` awaits it before
/// `new WorkerApp`.
#[cfg(all(target_arch = "wasm32", feature = "threads"))]
pub use wasm_bindgen_rayon::init_thread_pool;

pub use error::WorkerError;
pub use session::Session;

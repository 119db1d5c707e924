//! The TinyGPT model: a pre-LayerNorm GPT with tied embeddings, over bytes (`byte-v1`) or
//! GPT-2's byte-level BPE ([`tokenizer`]).
//!
//! Architecture (the contract checkpoints and outside tools rely on):
//! token embedding `[vocab, d]` (256 for bytes) + position embedding `[ctx, d]`; `n_layers` blocks of
//! `x += o_proj(causal_mha(q_proj, k_proj, v_proj of ln1(x)))`,
//! `x += fc_out(gelu_tanh(fc_in(ln2(x))))`; a final LayerNorm; logits `= x · token_embeddingᵀ`.
//! Every linear has a bias; LayerNorm eps is 1e-5; attention is scaled by `1/sqrt(head_dim)`;
//! dropout (`dropout` in the config, 0 by default) as in [`dropout`]. Parameter names, order and layouts: [`ModelConfig::tensor_specs`], written once in
//! [`GptParts::build`].
#![warn(missing_docs)]

pub mod count_models;
pub mod data;
pub mod dropout;
mod error;
mod gpt;
pub mod head_loss;
mod kv_cache;
pub mod lora;
pub mod memory;
mod params;
mod sample;
pub mod tokenizer;

pub use count_models::{count_model_losses, CountModelLosses};
pub use data::{Batch, Dataset, Split, SplitTokens};
pub use dropout::DropoutDraw;
pub use error::ModelError;
pub use gpt::{Forward, Gpt, LinearDelta, LN_EPS};
pub use kv_cache::KvCache;
pub use lora::{Lora, DEFAULT_LORA_LEARNING_RATE};
pub use memory::{
    adapter_training_memory_bytes, check_adapter_training_memory, check_training_memory, largest_tensor,
    training_memory_bytes,
};
pub use params::{windowed_weights, Params};
pub use sample::{pick_token, pick_token_id, Generation, SampleConfig};
/// The architecture, dataset manifest and adapter config as plain data (they live in
/// `tinygpt-run` so that the checkpoint format reads them without the training crates).
pub use tinygpt_run::{
    Block, ConfigError, DatasetManifest, GptParts, Init, LayerNorm, Linear, LinearKind, LoraConfig,
    ModelConfig, Preset, TensorDecl, TensorSpec,
};
pub use tokenizer::Tokenizer;

/// The README's examples, compiled and run as doctests.
#[cfg(doctest)]
#[doc = include_str!("../README.md")]
pub struct ReadmeDoctests;

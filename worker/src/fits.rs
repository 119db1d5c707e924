//! Refusals made before anything is allocated: a model the tab's WebAssembly memory cannot
//! train, or a tensor larger than one GPU buffer. Its own module so that the checkpoint and
//! adapter stores, which check what they load, need not import the session.

use tinygpt_model::memory::WASM32_ADDRESS_SPACE;
use tinygpt_model::{check_adapter_training_memory, check_training_memory, LoraConfig, ModelConfig};
use tinygpt_tensor::{Backend, TensorError};

use crate::error::WorkerError;
use crate::protocol::ErrorCode;

/// The memory a browser tab's WebAssembly can address, as the refusal names it.
const WASM32_BUDGET: &str = "the memory WebAssembly can address in a browser tab";

/// Refuses, before anything is allocated, a model the worker's wasm32 memory cannot train
/// (the estimate the CLI and the preset picker use): an allocation failure would kill the
/// worker instead.
pub fn check_fits_wasm32(model: &ModelConfig, batch: usize) -> Result<(), WorkerError> {
    check_training_memory(model, batch, WASM32_ADDRESS_SPACE, WASM32_BUDGET)?;
    Ok(())
}

/// The window an adapter run trains on when `trainAdapter` names none: the base's context
/// when it is shorter. What an adapter learns (a style, a vocabulary) shows in windows of
/// a few hundred tokens, while a GPT-2 base's full 1,024 would quadruple a step's
/// activations and make a 124M base too large for a tab at batch 4 (see
/// [`check_adapter_fits_wasm32`]). 256 is the native benchmark's window
/// (`configs/gpt2-124m-lora.json`, whose model has a context of 256).
pub const DEFAULT_ADAPTER_WINDOW: usize = 256;

/// The window an adapter run on `model` trains on: `requested`, or
/// [`DEFAULT_ADAPTER_WINDOW`] capped at the base's context. Refused, with what to give,
/// when it is 0 or longer than the base's context (its position table has no rows past it).
pub fn adapter_window(model: &ModelConfig, requested: Option<usize>) -> Result<usize, WorkerError> {
    let context = model.context_length;
    match requested {
        None => Ok(DEFAULT_ADAPTER_WINDOW.min(context)),
        Some(w) if (1..=context).contains(&w) => Ok(w),
        Some(w) => Err(WorkerError::new(
            ErrorCode::InvalidConfig,
            format!(
                "An adapter cannot train on windows of {w} tokens on this base. Give a context of 1 to {context} \
                 tokens (the base's own context), or leave it out for {}.",
                DEFAULT_ADAPTER_WINDOW.min(context)
            ),
        )),
    }
}

/// The window a saved adapter `name` continues training on: the one it `recorded` (its
/// `adapter_config.json`'s `context_length`), which a `requested` window must equal, since
/// on another window its batches, and so its continuation, would differ from the run it
/// was; an adapter saved before windows were recorded takes [`adapter_window`] of
/// `requested`.
pub fn resumed_window(
    model: &ModelConfig,
    name: &str,
    recorded: Option<usize>,
    requested: Option<usize>,
) -> Result<usize, WorkerError> {
    match (recorded, requested) {
        (None, requested) => adapter_window(model, requested),
        (Some(w), Some(r)) if r != w => Err(WorkerError::new(
            ErrorCode::ContextMismatch,
            format!(
                "Adapter \"{name}\" was trained on windows of {w} tokens, so it continues on windows of {w} tokens, \
                 not {r}. Leave the context out (or give {w}) to continue it, or train a new adapter on windows \
                 of {r} tokens."
            ),
        )),
        (Some(w), _) => adapter_window(model, Some(w)),
    }
}

/// Refuses, before anything is allocated, an adapter run the worker's wasm32 memory cannot
/// hold: `lora` on the frozen `model` at `batch` rows of `window` tokens
/// ([`tinygpt_model::adapter_training_memory_bytes`]: the base's weights without gradients or
/// moments, activations at the window), plus the loaded base's own flat copy of its weights,
/// which the worker keeps beside the run's (for samples of the base alone, merges and the
/// next run). A full-training estimate here would refuse a GPT-2-124M base that an adapter
/// trains on in about 3.5 GB.
pub fn check_adapter_fits_wasm32(
    model: &ModelConfig,
    lora: &LoraConfig,
    batch: usize,
    window: usize,
) -> Result<(), WorkerError> {
    let base_copy = 4u64.saturating_mul(model.param_count() as u64);
    check_adapter_training_memory(
        model,
        lora,
        batch,
        window,
        base_copy,
        WASM32_ADDRESS_SPACE,
        WASM32_BUDGET,
    )?;
    Ok(())
}

/// Refuses, before its weights are read, a base no adapter could train on in the tab: the
/// default adapter (`qv-r4`, what `trainAdapter` trains when it names none) at `batch` rows
/// of the default window ([`adapter_window`]).
pub fn check_base_fits_wasm32(model: &ModelConfig, batch: usize) -> Result<(), WorkerError> {
    let lora =
        LoraConfig::preset("qv-r4").map_err(|e| WorkerError::new(ErrorCode::Internal, e.to_string()))?;
    check_adapter_fits_wasm32(model, &lora, batch, adapter_window(model, None)?)
}

/// Refuses, before anything is allocated, a model one of whose tensors is larger than one
/// buffer of `backend` ([`Backend::max_tensor_len`]: on WebGPU the adapter's largest storage
/// binding, 128 MiB unless the adapter offers more), naming the tensor, the limit and by how
/// much it is over. The optimizer's flat buffers are not a reason: they shard.
pub fn check_fits_one_buffer<B: Backend>(
    backend: &B,
    model: &ModelConfig,
    batch: usize,
) -> Result<(), WorkerError> {
    let (what, values) = tinygpt_model::largest_tensor(model, batch);
    let limit = backend.max_tensor_len() as u64;
    if values <= limit {
        return Ok(());
    }
    let mib = |values: u64| values as f64 * 4.0 / (1024.0 * 1024.0);
    // The same refusal the GPU's own allocation makes (out of memory, naming the binding),
    // before anything is allocated: the page offers to continue on WebAssembly.
    let reason = format!(
        "its largest tensor ({what}) needs {:.1} MiB in one buffer, {:.1} MiB more than this adapter's \
         largest storage binding ({} bytes), {:.1} MiB (maxStorageBufferBindingSize)",
        mib(values),
        mib(values - limit),
        limit * 4,
        mib(limit),
    );
    Err(WorkerError::from(TensorError::OutOfMemory { backend: "wgpu".into(), reason }))
}

//! Refusals made before anything is allocated: a model the tab's WebAssembly memory cannot
//! train, or a tensor larger than one GPU buffer. Its own module so that the checkpoint and
//! adapter stores, which check what they load, need not import the session.

use tinygpt_model::memory::WASM32_ADDRESS_SPACE;
use tinygpt_model::{check_training_memory, ModelConfig};
use tinygpt_tensor::{Backend, TensorError};

use crate::error::WorkerError;

/// The memory a browser tab's WebAssembly can address, as the refusal names it.
const WASM32_BUDGET: &str = "the memory WebAssembly can address in a browser tab";

/// Refuses, before anything is allocated, a model the worker's wasm32 memory cannot train
/// (the estimate the CLI and the preset picker use): an allocation failure would kill the
/// worker instead.
pub fn check_fits_wasm32(model: &ModelConfig, batch: usize) -> Result<(), WorkerError> {
    check_training_memory(model, batch, WASM32_ADDRESS_SPACE, WASM32_BUDGET)?;
    Ok(())
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

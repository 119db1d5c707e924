//! Planning within the adapter's limits: a tensor that no storage binding can hold is
//! refused with an error that names the sizes (from `flush`), not a panic or wgpu's
//! validation text. Lavapipe offers 128 MiB bindings, so the tensor here is 128 MiB + 4 B.

use tinygpt_kernels_wgsl::testing::own_backend;
use tinygpt_tensor::{block_on, Backend, TensorError};

#[test]
fn a_tensor_above_the_largest_storage_binding_is_refused_naming_the_limit() {
    // A backend of its own: the error is sticky and would fail the other tests' shared one.
    let Some(gpu) = own_backend() else { return };
    let limit = gpu.adapter().max_storage_buffer_binding_size;
    let len = (limit / 4 + 1) as usize;
    let _too_big = gpu.zeros(len);
    match block_on(gpu.flush()) {
        Err(TensorError::OutOfMemory { reason, .. }) => {
            assert!(reason.contains("largest storage binding"), "{reason}");
            assert!(reason.contains(&limit.to_string()), "{reason}");
        }
        other => panic!("expected an out-of-memory error naming the binding limit, got {other:?}"),
    }
}

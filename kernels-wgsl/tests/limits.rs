//! Planning within the adapter's limits: a tensor that no storage binding can hold is
//! refused with an error that names the sizes (from `flush`), not a panic or wgpu's
//! validation text. Lavapipe offers 128 MiB bindings, so the tensor here is 128 MiB + 4 B.

use tinygpt_kernels_wgsl::testing::own_backend;
use tinygpt_tensor::{block_on, read_vec, Backend, TensorError};

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

#[test]
fn an_elementwise_op_past_the_per_dimension_workgroup_limit_covers_every_element() {
    let Some(gpu) = tinygpt_kernels_wgsl::testing::shared_backend() else { return };
    // 30M elements: over 65,535 workgroups of 256 (the limit on lavapipe and most adapters),
    // so the grid is folded into two dimensions; still under a 128 MiB binding.
    let len = 30_000_000usize;
    let folded_at = 65_535 * 256;
    assert!(len > folded_at && len * 4 <= gpu.adapter().max_storage_buffer_binding_size as usize);
    let data: Vec<f32> = (0..len).map(|i| (i % 1013) as f32).collect();
    let x = gpu.upload(&data);
    let y = gpu.scale(&x, 2.0, len);
    let got = block_on(read_vec(&gpu, &y)).expect("read");
    assert_eq!(got.len(), len);
    for (i, (&g, &d)) in got.iter().zip(&data).enumerate() {
        assert_eq!(g, 2.0 * d, "element {i} of {len}");
    }
}

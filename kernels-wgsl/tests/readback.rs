//! A read abandoned before its mapping completes (the worker stops waiting for the device
//! when a page message arrives: `worker/src/interrupt.rs`) still returns its staging buffer
//! to the pool, so interrupted waits do not create a new buffer each time.

use tinygpt_kernels_wgsl::testing::own_backend;
use tinygpt_tensor::{block_on, read_vec, Backend};

#[test]
fn an_abandoned_read_returns_its_staging_buffer_to_the_pool() {
    // A backend of its own: the test counts the buffers it creates.
    let Some(gpu) = own_backend() else { return };
    let x = gpu.upload(&vec![1.5f32; 1000]);
    assert_eq!(block_on(read_vec(&gpu, &x)).expect("read"), vec![1.5f32; 1000]);
    let before = gpu.stats().buffers;
    for _ in 0..5 {
        // Copied and mapped at once, then dropped without being awaited.
        drop(gpu.read(&x, &mut Vec::new()));
        assert_eq!(block_on(read_vec(&gpu, &x)).expect("read after an abandoned one"), vec![1.5f32; 1000]);
    }
    // The first abandoned read's buffer comes back only when its mapping completes (during
    // the next read), so that read makes one more; after that both are reused.
    let made = gpu.stats().buffers - before;
    assert!(made <= 1, "{made} staging buffers made for 5 abandoned reads");
}

//! The backend conformance kit (`tinygpt_tensor::conformance`) on WebGPU in headless
//! Chromium (SwiftShader under `--enable-unsafe-webgpu`, see `webdriver.json`), every check
//! awaited so readbacks complete as the browser's event loop turns. Only the checks that
//! catch panics are left out (wasm32 aborts on a panic). Run by `cargo xtask test`:
//!
//! ```text
//! CARGO_TARGET_WASM32_UNKNOWN_UNKNOWN_RUNNER=wasm-bindgen-test-runner CHROMEDRIVER=/usr/bin/chromedriver \
//!   cargo test -p tinygpt-kernels-wgsl --test browser_conformance --target wasm32-unknown-unknown
//! ```
#![cfg(target_arch = "wasm32")]

use std::cell::RefCell;

use tinygpt_kernels_wgsl::{MatmulPath, WgpuBackend};

wasm_bindgen_test::wasm_bindgen_test_configure!(run_in_browser);

/// One backend for the whole page (pipelines compile once); tests run one after another
/// on the page's thread, where WebGPU handles must stay.
async fn shared_backend() -> WgpuBackend {
    thread_local!(static SHARED: RefCell<Option<WgpuBackend>> = const { RefCell::new(None) });
    if let Some(backend) = SHARED.with(|s| s.borrow().clone()) {
        return backend;
    }
    let backend = WgpuBackend::new_async().await.unwrap_or_else(|e| {
        panic!("{e} (Chromium gives a WebGPU adapter only with --enable-unsafe-webgpu; see webdriver.json)")
    });
    SHARED.with(|s| *s.borrow_mut() = Some(backend.clone()));
    backend
}

/// The adapter's default matmul kernel (on SwiftShader, a CPU adapter: the direct one).
mod default_matmul {
    tinygpt_tensor::backend_conformance_browser_tests!(crate::shared_backend().await);
}

/// The workgroup-tiled kernel, the one real GPUs take, under the browser's limits.
mod tiled_matmul {
    use super::*;
    tinygpt_tensor::backend_conformance_browser_tests!(shared_backend()
        .await
        .with_matmul_path(MatmulPath::Tiled));
}

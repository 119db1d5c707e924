//! The backend conformance kit (`tinygpt_tensor::conformance`) on WebGPU in headless
//! Chromium (SwiftShader under `--enable-unsafe-webgpu`, see `webdriver.json`), every check
//! awaited so readbacks complete as the browser's event loop turns. Only the checks that
//! catch panics are left out (wasm32 aborts on a panic). Also `mixed` precision: its
//! fallback to f32 where the adapter has no `shader-f16` (SwiftShader), and the kit on it
//! where it has. Run by `cargo xtask test`:
//!
//! ```text
//! CARGO_TARGET_WASM32_UNKNOWN_UNKNOWN_RUNNER=wasm-bindgen-test-runner CHROMEDRIVER=/usr/bin/chromedriver \
//!   cargo test -p tinygpt-kernels-wgsl --test browser_conformance --target wasm32-unknown-unknown
//! ```
#![cfg(target_arch = "wasm32")]

use std::cell::RefCell;

use tinygpt_kernels_wgsl::{MatmulKernels, MatmulPath, WgpuBackend};
use tinygpt_tensor::Precision;

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

/// A backend opened for `mixed`, shared like [`shared_backend`]'s.
async fn mixed_backend() -> WgpuBackend {
    thread_local!(static SHARED: RefCell<Option<WgpuBackend>> = const { RefCell::new(None) });
    if let Some(backend) = SHARED.with(|s| s.borrow().clone()) {
        return backend;
    }
    let backend = WgpuBackend::new_async_with_precision(Precision::Mixed).await.unwrap();
    SHARED.with(|s| *s.borrow_mut() = Some(backend.clone()));
    backend
}

/// `mixed` asked for: without `shader-f16` (SwiftShader has none) the matmul falls back to
/// f32 and the report says why; with it, the shader-f16 path passed its self-test.
#[wasm_bindgen_test::wasm_bindgen_test]
async fn mixed_without_shader_f16_falls_back_to_f32_and_says_so() {
    let backend = mixed_backend().await;
    let report = backend.matmul_precision();
    wasm_bindgen_test::console_log!("{}: {report}", backend.adapter().name);
    assert_eq!(report.requested, Precision::Mixed);
    if backend.adapter().shader_f16 {
        assert_eq!(report.kernels, MatmulKernels::ShaderF16, "{report}");
    } else {
        assert_eq!(report.kernels, MatmulKernels::F32, "{report}");
        let line = report.to_string();
        assert!(line.starts_with("f32: mixed was asked for but") && line.contains("no shader-f16"), "{line}");
    }
}

/// The kit on `mixed` where the adapter offers `shader-f16`; elsewhere (SwiftShader) each
/// test returns at once, the fallback being checked above.
mod mixed {
    use super::*;

    async fn mixed_kit_backend() -> Option<WgpuBackend> {
        let backend = mixed_backend().await;
        (backend.matmul_precision().kernels == MatmulKernels::ShaderF16).then_some(backend)
    }

    tinygpt_tensor::backend_conformance_browser_tests!(precision: Mixed => match mixed_kit_backend().await {
        Some(backend) => backend,
        None => return,
    });
}

//! Which engine `init` trains on: WebGPU when the page allows it (`auto` or `webgpu`), the
//! browser offers a GPU (`navigator.gpu.requestAdapter()`), wgpu opens a device on it and
//! the [`crate::self_test`] passes there; otherwise this build's CPU kernels, with one line
//! saying why.
//!
//! The GPU handles stay on this (the worker's) thread: the engine lives in the router's
//! session slot and is never sent anywhere.

use std::rc::Rc;

use tinygpt_kernels_wgsl::{MatmulKernels, MatmulPath, WgpuBackend};
use tinygpt_tensor::Precision;

use crate::abandon::Abandon;
use crate::engine::Engine;
use crate::protocol::{BackendChoice, EngineKind, WebgpuInfo};
use crate::self_test::self_test;

/// What the JS side saw of WebGPU (see [`super::Environment`]).
pub struct GpuProbe<'a> {
    /// The GPU the browser offers, if any.
    pub gpu: Option<&'a WebgpuInfo>,
    /// Why there is none, when there is none.
    pub note: Option<&'a str>,
}

/// The engine to train on and, when it is not WebGPU, why not: one line that gives the
/// reason only (the page shows it beside the engine's name, which it never repeats).
pub async fn choose(
    choice: BackendChoice,
    probe: GpuProbe<'_>,
    cpu: EngineKind,
    checked: bool,
    abandon: Rc<Abandon>,
) -> (Engine, Option<String>) {
    if checked {
        let note = "developer mode: every op checked (slow; WebGPU is not checked in a tab).".to_string();
        return (Engine::checked_cpu(cpu, abandon), Some(note));
    }
    let why_not = match choice {
        BackendChoice::Wasm
        | BackendChoice::WasmSimd
        | BackendChoice::WasmRelaxedSimd
        | BackendChoice::WasmSimdThreads
        | BackendChoice::WasmRelaxedSimdThreads => "chosen in the Backend setting".to_string(),
        BackendChoice::Auto | BackendChoice::Webgpu => match open_webgpu(&probe).await {
            Ok(engine) => return (engine, None),
            Err(why) => why,
        },
    };
    (Engine::cpu(cpu, abandon), Some(format!("{}.", why_not.trim_end_matches('.'))))
}

/// A WebGPU engine that passed the self-test, or why there is none.
///
/// Two handles, so `f32` stays bit for bit what it was and `mixed` gets the f16 path where
/// the device offers it: kernels-wgsl decides what a device's matmul runs once, as it
/// opens. The device is opened for mixed (it asks for `shader-f16` only where the GPU has
/// it, and self-tests the f16 matmul; see `WgpuBackend::matmul_precision`). Where that
/// chose f32 kernels (no `shader-f16`, as on SwiftShader, or a failed self-test) the one
/// device serves both precisions; where it chose the f16 path, f32 runs get a device of
/// their own, opened for f32.
async fn open_webgpu(probe: &GpuProbe<'_>) -> Result<Engine, String> {
    let Some(gpu) = probe.gpu else {
        return Err(probe.note.unwrap_or("No WebGPU adapter").to_string());
    };
    let open_error = |e| format!("WebGPU could not be opened ({e})");
    let mixed = WgpuBackend::new_async_with_precision(Precision::Mixed).await.map_err(open_error)?;
    let f32 = match mixed.matmul_precision().kernels {
        MatmulKernels::F32 => mixed.clone(),
        _ => WgpuBackend::new_async().await.map_err(open_error)?,
    };
    // Software GPUs (SwiftShader) run workgroup barriers as context switches, so the
    // barrier-free matmul is faster there (see kernels-wgsl's `MatmulPath`).
    let direct = |backend: WgpuBackend| {
        if gpu.fallback_adapter {
            backend.with_matmul_path(MatmulPath::Direct)
        } else {
            backend
        }
    };
    let (f32, mixed) = (direct(f32), direct(mixed));
    self_test(&f32).await.map_err(|e| format!("WebGPU failed the self-test ({e})"))?;
    Ok(Engine::webgpu(f32, mixed))
}

//! Which engine `init` trains on: WebGPU when the page allows it (`auto` or `webgpu`), the
//! browser offers an adapter, wgpu opens a device on it and the [`crate::self_test`]
//! passes there; otherwise this build's CPU kernels, with one line saying why.
//!
//! The GPU handles stay on this (the worker's) thread: the engine lives in the worker's
//! session slot and is never sent anywhere.

use std::rc::Rc;

use tinygpt_kernels_wgsl::{MatmulPath, WgpuBackend};

use crate::abandon::Abandon;
use crate::engine::Engine;
use crate::protocol::{BackendChoice, EngineKind, WebgpuInfo};
use crate::self_test::self_test;

/// What the JS side saw of WebGPU (see `Environment`).
pub struct Probe<'a> {
    pub adapter: Option<&'a WebgpuInfo>,
    /// Why there is no adapter, when there is none.
    pub note: Option<&'a str>,
}

/// The engine to train on and, when it is not WebGPU, why not (one line).
pub async fn choose(
    choice: BackendChoice,
    probe: Probe<'_>,
    wasm: EngineKind,
    checked: bool,
    abandon: Rc<Abandon>,
) -> (Engine, Option<String>) {
    if checked {
        let note = format!(
            "developer mode: every op checked on {} (slow; WebGPU is not checked in a tab).",
            name(wasm)
        );
        return (Engine::checked_cpu(wasm, abandon), Some(note));
    }
    let why_not = match choice {
        BackendChoice::Wasm
        | BackendChoice::WasmSimd
        | BackendChoice::WasmRelaxedSimd
        | BackendChoice::WasmSimdThreads
        | BackendChoice::WasmRelaxedSimdThreads => {
            format!("{} was chosen", name(wasm))
        }
        BackendChoice::Auto | BackendChoice::Webgpu => match open_webgpu(&probe).await {
            Ok(engine) => return (engine, None),
            Err(why) => why,
        },
    };
    (
        Engine::cpu(wasm, abandon),
        Some(format!("{}: training on {}.", why_not.trim_end_matches('.'), name(wasm))),
    )
}

/// A WebGPU engine that passed the self-test, or why there is none.
async fn open_webgpu(probe: &Probe<'_>) -> Result<Engine, String> {
    let Some(adapter) = probe.adapter else {
        return Err(probe.note.unwrap_or("No WebGPU adapter").to_string());
    };
    let gpu = WgpuBackend::new_async().await.map_err(|e| format!("WebGPU could not be opened ({e})"))?;
    // Software adapters (SwiftShader) run workgroup barriers as context switches, so the
    // barrier-free matmul is faster there (see kernels-wgsl's `MatmulPath`).
    let gpu = if adapter.fallback_adapter { gpu.with_matmul_path(MatmulPath::Direct) } else { gpu };
    self_test(&gpu).await.map_err(|e| format!("WebGPU failed the self-test ({e})"))?;
    Ok(Engine::webgpu(gpu))
}

/// The protocol's name for a backend, as the note says it.
pub fn name(kind: EngineKind) -> &'static str {
    match kind {
        EngineKind::WasmSimd => "wasm-simd",
        EngineKind::WasmRelaxedSimd => "wasm-relaxed-simd",
        EngineKind::WasmSimdThreads => "wasm-simd-threads",
        EngineKind::WasmRelaxedSimdThreads => "wasm-relaxed-simd-threads",
        EngineKind::Wasm => "wasm",
        EngineKind::Webgpu => "webgpu",
    }
}

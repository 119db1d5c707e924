//! [`Engine`]: the worker's [`Session`] on whichever backend `init` chose — the CPU
//! kernels (compiled as scalar or SIMD wasm) or WebGPU through `tinygpt-kernels-wgsl`.
//!
//! Why an enum: `tinygpt_tensor::Backend` is generic (its reads return `impl Future`), so
//! it has no trait objects, and the backend is only known at run time (after the GPU
//! probe and the [`crate::self_test`]). `Session<B>` holds all the logic once; this file
//! only forwards each call to the variant in use (the `on_session!` match), so no session
//! code is written per backend.

use std::rc::Rc;

use tinygpt_ckpt::{AdapterCheckpoint, Checkpoint};
use tinygpt_kernels_checked::Checked;
use tinygpt_kernels_cpu::CpuBackend;
use tinygpt_kernels_wgsl::WgpuBackend;
use tinygpt_tensor::Precision;

use crate::abandon::{Abandon, Abandonable};
use crate::adapters::BaseModel;
use crate::checkpoints::{restore, snapshot};
use crate::clock::Clock;
use crate::error::WorkerError;
use crate::interrupt::Interrupt;
use crate::protocol::{DatasetInput, EngineKind, MatmulInfo, OutMessage, RunState};
use crate::session::{adapter_snapshot, AdapterRequest, SampleRequest, Session, TickOutcome, TrainRequest};

/// A run's state to save: a full checkpoint, or an adapter run's adapter (by its name).
#[derive(Debug)]
pub enum Snapshot {
    Run(Checkpoint),
    Adapter { name: String, ckpt: AdapterCheckpoint },
}

/// A session on the CPU or on the GPU.
#[derive(Debug)]
pub enum Engine {
    /// The CPU kernels; whole steps that a page message can give up when the page shares
    /// its message counter ([`crate::abandon`]).
    Cpu(Session<Abandonable<CpuBackend>>),
    Webgpu(Session<WgpuBackend>),
    /// The CPU kernels with every op checked (developer mode).
    CheckedCpu(Session<Abandonable<Checked<CpuBackend>>>),
}

/// Evaluates `$body` with `$s` bound to the session, whatever its backend.
macro_rules! on_session {
    ($engine:expr, $s:ident => $body:expr) => {
        match $engine {
            Engine::Cpu($s) => $body,
            Engine::Webgpu($s) => $body,
            Engine::CheckedCpu($s) => $body,
        }
    };
}

/// What the page's Web Lock and refusal messages need to know about the current run.
#[derive(Clone, Debug, PartialEq)]
pub struct RunSummary {
    pub lock_name: String,
    pub model_name: String,
    pub dataset_name: String,
}

impl Engine {
    /// A CPU session: the WASM build's own kernels (`kind` says scalar, SIMD, or SIMD on
    /// rayon's global pool, which wasm-bindgen-rayon's `initThreadPool` has started), its
    /// units given up through `abandon` ([`Abandon::never`]: row parts instead).
    pub fn cpu(kind: EngineKind, abandon: Rc<Abandon>) -> Self {
        Engine::Cpu(Session::abandonable(cpu_backend(kind), kind, abandon))
    }

    /// [`Engine::cpu`] with every op's inputs and outputs checked (developer mode): a
    /// NaN, an infinity or an out-of-range value stops the run with the op's name.
    pub fn checked_cpu(kind: EngineKind, abandon: Rc<Abandon>) -> Self {
        Engine::CheckedCpu(Session::abandonable(Checked::new(cpu_backend(kind)), kind, abandon))
    }

    /// Whether every op is checked.
    pub fn is_checked(&self) -> bool {
        matches!(self, Engine::CheckedCpu(_))
    }

    /// A session on `gpu` (reported as `webgpu`) whose `precision: mixed` runs train on
    /// `mixed` (the same device or another, see `router/engine_choice.rs`).
    pub fn webgpu(gpu: WgpuBackend, mixed: WgpuBackend) -> Self {
        Engine::Webgpu(Session::new(gpu, EngineKind::Webgpu).with_mixed(mixed))
    }

    /// What a mixed run's matmul runs here and why: the WebGPU device's choice; `None` on
    /// the CPU builds, which refuse mixed. `gpu_name` is the browser's name for the GPU
    /// (wgpu's is empty on the WebGPU backend).
    pub fn mixed_matmul(&self, gpu_name: &str) -> Option<MatmulInfo> {
        let Engine::Webgpu(s) = self else { return None };
        let gpu = s.backend_for(Precision::Mixed).ok()?;
        let p = gpu.matmul_precision();
        Some(MatmulInfo {
            kernels: p.kernels.as_str().to_string(),
            reason: name_the_gpu(&p.reason, &gpu.adapter().name, gpu_name),
            self_test_worst: p.self_test_worst,
        })
    }

    pub fn kind(&self) -> EngineKind {
        on_session!(self, s => s.kind())
    }

    pub fn is_busy(&self) -> bool {
        on_session!(self, s => s.is_busy())
    }

    pub fn training_lock(&self) -> Option<String> {
        on_session!(self, s => s.training_lock())
    }

    pub fn run_summary(&self) -> Option<RunSummary> {
        on_session!(self, s => s.run().map(|r| {
            let t = r.trainer();
            RunSummary {
                lock_name: r.lock_name(),
                model_name: t.model().config().model_name.clone(),
                dataset_name: t.dataset().manifest().name.clone(),
            }
        }))
    }

    /// Whether there is a run whose weights changed since its last checkpoint.
    pub fn needs_save(&self) -> bool {
        on_session!(self, s => s.run().is_some_and(|r| r.needs_save()))
    }

    pub fn start(
        &mut self,
        request: TrainRequest,
        dataset: DatasetInput,
        now_ms: f64,
    ) -> Result<Vec<OutMessage>, WorkerError> {
        on_session!(self, s => s.start(request, dataset, now_ms))
    }

    /// Makes the checkpoint `ckpt` (saved as `id`) the current run, paused.
    pub fn load(
        &mut self,
        mut ckpt: Checkpoint,
        id: String,
        dataset: &DatasetInput,
        now_ms: f64,
    ) -> Result<Vec<OutMessage>, WorkerError> {
        on_session!(self, s => {
            ckpt.training_config.precision = s.continuing_precision(ckpt.training_config.precision);
            let trainer = restore(s.backend_for(ckpt.training_config.precision)?, ckpt, dataset)?;
            Ok(s.install(trainer, Some(id), RunState::Paused, now_ms))
        })
    }

    pub fn pause(&mut self) -> Result<Vec<OutMessage>, WorkerError> {
        on_session!(self, s => s.pause())
    }

    pub fn resume(&mut self, now_ms: f64) -> Result<Vec<OutMessage>, WorkerError> {
        on_session!(self, s => s.resume(now_ms))
    }

    pub async fn stop_async(&mut self) -> Result<Vec<OutMessage>, WorkerError> {
        on_session!(self, s => s.stop_async().await)
    }

    pub fn halt(&mut self) -> Result<Vec<OutMessage>, WorkerError> {
        on_session!(self, s => s.halt())
    }

    pub async fn last_progress_async(&mut self) -> Vec<OutMessage> {
        on_session!(self, s => s.last_progress_async().await)
    }

    pub fn sample(&mut self, request: SampleRequest, now_ms: f64) -> Result<Vec<OutMessage>, WorkerError> {
        on_session!(self, s => s.sample(request, now_ms))
    }

    pub async fn tick_async(
        &mut self,
        budget_ms: f64,
        clock: &dyn Clock,
        interrupt: &Interrupt,
    ) -> Result<TickOutcome, WorkerError> {
        // A tick runs ops back to back, so the CPU kernels' threads stay awake through it
        // (between ticks, and while paused, they nap and then sleep as usual).
        let _awake = match self {
            Engine::Cpu(s) => Some(s.backend().inner().stay_awake()),
            Engine::CheckedCpu(s) => Some(s.backend().inner().inner().stay_awake()),
            Engine::Webgpu(_) => None,
        };
        on_session!(self, s => s.tick_async(budget_ms, clock, interrupt).await)
    }

    /// The current run as a checkpoint, or an adapter run's adapter (weights and moments
    /// read back); `None` without a run.
    pub async fn snapshot(&self) -> Option<Result<Snapshot, WorkerError>> {
        on_session!(self, s => match s.run() {
            Some(run) => Some(match adapter_snapshot(run).await {
                Some(adapter) => adapter.map(|(name, ckpt)| Snapshot::Adapter { name, ckpt }),
                None => snapshot(run.trainer()).await.map(Snapshot::Run),
            }),
            None => None,
        })
    }

    /// LoRA: the loaded base, if any.
    pub fn base(&self) -> Option<Rc<BaseModel>> {
        on_session!(self, s => s.base())
    }

    /// LoRA: makes `base` the base adapters train on and sample with: `baseLoaded`.
    pub fn load_base(&mut self, base: Rc<BaseModel>) -> Vec<OutMessage> {
        on_session!(self, s => s.load_base(base))
    }

    /// LoRA: a fresh adapter run on the loaded base.
    pub fn start_adapter(
        &mut self,
        request: AdapterRequest,
        dataset: DatasetInput,
        now_ms: f64,
    ) -> Result<Vec<OutMessage>, WorkerError> {
        on_session!(self, s => s.start_adapter(request, dataset, now_ms))
    }

    /// LoRA: a stored adapter onto the loaded base, as a paused run (with its text, on the
    /// window it was trained on: `context` must be that one or absent) or selected for
    /// sampling (without).
    pub fn load_adapter(
        &mut self,
        name: String,
        ckpt: AdapterCheckpoint,
        dataset: Option<&DatasetInput>,
        context: Option<usize>,
        now_ms: f64,
    ) -> Result<Vec<OutMessage>, WorkerError> {
        on_session!(self, s => s.load_adapter(name, ckpt, dataset, context, now_ms))
    }

    /// Records that the run's state at `step` was saved as checkpoint `id`.
    pub fn mark_saved(&mut self, step: usize, id: &str) {
        on_session!(self, s => if let Some(run) = s.run_mut() {
            run.saved_step = step;
            run.checkpoint_id = Some(id.to_string());
        })
    }
}

/// kernels-wgsl's `reason`, written around the GPU's `name`, with `browser_name` where
/// `name` is empty (wgpu has no GPU name on the WebGPU backend, so the line read "but
/// has no shader-f16").
fn name_the_gpu(reason: &str, name: &str, browser_name: &str) -> String {
    if !name.is_empty() || browser_name.is_empty() {
        return reason.to_string();
    }
    reason
        .replace(" but  has ", &format!(" but {browser_name} has "))
        .replace(" on : ", &format!(" on {browser_name}: "))
}

/// The CPU kernels for `kind`: in the threads builds SIMD on this thread plus
/// threads of rayon's global pool (wasm-bindgen-rayon's `initThreadPool` has started it)
/// that stay awake between ops (`CpuBackend::awake_on_global_pool`; rayon's own workers
/// slept between a step's ops and woke too late to help); one thread otherwise.
fn cpu_backend(kind: EngineKind) -> CpuBackend {
    match kind {
        EngineKind::WasmSimdThreads | EngineKind::WasmRelaxedSimdThreads => {
            CpuBackend::awake_on_global_pool()
        }
        _ => CpuBackend::new(1),
    }
}

#[cfg(test)]
mod tests {
    use super::name_the_gpu;

    #[test]
    fn an_unnamed_adapter_gets_the_browsers_name() {
        let reason =
            "mixed was asked for but  has no shader-f16 (no cooperative-matrix matmul on : none listed)";
        assert_eq!(
            name_the_gpu(reason, "", "google swiftshader"),
            "mixed was asked for but google swiftshader has no shader-f16 (no cooperative-matrix matmul on \
             google swiftshader: none listed)"
        );
        assert_eq!(
            name_the_gpu("f16 inputs", "llvmpipe", "x"),
            "f16 inputs",
            "a named adapter keeps its line"
        );
    }
}

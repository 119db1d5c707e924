//! The composition root's one job: turn `--backend`/`--threads`/`--kernels` into a concrete
//! backend and run a generic command on it.

use std::any::Any;

use tinygpt_kernels_checked::Checked;
use tinygpt_kernels_cpu::{CpuBackend, Kernels};
use tinygpt_kernels_wgsl::{MatmulPrecision, WgpuBackend};
use tinygpt_tensor::{Backend, Precision, TensorError};

use crate::args::{BackendKind, Compute, KernelsKind};
use crate::error::CliError;

/// A command body that works on any backend.
pub trait WithBackend {
    type Output;
    fn run<B: Backend>(self, backend: B, threads: usize) -> Result<Self::Output, CliError>;
}

/// More threads than this many per core only add overhead (and, by the thousand, exhaust
/// memory for their stacks).
const MAX_THREADS_PER_CORE: usize = 4;

/// The thread count `--threads` asks for (default: every core), from 1 to 4 × the cores.
pub fn threads(compute: &Compute) -> Result<usize, CliError> {
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
    let max = cores * MAX_THREADS_PER_CORE;
    match compute.threads {
        None => Ok(cores),
        Some(n) if n >= 1 && n as u64 <= max as u64 => Ok(n as usize),
        Some(n) => Err(CliError::Usage(format!(
            "--threads must be between 1 and {max} (4 × the {cores} cores of this machine), got {n}"
        ))),
    }
}

pub fn dispatch<C: WithBackend>(compute: &Compute, command: C) -> Result<C::Output, CliError> {
    dispatch_at(compute, Precision::F32, command)
}

/// [`dispatch`] on a backend whose matrix products compute in `precision` (a training
/// config's). `mixed` runs on `--backend wgpu` only: the CPU backends have f32 kernels
/// only, and the checked backends compare with f32 references.
pub fn dispatch_at<C: WithBackend>(
    compute: &Compute,
    precision: Precision,
    command: C,
) -> Result<C::Output, CliError> {
    check_precision(compute.backend, precision)?;
    let threads = threads(compute)?;
    match compute.backend {
        BackendKind::Cpu => command.run(cpu(compute, threads)?, threads),
        BackendKind::Wgpu => command.run(wgpu(precision)?, threads),
        BackendKind::Checked => command.run(Checked::new(cpu(compute, threads)?), threads),
        BackendKind::CheckedWgpu => command.run(Checked::new(wgpu(precision)?), threads),
    }
}

/// Refuses `mixed` on every backend but `wgpu`, in one line.
pub fn check_precision(backend: BackendKind, precision: Precision) -> Result<(), CliError> {
    if precision == Precision::Mixed && backend != BackendKind::Wgpu {
        return Err(CliError::Usage(
            "--precision mixed runs on --backend wgpu; the CPU and checked backends compute in f32".into(),
        ));
    }
    Ok(())
}

fn cpu(compute: &Compute, threads: usize) -> Result<CpuBackend, CliError> {
    let backend = CpuBackend::try_new_on_this_thread(threads).map_err(|e| {
        CliError::Usage(format!("cannot start {threads} threads ({e}); try a smaller --threads"))
    })?;
    let kernels = match compute.kernels {
        KernelsKind::Reference => Kernels::Reference,
        KernelsKind::Fast => Kernels::Fast,
    };
    Ok(backend.with_kernels(kernels))
}

/// The GPU backend; `f32` opens it as it always did ([`WgpuBackend::new`]), `mixed` asks
/// for its f16 matmul, which it may refuse (see [`WgpuBackend::matmul_precision`]).
fn wgpu(precision: Precision) -> Result<WgpuBackend, CliError> {
    let made = match precision {
        Precision::F32 => WgpuBackend::new(),
        Precision::Mixed => WgpuBackend::new_with_precision(precision),
    };
    made.map_err(|e| TensorError::DeviceLost { backend: "wgpu".into(), reason: e.to_string() }.into())
}

/// The backend under a [`Checked`] wrapper, or `backend` itself.
fn unwrapped<B: Backend>(backend: &B) -> &dyn Any {
    let any = backend as &dyn Any;
    if let Some(checked) = any.downcast_ref::<Checked<CpuBackend>>() {
        return checked.inner();
    }
    match any.downcast_ref::<Checked<WgpuBackend>>() {
        Some(checked) => checked.inner(),
        None => any,
    }
}

/// What `backend` runs on, for benchmark lines: the GPU adapter's name, or the CPU thread count.
pub fn device_label<B: Backend>(backend: &B, threads: usize) -> String {
    match unwrapped(backend).downcast_ref::<WgpuBackend>() {
        Some(gpu) => format!("{} ({})", gpu.adapter().name, gpu.adapter().api),
        None => format!("{threads} CPU threads"),
    }
}

/// The optional GPU features the adapter offers, for benchmark lines: `{shader_f16,
/// subgroups, kernels}` (`kernels`: what the matmul runs, `f32` or `shader-f16`), or `None`
/// on the CPU backend.
pub fn gpu_features<B: Backend>(backend: &B) -> Option<serde_json::Value> {
    unwrapped(backend).downcast_ref::<WgpuBackend>().map(|gpu| {
        let adapter = gpu.adapter();
        let kernels = gpu.matmul_precision().kernels.as_str();
        serde_json::json!({"shader_f16": adapter.shader_f16, "subgroups": adapter.subgroups, "kernels": kernels})
    })
}

/// What `backend`'s matmul runs and why: the GPU's choice ([`WgpuBackend::matmul_precision`]),
/// or f32 on the CPU backends, as `(path, reason)`.
pub fn matmul_path<B: Backend>(backend: &B) -> (String, String) {
    match unwrapped(backend).downcast_ref::<WgpuBackend>().map(WgpuBackend::matmul_precision) {
        Some(MatmulPrecision { kernels, reason, .. }) => (kernels.as_str().to_string(), reason.clone()),
        None => ("f32".into(), "the CPU backends compute in f32".into()),
    }
}

/// The CPU kernel variant `backend` runs (`"avx512"`, `"reference"`, …), for benchmark
/// lines; `None` on a GPU backend.
pub fn cpu_kernels<B: Backend>(backend: &B) -> Option<&'static str> {
    unwrapped(backend).downcast_ref::<CpuBackend>().map(|cpu| cpu.variant().name())
}

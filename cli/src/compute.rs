//! The composition root's one job: turn `--backend`/`--threads` into a concrete backend and
//! run a generic command on it.

use tinygpt_kernels_cpu::CpuBackend;
use tinygpt_tensor::Backend;

use crate::args::{BackendKind, Compute};
use crate::error::CliError;

/// A command body that works on any backend.
pub trait WithBackend {
    type Output;
    fn run<B: Backend>(self, backend: B, threads: usize) -> Result<Self::Output, CliError>;
}

/// The thread count `--threads` asks for (default: every core).
pub fn threads(compute: &Compute) -> Result<usize, CliError> {
    match compute.threads {
        Some(0) => Err(CliError::Usage("--threads must be at least 1".into())),
        Some(n) => Ok(n),
        None => Ok(std::thread::available_parallelism().map_or(1, |n| n.get())),
    }
}

pub fn dispatch<C: WithBackend>(compute: &Compute, command: C) -> Result<C::Output, CliError> {
    let threads = threads(compute)?;
    match compute.backend {
        BackendKind::Cpu => command.run(CpuBackend::new(threads), threads),
    }
}

use thiserror::Error;

/// Why a [`crate::CpuBackend`] could not be created.
#[derive(Debug, Error)]
pub enum CpuBackendError {
    #[error("the CPU backend needs at least 1 thread (got 0); pass --threads 1 or more")]
    ZeroThreads,
    #[error("could not start {threads} worker threads for the CPU backend: {reason}; try fewer --threads")]
    ThreadPool { threads: usize, reason: String },
    #[error("this CPU cannot run the {variant} kernels; use --kernels reference or fast")]
    Unsupported { variant: &'static str },
}

use thiserror::Error;

/// Why a [`crate::CpuBackend`] could not be created.
#[derive(Debug, Error)]
// The variants' fields are the values their messages show.
#[allow(missing_docs)]
pub enum CpuBackendError {
    /// `--threads 0`.
    #[error("the CPU backend needs at least 1 thread (got 0); pass --threads 1 or more")]
    ZeroThreads,
    /// The thread pool could not start.
    #[error("could not start {threads} worker threads for the CPU backend: {reason}; try fewer --threads")]
    ThreadPool { threads: usize, reason: String },
    /// The CPU lacks the variant's instructions.
    #[error("this CPU cannot run the {variant} kernels; use --kernels reference or fast")]
    Unsupported { variant: &'static str },
}

//! [`CpuBackend`]: construction and threading. The `Backend` impl is in `ops.rs`.

use std::sync::Arc;

use crate::error::CpuBackendError;
use crate::parallel::Parallel;
use crate::storage::CpuBuffer;

/// The CPU backend. Cloning shares its thread pool.
///
/// Results are bit-identical for every thread count: work is split into pieces chosen by
/// problem size alone, and every output element is computed by one piece in a fixed order.
#[derive(Clone, Debug)]
pub struct CpuBackend {
    pub(crate) par: Parallel,
}

impl Default for CpuBackend {
    /// One thread: every kernel runs inline on the calling thread.
    fn default() -> Self {
        CpuBackend { par: Parallel::Inline }
    }
}

impl CpuBackend {
    /// A backend running its kernels on `threads` threads; panics if `threads` is 0 or the
    /// threads cannot be started (use [`CpuBackend::try_new`] to handle that).
    pub fn new(threads: usize) -> Self {
        Self::try_new(threads).unwrap_or_else(|e| panic!("{e}"))
    }

    /// With `threads == 1` no pool is created and kernels run on the calling thread; with
    /// more, on a dedicated rayon pool of that size (never the global pool).
    pub fn try_new(threads: usize) -> Result<Self, CpuBackendError> {
        match threads {
            0 => Err(CpuBackendError::ZeroThreads),
            1 => Ok(Self::default()),
            _ => {
                let pool = rayon::ThreadPoolBuilder::new()
                    .num_threads(threads)
                    .thread_name(|i| format!("tinygpt-cpu-{i}"))
                    .build()
                    .map_err(|e| CpuBackendError::ThreadPool { threads, reason: e.to_string() })?;
                Ok(CpuBackend { par: Parallel::Pool(Arc::new(pool)) })
            }
        }
    }

    /// Number of threads kernels run on.
    pub fn threads(&self) -> usize {
        self.par.threads()
    }

    /// A new `len`-element buffer filled by `fill`.
    pub(crate) fn produce(&self, len: usize, fill: impl FnOnce(&mut [f32])) -> CpuBuffer<f32> {
        let mut out = vec![0f32; len];
        fill(&mut out);
        CpuBuffer::new(out)
    }
}

//! [`CpuBackend`]: construction, threading and the kernel variant. The `Backend` impl is
//! in `ops.rs`.

use std::fmt;
use std::sync::{Arc, Mutex};

use tinygpt_tensor::{Backend, TensorError};

use crate::error::CpuBackendError;
use crate::fast::FastKernels;
use crate::parallel::Parallel;
use crate::pool::BufferPool;
use crate::spin_pool::{AwakeHold, SpinPool};
use crate::storage::CpuBuffer;
use crate::{KernelVariant, Kernels};

/// The CPU backend. Cloning shares its thread pool and its buffer pools.
///
/// It runs one [`KernelVariant`]: the fastest this CPU supports unless told otherwise
/// ([`CpuBackend::with_kernels`], [`CpuBackend::with_variant`]).
///
/// Determinism: for one variant, results are bit-identical for every thread count — work is
/// split into pieces chosen by problem size alone, and every output element is computed by
/// one piece in a fixed order. Different variants agree within the conformance kit's
/// tolerances, not bit for bit.
#[derive(Clone)]
pub struct CpuBackend {
    pub(crate) par: Parallel,
    variant: KernelVariant,
    /// `variant`'s entry points (`None` for the reference), looked up once.
    pub(crate) fast: Option<&'static FastKernels>,
    /// Buffers given back by dropped handles, reused by later ops (see `pool.rs`).
    pool: Arc<BufferPool<f32>>,
    index_pool: Arc<BufferPool<u32>>,
    /// Scratch for the f64 partial sums of reductions (`sum_squares`, the fused
    /// cross-entropy): one list, grown to the largest need and kept (see [`CpuBackend::with_sums`]).
    sums: Arc<Mutex<Vec<f64>>>,
}

impl fmt::Debug for CpuBackend {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("CpuBackend").field("par", &self.par).field("variant", &self.variant).finish()
    }
}

impl Default for CpuBackend {
    /// One thread (every kernel runs inline on the calling thread), fastest variant.
    fn default() -> Self {
        CpuBackend {
            par: Parallel::Inline,
            variant: KernelVariant::Reference,
            fast: None,
            pool: Arc::default(),
            index_pool: Arc::default(),
            sums: Arc::default(),
        }
        .with_kernels(Kernels::Fast)
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
                Ok(CpuBackend { par: Parallel::Pool(Arc::new(pool)), ..Self::default() })
            }
        }
    }

    /// Like [`CpuBackend::try_new`], but the thread that calls an op runs its pieces too,
    /// beside `threads - 1` started threads that stay awake for a moment between ops
    /// (`spin_pool.rs`): a training step is a few hundred ops, and a rayon worker that went
    /// to sleep between two of them woke too late to help with the next. For a program's
    /// one backend (the CLI): the started threads spin on a core for up to 2 ms after each
    /// op. Called from several threads at once, one runs its op on the pool and the others
    /// run theirs inline. More threads than the machine's cores get [`CpuBackend::try_new`]'s
    /// rayon pool instead: a spinning thread would then take the core from one holding a
    /// piece the op waits for. Results are the same bits either way.
    pub fn try_new_on_this_thread(threads: usize) -> Result<Self, CpuBackendError> {
        let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
        match threads {
            0 => Err(CpuBackendError::ZeroThreads),
            1 => Ok(Self::default()),
            _ if threads > cores => Self::try_new(threads),
            _ => {
                let pool = SpinPool::new(threads)
                    .map_err(|e| CpuBackendError::ThreadPool { threads, reason: e.to_string() })?;
                Ok(CpuBackend { par: Parallel::Spin(Arc::new(pool)), ..Self::default() })
            }
        }
    }

    /// A backend running its kernels on rayon's global pool, however many threads it has
    /// (wasm-bindgen-rayon's `initThreadPool(n)` starts it in a browser, where a backend
    /// cannot start a pool of its own). Results are the same as on any other thread count.
    pub fn on_global_pool() -> Self {
        CpuBackend { par: Parallel::Global, ..Self::default() }
    }

    /// Like [`CpuBackend::try_new_on_this_thread`] with as many threads as rayon's global
    /// pool has, the started ones being tasks that occupy all but one of that pool's threads
    /// for the backend's lifetime (`SpinPool::on_global_pool`): the browser's threads build,
    /// where wasm-bindgen-rayon's pool is the only way to have threads, and rayon's sleeping
    /// workers made it no faster than one thread. For a program's one backend; with one
    /// thread it runs inline. Results are the same bits.
    pub fn awake_on_global_pool() -> Self {
        match rayon::current_num_threads() {
            0 | 1 => Self::default(),
            threads => CpuBackend {
                par: Parallel::Spin(Arc::new(SpinPool::on_global_pool(threads))),
                ..Self::default()
            },
        }
    }

    /// The same backend (sharing its threads) running `kernels`; always succeeds, since
    /// [`Kernels::Fast`] falls back to the reference where the CPU has no fast variant.
    pub fn with_kernels(self, kernels: Kernels) -> Self {
        self.with_variant(kernels.variant()).expect("Kernels::variant picks a supported variant")
    }

    /// The same backend running exactly `variant`, or an error if this CPU (or build)
    /// cannot run it.
    pub fn with_variant(self, variant: KernelVariant) -> Result<Self, CpuBackendError> {
        if !variant.is_supported() {
            return Err(CpuBackendError::Unsupported { variant: variant.name() });
        }
        Ok(CpuBackend { variant, fast: variant.fast_kernels(), ..self })
    }

    /// The kernel variant this backend runs.
    pub fn variant(&self) -> KernelVariant {
        self.variant
    }

    /// Keeps the threads of an awake pool ([`CpuBackend::try_new_on_this_thread`],
    /// [`CpuBackend::awake_on_global_pool`]) spinning between ops until the hold is dropped,
    /// instead of napping and then sleeping when an op does not follow within microseconds:
    /// for a run in progress. In a browser a nap is an atomic wait that the browser rounds
    /// up, so an op started while the others napped waited for them. Other backends need
    /// none, and get a hold that does nothing.
    pub fn stay_awake(&self) -> AwakeHold {
        match &self.par {
            Parallel::Spin(pool) => pool.hold_awake(),
            _ => AwakeHold::none(),
        }
    }

    /// Number of threads kernels run on.
    pub fn threads(&self) -> usize {
        self.par.threads()
    }

    /// A `len`-element buffer of zeros, from the pool when one of that length is free.
    pub(crate) fn zeroed(&self, len: usize) -> Vec<f32> {
        let mut out = self.pool.take(len);
        out.fill(0.0);
        out
    }

    /// A `len`-element buffer holding arbitrary values, for a kernel that writes every one.
    pub(crate) fn uninit(&self, len: usize) -> Vec<f32> {
        self.pool.take(len)
    }

    /// Gives a scratch buffer from [`CpuBackend::uninit`] back to the pool.
    pub(crate) fn recycle(&self, data: Vec<f32>) {
        self.pool.give_back(data)
    }

    /// Hands `data` out as a buffer that returns to this backend's pool when dropped.
    pub(crate) fn wrap(&self, data: Vec<f32>) -> CpuBuffer<f32> {
        CpuBuffer::pooled(data, &self.pool)
    }

    /// A buffer of the indices `data`, pooled like the f32 ones.
    pub(crate) fn wrap_indices(&self, data: &[u32]) -> CpuBuffer<u32> {
        let mut out = self.index_pool.take(data.len());
        out.copy_from_slice(data);
        CpuBuffer::pooled(out, &self.index_pool)
    }

    /// `f` on `len` scratch values (arbitrary on entry) for a reduction's partial sums.
    pub(crate) fn with_sums<R>(&self, len: usize, f: impl FnOnce(&mut [f64]) -> R) -> R {
        // Nothing in the list outlives a call, so a panic in another one left nothing to guard.
        let mut sums = self.sums.lock().unwrap_or_else(|e| e.into_inner());
        sums.resize(len, 0.0);
        f(&mut sums)
    }

    /// Why a read failed: the buffer was poisoned.
    pub(crate) fn poisoned(&self) -> TensorError {
        TensorError::Readback {
            backend: self.name(),
            reason: "the buffer was left half-updated by a kernel that panicked".to_string(),
        }
    }

    /// A new `len`-element buffer, zero-filled, then filled by `fill`.
    pub(crate) fn produce(&self, len: usize, fill: impl FnOnce(&mut [f32])) -> CpuBuffer<f32> {
        let mut out = self.zeroed(len);
        fill(&mut out);
        self.wrap(out)
    }

    /// A new `len`-element buffer filled by `fill`, which must write every element (the
    /// buffer starts with whatever its last user left in it).
    pub(crate) fn produce_all(&self, len: usize, fill: impl FnOnce(&mut [f32])) -> CpuBuffer<f32> {
        let mut out = self.uninit(len);
        fill(&mut out);
        self.wrap(out)
    }
}

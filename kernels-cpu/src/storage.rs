//! The CPU backend's buffer handle.

use std::fmt;
use std::sync::{Arc, RwLock, RwLockReadGuard, RwLockWriteGuard};

use crate::pool::BufferPool;

/// A shared, fixed-size host buffer: the CPU backend's `Storage` (`T = f32`) and
/// `Indices` (`T = u32`).
///
/// Cloning is cheap and shares the data, as the [`tinygpt_tensor::Backend`] contract
/// requires. The lock exists for [`tinygpt_tensor::Backend::copy`] and
/// [`tinygpt_tensor::Backend::adamw`], the ops that write into existing buffers; every
/// other op only reads its inputs and returns a new buffer. Kernels may hold several read
/// guards of one buffer at once (e.g. `add(x, x)`), which is fine because the writers run
/// on the calling thread between ops and never write a buffer they also read.
///
/// A buffer the backend made goes back to its `BufferPool` when the last handle drops.
pub struct CpuBuffer<T> {
    data: Arc<Shared<T>>,
}

struct Shared<T> {
    data: RwLock<Vec<T>>,
    /// Where the `Vec` goes when the last handle drops (`None`: freed as usual).
    home: Option<Arc<BufferPool<T>>>,
}

impl<T> Drop for Shared<T> {
    fn drop(&mut self) {
        let Some(pool) = &self.home else { return };
        match self.data.get_mut() {
            Ok(data) => pool.give_back(std::mem::take(data)),
            // Half-written by a kernel that panicked: counted out of the pool, not reused.
            Err(poisoned) => pool.forget(poisoned.get_ref().len()),
        }
    }
}

impl<T> Clone for CpuBuffer<T> {
    fn clone(&self) -> Self {
        CpuBuffer { data: Arc::clone(&self.data) }
    }
}

impl<T> fmt::Debug for CpuBuffer<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.data.data.try_read() {
            Ok(data) => write!(f, "CpuBuffer(len {})", data.len()),
            Err(_) => write!(f, "CpuBuffer(locked)"),
        }
    }
}

impl<T> CpuBuffer<T> {
    /// A buffer owning `data`.
    pub fn new(data: Vec<T>) -> Self {
        CpuBuffer { data: Arc::new(Shared { data: RwLock::new(data), home: None }) }
    }

    /// Wraps `data` taken from `pool`, to which it returns when the last handle drops.
    pub(crate) fn pooled(data: Vec<T>, pool: &Arc<BufferPool<T>>) -> Self {
        CpuBuffer { data: Arc::new(Shared { data: RwLock::new(data), home: Some(Arc::clone(pool)) }) }
    }

    /// Number of elements.
    pub fn len(&self) -> usize {
        self.read().len()
    }

    /// Whether the buffer holds no elements.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Whether two handles share one buffer.
    pub fn same_buffer(&self, other: &Self) -> bool {
        Arc::ptr_eq(&self.data, &other.data)
    }

    /// Read access for a kernel. Panics if an earlier kernel panicked while writing this
    /// buffer (its contents are then half-updated and must not be used).
    pub(crate) fn read(&self) -> RwLockReadGuard<'_, Vec<T>> {
        self.data.data.read().expect("CpuBuffer: a kernel panicked while updating this buffer")
    }

    /// Write access, for the in-place ops (`copy`, `adamw`) only.
    pub(crate) fn write(&self) -> RwLockWriteGuard<'_, Vec<T>> {
        self.data.data.write().expect("CpuBuffer: a kernel panicked while updating this buffer")
    }

    /// A host copy, or `None` when the buffer was poisoned by a panicking kernel.
    pub(crate) fn try_to_vec(&self) -> Option<Vec<T>>
    where
        T: Clone,
    {
        self.data.data.read().ok().map(|d| d.clone())
    }
}

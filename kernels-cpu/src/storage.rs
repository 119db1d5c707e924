//! The CPU backend's buffer handle.

use std::fmt;
use std::mem::ManuallyDrop;
use std::sync::{Arc, RwLock, RwLockReadGuard, RwLockWriteGuard, Weak};

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
/// A buffer the backend made goes back to its `BufferPool` when the last handle drops: its
/// `Vec` to the pool's free lengths, and the handle's own allocation (the `Arc`) to the
/// pool's spare shells, so that wrapping the next buffer allocates nothing either.
pub struct CpuBuffer<T> {
    /// Taken out only in `drop`.
    data: ManuallyDrop<Arc<Shared<T>>>,
}

pub(crate) struct Shared<T> {
    data: RwLock<Vec<T>>,
    /// Where the `Vec` (and this shell) go when the last handle drops (`None`: freed as
    /// usual). Weak, because the pool keeps spare shells: a strong link back would be a cycle.
    home: Option<Weak<BufferPool<T>>>,
}

impl<T> Drop for CpuBuffer<T> {
    fn drop(&mut self) {
        // SAFETY: `self.data` is not touched again: this is the handle's last use.
        let mut shared = unsafe { ManuallyDrop::take(&mut self.data) };
        let Some(pool) = shared.home.as_ref().and_then(Weak::upgrade) else { return };
        // Another handle still shares the buffer: the last one to drop recycles it.
        let Some(unique) = Arc::get_mut(&mut shared) else { return };
        match unique.data.get_mut() {
            Ok(data) => {
                let data = std::mem::take(data);
                pool.recycle(data, shared);
            }
            // Half-written by a kernel that panicked: counted out of the pool, not reused.
            Err(poisoned) => pool.forget(poisoned.get_ref().len()),
        }
    }
}

impl<T> Drop for Shared<T> {
    /// Reached when two handles of one buffer drop at once on two threads (neither saw
    /// itself last), or when the pool itself goes: the `Vec` still goes home if it can.
    fn drop(&mut self) {
        let Some(pool) = self.home.as_ref().and_then(Weak::upgrade) else { return };
        match self.data.get_mut() {
            Ok(data) if data.capacity() > 0 => pool.give_back(std::mem::take(data)),
            Ok(_) => {}
            Err(poisoned) => pool.forget(poisoned.get_ref().len()),
        }
    }
}

impl<T> Clone for CpuBuffer<T> {
    fn clone(&self) -> Self {
        CpuBuffer { data: ManuallyDrop::new(Arc::clone(&self.data)) }
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
        CpuBuffer { data: ManuallyDrop::new(Arc::new(Shared { data: RwLock::new(data), home: None })) }
    }

    /// Wraps `data` taken from `pool`, to which it returns when the last handle drops: in a
    /// spare shell of the pool's if it has one.
    pub(crate) fn pooled(data: Vec<T>, pool: &Arc<BufferPool<T>>) -> Self {
        let shared = match pool.spare_shell() {
            Some(mut shell) => {
                let unique = Arc::get_mut(&mut shell).expect("a spare shell has no other handle");
                *unique.data.get_mut().unwrap_or_else(|e| e.into_inner()) = data;
                shell
            }
            None => Arc::new(Shared { data: RwLock::new(data), home: Some(Arc::downgrade(pool)) }),
        };
        CpuBuffer { data: ManuallyDrop::new(shared) }
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
        Arc::ptr_eq(&*self.data, &*other.data)
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

    /// Replaces `dst`'s contents with a host copy (reusing its allocation), or `None` when
    /// the buffer was poisoned by a panicking kernel.
    pub(crate) fn try_read_into(&self, dst: &mut Vec<T>) -> Option<()>
    where
        T: Copy,
    {
        let data = self.data.data.read().ok()?;
        dst.clear();
        dst.extend_from_slice(&data);
        Some(())
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use super::CpuBuffer;
    use crate::pool::BufferPool;

    #[test]
    fn the_last_handle_gives_back_its_buffer_and_its_shell() {
        let pool = Arc::new(BufferPool::<f32>::default());
        let a = CpuBuffer::pooled(pool.take(8), &pool);
        let (shell, data) = (Arc::as_ptr(&a.data), a.read().as_ptr());
        let b = a.clone();
        drop(a);
        assert!(pool.spare_shell().is_none(), "a handle is still live: nothing comes back yet");
        drop(b);
        let c = CpuBuffer::pooled(pool.take(8), &pool);
        assert_eq!((Arc::as_ptr(&c.data), c.read().as_ptr()), (shell, data), "both reused");
    }

    #[test]
    fn a_buffer_outliving_its_pool_is_freed_as_usual() {
        let pool = Arc::new(BufferPool::<f32>::default());
        let a = CpuBuffer::pooled(pool.take(8), &pool);
        let spare = CpuBuffer::pooled(pool.take(8), &pool);
        drop(spare);
        drop(pool);
        assert_eq!(a.len(), 8);
        drop(a);
    }
}

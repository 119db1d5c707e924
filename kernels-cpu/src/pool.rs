//! Recycling of freed buffers, so a steady-state training step allocates no buffer memory:
//! every step asks for the same lengths in the same order, and each request is served by a
//! buffer an earlier step gave back instead of fresh zero-filled pages from the OS (which
//! cost a page fault per 4 KiB, about a sixth of a `medium` step before this pool).

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use crate::storage::Shared;

/// Free buffers by exact length. Shared (through an `Arc`) by a backend and its clones and
/// by every buffer they made, which hands its `Vec` back here when its last handle drops.
///
/// The pool keeps at most as many bytes as were ever live at once (`peak_live_bytes`), so
/// what it holds never exceeds the largest working set seen: in a training loop the pool
/// and the live buffers together stay near one step's peak. A length that stops recurring
/// (sampling with a growing context) only fills the pool up to that bound; past it, given
/// back buffers are freed.
pub(crate) struct BufferPool<T> {
    state: Mutex<PoolState<T>>,
}

struct PoolState<T> {
    free: HashMap<usize, Vec<Vec<T>>>,
    /// Handles' allocations whose buffers came back, emptied, for the next buffer to wrap.
    /// As many as were ever live at once, at most.
    shells: Vec<Arc<Shared<T>>>,
    held_bytes: usize,
    live_bytes: usize,
    peak_live_bytes: usize,
}

impl<T> PoolState<T> {
    /// Counts `buf` out of the live bytes and keeps it, unless the pool holds its bound.
    fn keep(&mut self, buf: Vec<T>) {
        let bytes = buf.len() * size_of::<T>();
        self.live_bytes = self.live_bytes.saturating_sub(bytes);
        if self.held_bytes + bytes <= self.peak_live_bytes {
            self.held_bytes += bytes;
            self.free.entry(buf.len()).or_default().push(buf);
        }
    }
}

impl<T> Default for BufferPool<T> {
    fn default() -> Self {
        let state = PoolState {
            free: HashMap::new(),
            shells: Vec::new(),
            held_bytes: 0,
            live_bytes: 0,
            peak_live_bytes: 0,
        };
        BufferPool { state: Mutex::new(state) }
    }
}

impl<T: Copy + Default> BufferPool<T> {
    /// A `len`-element buffer: a recycled one (holding whatever its last user left in it)
    /// or, when none of that length is free, a new one filled with `T::default()`.
    pub fn take(&self, len: usize) -> Vec<T> {
        let bytes = len * size_of::<T>();
        let recycled = {
            let mut state = self.lock();
            state.live_bytes += bytes;
            state.peak_live_bytes = state.peak_live_bytes.max(state.live_bytes);
            let found = state.free.get_mut(&len).and_then(Vec::pop);
            if found.is_some() {
                state.held_bytes -= bytes;
            }
            found
        };
        recycled.unwrap_or_else(|| vec![T::default(); len])
    }
}

impl<T> BufferPool<T> {
    /// Takes `buf` back for reuse (or frees it when the pool already holds its bound).
    pub fn give_back(&self, buf: Vec<T>) {
        self.lock().keep(buf);
    }

    /// Takes back a buffer and the emptied shell of its last handle, under one lock.
    pub(crate) fn recycle(&self, buf: Vec<T>, shell: Arc<Shared<T>>) {
        let mut state = self.lock();
        state.keep(buf);
        state.shells.push(shell);
    }

    /// An emptied handle allocation to wrap the next buffer in, if one came back.
    pub(crate) fn spare_shell(&self) -> Option<Arc<Shared<T>>> {
        self.lock().shells.pop()
    }

    /// A buffer given back by a thread that panicked mid-kernel must still be counted out.
    pub fn forget(&self, len: usize) {
        let mut state = self.lock();
        state.live_bytes = state.live_bytes.saturating_sub(len * size_of::<T>());
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, PoolState<T>> {
        // The state is a few counters and lists, consistent after every statement: a
        // panic elsewhere while it was locked leaves nothing half-done to guard against.
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }
}

#[cfg(test)]
mod tests {
    use super::BufferPool;

    #[test]
    fn a_given_back_buffer_is_reused_for_the_same_length_only() {
        let pool = BufferPool::<f32>::default();
        let mut a = pool.take(1000);
        a[0] = 7.0;
        let ptr = a.as_ptr();
        pool.give_back(a);
        let b = pool.take(999);
        assert_eq!(b[0], 0.0, "a new length gets a fresh, zeroed buffer");
        let c = pool.take(1000);
        assert_eq!((c.as_ptr(), c[0]), (ptr, 7.0), "the same length gets the old buffer back");
    }

    #[test]
    fn the_pool_holds_no_more_than_the_peak_live_bytes() {
        let pool = BufferPool::<f32>::default();
        let a = pool.take(10);
        pool.give_back(a);
        // Peak live was 10 values; a 20-value buffer from elsewhere is not kept.
        pool.give_back(vec![0.0; 20]);
        let state = pool.lock();
        assert_eq!((state.held_bytes, state.free.get(&20).map(Vec::len)), (40, None));
    }
}

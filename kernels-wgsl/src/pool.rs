//! Device buffers and the pool that recycles them.
//!
//! Every op returns a new buffer, so a training step asks for a few hundred of them; the
//! pool makes all but the first step's requests free. Buffers are grouped by size class
//! (a quarter-octave grid: at most 25% slack) and by use (storage, or host-readable
//! staging for readback). A storage buffer goes back to its class when the last
//! [`GpuBuffer`] handle drops. Reuse needs no fence: commands run in the order they were
//! recorded on the one queue, so a later op that reuses the buffer runs after every
//! earlier op that read it. (A host write is the exception, handled by `upload`: it
//! submits pending commands before queueing the write.)

use std::collections::HashMap;
use std::fmt;
use std::marker::PhantomData;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

/// Smallest buffer the pool makes, in bytes.
const MIN_CLASS: u64 = 256;

/// Counters behind [`crate::WgpuStats`].
#[derive(Debug, Default)]
pub(crate) struct Counters {
    pub buffers: AtomicU64,
    pub bind_groups: AtomicU64,
    pub pipelines: AtomicU64,
    pub submissions: AtomicU64,
    pub dispatches: AtomicU64,
}

impl Counters {
    pub fn bump(counter: &AtomicU64) {
        counter.fetch_add(1, Ordering::Relaxed);
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
enum Use {
    Storage,
    Readback,
}

/// The smallest size class holding `bytes`.
fn size_class(bytes: u64) -> u64 {
    if bytes <= MIN_CLASS {
        return MIN_CLASS;
    }
    let step = 1u64 << (63 - bytes.leading_zeros() - 2);
    bytes.div_ceil(step) * step
}

/// An idle buffer and its id.
type FreeBuffer = (u64, wgpu::Buffer);

pub(crate) struct Pool {
    device: wgpu::Device,
    free: Mutex<HashMap<(Use, u64), Vec<FreeBuffer>>>,
    next_id: AtomicU64,
    pub counters: Arc<Counters>,
}

impl Pool {
    pub fn new(device: wgpu::Device, counters: Arc<Counters>) -> Self {
        Pool { device, free: Mutex::new(HashMap::new()), next_id: AtomicU64::new(1), counters }
    }

    fn take(&self, usage: Use, bytes: u64) -> (u64, u64, wgpu::Buffer) {
        let class = size_class(bytes);
        if let Some((id, buffer)) =
            self.free.lock().expect("buffer pool lock").get_mut(&(usage, class)).and_then(Vec::pop)
        {
            return (id, class, buffer);
        }
        Counters::bump(&self.counters.buffers);
        let usages = match usage {
            Use::Storage => {
                wgpu::BufferUsages::STORAGE | wgpu::BufferUsages::COPY_SRC | wgpu::BufferUsages::COPY_DST
            }
            Use::Readback => wgpu::BufferUsages::MAP_READ | wgpu::BufferUsages::COPY_DST,
        };
        let buffer = self.device.create_buffer(&wgpu::BufferDescriptor {
            label: Some(match usage {
                Use::Storage => "tinygpt storage",
                Use::Readback => "tinygpt readback",
            }),
            size: class,
            usage: usages,
            mapped_at_creation: false,
        });
        (self.next_id.fetch_add(1, Ordering::Relaxed), class, buffer)
    }

    /// Idle buffers of a class are kept by descending id and handed out smallest id first:
    /// which buffer an op gets then depends only on which ones are idle, not on the order
    /// they were freed in, so every step of a training loop binds the same buffers at the
    /// same points as the step before and finds each bind group in the recorder's cache.
    fn give_back(&self, usage: Use, class: u64, id: u64, buffer: wgpu::Buffer) {
        let mut free = self.free.lock().expect("buffer pool lock");
        let list = free.entry((usage, class)).or_default();
        let at = list.partition_point(|&(other, _)| other > id);
        list.insert(at, (id, buffer));
    }

    /// A storage buffer for `len` elements of 4 bytes; contents undefined.
    pub fn storage<T>(self: &Arc<Self>, len: usize) -> GpuBuffer<T> {
        let (id, class, buffer) = self.take(Use::Storage, (len as u64 * 4).max(4));
        GpuBuffer { slot: Arc::new(Slot { id, class, buffer, pool: Arc::clone(self) }), len, _t: PhantomData }
    }

    /// A host-readable staging buffer of at least `bytes`; hand it back with
    /// [`Pool::return_staging`] once unmapped.
    pub fn staging(&self, bytes: u64) -> Staging {
        let (id, class, buffer) = self.take(Use::Readback, bytes);
        Staging { id, class, buffer }
    }

    pub fn return_staging(&self, staging: Staging) {
        self.give_back(Use::Readback, staging.class, staging.id, staging.buffer);
    }
}

pub(crate) struct Staging {
    id: u64,
    class: u64,
    pub buffer: wgpu::Buffer,
}

/// One pooled device buffer; returns to the pool when dropped.
struct Slot {
    id: u64,
    class: u64,
    buffer: wgpu::Buffer,
    pool: Arc<Pool>,
}

impl Drop for Slot {
    fn drop(&mut self) {
        self.pool.give_back(Use::Storage, self.class, self.id, self.buffer.clone());
    }
}

/// A handle to `len` f32 (`T = f32`, the backend's `Storage`) or u32 (`T = u32`,
/// `Indices`) values on the device. Cloning shares the buffer; the buffer is recycled
/// when the last handle drops.
pub struct GpuBuffer<T> {
    slot: Arc<Slot>,
    len: usize,
    _t: PhantomData<fn() -> T>,
}

impl<T> Clone for GpuBuffer<T> {
    fn clone(&self) -> Self {
        GpuBuffer { slot: Arc::clone(&self.slot), len: self.len, _t: PhantomData }
    }
}

impl<T> fmt::Debug for GpuBuffer<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "GpuBuffer(len {}, buffer #{})", self.len, self.slot.id)
    }
}

impl<T> GpuBuffer<T> {
    /// Number of elements.
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether the pool holds no buffers.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Whether two handles share one buffer.
    pub fn same_buffer(&self, other: &Self) -> bool {
        Arc::ptr_eq(&self.slot, &other.slot)
    }

    pub(crate) fn buffer(&self) -> &wgpu::Buffer {
        &self.slot.buffer
    }

    /// Bytes holding the elements (at least 4: bindings cannot be empty).
    pub(crate) fn bytes(&self) -> u64 {
        (self.len as u64 * 4).max(4)
    }

    /// What a bind group needs to know about this buffer.
    pub(crate) fn bind(&self) -> Bind<'_> {
        Bind { buffer: &self.slot.buffer, id: self.slot.id, size: self.bytes() }
    }
}

/// A buffer as bound to a kernel: its id (the bind-group cache key) and bound size.
#[derive(Clone, Copy)]
pub(crate) struct Bind<'a> {
    pub buffer: &'a wgpu::Buffer,
    pub id: u64,
    pub size: u64,
}

#[cfg(test)]
mod tests {
    use super::size_class;

    #[test]
    fn size_classes_cover_with_at_most_a_quarter_of_slack() {
        assert_eq!(size_class(1), 256);
        assert_eq!(size_class(256), 256);
        assert_eq!(size_class(257), 320);
        assert_eq!(size_class(1000), 1024);
        assert_eq!(size_class(1025), 1280);
        for bytes in [300u64, 4097, 123_457, 1 << 26, (1 << 26) + 4] {
            let c = size_class(bytes);
            assert!(c >= bytes && c * 4 <= bytes * 5 + 4 * 256, "{bytes} -> {c}");
            assert_eq!(c % 4, 0);
        }
    }
}

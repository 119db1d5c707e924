//! A steady-state training step on the CPU backend's fast kernels allocates no tensor
//! buffers: every tensor comes from the backend's pool and every kernel's scratch is kept
//! between calls. What still allocates, counted and printed (`--nocapture`), is
//! bookkeeping: the autograd tape's node and gradient lists growing again each step, the
//! model's and dataset's per-step vectors (16 allocations of 384 B or more in a `small`
//! step), the partial-sum vector of the reference `sum_squares` kernel (the fused
//! cross-entropy's block sums are a small one), and some 750 smaller ones (handles,
//! shapes). A tensor buffer coming back would
//! add one allocation per tensor, about 300 a step, far past the bound asserted here.
//!
//! Alone in its test binary: the counting allocator sees every thread of the process.

use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::atomic::{AtomicUsize, Ordering};

use tinygpt_kernels_cpu::{CpuBackend, KernelVariant, Kernels};
use tinygpt_model::{Dataset, Preset};
use tinygpt_optim::{Trainer, TrainingConfig};

/// An allocation of at least this many bytes counts as a buffer; below it, as bookkeeping.
/// The smallest tensor the `small` preset trains is 96 floats (a bias), 384 bytes; the
/// largest bookkeeping vector is well below 4 KiB.
const BUFFER_BYTES: usize = 384;
/// The bookkeeping allocations of at least `BUFFER_BYTES` a step (see the module doc: 18–19
/// on one thread and 22 on two, where rayon's parallel collects add a few, when this test
/// was written).
const LARGE_BOOKKEEPING_PER_STEP: usize = 24;

struct CountingAllocator;

static BUFFERS: AtomicUsize = AtomicUsize::new(0);
static BOOKKEEPING: AtomicUsize = AtomicUsize::new(0);

fn count(size: usize) {
    let counter = if size >= BUFFER_BYTES { &BUFFERS } else { &BOOKKEEPING };
    counter.fetch_add(1, Ordering::Relaxed);
}

// SAFETY: forwards every call to the system allocator unchanged; only counts.
unsafe impl GlobalAlloc for CountingAllocator {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        count(layout.size());
        System.alloc(layout)
    }
    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        count(layout.size());
        System.alloc_zeroed(layout)
    }
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        count(new_size);
        System.realloc(ptr, layout, new_size)
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        System.dealloc(ptr, layout)
    }
}

#[global_allocator]
static ALLOCATOR: CountingAllocator = CountingAllocator;

#[test]
fn a_steady_state_step_on_the_fast_kernels_allocates_no_tensor_buffers() {
    if Kernels::Fast.variant() == KernelVariant::Reference {
        eprintln!("skipped: this CPU has no fast kernel variant");
        return;
    }
    let preset = Preset::by_name("small").unwrap();
    let model = preset.model;
    let training = TrainingConfig { batch_size: 4, max_steps: 100, ..Default::default() };
    let text = include_bytes!("../../data/tinyshakespeare.txt");
    let dataset = Dataset::new("shakespeare", &text[..200_000], model.context_length, training.seed).unwrap();
    for threads in [1, 2] {
        let backend = CpuBackend::new(threads).with_kernels(Kernels::Fast);
        let mut trainer = Trainer::new(&backend, model.clone(), training.clone(), dataset.clone()).unwrap();
        // The first steps fill the pool and the kernels' scratch.
        for _ in 0..3 {
            trainer.step().unwrap();
        }
        let steps = 3;
        let (buffers, bookkeeping) = (BUFFERS.load(Ordering::Relaxed), BOOKKEEPING.load(Ordering::Relaxed));
        for _ in 0..steps {
            trainer.step().unwrap();
        }
        let buffers = BUFFERS.load(Ordering::Relaxed) - buffers;
        let bookkeeping = BOOKKEEPING.load(Ordering::Relaxed) - bookkeeping;
        eprintln!(
            "{threads} thread(s): per step {} allocations of {BUFFER_BYTES} B or more, {} smaller ones",
            buffers as f64 / steps as f64,
            bookkeeping as f64 / steps as f64
        );
        assert!(
            buffers <= LARGE_BOOKKEEPING_PER_STEP * steps,
            "{threads} thread(s): {buffers} allocations of {BUFFER_BYTES} B or more in {steps} steady-state steps"
        );
    }
}

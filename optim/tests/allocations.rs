//! A steady-state training step on the CPU backend's fast kernels allocates nothing: every
//! tensor buffer and its handle come back from the backend's pool, every kernel's scratch is
//! kept between calls, shapes are held inline, and the trainer keeps its tape, gradient
//! slots, batch and per-step lists from one step to the next. A buffer coming back would add
//! an allocation per tensor, about 300 a `small` step; a shape on the heap, about 500.
//!
//! Checked on the variant `Kernels::Fast` picks here (the one the CLI trains on), named in
//! the output and in a failure. A CPU without a fast variant fails the test rather than
//! passing it empty: there would be nothing to check (the reference kernels are not
//! promised allocation-free).
//!
//! On a loaded 2-core machine (load average 4 to 5, other builds running) the two-thread
//! spin pool made 1 to 8 allocations in its first 5 steady-state steps in about one run of
//! three: when the helper thread is late, the calling thread runs pieces it had not run
//! before and grows its kernels' thread-local scratch once (gemm, attention, layernorm keep
//! one per thread). That is once per thread and shape, so the test measures up to
//! [`WINDOWS`] windows of steps and passes on the first without an allocation; a buffer or
//! shape that stops coming back allocates in every step of every window, hundreds a step.
//!
//! The backends are the ones the CLI and the browser's threads build train on: inline on
//! one thread, and the spin pool (`CpuBackend::try_new_on_this_thread`) on two. A rayon pool
//! (`CpuBackend::new(2)`) is left out: rayon's job queue allocates a block for every 63
//! jobs sent to it from outside its threads, about two a step.
//!
//! Alone in its test binary: the counting allocator sees every thread of the process.

use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::atomic::{AtomicUsize, Ordering};

use tinygpt_kernels_cpu::{CpuBackend, KernelVariant, Kernels};
use tinygpt_model::{Dataset, Preset};
use tinygpt_optim::{TrainedSet, Trainer, TrainingConfig};

struct CountingAllocator;

static ALLOCATIONS: AtomicUsize = AtomicUsize::new(0);

// SAFETY: forwards every call to the system allocator unchanged; only counts.
unsafe impl GlobalAlloc for CountingAllocator {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        ALLOCATIONS.fetch_add(1, Ordering::Relaxed);
        System.alloc(layout)
    }
    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        ALLOCATIONS.fetch_add(1, Ordering::Relaxed);
        System.alloc_zeroed(layout)
    }
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        ALLOCATIONS.fetch_add(1, Ordering::Relaxed);
        System.realloc(ptr, layout, new_size)
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        System.dealloc(ptr, layout)
    }
}

#[global_allocator]
static ALLOCATOR: CountingAllocator = CountingAllocator;

#[test]
#[cfg_attr(not(target_arch = "x86_64"), ignore = "native fast kernels exist only for x86-64")]
fn a_steady_state_step_on_the_fast_kernels_allocates_nothing() {
    let variant = Kernels::Fast.variant();
    assert_ne!(
        variant,
        KernelVariant::Reference,
        "this CPU has no fast kernel variant (AVX2+FMA or AVX-512): nothing to check here"
    );
    let preset = Preset::by_name("small").unwrap();
    let model = preset.model;
    let training = TrainingConfig { batch_size: 4, max_steps: 100, ..Default::default() };
    let text = include_bytes!("../../data/tinyshakespeare.txt");
    let dataset = Dataset::new("shakespeare", &text[..200_000], model.context_length, training.seed).unwrap();
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
    assert!(cores >= 2, "this test needs two cores for the spin pool (it would fall back to rayon's)");
    for threads in [1, 2] {
        let backend = CpuBackend::try_new_on_this_thread(threads).unwrap().with_variant(variant).unwrap();
        let mut trainer = Trainer::new(
            TrainedSet::whole_model(&backend, model.clone()),
            training.clone(),
            dataset.clone(),
            None,
        )
        .unwrap();
        // The first steps fill the pool, the kernels' scratch and the trainer's lists.
        for _ in 0..3 {
            trainer.step().unwrap();
        }
        let steps = 5;
        let mut windows = Vec::new();
        while windows.len() < WINDOWS && windows.last() != Some(&0) {
            let before = ALLOCATIONS.load(Ordering::Relaxed);
            for _ in 0..steps {
                trainer.step().unwrap();
            }
            windows.push(ALLOCATIONS.load(Ordering::Relaxed) - before);
        }
        let what = format!(
            "{variant}, {threads} thread(s): allocations in each window of {steps} steady-state steps: {windows:?}"
        );
        eprintln!("{what}");
        assert_eq!(windows.last(), Some(&0), "{what}");
    }
}

/// Windows of steady-state steps measured before the test gives up on seeing one without
/// an allocation (see the module docs: a late helper thread grows its scratch once).
const WINDOWS: usize = 4;

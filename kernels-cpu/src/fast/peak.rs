//! The f32 multiply-add peak a variant reaches on this machine, measured rather than taken
//! from a datasheet: a loop of nothing but vector multiply-adds into [`ACCUMULATORS`]
//! independent registers (more than the FMA latency times the FMA units of any x86 core, so
//! the loop is bound by throughput, not latency). It is the fastest of [`BURSTS`] short
//! bursts: on a shared machine (load average 4–6 on the 2-core VM) a single 0.2-s run was
//! preempted for a varying share of its time and read 13–41 GFLOP/s for the same wasm
//! loop, while the fastest burst reads what a core does when it runs the loop, 42–44;
//! `matmul_bench` sets the fastest matmul call against it (`of_peak`).

use std::time::Instant;

use crate::fast::simd::Simd;
use crate::fast::FastKernels;

/// Independent accumulators: 4-cycle latency × 2 FMA units needs 8; 12 leaves slack.
const ACCUMULATORS: usize = 12;

/// `iters` rounds of one multiply-add per accumulator; returns a value that depends on all
/// of them, so none is optimised away.
///
/// # Safety
/// The CPU must support `S`'s instructions.
#[inline(always)]
pub(crate) unsafe fn multiply_adds<S: Simd>(iters: usize) -> f32 {
    let (scale, step) = (S::splat(0.999), S::splat(1e-3));
    let mut acc = [S::zero(); ACCUMULATORS];
    for _ in 0..iters {
        for x in acc.iter_mut() {
            *x = S::mul_add(*x, scale, step);
        }
    }
    let mut lanes = [0f32; 16];
    let mut total = 0.0;
    for x in acc {
        S::store(lanes.as_mut_ptr(), x);
        total += lanes[0];
    }
    total
}

/// How many bursts [`gflops`] times, about 5 ms each (0.2 s in all).
const BURSTS: usize = 40;

/// GFLOP/s (a multiply-add counts 2) of `threads` threads running `kernels`' multiply-add
/// loop at once: the fastest of [`BURSTS`] bursts.
pub(crate) fn gflops(kernels: &FastKernels, threads: usize) -> f64 {
    let flops_per_iter = (ACCUMULATORS * kernels.lanes * 2) as f64;
    // SAFETY: `kernels` is a supported variant's (see `FastKernels`).
    let run = |iters: usize| unsafe { (kernels.multiply_adds)(std::hint::black_box(iters)) };
    let started = Instant::now();
    std::hint::black_box(run(1 << 20));
    let per_iter = started.elapsed().as_secs_f64() / (1 << 20) as f64;
    let iters = ((0.2 / BURSTS as f64 / per_iter.max(1e-12)) as usize).clamp(1 << 15, 1 << 30);
    let burst = || {
        let started = Instant::now();
        if threads == 1 {
            // On this thread: wasm32-wasip1 (matmul_bench under Node) cannot start one.
            std::hint::black_box(run(iters));
        } else {
            std::thread::scope(|scope| {
                for _ in 0..threads {
                    scope.spawn(|| std::hint::black_box(run(iters)));
                }
            });
        }
        started.elapsed().as_secs_f64()
    };
    let fastest = (0..BURSTS).map(|_| burst()).fold(f64::INFINITY, f64::min);
    threads as f64 * iters as f64 * flops_per_iter / fastest / 1e9
}

//! A small fork-join pool whose threads stay awake between ops (the CLI's, through
//! [`crate::CpuBackend::try_new_on_this_thread`]).
//!
//! Why not rayon here: a training step is a few hundred ops, many of them well under
//! 100 µs at the `small` and `medium` presets. A rayon worker that found no work for a few
//! dozen yields goes to sleep on a futex, and the next op's pieces are mostly done by the
//! calling thread before it wakes up (the second core added 1.37× at `small`, against
//! PyTorch's 1.6× with OpenMP threads that spin between parallel regions). Here the started
//! threads spin on one atomic for a while after their last piece ([`SPIN`], then yielding
//! until [`AWAKE`]), then sleep on a condition variable until the next op.
//!
//! An op is `n` items `f(0..n)`: the calling thread publishes it and takes items itself,
//! the others claim the rest one at a time, and the call returns once every item is done.
//! Which thread runs an item never changes what it computes (the kernels' pieces are chosen
//! by problem size, see `parallel.rs`), so results are the same bits as on one thread.
//!
//! While the pool is held awake ([`SpinPool::hold_awake`]: a run in progress, whose ops come
//! one after another) its threads only spin: none yields, naps or sleeps between ops.

use std::cell::{Cell, UnsafeCell};
use std::panic::{self, AssertUnwindSafe};
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Condvar, Mutex};
use std::thread::JoinHandle;
use std::time::Duration;
#[cfg(not(target_arch = "wasm32"))]
use std::time::Instant;

/// How long a started thread spins on the ticket after its last item before it starts
/// yielding the core to other processes.
const SPIN: Duration = Duration::from_micros(50);
/// How long after its last item a started thread stays awake (spinning, then yielding)
/// before it sleeps until the next op.
const AWAKE: Duration = Duration::from_millis(2);

/// The ticket: generation, item count and next unclaimed item, in one word so an item is
/// claimed by one compare-and-swap that also proves the op is still the current one.
const INDEX_BITS: u32 = 18;
const MAX_ITEMS: usize = (1 << INDEX_BITS) - 1;
const INDEX_MASK: u64 = (1 << INDEX_BITS) - 1;
const GEN_SHIFT: u32 = 2 * INDEX_BITS;

/// An op's items, with the caller's lifetime erased: valid from when the ticket names its
/// generation until its last item is done, which [`SpinPool::run`] waits for.
type Job = *const (dyn Fn(usize) + Sync);

thread_local! {
    /// Set on the started threads and on a caller while it runs an op's items: an op called
    /// from inside an item runs inline (same results) instead of publishing a second op.
    static IN_OP: Cell<bool> = const { Cell::new(false) };
}

struct Shared {
    ticket: AtomicU64,
    /// Written only by the thread holding [`SpinPool::submit`], while no op is current;
    /// read only by a thread that claimed an item of the current op.
    job: UnsafeCell<Option<Job>>,
    done: AtomicUsize,
    /// The first panic of the current op's items, raised by [`SpinPool::run`] afterwards.
    panic: Mutex<Option<Box<dyn std::any::Any + Send>>>,
    sleeping: AtomicUsize,
    /// Live [`AwakeHold`]s: while any is, idle threads and a waiting caller only spin.
    holds: AtomicUsize,
    stop: AtomicBool,
    lock: Mutex<()>,
    wake: Condvar,
}

// SAFETY: `job` is accessed as its comment says (one writer between ops, readers during
// one, ordered by the ticket's release/acquire); everything else is atomics and locks.
unsafe impl Sync for Shared {}
unsafe impl Send for Shared {}

impl Shared {
    fn held_awake(&self) -> bool {
        self.holds.load(Ordering::SeqCst) > 0
    }

    /// Wakes the threads sleeping in [`Shared::work`], under the lock they check their
    /// reasons to sleep under (a new op, a hold, stop), so none misses the change that the
    /// caller made before calling this.
    fn wake_sleepers(&self) {
        let _guard = self.lock.lock().unwrap_or_else(|e| e.into_inner());
        self.wake.notify_all();
    }

    fn has_work(&self) -> bool {
        let t = self.ticket.load(Ordering::SeqCst);
        t & INDEX_MASK < (t >> INDEX_BITS) & INDEX_MASK
    }

    /// Claims and runs one item of the current op: `Some(true)` if it ran one, `Some(false)`
    /// if another thread took the item first (try again), `None` if none is left.
    fn run_one(&self) -> Option<bool> {
        let t = self.ticket.load(Ordering::Acquire);
        let (n, i) = ((t >> INDEX_BITS) & INDEX_MASK, t & INDEX_MASK);
        if i >= n {
            return None;
        }
        if self.ticket.compare_exchange_weak(t, t + 1, Ordering::AcqRel, Ordering::Relaxed).is_err() {
            return Some(false);
        }
        // SAFETY: item `i` of the current op is claimed and not done, so the op's caller is
        // still waiting in `run` and the job it published (before the ticket) is alive.
        let job = unsafe { (*self.job.get()).expect("a current op has a job") };
        if let Err(payload) = panic::catch_unwind(AssertUnwindSafe(|| unsafe { (*job)(i as usize) })) {
            self.panic.lock().unwrap_or_else(|e| e.into_inner()).get_or_insert(payload);
        }
        self.done.fetch_add(1, Ordering::Release);
        Some(true)
    }

    /// A started thread: runs items while there are any, spins and yields for [`AWAKE`]
    /// after the last (or spins for as long as the pool is held awake), then sleeps until
    /// woken.
    fn work(&self) {
        IN_OP.set(true);
        let mut idle_since = IdleClock::now();
        let mut idle_rounds = 0u32;
        while !self.stop.load(Ordering::Relaxed) {
            if self.run_one().is_some() {
                idle_rounds = 0;
                continue;
            }
            idle_rounds += 1;
            if idle_rounds == 1 {
                idle_since = IdleClock::now();
            }
            if !idle_rounds.is_multiple_of(64) {
                std::hint::spin_loop();
                continue;
            }
            if self.held_awake() {
                // The idle time counts from the hold's end.
                idle_rounds = 0;
                std::hint::spin_loop();
                continue;
            }
            let idle = idle_since.elapsed(idle_rounds);
            if idle < SPIN {
                std::hint::spin_loop();
            } else if idle < AWAKE {
                give_way();
                idle_since.gave_way();
            } else {
                let guard = self.lock.lock().unwrap_or_else(|e| e.into_inner());
                self.sleeping.fetch_add(1, Ordering::SeqCst);
                // Under the lock that `hold_awake` and `run` notify under, so a hold or an op
                // that comes now either is seen here or wakes this thread.
                if !self.has_work() && !self.held_awake() && !self.stop.load(Ordering::SeqCst) {
                    drop(self.wake.wait(guard).unwrap_or_else(|e| e.into_inner()));
                }
                self.sleeping.fetch_sub(1, Ordering::SeqCst);
                idle_rounds = 0;
            }
        }
    }
}

/// Lets another thread have this core for a moment, for a thread that waits: natively
/// `yield_now`; on wasm32, where `yield_now` does nothing, a nap of [`WASM_NAP`] (an
/// atomic wait with a timeout). Without it a waiting thread kept its core from the thread
/// it waited for on a busy machine (a `small` step took 1.8 s instead of 0.1 s in Chromium
/// on the loaded 2-core VM).
fn give_way() {
    #[cfg(not(target_arch = "wasm32"))]
    std::thread::yield_now();
    #[cfg(target_arch = "wasm32")]
    std::thread::sleep(WASM_NAP);
}

/// How long [`give_way`] naps on wasm32.
#[cfg(target_arch = "wasm32")]
const WASM_NAP: Duration = Duration::from_micros(20);

/// How long a started thread has been idle: a clock natively; on wasm32, where std has no
/// clock (`Instant::now` panics there), its idle rounds at an assumed [`WASM_ROUND`] each
/// plus its naps, so a thread sleeps after roughly [`AWAKE`] there too.
#[cfg(not(target_arch = "wasm32"))]
struct IdleClock(Instant);

#[cfg(not(target_arch = "wasm32"))]
impl IdleClock {
    fn now() -> Self {
        IdleClock(Instant::now())
    }

    fn elapsed(&self, _rounds: u32) -> Duration {
        self.0.elapsed()
    }

    fn gave_way(&mut self) {}
}

/// What one idle round (a look at the ticket) is taken to cost on wasm32.
#[cfg(target_arch = "wasm32")]
const WASM_ROUND: Duration = Duration::from_nanos(5);

#[cfg(target_arch = "wasm32")]
struct IdleClock {
    naps: u32,
}

#[cfg(target_arch = "wasm32")]
impl IdleClock {
    fn now() -> Self {
        IdleClock { naps: 0 }
    }

    fn elapsed(&self, rounds: u32) -> Duration {
        WASM_ROUND * rounds + WASM_NAP * self.naps
    }

    fn gave_way(&mut self) {
        self.naps += 1;
    }
}

/// `threads - 1` started threads plus whichever thread calls [`SpinPool::run`].
pub(crate) struct SpinPool {
    shared: Arc<Shared>,
    threads: usize,
    workers: Vec<JoinHandle<()>>,
    /// Held by the caller of the current op (and its generation counter): a second thread
    /// calling meanwhile runs its op inline instead.
    submit: Mutex<u64>,
}

impl std::fmt::Debug for SpinPool {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SpinPool").field("threads", &self.threads).finish()
    }
}

impl SpinPool {
    /// Starts `threads - 1` threads (the caller of each op is the last one).
    pub fn new(threads: usize) -> std::io::Result<SpinPool> {
        let mut pool = SpinPool::unstarted(threads);
        for i in 1..threads {
            let shared = Arc::clone(&pool.shared);
            let worker =
                std::thread::Builder::new().name(format!("tinygpt-cpu-{i}")).spawn(move || shared.work())?;
            pool.workers.push(worker);
        }
        Ok(pool)
    }

    /// A pool whose `threads - 1` started threads are tasks that occupy threads of rayon's
    /// global pool for the pool's lifetime: in a browser, wasm-bindgen-rayon's
    /// `initThreadPool` starts that pool's Web Workers, and a program cannot start threads
    /// any other way. Rayon's own workers sleep between a step's short ops and woke too late
    /// to help (the wasm threads build was no faster than one thread on 2 cores), so here as
    /// natively the started threads stay awake between ops. Needs `threads - 1` free threads
    /// in the global pool.
    pub fn on_global_pool(threads: usize) -> SpinPool {
        let pool = SpinPool::unstarted(threads);
        for _ in 1..threads {
            let shared = Arc::clone(&pool.shared);
            rayon::spawn(move || shared.work());
        }
        pool
    }

    fn unstarted(threads: usize) -> SpinPool {
        let shared = Arc::new(Shared {
            ticket: AtomicU64::new(0),
            job: UnsafeCell::new(None),
            done: AtomicUsize::new(0),
            panic: Mutex::new(None),
            sleeping: AtomicUsize::new(0),
            holds: AtomicUsize::new(0),
            stop: AtomicBool::new(false),
            lock: Mutex::new(()),
            wake: Condvar::new(),
        });
        SpinPool { shared, threads, workers: Vec::new(), submit: Mutex::new(0) }
    }

    pub fn threads(&self) -> usize {
        self.threads
    }

    /// Keeps the pool's threads spinning between ops until the hold is dropped, and a
    /// caller waiting for another thread's last item spinning too: for a run in progress,
    /// whose next op comes within microseconds. Not held, they yield after [`SPIN`] and
    /// sleep after [`AWAKE`]; on wasm32 a yield is a nap, an atomic wait whose timeout the
    /// browser rounds up, so an op could start while the others napped and wait for them.
    /// Holds nest.
    pub fn hold_awake(&self) -> AwakeHold {
        self.shared.holds.fetch_add(1, Ordering::SeqCst);
        if self.shared.sleeping.load(Ordering::SeqCst) > 0 {
            self.shared.wake_sleepers();
        }
        AwakeHold(Some(Arc::clone(&self.shared)))
    }

    /// Calls `f(i)` for every `i` in `0..n`, spread over the pool's threads and the calling
    /// one; returns when all are done. A panic in any item is raised here afterwards.
    pub fn run(&self, n: usize, f: &(dyn Fn(usize) + Sync)) {
        let inline = || (0..n).for_each(f);
        if n <= 1 || n > MAX_ITEMS || IN_OP.get() {
            return inline();
        }
        let Ok(mut generation) = self.submit.try_lock() else {
            return inline();
        };
        let shared = &*self.shared;
        *generation += 1;
        // SAFETY: only the lifetime is erased; `job` is used only until every item is done,
        // which this call waits for below before `f` can go out of scope.
        let job: Job =
            unsafe { std::mem::transmute::<&(dyn Fn(usize) + Sync), &'static (dyn Fn(usize) + Sync)>(f) };
        // SAFETY: no op is current (the last one's items are all done), and we hold `submit`.
        unsafe { *shared.job.get() = Some(job) };
        shared.done.store(0, Ordering::Relaxed);
        let ticket = (*generation << GEN_SHIFT) | ((n as u64) << INDEX_BITS);
        shared.ticket.store(ticket, Ordering::SeqCst);
        if shared.sleeping.load(Ordering::SeqCst) > 0 {
            shared.wake_sleepers();
        }
        IN_OP.set(true);
        while shared.run_one().is_some() {}
        IN_OP.set(false);
        let mut rounds = 0u32;
        while shared.done.load(Ordering::Acquire) < n {
            rounds = rounds.wrapping_add(1);
            if rounds < 1 << 12 || shared.held_awake() {
                std::hint::spin_loop();
            } else {
                give_way();
            }
        }
        // SAFETY: every item is done, so no other thread reads the job any more.
        unsafe { *shared.job.get() = None };
        let payload = shared.panic.lock().unwrap_or_else(|e| e.into_inner()).take();
        if let Some(payload) = payload {
            drop(generation);
            panic::resume_unwind(payload);
        }
    }
}

impl Drop for SpinPool {
    fn drop(&mut self) {
        self.shared.stop.store(true, Ordering::SeqCst);
        self.shared.wake_sleepers();
        for worker in self.workers.drain(..) {
            let _ = worker.join();
        }
    }
}

/// Keeps a CPU backend's threads spinning between ops while it lives
/// ([`crate::CpuBackend::stay_awake`]); a backend without such threads gives one that does
/// nothing.
#[must_use = "the threads stay awake only while the hold lives"]
pub struct AwakeHold(Option<Arc<Shared>>);

impl AwakeHold {
    pub(crate) fn none() -> AwakeHold {
        AwakeHold(None)
    }
}

impl std::fmt::Debug for AwakeHold {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AwakeHold").finish_non_exhaustive()
    }
}

impl Drop for AwakeHold {
    fn drop(&mut self) {
        if let Some(shared) = &self.0 {
            shared.holds.fetch_sub(1, Ordering::SeqCst);
        }
    }
}

/// A raw pointer the pool's threads may share: each item touches only its own part.
pub(crate) struct SendPtr<T>(pub *mut T);
impl<T> Clone for SendPtr<T> {
    fn clone(&self) -> Self {
        *self
    }
}
impl<T> Copy for SendPtr<T> {}

impl<T> SendPtr<T> {
    /// The pointer (a method, so a closure captures the whole `SendPtr`, not its field).
    pub fn get(self) -> *mut T {
        self.0
    }
}
// SAFETY: used only for disjoint per-item parts of one buffer (see the callers).
unsafe impl<T: Send> Send for SendPtr<T> {}
unsafe impl<T: Send> Sync for SendPtr<T> {}

impl SpinPool {
    /// `f(i)` for `i` in `0..n`, results in order of `i`.
    pub fn map<R: Send>(&self, n: usize, f: impl Fn(usize) -> R + Sync) -> Vec<R> {
        let mut out: Vec<R> = Vec::with_capacity(n);
        let slots = SendPtr(out.as_mut_ptr());
        self.run(n, &|i| {
            // SAFETY: item `i` writes only slot `i` of the `n` reserved.
            unsafe { slots.get().add(i).write(f(i)) }
        });
        // SAFETY: every slot was written (a panicking item panics `run` before this).
        unsafe { out.set_len(n) };
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn map_returns_every_item_in_order_awake_and_after_sleeping() {
        let pool = SpinPool::new(3).unwrap();
        for n in [0, 1, 2, 7, 100, 5000] {
            assert_eq!(pool.map(n, |i| i * i), (0..n).map(|i| i * i).collect::<Vec<_>>());
        }
        std::thread::sleep(AWAKE * 3);
        assert_eq!(pool.map(64, |i| i + 1), (1..=64).collect::<Vec<_>>());
    }

    #[test]
    fn a_pool_on_rayons_global_threads_gives_every_item_in_order() {
        let pool = SpinPool::on_global_pool(2);
        for n in [0, 1, 7, 5000] {
            assert_eq!(pool.map(n, |i| i * 3), (0..n).map(|i| i * 3).collect::<Vec<_>>());
        }
        std::thread::sleep(AWAKE * 3);
        assert_eq!(pool.map(64, |i| i + 1), (1..=64).collect::<Vec<_>>());
        drop(pool);
        // The global pool still runs work after the pool is gone.
        assert_eq!(rayon::join(|| 1, || 2), (1, 2));
    }

    /// Waits up to a second for `done`.
    fn within_a_second(done: impl Fn() -> bool) -> bool {
        let start = Instant::now();
        while !done() && start.elapsed() < Duration::from_secs(1) {
            std::thread::sleep(Duration::from_millis(1));
        }
        done()
    }

    #[test]
    fn a_held_pool_keeps_its_threads_awake_and_they_sleep_once_the_hold_ends() {
        let pool = SpinPool::new(3).unwrap();
        let asleep = || pool.shared.sleeping.load(Ordering::SeqCst);
        assert_eq!(pool.map(64, |i| i + 1), (1..=64).collect::<Vec<_>>());
        assert!(within_a_second(|| asleep() == 2), "idle threads sleep after AWAKE");
        let hold = pool.hold_awake();
        let nested = pool.hold_awake();
        assert!(within_a_second(|| asleep() == 0), "a hold wakes sleeping threads");
        drop(nested);
        std::thread::sleep(AWAKE * 5);
        assert_eq!(asleep(), 0, "held threads never sleep");
        assert_eq!(pool.map(64, |i| i * 2), (0..64).map(|i| i * 2).collect::<Vec<_>>());
        drop(hold);
        assert!(within_a_second(|| asleep() == 2), "once the last hold ends they sleep again");
        assert_eq!(pool.map(64, |i| i + 1), (1..=64).collect::<Vec<_>>());
    }

    #[test]
    fn callers_on_several_threads_each_get_their_own_results() {
        let pool = Arc::new(SpinPool::new(2).unwrap());
        let callers: Vec<_> = (0..3)
            .map(|t| {
                let pool = Arc::clone(&pool);
                std::thread::spawn(move || {
                    for round in 0..200 {
                        let got = pool.map(50, |i| i * t + round);
                        assert_eq!(got, (0..50).map(|i| i * t + round).collect::<Vec<_>>());
                    }
                })
            })
            .collect();
        callers.into_iter().for_each(|c| c.join().unwrap());
    }

    #[test]
    fn an_item_that_panics_panics_the_caller_with_its_message_and_the_pool_goes_on() {
        let pool = SpinPool::new(2).unwrap();
        let caught = panic::catch_unwind(AssertUnwindSafe(|| {
            pool.map(40, |i| if i == 33 { panic!("item {i} failed") } else { i })
        }));
        let message = caught.unwrap_err().downcast::<String>().unwrap();
        assert_eq!(*message, "item 33 failed");
        assert_eq!(pool.map(40, |i| i), (0..40).collect::<Vec<_>>());
    }

    #[test]
    fn an_op_called_from_inside_an_item_runs_inline() {
        let pool = SpinPool::new(2).unwrap();
        let got = pool.map(8, |i| pool.map(4, |j| i * 4 + j).into_iter().sum::<usize>());
        assert_eq!(got, (0..8).map(|i| (0..4).map(|j| i * 4 + j).sum::<usize>()).collect::<Vec<_>>());
    }
}

//! How kernels spread work over threads without changing their results.
//!
//! Every helper here hands out work in pieces whose boundaries depend only on the
//! problem size (a chunk length or an item count chosen by the kernel), never on the
//! number of threads, and each output element is written by exactly one piece in a fixed
//! order. A kernel built from these helpers therefore gives bit-identical results on 1
//! thread and on 64.

use std::sync::Arc;

use rayon::prelude::*;
use rayon::ThreadPool;

use crate::spin_pool::{SendPtr, SpinPool};

/// Where kernels run: inline on the calling thread, on a dedicated rayon pool, on
/// rayon's global pool (the only one wasm-bindgen-rayon can start in a browser, where a
/// backend cannot spawn threads of its own), or on the calling thread with threads that
/// stay awake between ops (`spin_pool.rs`).
#[derive(Clone, Debug)]
pub(crate) enum Parallel {
    Inline,
    Pool(Arc<ThreadPool>),
    Global,
    Spin(Arc<SpinPool>),
}

impl Parallel {
    pub fn threads(&self) -> usize {
        match self {
            Parallel::Inline => 1,
            Parallel::Pool(pool) => pool.current_num_threads(),
            Parallel::Global => rayon::current_num_threads(),
            Parallel::Spin(pool) => pool.threads(),
        }
    }

    /// Whether work is spread over threads at all (one global thread is still a pool).
    fn spreads(&self) -> bool {
        !matches!(self, Parallel::Inline)
    }

    /// Runs `op` where this `Parallel`'s rayon calls go: inside the dedicated pool, or as is
    /// (the global pool).
    fn install<R: Send>(&self, op: impl FnOnce() -> R + Send) -> R {
        match self {
            Parallel::Pool(pool) => pool.install(op),
            _ => op(),
        }
    }

    /// Calls `f(i, chunk)` for the `i`-th `chunk_len`-sized chunk of `out` (the last one
    /// may be shorter).
    pub fn chunks_mut<T, F>(&self, out: &mut [T], chunk_len: usize, f: F)
    where
        T: Send,
        F: Fn(usize, &mut [T]) + Sync + Send,
    {
        self.map_chunks_mut(out, chunk_len, |i, c| f(i, c));
    }

    /// Like [`Parallel::chunks_mut`], collecting what each call returns, in chunk order.
    pub fn map_chunks_mut<T, R, F>(&self, out: &mut [T], chunk_len: usize, f: F) -> Vec<R>
    where
        T: Send,
        R: Send,
        F: Fn(usize, &mut [T]) -> R + Sync + Send,
    {
        let chunk_len = chunk_len.max(1);
        match self {
            Parallel::Spin(pool) if out.len() > chunk_len => {
                let (len, base) = (out.len(), SendPtr(out.as_mut_ptr()));
                pool.map(len.div_ceil(chunk_len), |i| {
                    // SAFETY: chunk `i` is `out[i * chunk_len..]` up to `chunk_len` values,
                    // disjoint from every other item's, and `out` is borrowed for the call.
                    f(i, unsafe { chunk(base.get(), len, chunk_len, i) })
                })
            }
            p if p.spreads() && out.len() > chunk_len => {
                p.install(|| out.par_chunks_mut(chunk_len).enumerate().map(|(i, c)| f(i, c)).collect())
            }
            _ => out.chunks_mut(chunk_len).enumerate().map(|(i, c)| f(i, c)).collect(),
        }
    }

    /// [`Parallel::map_chunks_mut`] writing what chunk `i`'s call returns to `results[i]`,
    /// the caller's (one per chunk), instead of into a new `Vec`.
    pub fn map_chunks_mut_into<T, R, F>(&self, out: &mut [T], chunk_len: usize, results: &mut [R], f: F)
    where
        T: Send,
        R: Send,
        F: Fn(usize, &mut [T]) -> R + Sync + Send,
    {
        let chunks = out.len().div_ceil(chunk_len.max(1));
        assert_eq!(results.len(), chunks, "map_chunks_mut_into: one result per chunk");
        let slots = SendPtr(results.as_mut_ptr());
        self.map_chunks_mut(out, chunk_len, |i, c| {
            let r = f(i, c);
            // SAFETY: chunk `i` (< `chunks`, checked above) writes only `results[i]`, and
            // `results` is borrowed for the call.
            unsafe { *slots.get().add(i) = r };
        });
    }

    /// `f(i)` for `i` in `0..n`, results in order of `i`.
    pub fn map<R, F>(&self, n: usize, f: F) -> Vec<R>
    where
        R: Send,
        F: Fn(usize) -> R + Sync + Send,
    {
        match self {
            Parallel::Spin(pool) => pool.map(n, f),
            p if p.spreads() && n > 1 => p.install(|| (0..n).into_par_iter().map(f).collect()),
            _ => (0..n).map(f).collect(),
        }
    }

    /// Calls `f(a_chunk, b_chunk, c_chunk)` for matching `chunk_len`-sized chunks of three
    /// equally long slices (an in-place update of several buffers, like AdamW's).
    pub fn zip3_chunks_mut<F>(&self, a: &mut [f32], b: &mut [f32], c: &mut [f32], chunk_len: usize, f: F)
    where
        F: Fn(usize, &mut [f32], &mut [f32], &mut [f32]) + Sync + Send,
    {
        assert!(a.len() == b.len() && b.len() == c.len(), "zip3_chunks_mut: slices differ in length");
        let chunk_len = chunk_len.max(1);
        match self {
            Parallel::Spin(pool) if a.len() > chunk_len => {
                let len = a.len();
                let [a, b, c] = [a, b, c].map(|x| SendPtr(x.as_mut_ptr()));
                pool.map(len.div_ceil(chunk_len), |i| {
                    // SAFETY: as in `map_chunks_mut`, for each of the three slices.
                    unsafe {
                        f(
                            i,
                            chunk(a.get(), len, chunk_len, i),
                            chunk(b.get(), len, chunk_len, i),
                            chunk(c.get(), len, chunk_len, i),
                        )
                    }
                });
            }
            p if p.spreads() && a.len() > chunk_len => p.install(|| {
                a.par_chunks_mut(chunk_len)
                    .zip(b.par_chunks_mut(chunk_len))
                    .zip(c.par_chunks_mut(chunk_len))
                    .enumerate()
                    .for_each(|(i, ((a, b), c))| f(i, a, b, c))
            }),
            _ => a
                .chunks_mut(chunk_len)
                .zip(b.chunks_mut(chunk_len))
                .zip(c.chunks_mut(chunk_len))
                .enumerate()
                .for_each(|(i, ((a, b), c))| f(i, a, b, c)),
        }
    }
}

/// Chunk `i` (`chunk_len` values, the last one shorter) of the `len` values at `base`.
///
/// # Safety
/// `base` must point at `len` values no one else touches while the chunk is used.
unsafe fn chunk<'a, T>(base: *mut T, len: usize, chunk_len: usize, i: usize) -> &'a mut [T] {
    let start = i * chunk_len;
    std::slice::from_raw_parts_mut(base.add(start), chunk_len.min(len - start))
}

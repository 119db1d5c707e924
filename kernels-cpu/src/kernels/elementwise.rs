//! Elementwise ops and plain reductions.
//!
//! add:         a, b [len] -> out [len]
//! scale:       a [len], alpha -> out [len]
//! sum_rows:    x [rows, cols] -> out [cols]     (f64 accumulation, ascending rows)
//! sum_squares: x [len] -> out [1]               (f64 accumulation, fixed chunks)

use crate::parallel::Parallel;

/// Elements per parallel piece of an elementwise op: big enough that spreading a piece
/// costs far less than computing it.
pub(crate) const ELEMENTWISE_CHUNK: usize = 1 << 14;
/// Columns per parallel piece of a column reduction.
const COLUMN_BLOCK: usize = 64;
/// Elements per partial sum of `sum_squares`. Fixed (never derived from the thread count)
/// so the order of the f64 additions, and hence the result, never changes.
const SUM_CHUNK: usize = 4096;

pub(crate) fn add(par: &Parallel, out: &mut [f32], a: &[f32], b: &[f32]) {
    par.chunks_mut(out, ELEMENTWISE_CHUNK, |i, out| {
        let start = i * ELEMENTWISE_CHUNK;
        let (a, b) = (&a[start..start + out.len()], &b[start..start + out.len()]);
        for ((o, &x), &y) in out.iter_mut().zip(a).zip(b) {
            *o = x + y;
        }
    });
}

pub(crate) fn scale(par: &Parallel, out: &mut [f32], a: &[f32], alpha: f32) {
    par.chunks_mut(out, ELEMENTWISE_CHUNK, |i, out| {
        let a = &a[i * ELEMENTWISE_CHUNK..][..out.len()];
        for (o, &x) in out.iter_mut().zip(a) {
            *o = alpha * x;
        }
    });
}

/// `out[j] = Σ_r term(r, j)` over `r` in `0..rows`, summed in f64 in ascending `r`;
/// `out` is `[cols]`. The shared core of `sum_rows` and LayerNorm's `dgamma`/`dbeta`.
pub(crate) fn column_sums<F>(par: &Parallel, out: &mut [f32], rows: usize, term: F)
where
    F: Fn(usize, usize) -> f64 + Sync + Send,
{
    par.chunks_mut(out, COLUMN_BLOCK, |blk, out| {
        let j0 = blk * COLUMN_BLOCK;
        let mut acc = vec![0f64; out.len()];
        for r in 0..rows {
            for (dj, a) in acc.iter_mut().enumerate() {
                *a += term(r, j0 + dj);
            }
        }
        for (o, a) in out.iter_mut().zip(acc) {
            *o = a as f32;
        }
    });
}

pub(crate) fn sum_rows(par: &Parallel, out: &mut [f32], x: &[f32], rows: usize, cols: usize) {
    column_sums(par, out, rows, |r, j| x[r * cols + j] as f64);
}

/// The partial sums [`sum_squares`] needs for `len` values.
pub(crate) fn sum_squares_pieces(len: usize) -> usize {
    len.div_ceil(SUM_CHUNK)
}

/// `partial`: scratch, [`sum_squares_pieces`] long (the caller's, so a step allocates nothing).
pub(crate) fn sum_squares(par: &Parallel, x: &[f32], partial: &mut [f64]) -> f32 {
    assert_eq!(partial.len(), sum_squares_pieces(x.len()), "sum_squares: one partial per piece");
    par.chunks_mut(partial, 1, |i, partial| {
        let end = ((i + 1) * SUM_CHUNK).min(x.len());
        partial[0] = x[i * SUM_CHUNK..end].iter().map(|&v| v as f64 * v as f64).sum::<f64>();
    });
    partial.iter().sum::<f64>() as f32
}

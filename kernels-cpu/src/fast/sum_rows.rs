//! Column sums (bias gradients) for the fast variants: each block of rows adds its rows
//! into a partial `[cols]` in f32 (vectorised along the row), and the caller adds the
//! partials in block order, so results do not depend on the thread count.
//!
//! sum_rows: x [rows, cols] -> out [cols]

/// Rows per parallel piece (and per partial sum).
pub(crate) const ROWS_PER_PIECE: usize = 64;

/// Columns summed at a time, in a buffer of the thread's own (see [`block_sums`]).
const COLS: usize = 256;

/// `partial[j] = Σ_r x[r, j]` over the rows of `x` (`partial.len()` columns each).
///
/// `COLS` columns at a time are summed on the stack and written to `partial` once: `partial`
/// lies beside other blocks' partials, which other threads write, and adding into it row
/// by row made the cache lines at its ends bounce between the cores. Each column still sums
/// its rows in ascending order from 0.
#[inline(always)]
pub(crate) fn block_sums(partial: &mut [f32], x: &[f32]) {
    let cols = partial.len();
    for (c0, out) in (0..cols).step_by(COLS).zip(partial.chunks_mut(COLS)) {
        let mut acc = [0f32; COLS];
        let acc = &mut acc[..out.len()];
        for row in x.chunks_exact(cols) {
            for (a, &v) in acc.iter_mut().zip(&row[c0..c0 + out.len()]) {
                *a += v;
            }
        }
        out.copy_from_slice(acc);
    }
}

//! Column sums (bias gradients) for the fast variants: each block of rows adds its rows
//! into a partial `[cols]` in f32 (vectorised along the row), and the caller adds the
//! partials in block order, so results do not depend on the thread count.
//!
//! sum_rows: x [rows, cols] -> out [cols]

/// Rows per parallel piece (and per partial sum).
pub(crate) const ROWS_PER_PIECE: usize = 64;

/// `partial[j] = Σ_r x[r, j]` over the rows of `x` (`partial.len()` columns each).
#[inline(always)]
pub(crate) fn block_sums(partial: &mut [f32], x: &[f32]) {
    partial.fill(0.0);
    for row in x.chunks_exact(partial.len()) {
        for (p, &v) in partial.iter_mut().zip(row) {
            *p += v;
        }
    }
}

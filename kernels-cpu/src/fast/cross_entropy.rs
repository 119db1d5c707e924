//! Softmax cross-entropy for the fast variants, fused: the forward finds each row's softmax
//! normaliser once and keeps it, so the backward is one `exp` per logit with no max or sum
//! pass over the logits again.
//!
//! forward_rows:  logits [rows, V], targets [rows] -> saved [rows, 2], Σ of the rows' losses
//! backward_rows: logits [rows, V], targets [rows], saved [rows, 2], scale -> dlogits [rows, V]
//!
//! `saved` holds each row's maximum and `1 / Σ exp(x - max)`. Same maths as the reference
//! (`kernels/cross_entropy.rs`): loss = ln Σ exp(x - max) - (x[t] - max), dlogits =
//! scale · (exp(x - max) / Σ - onehot(t)), with `scale` = dloss / rows; but with the
//! vectorisable `exp` of `math.rs` and the sum of exponentials in f32 over `BLOCK`
//! interleaved partials instead of f64. Keeping the maximum (not the log-sum-exp) keeps
//! `x - max` exact for logits far from zero.

use crate::fast::math::{exp, partials_blocked};
use crate::fast::simd::Simd;
use crate::kernels::cross_entropy::target_of;

/// Rows per parallel piece (and per partial sum of losses).
pub(crate) const ROWS_PER_PIECE: usize = 32;

/// A block of rows: `logits` `[targets.len(), vocab]`.
#[derive(Clone, Copy)]
pub(crate) struct Rows<'a> {
    pub logits: &'a [f32],
    pub targets: &'a [u32],
    pub vocab: usize,
}

impl Rows<'_> {
    #[inline(always)]
    fn row(&self, r: usize) -> (&[f32], usize) {
        (&self.logits[r * self.vocab..][..self.vocab], target_of(self.targets, r, self.vocab))
    }
}

/// Fills `saved` `[rows, 2]` for the block and returns the sum of its rows' losses (in f64,
/// in row order).
#[inline(always)]
pub(crate) fn forward_rows<S: Simd>(rows: Rows<'_>, saved: &mut [f32]) -> f64 {
    let mut loss = 0f64;
    for (r, saved) in saved.chunks_exact_mut(2).enumerate().take(rows.targets.len()) {
        let (row, t) = rows.row(r);
        let max = max_blocked(row);
        let sum = exp_sum_blocked::<S>(row, max);
        saved[0] = max;
        saved[1] = 1.0 / sum;
        loss += sum.ln() as f64 - (row[t] - max) as f64;
    }
    loss
}

/// `dlogits` `[rows, vocab]` for the block, from its `saved` normalisers.
#[inline(always)]
pub(crate) fn backward_rows<S: Simd>(rows: Rows<'_>, dlogits: &mut [f32], saved: &[f32], scale: f32) {
    for r in 0..rows.targets.len() {
        let (row, t) = rows.row(r);
        let d = &mut dlogits[r * rows.vocab..][..rows.vocab];
        let (max, factor) = (saved[2 * r], saved[2 * r + 1] * scale);
        for (o, &x) in d.iter_mut().zip(row) {
            *o = exp::<S>(x - max) * factor;
        }
        d[t] -= scale;
    }
}

/// The row's maximum, over `BLOCK` interleaved partial maxima (exact in any order).
#[inline(always)]
fn max_blocked(x: &[f32]) -> f32 {
    partials_blocked(x, f32::NEG_INFINITY, f32::max).iter().copied().fold(f32::NEG_INFINITY, f32::max)
}

/// `Σ exp(x[i] - max)` in `BLOCK` interleaved partial sums.
#[inline(always)]
fn exp_sum_blocked<S: Simd>(x: &[f32], max: f32) -> f32 {
    partials_blocked(x, 0.0, |a, v| a + exp::<S>(v - max)).iter().sum()
}

//! Softmax cross-entropy, mean over rows.
//!
//! cross_entropy_forward:  logits [rows, V], targets [rows] -> loss (scalar)
//! cross_entropy_backward: logits [rows, V], targets [rows], dloss -> dlogits [rows, V]
//!
//! loss = (1/rows) Σ_r (logsumexp(logits[r]) - logits[r][targets[r]]);
//! dlogits[r] = dloss (softmax(logits[r]) - onehot(targets[r])) / rows.
//! Each row subtracts its maximum before exponentiating (f32 `exp`) and sums the
//! exponentials in f64; the per-row losses are summed in f64 in row order.

use crate::parallel::Parallel;

/// A row's maximum and `Σ exp(x - max)` (in f64).
fn row_normaliser(row: &[f32]) -> (f32, f64) {
    let max = row.iter().copied().fold(f32::NEG_INFINITY, f32::max);
    let sum = row.iter().map(|&x| (x - max).exp() as f64).sum::<f64>();
    (max, sum)
}

pub(crate) fn target_of(targets: &[u32], r: usize, vocab: usize) -> usize {
    let t = targets[r] as usize;
    assert!(t < vocab, "cross_entropy: target {t} in row {r} is outside the vocabulary of {vocab}");
    t
}

pub(crate) fn cross_entropy_forward(par: &Parallel, logits: &[f32], targets: &[u32], vocab: usize) -> f32 {
    let rows = targets.len();
    let losses = par.map(rows, |r| {
        let row = &logits[r * vocab..][..vocab];
        let (max, sum) = row_normaliser(row);
        sum.ln() - (row[target_of(targets, r, vocab)] - max) as f64
    });
    (losses.iter().sum::<f64>() / rows as f64) as f32
}

pub(crate) fn cross_entropy_backward(
    par: &Parallel,
    dlogits: &mut [f32],
    logits: &[f32],
    targets: &[u32],
    dloss: f32,
    vocab: usize,
) {
    let rows = targets.len();
    par.chunks_mut(dlogits, vocab, |r, d| {
        let row = &logits[r * vocab..][..vocab];
        let (max, sum) = row_normaliser(row);
        let scale = dloss / rows as f32;
        let inv_sum = (1.0 / sum) as f32;
        for (o, &x) in d.iter_mut().zip(row) {
            *o = (x - max).exp() * inv_sum * scale;
        }
        d[target_of(targets, r, vocab)] -= scale;
    });
}

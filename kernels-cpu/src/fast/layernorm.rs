//! LayerNorm for the fast variants, each direction one fused pass per row block.
//!
//! layernorm_forward:  x [rows, dim], gamma [dim], beta [dim]
//!                     -> out [rows, dim], mean [rows], rstd [rows]
//! layernorm_backward: dout [rows, dim], x, gamma, mean, rstd (, onto [rows, dim])
//!                     -> dx [rows, dim] (or onto + dx), and this block's partial dgamma,
//!                        dbeta [dim]
//!
//! Same maths as the reference (`kernels/layernorm.rs`), with the row sums in f32 over
//! `BLOCK` interleaved partials (vectorisable) instead of f64. The backward pass computes
//! `dx` and accumulates the block's `dgamma`/`dbeta` while the row is in cache, instead of
//! two more passes over all rows; the caller adds the blocks' partials in block order, so
//! the result does not depend on the thread count.

use crate::fast::math::{partials_blocked, sum_blocked, BLOCK};

/// Rows per parallel piece (and per partial `dgamma`/`dbeta`).
pub(crate) const ROWS_PER_PIECE: usize = 32;

/// Normalises the rows of `x` (`mean.len()` rows of `gamma.len()` values) into `out`.
#[inline(always)]
pub(crate) fn forward_rows(
    out: &mut [f32],
    mean: &mut [f32],
    rstd: &mut [f32],
    x: &[f32],
    gamma: &[f32],
    beta: &[f32],
    eps: f32,
) {
    let dim = gamma.len();
    let rows = out.chunks_exact_mut(dim).zip(x.chunks_exact(dim));
    for (((out, x), mean), rstd) in rows.zip(mean.iter_mut()).zip(rstd.iter_mut()) {
        let mu = sum_blocked(x) / dim as f32;
        let var = squared_deviations(x, mu) / dim as f32;
        let rs = 1.0 / (var + eps).sqrt();
        (*mean, *rstd) = (mu, rs);
        for (((o, &v), &g), &b) in out.iter_mut().zip(x).zip(gamma).zip(beta) {
            *o = (v - mu) * rs * g + b;
        }
    }
}

/// `Σ (x[i] - mu)²` in `BLOCK` interleaved partial sums.
#[inline(always)]
fn squared_deviations(x: &[f32], mu: f32) -> f32 {
    partials_blocked(x, 0.0, |a, v| a + (v - mu) * (v - mu)).iter().sum()
}

/// `dx` for a block of rows (with `onto`: `onto + dx`, the residual stream's gradient
/// meeting this LayerNorm's, added as each row is written rather than in a pass of its
/// own), and the block's `Σ dout · xhat` and `Σ dout` per column into `partial` (`[2, dim]`:
/// dgamma's part, then dbeta's).
#[inline(always)]
#[allow(clippy::too_many_arguments)]
pub(crate) fn backward_rows(
    dx: &mut [f32],
    partial: &mut [f32],
    dout: &[f32],
    x: &[f32],
    gamma: &[f32],
    mean: &[f32],
    rstd: &[f32],
    onto: Option<&[f32]>,
) {
    match onto {
        Some(onto) => backward_rows_onto::<true>(dx, partial, dout, x, gamma, mean, rstd, onto),
        None => backward_rows_onto::<false>(dx, partial, dout, x, gamma, mean, rstd, &[]),
    }
}

/// [`backward_rows`], with `ONTO` a constant so each case compiles to its own loop.
#[inline(always)]
#[allow(clippy::too_many_arguments)]
fn backward_rows_onto<const ONTO: bool>(
    dx: &mut [f32],
    partial: &mut [f32],
    dout: &[f32],
    x: &[f32],
    gamma: &[f32],
    mean: &[f32],
    rstd: &[f32],
    onto: &[f32],
) {
    let dim = gamma.len();
    let (dgamma, dbeta) = partial.split_at_mut(dim);
    dgamma.fill(0.0);
    dbeta.fill(0.0);
    let rows = dx.chunks_exact_mut(dim).zip(dout.chunks_exact(dim)).zip(x.chunks_exact(dim));
    for (r, (((dx, dout), x), (&mu, &rs))) in rows.zip(mean.iter().zip(rstd)).enumerate() {
        // With dxhat = dout * gamma: dx = rstd * (dxhat - mean(dxhat) - xhat * mean(dxhat * xhat)).
        let (sum, sum_xhat) = row_sums(dout, x, gamma, mu, rs);
        let (mean_dxhat, mean_dxhat_xhat) = (sum / dim as f32, sum_xhat / dim as f32);
        // Without `onto`, any row of the right length stands in for it, unread.
        let onto = if ONTO { &onto[r * dim..][..dim] } else { dout };
        let cols =
            dx.iter_mut().zip(dout).zip(x).zip(gamma).zip(onto).zip(dgamma.iter_mut().zip(dbeta.iter_mut()));
        for (((((dx, &d), &v), &g), &o), (dg, db)) in cols {
            let xhat = (v - mu) * rs;
            let grad = rs * (d * g - mean_dxhat - xhat * mean_dxhat_xhat);
            // `onto + dx` rounded once, as `add` rounds it: the same bits as the two passes.
            *dx = if ONTO { o + grad } else { grad };
            *dg += d * xhat;
            *db += d;
        }
    }
}

/// `(Σ dout·gamma, Σ dout·gamma·xhat)` over one row, in `BLOCK` interleaved partials.
#[inline(always)]
fn row_sums(dout: &[f32], x: &[f32], gamma: &[f32], mu: f32, rs: f32) -> (f32, f32) {
    let (mut sum, mut sum_xhat) = ([0f32; BLOCK], [0f32; BLOCK]);
    let mut add = |lanes: usize, d: &[f32], v: &[f32], g: &[f32]| {
        for l in 0..lanes {
            let dxhat = d[l] * g[l];
            sum[l] += dxhat;
            sum_xhat[l] += dxhat * (v[l] - mu) * rs;
        }
    };
    let (dc, xc, gc) = (dout.chunks_exact(BLOCK), x.chunks_exact(BLOCK), gamma.chunks_exact(BLOCK));
    let (dr, xr, gr) = (dc.remainder(), xc.remainder(), gc.remainder());
    for ((d, v), g) in dc.zip(xc).zip(gc) {
        add(BLOCK, d, v, g);
    }
    add(dr.len(), dr, xr, gr);
    (sum.iter().sum(), sum_xhat.iter().sum())
}

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

use crate::fast::math::{
    block_lanes, block_vectors, partials_blocked, sum_blocked, BLOCK, MAX_BLOCK_VECTORS,
};
use crate::fast::simd::Simd;

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
///
/// # Safety
/// `S`'s instructions are available (see [`Simd`]).
#[inline(always)]
#[allow(clippy::too_many_arguments)]
pub(crate) unsafe fn backward_rows<S: Simd>(
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
        Some(onto) => backward_rows_onto::<S, true>(dx, partial, dout, x, gamma, mean, rstd, onto),
        None => backward_rows_onto::<S, false>(dx, partial, dout, x, gamma, mean, rstd, &[]),
    }
}

/// [`backward_rows`], with `ONTO` a constant so each case compiles to its own loop.
///
/// # Safety
/// As [`backward_rows`].
#[inline(always)]
#[allow(clippy::too_many_arguments)]
unsafe fn backward_rows_onto<S: Simd, const ONTO: bool>(
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
    // Summed in this thread's own buffer and copied to `partial` once: `partial` lies beside
    // the other blocks' partials, which other threads write, and adding into it row by row
    // made the cache lines at its ends bounce between the cores (at two threads this pass
    // took three times its one-thread share of a `medium` step, `perf`). Taken out of the
    // thread-local, not borrowed in a closure, which would not inherit the caller's
    // `#[target_feature]`s.
    let mut sums = PARTIAL.take();
    sums.clear();
    sums.resize(partial.len(), 0.0);
    let (dgamma, dbeta) = sums.split_at_mut(dim);
    let rows = dx.chunks_exact_mut(dim).zip(dout.chunks_exact(dim)).zip(x.chunks_exact(dim));
    for (r, (((dx, dout), x), (&mu, &rs))) in rows.zip(mean.iter().zip(rstd)).enumerate() {
        // With dxhat = dout * gamma: dx = rstd * (dxhat - mean(dxhat) - xhat * mean(dxhat * xhat)).
        let (sum, sum_xhat) = row_sums::<S>(dout, x, gamma, mu, rs);
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
    partial.copy_from_slice(&sums);
    PARTIAL.set(sums);
}

thread_local! {
    /// Each thread's `dgamma`/`dbeta` sums for the block it is on (see `backward_rows_onto`).
    static PARTIAL: std::cell::Cell<Vec<f32>> = const { std::cell::Cell::new(Vec::new()) };
}

/// `(Σ dout·gamma, Σ dout·gamma·xhat)` over one row, in `BLOCK` interleaved partials.
///
/// In explicit vectors (`BLOCK / S::LANES` of them per sum): written as a scalar loop over
/// the partials, the compiler kept these sums scalar whatever the rewrite (a third of the
/// backward's time, `perf`). Lane `l` of the vectors is partial `l` of the scalar loop, every
/// operation rounded as it is there (no fused multiply-add) and the partials then added in
/// the same order, so the result is the same bits.
///
/// # Safety
/// `S`'s instructions are available (see [`Simd`]).
#[inline(always)]
unsafe fn row_sums<S: Simd>(dout: &[f32], x: &[f32], gamma: &[f32], mu: f32, rs: f32) -> (f32, f32) {
    let vectors = block_vectors::<S>();
    assert!(x.len() == dout.len() && gamma.len() == dout.len());
    let whole = dout.len() / BLOCK * BLOCK;
    let (mut s, mut sx) = ([S::zero(); MAX_BLOCK_VECTORS], [S::zero(); MAX_BLOCK_VECTORS]);
    let (mu_v, rs_v) = (S::splat(mu), S::splat(rs));
    let (d, v, g) = (dout.as_ptr(), x.as_ptr(), gamma.as_ptr());
    for i0 in (0..whole).step_by(BLOCK) {
        for j in 0..vectors {
            let i = i0 + j * S::LANES;
            // `i + LANES <= whole <= len` for all three rows (asserted above).
            let dxhat = S::mul(S::load(d.add(i)), S::load(g.add(i)));
            s[j] = S::add(s[j], dxhat);
            sx[j] = S::add(sx[j], S::mul(S::mul(dxhat, S::sub(S::load(v.add(i)), mu_v)), rs_v));
        }
    }
    let (mut sum, mut sum_xhat) = (block_lanes::<S>(&s), block_lanes::<S>(&sx));
    for (l, ((&d, &v), &g)) in dout[whole..].iter().zip(&x[whole..]).zip(&gamma[whole..]).enumerate() {
        let dxhat = d * g;
        sum[l] += dxhat;
        sum_xhat[l] += dxhat * (v - mu) * rs;
    }
    (sum.iter().sum(), sum_xhat.iter().sum())
}

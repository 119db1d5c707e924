//! LayerNorm over the last dimension.
//!
//! layernorm_forward:  x [rows, dim], gamma [dim], beta [dim]
//!                     -> out [rows, dim], mean [rows], rstd [rows]
//! layernorm_backward: dout [rows, dim], x, gamma, mean, rstd
//!                     -> dx [rows, dim], dgamma [dim], dbeta [dim]
//!
//! Row statistics (mean, biased variance, and the two means in the backward pass) are
//! accumulated in f64 and rounded to f32 once; the normalised value
//! `xhat = (x - mean) * rstd` always uses the saved f32 `mean` and `rstd`, so forward and
//! backward see the same `xhat`. Rows run in parallel; `dgamma`/`dbeta` are column sums
//! in ascending row order.

use crate::kernels::elementwise::column_sums;
use crate::parallel::Parallel;

/// Per-row results of the forward pass.
pub(crate) struct RowStats {
    pub mean: Vec<f32>,
    pub rstd: Vec<f32>,
}

pub(crate) fn layernorm_forward(
    par: &Parallel,
    out: &mut [f32],
    x: &[f32],
    gamma: &[f32],
    beta: &[f32],
    dim: usize,
    eps: f32,
) -> RowStats {
    let stats = par.map_chunks_mut(out, dim, |r, out| {
        let x = &x[r * dim..][..dim];
        let mean = x.iter().map(|&v| v as f64).sum::<f64>() / dim as f64;
        let var = x.iter().map(|&v| (v as f64 - mean).powi(2)).sum::<f64>() / dim as f64;
        let rstd = (1.0 / (var + eps as f64).sqrt()) as f32;
        let mean = mean as f32;
        for (((o, &v), &g), &b) in out.iter_mut().zip(x).zip(gamma).zip(beta) {
            *o = (v - mean) * rstd * g + b;
        }
        (mean, rstd)
    });
    let (mean, rstd) = stats.into_iter().unzip();
    RowStats { mean, rstd }
}

/// Gradients of [`layernorm_forward`], written into `dx` (`[rows, dim]`), `dgamma` and
/// `dbeta` (`[dim]`).
#[allow(clippy::too_many_arguments)]
pub(crate) fn layernorm_backward(
    par: &Parallel,
    dx: &mut [f32],
    dgamma: &mut [f32],
    dbeta: &mut [f32],
    dout: &[f32],
    x: &[f32],
    gamma: &[f32],
    stats: &RowStats,
    dim: usize,
) {
    let rows = stats.mean.len();
    let xhat = |r: usize, j: usize| (x[r * dim + j] - stats.mean[r]) * stats.rstd[r];
    par.chunks_mut(dx, dim, |r, dx| {
        let dout = &dout[r * dim..][..dim];
        // With dxhat = dout * gamma: dx = rstd * (dxhat - mean(dxhat) - xhat * mean(dxhat * xhat)).
        let (mut sum, mut sum_xhat) = (0f64, 0f64);
        for (j, (&d, &g)) in dout.iter().zip(gamma).enumerate() {
            let dxhat = (d * g) as f64;
            sum += dxhat;
            sum_xhat += dxhat * xhat(r, j) as f64;
        }
        let mean_dxhat = (sum / dim as f64) as f32;
        let mean_dxhat_xhat = (sum_xhat / dim as f64) as f32;
        let rstd = stats.rstd[r];
        for (j, (o, (&d, &g))) in dx.iter_mut().zip(dout.iter().zip(gamma)).enumerate() {
            *o = rstd * (d * g - mean_dxhat - xhat(r, j) * mean_dxhat_xhat);
        }
    });
    column_sums(par, dgamma, rows, |r, j| (dout[r * dim + j] * xhat(r, j)) as f64);
    column_sums(par, dbeta, rows, |r, j| dout[r * dim + j] as f64);
}

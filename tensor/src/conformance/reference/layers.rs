//! f64 references for GELU, LayerNorm and softmax cross-entropy, written from the
//! textbook formulas (not from any backend's kernels).

use std::f64::consts::PI;

fn gelu_inner(x: f64) -> f64 {
    (2.0 / PI).sqrt() * (x + 0.044715 * x.powi(3))
}

pub(crate) fn gelu(x: &[f32]) -> Vec<f64> {
    x.iter().map(|&x| x as f64).map(|x| 0.5 * x * (1.0 + gelu_inner(x).tanh())).collect()
}

/// `dout * gelu'(x)`.
pub(crate) fn gelu_backward(x: &[f32], dout: &[f32]) -> Vec<f64> {
    x.iter()
        .zip(dout)
        .map(|(&x, &d)| {
            let x = x as f64;
            let t = gelu_inner(x).tanh();
            let du = (2.0 / PI).sqrt() * (1.0 + 3.0 * 0.044715 * x * x);
            d as f64 * (0.5 * (1.0 + t) + 0.5 * x * (1.0 - t * t) * du)
        })
        .collect()
}

/// Per row of `[rows, dim]`: mean, biased variance → `rstd = 1/sqrt(var + eps)`.
fn row_stats(x: &[f32], dim: usize, eps: f32) -> Vec<(f64, f64)> {
    x.chunks_exact(dim)
        .map(|row| {
            let mean = row.iter().map(|&v| v as f64).sum::<f64>() / dim as f64;
            let var = row.iter().map(|&v| (v as f64 - mean).powi(2)).sum::<f64>() / dim as f64;
            (mean, 1.0 / (var + eps as f64).sqrt())
        })
        .collect()
}

/// LayerNorm forward: `(out, mean, rstd)`.
pub(crate) fn layer_norm(
    x: &[f32],
    gamma: &[f32],
    beta: &[f32],
    dim: usize,
    eps: f32,
) -> (Vec<f64>, Vec<f64>, Vec<f64>) {
    let stats = row_stats(x, dim, eps);
    let mut out = Vec::with_capacity(x.len());
    for (row, &(mean, rstd)) in x.chunks_exact(dim).zip(&stats) {
        for j in 0..dim {
            out.push((row[j] as f64 - mean) * rstd * gamma[j] as f64 + beta[j] as f64);
        }
    }
    let (mean, rstd) = stats.into_iter().unzip();
    (out, mean, rstd)
}

/// LayerNorm backward: `(dx, dgamma, dbeta)`, from the inputs alone.
pub(crate) fn layer_norm_backward(
    dout: &[f32],
    x: &[f32],
    gamma: &[f32],
    dim: usize,
    eps: f32,
) -> (Vec<f64>, Vec<f64>, Vec<f64>) {
    let stats = row_stats(x, dim, eps);
    let (mut dx, mut dgamma, mut dbeta) = (Vec::with_capacity(x.len()), vec![0f64; dim], vec![0f64; dim]);
    for ((row, d), &(mean, rstd)) in x.chunks_exact(dim).zip(dout.chunks_exact(dim)).zip(&stats) {
        let xhat: Vec<f64> = row.iter().map(|&v| (v as f64 - mean) * rstd).collect();
        let dxhat: Vec<f64> = d.iter().zip(gamma).map(|(&d, &g)| d as f64 * g as f64).collect();
        let mean_dxhat = dxhat.iter().sum::<f64>() / dim as f64;
        let mean_dxhat_xhat = dxhat.iter().zip(&xhat).map(|(a, b)| a * b).sum::<f64>() / dim as f64;
        for j in 0..dim {
            dx.push(rstd * (dxhat[j] - mean_dxhat - xhat[j] * mean_dxhat_xhat));
            dgamma[j] += d[j] as f64 * xhat[j];
            dbeta[j] += d[j] as f64;
        }
    }
    (dx, dgamma, dbeta)
}

/// Softmax of one row, stabilised by its maximum.
fn softmax(row: &[f32]) -> Vec<f64> {
    let max = row.iter().map(|&v| v as f64).fold(f64::NEG_INFINITY, f64::max);
    let e: Vec<f64> = row.iter().map(|&v| (v as f64 - max).exp()).collect();
    let sum: f64 = e.iter().sum();
    e.into_iter().map(|v| v / sum).collect()
}

/// Mean over rows of `-log softmax(row)[target]`.
pub(crate) fn cross_entropy(logits: &[f32], targets: &[u32], vocab: usize) -> f64 {
    let total: f64 = logits
        .chunks_exact(vocab)
        .zip(targets)
        .map(|(row, &t)| {
            let max = row.iter().map(|&v| v as f64).fold(f64::NEG_INFINITY, f64::max);
            let lse = max + row.iter().map(|&v| (v as f64 - max).exp()).sum::<f64>().ln();
            lse - row[t as usize] as f64
        })
        .sum();
    total / targets.len() as f64
}

/// `dloss * (softmax - onehot) / rows`.
pub(crate) fn cross_entropy_backward(logits: &[f32], targets: &[u32], dloss: f32, vocab: usize) -> Vec<f64> {
    let scale = dloss as f64 / targets.len() as f64;
    let mut out = Vec::with_capacity(logits.len());
    for (row, &t) in logits.chunks_exact(vocab).zip(targets) {
        let start = out.len();
        out.extend(softmax(row).into_iter().map(|p| p * scale));
        out[start + t as usize] -= scale;
    }
    out
}

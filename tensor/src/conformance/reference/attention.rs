//! f64 reference for causal multi-head attention, with plain index arithmetic.

use crate::AttentionDims;

/// Element `(b, t, h, d)` of a `[batch, seq, heads * head_dim]` buffer.
fn idx(dims: AttentionDims, b: usize, t: usize, h: usize, d: usize) -> usize {
    (b * dims.seq + t) * dims.channels() + h * dims.head_dim + d
}

/// The dropout factor of `probs` element `i` (1 without dropout).
fn factor(dims: AttentionDims, i: usize) -> f64 {
    dims.dropout.map_or(1.0, |m| m.factor(i) as f64)
}

/// Softmax probabilities `[batch, heads, seq, seq]`, zero above the diagonal.
fn probs(q: &[f32], k: &[f32], dims: AttentionDims) -> Vec<f64> {
    let (seq, hd) = (dims.seq, dims.head_dim);
    let scale = 1.0 / (hd as f64).sqrt();
    let mut p = vec![0f64; dims.batch * dims.heads * seq * seq];
    for b in 0..dims.batch {
        for h in 0..dims.heads {
            for t in 0..seq {
                let row = &mut p[((b * dims.heads + h) * seq + t) * seq..][..seq];
                for (u, s) in row.iter_mut().enumerate().take(t + 1) {
                    *s = scale
                        * (0..hd)
                            .map(|d| q[idx(dims, b, t, h, d)] as f64 * k[idx(dims, b, u, h, d)] as f64)
                            .sum::<f64>();
                }
                let max = row[..=t].iter().copied().fold(f64::NEG_INFINITY, f64::max);
                let sum: f64 = row[..=t].iter().map(|s| (s - max).exp()).sum();
                for s in row[..=t].iter_mut() {
                    *s = (*s - max).exp() / sum;
                }
            }
        }
    }
    p
}

/// Forward: `(out [batch, seq, channels], probs [batch, heads, seq, seq])`.
pub(crate) fn attention(q: &[f32], k: &[f32], v: &[f32], dims: AttentionDims) -> (Vec<f64>, Vec<f64>) {
    let p = probs(q, k, dims);
    let seq = dims.seq;
    let mut out = vec![0f64; q.len()];
    for b in 0..dims.batch {
        for h in 0..dims.heads {
            for t in 0..seq {
                for d in 0..dims.head_dim {
                    out[idx(dims, b, t, h, d)] = (0..=t)
                        .map(|u| {
                            let i = ((b * dims.heads + h) * seq + t) * seq + u;
                            p[i] * factor(dims, i) * v[idx(dims, b, u, h, d)] as f64
                        })
                        .sum();
                }
            }
        }
    }
    (out, p)
}

/// Backward from the inputs alone: `(dq, dk, dv)`.
pub(crate) fn attention_backward(
    dout: &[f32],
    q: &[f32],
    k: &[f32],
    v: &[f32],
    dims: AttentionDims,
) -> (Vec<f64>, Vec<f64>, Vec<f64>) {
    let p = probs(q, k, dims);
    let (seq, hd) = (dims.seq, dims.head_dim);
    let scale = 1.0 / (hd as f64).sqrt();
    let (mut dq, mut dk, mut dv) = (vec![0f64; q.len()], vec![0f64; q.len()], vec![0f64; q.len()]);
    let dot = |x: &[f32], i: usize, y: &[f32], j: usize| -> f64 {
        (0..hd).map(|d| x[i + d] as f64 * y[j + d] as f64).sum()
    };
    for b in 0..dims.batch {
        for h in 0..dims.heads {
            for t in 0..seq {
                let row = ((b * dims.heads + h) * seq + t) * seq;
                let prow = &p[row..][..=t];
                let it = idx(dims, b, t, h, 0);
                // dP[t,u] = (dout_t · v_u) D[t,u]; dS = P (dP - Σ_u P dP).
                let dp: Vec<f64> = (0..=t)
                    .map(|u| dot(dout, it, v, idx(dims, b, u, h, 0)) * factor(dims, row + u))
                    .collect();
                let weighted: f64 = prow.iter().zip(&dp).map(|(p, d)| p * d).sum();
                for u in 0..=t {
                    let iu = idx(dims, b, u, h, 0);
                    let ds = prow[u] * (dp[u] - weighted) * scale;
                    for d in 0..hd {
                        dv[iu + d] += prow[u] * factor(dims, row + u) * dout[it + d] as f64;
                        dq[it + d] += ds * k[iu + d] as f64;
                        dk[iu + d] += ds * q[it + d] as f64;
                    }
                }
            }
        }
    }
    (dq, dk, dv)
}

//! Causal multi-head self-attention.
//!
//! attention_forward:  q, k, v [B, T, C] -> out [B, T, C], probs [B, H, T, T]
//! attention_backward: dout [B, T, C], q, k, v, probs -> dq, dk, dv [B, T, C]
//!
//! C = H * hd; head h owns columns h*hd .. (h+1)*hd. Scores are `q_t · k_u / sqrt(hd)`
//! for u <= t; `probs` rows are their softmax, zero above the diagonal. With
//! `dims.dropout`, `P[t,u]` weighs `v_u` as `P[t,u] · mask.factor(probs index)` (the mask
//! redrawn in the backward; `probs` keeps the undropped softmax). Dot products
//! accumulate in f32 in ascending index order; the softmax normaliser (and the
//! `Σ p·dp` term of its backward) in f64. Each (batch, head) pair is one parallel piece
//! that works on private buffers, which are then copied into the interleaved outputs.

use tinygpt_tensor::{AttentionDims, DropoutMask};

use crate::parallel::Parallel;

/// Offsets of one (batch, head) pair's rows and columns in a [B, T, C] buffer.
#[derive(Clone, Copy)]
struct Head {
    /// Offset of row (b, 0) plus this head's first column.
    base: usize,
    channels: usize,
    head_dim: usize,
}

impl Head {
    fn new(dims: AttentionDims, bh: usize) -> Self {
        let (b, h) = (bh / dims.heads, bh % dims.heads);
        Head {
            base: b * dims.seq * dims.channels() + h * dims.head_dim,
            channels: dims.channels(),
            head_dim: dims.head_dim,
        }
    }

    /// This head's `head_dim` values at position `t` of `buf`.
    fn row<'a>(&self, buf: &'a [f32], t: usize) -> &'a [f32] {
        &buf[self.base + t * self.channels..][..self.head_dim]
    }

    /// Copies a private `[T, hd]` buffer into this head's columns of `out`.
    fn scatter(&self, out: &mut [f32], private: &[f32]) {
        for (t, row) in private.chunks_exact(self.head_dim).enumerate() {
            out[self.base + t * self.channels..][..self.head_dim].copy_from_slice(row);
        }
    }
}

pub(crate) fn dot(a: &[f32], b: &[f32]) -> f32 {
    let mut s = 0f32;
    for (&x, &y) in a.iter().zip(b) {
        s += x * y;
    }
    s
}

/// `acc += alpha * x`.
pub(crate) fn axpy(acc: &mut [f32], alpha: f32, x: &[f32]) {
    for (a, &v) in acc.iter_mut().zip(x) {
        *a += alpha * v;
    }
}

/// `value` times the dropout factor of `probs` element `index` (unchanged without dropout).
fn dropped(mask: Option<&DropoutMask>, value: f32, index: usize) -> f32 {
    match mask {
        Some(m) => value * m.factor(index),
        None => value,
    }
}

fn scale_of(dims: AttentionDims) -> f32 {
    1.0 / (dims.head_dim as f32).sqrt()
}

/// Writes `out` and `probs`; `probs` must be `[B, H, T, T]`.
pub(crate) fn attention_forward(
    par: &Parallel,
    out: &mut [f32],
    probs: &mut [f32],
    q: &[f32],
    k: &[f32],
    v: &[f32],
    dims: AttentionDims,
) {
    let (seq, hd) = (dims.seq, dims.head_dim);
    let scale = scale_of(dims);
    if out.is_empty() {
        return;
    }
    let heads_out = par.map_chunks_mut(probs, seq * seq, |bh, probs| {
        let head = Head::new(dims, bh);
        let mut out = vec![0f32; seq * hd];
        for t in 0..seq {
            let q_t = head.row(q, t);
            let row = &mut probs[t * seq..(t + 1) * seq];
            let mut max = f32::NEG_INFINITY;
            for (u, s) in row[..=t].iter_mut().enumerate() {
                *s = dot(q_t, head.row(k, u)) * scale;
                max = max.max(*s);
            }
            let mut sum = 0f64;
            for s in row[..=t].iter_mut() {
                *s = (*s - max).exp();
                sum += *s as f64;
            }
            let inv = (1.0 / sum) as f32;
            row[..=t].iter_mut().for_each(|p| *p *= inv);
            row[t + 1..].fill(0.0);
            let out_t = &mut out[t * hd..(t + 1) * hd];
            let row_index = (bh * seq + t) * seq;
            for (u, &p) in row[..=t].iter().enumerate() {
                axpy(out_t, dropped(dims.dropout.as_ref(), p, row_index + u), head.row(v, u));
            }
        }
        out
    });
    for (bh, private) in heads_out.iter().enumerate() {
        Head::new(dims, bh).scatter(out, private);
    }
}

/// Gradients for q, k and v, each written into a `[B, T, C]` buffer.
pub(crate) struct AttentionGradBufs<'a> {
    pub dq: &'a mut [f32],
    pub dk: &'a mut [f32],
    pub dv: &'a mut [f32],
}

/// With `P` the saved probabilities, `D` the dropout factors (1 without dropout) and `S`
/// the scaled scores of one head:
/// `dv_u = Σ_t P[t,u] D[t,u] dout_t`, `dP[t,u] = (dout_t · v_u) D[t,u]`,
/// `dS[t,u] = P[t,u] (dP[t,u] - Σ_u' P[t,u'] dP[t,u'])`,
/// `dq_t = scale Σ_u dS[t,u] k_u`, `dk_u = scale Σ_t dS[t,u] q_t`.
#[allow(clippy::too_many_arguments)]
pub(crate) fn attention_backward(
    par: &Parallel,
    grads: AttentionGradBufs<'_>,
    dout: &[f32],
    q: &[f32],
    k: &[f32],
    v: &[f32],
    probs: &[f32],
    dims: AttentionDims,
) {
    let (seq, hd) = (dims.seq, dims.head_dim);
    let scale = scale_of(dims);
    let pairs = dims.batch * dims.heads;
    if grads.dq.is_empty() {
        return;
    }
    let per_head = par.map(pairs, |bh| {
        let head = Head::new(dims, bh);
        let p_head = &probs[bh * seq * seq..][..seq * seq];
        let (mut dq, mut dk, mut dv) = (vec![0f32; seq * hd], vec![0f32; seq * hd], vec![0f32; seq * hd]);
        let mut dp = vec![0f32; seq];
        for t in 0..seq {
            let (dout_t, q_t, p_row) = (head.row(dout, t), head.row(q, t), &p_head[t * seq..][..=t]);
            let mut weighted = 0f64;
            let mask = dims.dropout.as_ref();
            let row_index = (bh * seq + t) * seq;
            for (u, (d, &p)) in dp.iter_mut().zip(p_row).enumerate() {
                *d = dropped(mask, dot(dout_t, head.row(v, u)), row_index + u);
                weighted += p as f64 * *d as f64;
            }
            let weighted = weighted as f32;
            for (u, (&p, &d)) in p_row.iter().zip(&dp).enumerate() {
                axpy(&mut dv[u * hd..(u + 1) * hd], dropped(mask, p, row_index + u), dout_t);
                let ds = p * (d - weighted) * scale;
                axpy(&mut dq[t * hd..(t + 1) * hd], ds, head.row(k, u));
                axpy(&mut dk[u * hd..(u + 1) * hd], ds, q_t);
            }
        }
        (dq, dk, dv)
    });
    for (bh, (dq, dk, dv)) in per_head.iter().enumerate() {
        let head = Head::new(dims, bh);
        head.scatter(grads.dq, dq);
        head.scatter(grads.dk, dk);
        head.scatter(grads.dv, dv);
    }
}

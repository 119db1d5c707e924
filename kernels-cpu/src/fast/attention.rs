//! Flash-style causal attention for the fast variants: the scores of one query row are
//! computed, turned into probabilities and used at once, so no `[T, T]` matrix per head is
//! ever stored. The forward pass keeps only each row's log-sum-exp, from which the backward
//! pass recomputes that row's probabilities exactly as the forward pass made them.
//!
//! attention_forward:  q, k, v [B, T, C] -> out [B, T, C], lse [B, H, T]
//! attention_backward: dout [B, T, C], q, k, v, lse [B, H, T] -> dq, dk, dv [B, T, C]
//!
//! Same maths as the reference (`kernels/attention.rs`, dropout included): with
//! `s_u = (q_t · k_u) / sqrt(hd)` for `u <= t`, `lse_t = log Σ_u e^{s_u}` and
//! `P[t,u] = e^{s_u - lse_t}`. Written for the auto-vectoriser and instantiated per ISA
//! behind its `#[target_feature]` (x86.rs, wasm.rs): each head's keys (and, backward, its
//! values) are first transposed into `[hd][T]` panels, so a row's scores are broadcast
//! multiply-adds over `BLOCK` consecutive positions held in one accumulator array (rows
//! padded to a multiple of it with zero keys); the
//! `Σ_u P v_u`-style sums run along the head's `hd` contiguous columns.
//!
//! One (batch, head) pair is one parallel piece; it writes only its own columns of the
//! outputs and its own `lse` row, in a fixed order, so results do not depend on threads.

use std::cell::RefCell;

use tinygpt_tensor::AttentionDims;

use crate::fast::math::{dot_blocked, exp, sum_blocked, BLOCK};
pub(crate) use crate::fast::shared_out::SharedOut;

/// The forward pass of one (batch, head) pair `bh`.
pub(crate) struct HeadForward<'a> {
    pub q: &'a [f32],
    pub k: &'a [f32],
    pub v: &'a [f32],
    pub dims: AttentionDims,
    pub bh: usize,
    /// `[B, T, C]`.
    pub out: SharedOut,
    /// This pair's `T` log-sum-exps.
    pub lse: SharedOut,
}

/// The backward pass of one (batch, head) pair `bh`.
pub(crate) struct HeadBackward<'a> {
    pub dout: &'a [f32],
    pub q: &'a [f32],
    pub k: &'a [f32],
    pub v: &'a [f32],
    /// This pair's `T` log-sum-exps, as the forward pass saved them.
    pub lse: &'a [f32],
    pub dims: AttentionDims,
    pub bh: usize,
    /// `[B, T, C]` each.
    pub dq: SharedOut,
    pub dk: SharedOut,
    pub dv: SharedOut,
}

/// Per-thread working memory, grown to the largest head seen and then reused, so a
/// steady-state step allocates nothing here.
#[derive(Default)]
struct Scratch {
    kt: Vec<f32>,
    vt: Vec<f32>,
    scores: Vec<f32>,
    dscores: Vec<f32>,
    dropped: Vec<f32>,
    row: Vec<f32>,
    dk: Vec<f32>,
    dv: Vec<f32>,
}

thread_local! {
    static SCRATCH: RefCell<Scratch> = RefCell::new(Scratch::default());
}

/// `buf` resized to `len` zeros (no allocation once it has held `len` values).
fn zeroed(buf: &mut Vec<f32>, len: usize) -> &mut [f32] {
    buf.clear();
    buf.resize(len, 0.0);
    buf
}

/// Where one head's values lie in a `[B, T, C]` buffer.
#[derive(Clone, Copy)]
struct Head {
    /// Offset of row (b, 0) plus the head's first column.
    base: usize,
    channels: usize,
    hd: usize,
    seq: usize,
    /// `seq` rounded up to `BLOCK`: the row length of the transposed panels.
    padded: usize,
}

impl Head {
    fn new(dims: AttentionDims, bh: usize) -> Self {
        let (b, h) = (bh / dims.heads, bh % dims.heads);
        Head {
            base: b * dims.seq * dims.channels() + h * dims.head_dim,
            channels: dims.channels(),
            hd: dims.head_dim,
            seq: dims.seq,
            padded: dims.seq.next_multiple_of(BLOCK),
        }
    }

    #[inline(always)]
    fn at(&self, t: usize) -> usize {
        self.base + t * self.channels
    }

    #[inline(always)]
    fn row<'a>(&self, buf: &'a [f32], t: usize) -> &'a [f32] {
        &buf[self.at(t)..][..self.hd]
    }

    /// This head's `[T, hd]` slice of `src` as `[hd][padded]` (zero past `T`).
    #[inline(always)]
    fn transpose_into(&self, dst: &mut [f32], src: &[f32]) {
        for u in 0..self.seq {
            for (d, &x) in self.row(src, u).iter().enumerate() {
                dst[d * self.padded + u] = x;
            }
        }
    }
}

/// `out[u] = scale · Σ_d x[d] · panel[d][u]` for the `out.len()` (a multiple of `BLOCK`)
/// first positions, `BLOCK` at a time in one accumulator array.
#[inline(always)]
fn panel_dots(out: &mut [f32], x: &[f32], panel: &[f32], padded: usize, scale: f32) {
    for (blk, out) in out.chunks_exact_mut(BLOCK).enumerate() {
        let mut acc = [0f32; BLOCK];
        for (d, &xd) in x.iter().enumerate() {
            let col = &panel[d * padded + blk * BLOCK..][..BLOCK];
            for (a, &p) in acc.iter_mut().zip(col) {
                *a += xd * p;
            }
        }
        for (o, a) in out.iter_mut().zip(acc) {
            *o = a * scale;
        }
    }
}

/// `acc += alpha · x`.
#[inline(always)]
fn axpy(acc: &mut [f32], alpha: f32, x: &[f32]) {
    for (a, &v) in acc.iter_mut().zip(x) {
        *a += alpha * v;
    }
}

/// Multiplies `row[u]` by the dropout factor of `probs` element `first + u`.
#[inline(always)]
fn drop_row(row: &mut [f32], dims: &AttentionDims, first: usize) {
    if let Some(mask) = &dims.dropout {
        for (u, x) in row.iter_mut().enumerate() {
            *x *= mask.factor(first + u);
        }
    }
}

/// # Safety
/// `job.out` and `job.lse` point at buffers of the sizes [`HeadForward`] names, and no other
/// piece writes this head's part of them meanwhile.
#[inline(always)]
pub(crate) unsafe fn forward_head(job: &HeadForward<'_>) {
    let dims = job.dims;
    let head = Head::new(dims, job.bh);
    let (seq, hd) = (head.seq, head.hd);
    let scale = 1.0 / (hd as f32).sqrt();
    // Taken out of the thread-local for the duration (no closure: a closure would not
    // inherit the caller's `#[target_feature]`s and would compile to baseline SSE).
    let mut scratch = SCRATCH.take();
    let sc = &mut scratch;
    let kt = zeroed(&mut sc.kt, hd * head.padded);
    head.transpose_into(kt, job.k);
    let scores = zeroed(&mut sc.scores, head.padded);
    let acc = zeroed(&mut sc.row, hd);
    let lse = job.lse.slice(0, seq);
    for (t, lse_t) in lse.iter_mut().enumerate() {
        let n = t + 1;
        panel_dots(&mut scores[..n.next_multiple_of(BLOCK)], head.row(job.q, t), kt, head.padded, scale);
        let s = &mut scores[..n];
        let max = s.iter().fold(f32::NEG_INFINITY, |m, &x| m.max(x));
        for x in s.iter_mut() {
            *x = exp(*x - max);
        }
        let sum = sum_blocked(s);
        *lse_t = max + sum.ln();
        let inv = 1.0 / sum;
        drop_row(s, &dims, (job.bh * seq + t) * seq);
        acc.fill(0.0);
        for (u, &p) in s.iter().enumerate() {
            axpy(acc, p * inv, head.row(job.v, u));
        }
        job.out.slice(head.at(t), hd).copy_from_slice(acc);
    }
    SCRATCH.set(scratch);
}

/// # Safety
/// As [`forward_head`], for `job.dq`, `job.dk` and `job.dv`.
#[inline(always)]
pub(crate) unsafe fn backward_head(job: &HeadBackward<'_>) {
    let dims = job.dims;
    let head = Head::new(dims, job.bh);
    let (seq, hd) = (head.seq, head.hd);
    let scale = 1.0 / (hd as f32).sqrt();
    // Taken out of the thread-local for the duration (no closure: a closure would not
    // inherit the caller's `#[target_feature]`s and would compile to baseline SSE).
    let mut scratch = SCRATCH.take();
    let sc = &mut scratch;
    let kt = zeroed(&mut sc.kt, hd * head.padded);
    head.transpose_into(kt, job.k);
    let vt = zeroed(&mut sc.vt, hd * head.padded);
    head.transpose_into(vt, job.v);
    let probs = zeroed(&mut sc.scores, head.padded);
    let dprobs = zeroed(&mut sc.dscores, head.padded);
    let dropped = zeroed(&mut sc.dropped, head.padded);
    let dq = zeroed(&mut sc.row, hd);
    let dk = zeroed(&mut sc.dk, seq * hd);
    let dv = zeroed(&mut sc.dv, seq * hd);
    for t in 0..seq {
        let (n, nv) = (t + 1, (t + 1).next_multiple_of(BLOCK));
        let (q_t, dout_t) = (head.row(job.q, t), head.row(job.dout, t));
        panel_dots(&mut probs[..nv], q_t, kt, head.padded, scale);
        panel_dots(&mut dprobs[..nv], dout_t, vt, head.padded, 1.0);
        let (p, dp, pd) = (&mut probs[..n], &mut dprobs[..n], &mut dropped[..n]);
        let lse = job.lse[t];
        for x in p.iter_mut() {
            *x = exp(*x - lse);
        }
        // With dropout factors D: dP = (dout · v_u) D and v_u is weighted by P D.
        let first = (job.bh * seq + t) * seq;
        drop_row(dp, &dims, first);
        pd.copy_from_slice(p);
        drop_row(pd, &dims, first);
        let weighted = dot_blocked(p, dp);
        // dS = P (dP - Σ P dP), scaled as the scores were; kept in `dp`.
        for (d, &p) in dp.iter_mut().zip(p.iter()) {
            *d = p * (*d - weighted) * scale;
        }
        dq.fill(0.0);
        for (u, (&ds, &pd)) in dp.iter().zip(pd.iter()).enumerate() {
            axpy(dq, ds, head.row(job.k, u));
            axpy(&mut dk[u * hd..][..hd], ds, q_t);
            axpy(&mut dv[u * hd..][..hd], pd, dout_t);
        }
        job.dq.slice(head.at(t), hd).copy_from_slice(dq);
    }
    for u in 0..seq {
        job.dk.slice(head.at(u), hd).copy_from_slice(&dk[u * hd..][..hd]);
        job.dv.slice(head.at(u), hd).copy_from_slice(&dv[u * hd..][..hd]);
    }
    SCRATCH.set(scratch);
}

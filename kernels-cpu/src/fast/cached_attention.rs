//! Attention of new positions against a key/value cache, for the fast variants (decoding:
//! usually one new row per call).
//!
//! cached_attention: q [rows, C], k_cache, v_cache [capacity, C] -> out [rows, C]
//!
//! Row `r` is position `t = past + r` and attends to cache rows `0..=t`, per head, with the
//! flash forward pass's maths (`attention.rs`): `s_u = (q_t · k_u) · scale`,
//! `p_u = e^{s_u - max}` (`math::exp`), `out_t = Σ_u (p_u / Σ p) · v_u` in ascending `u`,
//! the normaliser in `BLOCK` interleaved partial sums. Only the scores differ: each is one
//! `dot_blocked` (`BLOCK` interleaved partial sums) over the key where it lies in the
//! cache, since for a single new row transposing the keys into panels, as the flash kernel
//! does, would cost as much as the scores themselves. Within the conformance kit's tolerance
//! of the reference (`kernels/cached_attention.rs`), not bit-identical to it.
//!
//! A parallel piece is a run of whole heads, as many as make about [`PIECE_WORK`]
//! multiply-adds (one decoding step at `medium` is one piece, run inline); each output is
//! computed the same way whatever the piece, so results do not depend on the threads.

use std::cell::RefCell;

use tinygpt_tensor::CachedAttentionDims;

use crate::fast::math::{dot_blocked, exp, sum_blocked};
use crate::fast::shared_out::SharedOut;
use crate::fast::simd::Simd;

/// About this many multiply-adds per parallel piece.
pub(crate) const PIECE_WORK: usize = 1 << 16;

/// Heads `heads` of every new row.
pub(crate) struct CachedHeads<'a> {
    pub q: &'a [f32],
    pub k: &'a [f32],
    pub v: &'a [f32],
    pub dims: CachedAttentionDims,
    pub heads: std::ops::Range<usize>,
    /// `[rows, C]`.
    pub out: SharedOut,
}

thread_local! {
    /// One row's scores, grown to the longest row seen and then reused.
    static SCORES: RefCell<Vec<f32>> = const { RefCell::new(Vec::new()) };
}

/// # Safety
/// `job.out` points at a `[rows, C]` buffer whose columns of `job.heads` no other piece
/// writes meanwhile.
#[inline(always)]
pub(crate) unsafe fn heads<S: Simd>(job: &CachedHeads<'_>) {
    let CachedHeads { q, k, v, dims, .. } = *job;
    let (c, hd) = (dims.channels(), dims.head_dim);
    let scale = 1.0 / (hd as f32).sqrt();
    // Taken out of the thread-local, not borrowed in a closure (which would not inherit the
    // caller's `#[target_feature]`s).
    let mut scores = SCORES.take();
    scores.clear();
    scores.resize(dims.past + dims.rows, 0.0);
    for h in job.heads.clone() {
        let col = h * hd;
        for r in 0..dims.rows {
            let t = dims.past + r;
            let q_t = &q[r * c + col..][..hd];
            let s = &mut scores[..=t];
            for (u, s) in s.iter_mut().enumerate() {
                *s = dot_blocked(q_t, &k[u * c + col..][..hd]) * scale;
            }
            let max = s.iter().fold(f32::NEG_INFINITY, |m, &x| m.max(x));
            for x in s.iter_mut() {
                *x = exp::<S>(*x - max);
            }
            let inv = 1.0 / sum_blocked(s);
            let out = job.out.slice(r * c + col, hd);
            out.fill(0.0);
            for (u, &p) in s.iter().enumerate() {
                let (weight, v_u) = (p * inv, &v[u * c + col..][..hd]);
                for (o, &x) in out.iter_mut().zip(v_u) {
                    *o += weight * x;
                }
            }
        }
    }
    SCORES.set(scores);
}

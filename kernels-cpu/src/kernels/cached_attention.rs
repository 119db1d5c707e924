//! Attention of new positions against a key/value cache (incremental decoding).
//!
//! cached_attention: q [rows, C], k_cache, v_cache [capacity, C] -> out [rows, C]
//!
//! Row r is position t = past + r and attends to cache rows 0..=t. Per head, the very
//! arithmetic of `attention_forward` for row t, in the same order (f32 dot products in
//! ascending index order, the softmax normaliser in f64, `p · v_u` accumulated in
//! ascending u), so a row here is bit-identical to that row of full causal attention over
//! the same keys and values (without dropout).

use tinygpt_tensor::CachedAttentionDims;

use crate::kernels::attention::{axpy, dot};

pub(crate) fn cached_attention(out: &mut [f32], q: &[f32], k: &[f32], v: &[f32], dims: CachedAttentionDims) {
    let (c, hd) = (dims.channels(), dims.head_dim);
    let scale = 1.0 / (hd as f32).sqrt();
    let mut scores = vec![0f32; dims.past + dims.rows];
    for r in 0..dims.rows {
        let t = dims.past + r;
        for h in 0..dims.heads {
            let col = h * hd;
            let q_t = &q[r * c + col..][..hd];
            let row = &mut scores[..=t];
            let mut max = f32::NEG_INFINITY;
            for (u, s) in row.iter_mut().enumerate() {
                *s = dot(q_t, &k[u * c + col..][..hd]) * scale;
                max = max.max(*s);
            }
            let mut sum = 0f64;
            for s in row.iter_mut() {
                *s = (*s - max).exp();
                sum += *s as f64;
            }
            let inv = (1.0 / sum) as f32;
            row.iter_mut().for_each(|p| *p *= inv);
            let out_t = &mut out[r * c + col..][..hd];
            out_t.fill(0.0);
            for (u, &p) in row.iter().enumerate() {
                axpy(out_t, p, &v[u * c + col..][..hd]);
            }
        }
    }
}

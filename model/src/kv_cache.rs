//! Incremental decoding: a key/value cache per block, so each new token runs one
//! position through the blocks instead of the whole window.
//!
//! [`Gpt::forward_cached`] runs new tokens (positions `cache.len()..`) through the model
//! as the uncached forward pass does (no dropout), writes their keys and values into the
//! cache (`Tensor::copy_into` `[context_length, d_model]` buffers on the device) and
//! attends over every cached position (`Backend::attention` with a cache in its descriptor). Only the last
//! position's logits are computed, and only those 256 values are read back. The cache
//! holds at most `context_length` positions; how generation slides its window is
//! [`crate::sample`]'s business (it starts a new cache over the kept tokens).

use tinygpt_tensor::{Backend, Indices, Tensor};

use crate::gpt::{Gpt, LN_EPS};
use crate::{LayerNorm, Linear};

/// Keys and values of the positions run so far, per block, on the model's device.
#[derive(Clone, Debug)]
pub struct KvCache<B: Backend> {
    keys: Vec<Tensor<B>>,
    values: Vec<Tensor<B>>,
    len: usize,
    capacity: usize,
}

impl<B: Backend> KvCache<B> {
    /// An empty cache for `model` (`context_length` positions per block).
    pub fn new(model: &Gpt<B>) -> Self {
        let c = model.config();
        let backend = model.params().tensors()[0].backend();
        let buffers =
            || (0..c.n_layers).map(|_| Tensor::zeros(backend, [c.context_length, c.d_model])).collect();
        KvCache { keys: buffers(), values: buffers(), len: 0, capacity: c.context_length }
    }

    /// Positions cached.
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether no position has been cached yet.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Positions left before the cache is full.
    pub fn room(&self) -> usize {
        self.capacity - self.len
    }

    /// Forgets every position (the buffers are kept).
    pub fn clear(&mut self) {
        self.len = 0;
    }
}

impl<B: Backend> Gpt<B> {
    /// Runs `tokens` at positions `cache.len()..` through the model, appending their keys
    /// and values to `cache`, and returns the last position's logits `[vocab]` (on the
    /// device). Panics on no tokens or more than the cache has room for (callers slide
    /// their window first).
    pub fn forward_cached(&self, cache: &mut KvCache<B>, tokens: &[u8]) -> Tensor<B> {
        let ids: Vec<u32> = tokens.iter().map(|&t| t as u32).collect();
        self.forward_cached_ids(cache, &ids)
    }

    /// [`Gpt::forward_cached`] for token ids of any vocabulary.
    pub fn forward_cached_ids(&self, cache: &mut KvCache<B>, ids: &[u32]) -> Tensor<B> {
        let (n, past) = (ids.len(), cache.len);
        assert!(n >= 1 && n <= cache.room(), "{n} tokens for a cache with room for {}", cache.room());
        let c = self.config();
        let d = c.d_model;
        let p = self.params().tensors();
        let parts = self.parts();
        let backend = p[0].backend();
        let linear = |x: &Tensor<B>, l: &Linear<usize>| x.matmul(&p[l.weight], Some(&p[l.bias]), false, true);
        let norm = |x: &Tensor<B>, l: &LayerNorm<usize>| x.layer_norm(&p[l.weight], &p[l.bias], LN_EPS).0;

        // Embeddings of the new positions: [n, C].
        let positions: Vec<u32> = (past..past + n).map(|t| t as u32).collect();
        let tok = p[parts.token_embedding].embedding(&Indices::new(backend, ids));
        let pos = p[parts.position_embedding].embedding(&Indices::new(backend, &positions));
        let mut x = tok.add(&pos);

        for (i, block) in parts.blocks.iter().enumerate() {
            let h = norm(&x, &block.ln1);
            let (q, k, v) = (linear(&h, &block.q_proj), linear(&h, &block.k_proj), linear(&h, &block.v_proj));
            k.copy_into(0, &cache.keys[i], past * d, n * d);
            v.copy_into(0, &cache.values[i], past * d, n * d);
            let a = q.cached_attention(&cache.keys[i], &cache.values[i], past, c.n_heads);
            x = x.add(&linear(&a, &block.o_proj));
            let h = norm(&x, &block.ln2);
            x = x.add(&linear(&linear(&h, &block.fc_in).gelu(), &block.fc_out));
        }
        cache.len += n;

        // Only the last position goes through the head.
        let last = if n == 1 {
            x
        } else {
            let row = Tensor::zeros(backend, [1, d]);
            x.copy_into((n - 1) * d, &row, 0, d);
            row
        };
        let logits = norm(&last, &parts.ln_final).matmul(&p[parts.token_embedding], None, false, true);
        logits.reshape([c.vocab_size])
    }
}

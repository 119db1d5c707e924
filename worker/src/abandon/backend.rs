//! `Backend for Abandonable<B>`: each op either runs on `B` or, once [`Abandon`] has seen a
//! waiting message, returns zeros of its documented output sizes without running.

use std::future::Future;
use std::rc::Rc;

use tinygpt_tensor::{
    AdamWStep, AttentionDims, AttentionGrads, AttentionOut, AttentionSaved, Backend, CachedAttentionDims,
    CopyRange, CrossEntropySaved, DropoutMask, LayerNormGrads, LayerNormOut, MatmulDims, TensorError,
};

use super::Abandon;

/// `B` whose ops stop computing while an armed [`Abandon`] has seen a page message (see the
/// module docs of [`super`]). Results are `B`'s, bit for bit, whenever nothing is skipped.
#[derive(Clone, Debug)]
pub struct Abandonable<B: Backend> {
    inner: B,
    abandon: Rc<Abandon>,
}

impl<B: Backend> Abandonable<B> {
    pub fn new(inner: B, abandon: Rc<Abandon>) -> Self {
        Abandonable { inner, abandon }
    }

    pub fn inner(&self) -> &B {
        &self.inner
    }

    /// `op` on `B`, or `skipped` (zeros of the output sizes) once the unit is being given up.
    fn run<T>(&self, skipped: impl FnOnce(&B) -> T, op: impl FnOnce(&B) -> T) -> T {
        if self.abandon.skip_op() {
            skipped(&self.inner)
        } else {
            op(&self.inner)
        }
    }
}

/// The size a skipped [`Backend::attention_for_training`] gives its opaque `saved`: the
/// default form's (the softmax), so even a backend that keeps less gets enough.
fn softmax_len(dims: &AttentionDims) -> usize {
    dims.batch * dims.heads * dims.seq * dims.seq
}

impl<B: Backend> Backend for Abandonable<B> {
    type Storage = B::Storage;
    type Indices = B::Indices;

    fn name(&self) -> String {
        self.inner.name()
    }

    // Memory, copies and AdamW always run: they write buffers that outlive the unit.
    fn max_tensor_len(&self) -> usize {
        self.inner.max_tensor_len()
    }
    fn zeros(&self, len: usize) -> Self::Storage {
        self.inner.zeros(len)
    }
    fn upload(&self, data: &[f32]) -> Self::Storage {
        self.inner.upload(data)
    }
    fn upload_indices(&self, data: &[u32]) -> Self::Indices {
        self.inner.upload_indices(data)
    }
    fn read(&self, src: &Self::Storage) -> impl Future<Output = Result<Vec<f32>, TensorError>> {
        self.inner.read(src)
    }
    fn read_into(
        &self,
        src: &Self::Storage,
        dst: &mut [f32],
    ) -> impl Future<Output = Result<(), TensorError>> {
        self.inner.read_into(src, dst)
    }
    fn copy(
        &self,
        src: &Self::Storage,
        src_offset: usize,
        dst: &Self::Storage,
        dst_offset: usize,
        len: usize,
    ) {
        self.inner.copy(src, src_offset, dst, dst_offset, len)
    }
    fn copy_many(&self, copies: &[CopyRange<'_, Self::Storage>]) {
        self.inner.copy_many(copies)
    }
    fn flush(&self) -> impl Future<Output = Result<(), TensorError>> {
        self.inner.flush()
    }
    #[allow(clippy::too_many_arguments)]
    fn adamw(
        &self,
        param: &Self::Storage,
        grad: &Self::Storage,
        m: &Self::Storage,
        v: &Self::Storage,
        grad_sumsq: &Self::Storage,
        hp: &AdamWStep,
        len: usize,
    ) {
        self.inner.adamw(param, grad, m, v, grad_sumsq, hp, len)
    }

    // Ops that return fresh buffers: skippable.
    fn add(&self, a: &Self::Storage, b: &Self::Storage, len: usize) -> Self::Storage {
        self.run(|s| s.zeros(len), |be| be.add(a, b, len))
    }
    fn scale(&self, a: &Self::Storage, alpha: f32, len: usize) -> Self::Storage {
        self.run(|s| s.zeros(len), |b| b.scale(a, alpha, len))
    }
    fn sum_rows(&self, x: &Self::Storage, rows: usize, cols: usize) -> Self::Storage {
        self.run(|s| s.zeros(cols), |b| b.sum_rows(x, rows, cols))
    }
    fn sum_squares(&self, x: &Self::Storage, len: usize) -> Self::Storage {
        self.run(|s| s.zeros(1), |b| b.sum_squares(x, len))
    }
    fn dropout(&self, x: &Self::Storage, mask: &DropoutMask, len: usize) -> Self::Storage {
        self.run(|s| s.zeros(len), |b| b.dropout(x, mask, len))
    }
    fn dropout_add(
        &self,
        residual: &Self::Storage,
        x: &Self::Storage,
        mask: &DropoutMask,
        len: usize,
    ) -> Self::Storage {
        self.run(|s| s.zeros(len), |b| b.dropout_add(residual, x, mask, len))
    }
    fn matmul(
        &self,
        a: &Self::Storage,
        b: &Self::Storage,
        bias: Option<&Self::Storage>,
        dims: MatmulDims,
    ) -> Self::Storage {
        self.run(|s| s.zeros(dims.m * dims.n), |be| be.matmul(a, b, bias, dims))
    }
    fn matmul_sum_rows(
        &self,
        a: &Self::Storage,
        b: &Self::Storage,
        dims: MatmulDims,
    ) -> (Self::Storage, Self::Storage) {
        let skipped = |s: &B| (s.zeros(dims.m * dims.n), s.zeros(dims.m));
        self.run(skipped, |be| be.matmul_sum_rows(a, b, dims))
    }
    fn matmul_onto(
        &self,
        onto: &Self::Storage,
        a: &Self::Storage,
        b: &Self::Storage,
        bias: Option<&Self::Storage>,
        dims: MatmulDims,
    ) -> Self::Storage {
        self.run(|s| s.zeros(dims.m * dims.n), |be| be.matmul_onto(onto, a, b, bias, dims))
    }
    fn embedding(&self, table: &Self::Storage, ids: &Self::Indices, n: usize, dim: usize) -> Self::Storage {
        self.run(|s| s.zeros(n * dim), |b| b.embedding(table, ids, n, dim))
    }
    fn embedding_backward(
        &self,
        dout: &Self::Storage,
        ids: &Self::Indices,
        n: usize,
        table_rows: usize,
        dim: usize,
    ) -> Self::Storage {
        self.run(|s| s.zeros(table_rows * dim), |b| b.embedding_backward(dout, ids, n, table_rows, dim))
    }
    fn layer_norm(
        &self,
        x: &Self::Storage,
        gamma: &Self::Storage,
        beta: &Self::Storage,
        rows: usize,
        dim: usize,
        eps: f32,
    ) -> LayerNormOut<Self::Storage> {
        self.run(
            |s| LayerNormOut { out: s.zeros(rows * dim), mean: s.zeros(rows), rstd: s.zeros(rows) },
            |b| b.layer_norm(x, gamma, beta, rows, dim, eps),
        )
    }
    fn layer_norm_backward(
        &self,
        dout: &Self::Storage,
        x: &Self::Storage,
        gamma: &Self::Storage,
        saved: &LayerNormOut<Self::Storage>,
        rows: usize,
        dim: usize,
    ) -> LayerNormGrads<Self::Storage> {
        self.run(
            |s| zero_layer_norm_grads(s, rows, dim),
            |b| b.layer_norm_backward(dout, x, gamma, saved, rows, dim),
        )
    }
    fn layer_norm_backward_onto(
        &self,
        onto: &Self::Storage,
        dout: &Self::Storage,
        x: &Self::Storage,
        gamma: &Self::Storage,
        saved: &LayerNormOut<Self::Storage>,
        rows: usize,
        dim: usize,
    ) -> LayerNormGrads<Self::Storage> {
        let run = |b: &B| b.layer_norm_backward_onto(onto, dout, x, gamma, saved, rows, dim);
        self.run(|s| zero_layer_norm_grads(s, rows, dim), run)
    }
    fn gelu(&self, x: &Self::Storage, len: usize) -> Self::Storage {
        self.run(|s| s.zeros(len), |b| b.gelu(x, len))
    }
    fn gelu_backward(&self, x: &Self::Storage, dout: &Self::Storage, len: usize) -> Self::Storage {
        self.run(|s| s.zeros(len), |b| b.gelu_backward(x, dout, len))
    }
    fn attention(
        &self,
        q: &Self::Storage,
        k: &Self::Storage,
        v: &Self::Storage,
        dims: AttentionDims,
    ) -> AttentionOut<Self::Storage> {
        let out = dims.batch * dims.seq * dims.channels();
        self.run(
            |s| AttentionOut { out: s.zeros(out), probs: s.zeros(softmax_len(&dims)) },
            |b| b.attention(q, k, v, dims),
        )
    }
    fn cached_attention(
        &self,
        q: &Self::Storage,
        k_cache: &Self::Storage,
        v_cache: &Self::Storage,
        dims: CachedAttentionDims,
    ) -> Self::Storage {
        self.run(|s| s.zeros(dims.rows * dims.channels()), |b| b.cached_attention(q, k_cache, v_cache, dims))
    }
    fn attention_backward(
        &self,
        dout: &Self::Storage,
        q: &Self::Storage,
        k: &Self::Storage,
        v: &Self::Storage,
        probs: &Self::Storage,
        dims: AttentionDims,
    ) -> AttentionGrads<Self::Storage> {
        let len = dims.batch * dims.seq * dims.channels();
        self.run(
            |s| AttentionGrads { dq: s.zeros(len), dk: s.zeros(len), dv: s.zeros(len) },
            |b| b.attention_backward(dout, q, k, v, probs, dims),
        )
    }
    fn attention_for_training(
        &self,
        q: &Self::Storage,
        k: &Self::Storage,
        v: &Self::Storage,
        dims: AttentionDims,
    ) -> AttentionSaved<Self::Storage> {
        let out = dims.batch * dims.seq * dims.channels();
        self.run(
            |s| AttentionSaved { out: s.zeros(out), saved: s.zeros(softmax_len(&dims)) },
            |b| b.attention_for_training(q, k, v, dims),
        )
    }
    fn attention_backward_saved(
        &self,
        dout: &Self::Storage,
        q: &Self::Storage,
        k: &Self::Storage,
        v: &Self::Storage,
        saved: &Self::Storage,
        dims: AttentionDims,
    ) -> AttentionGrads<Self::Storage> {
        let len = dims.batch * dims.seq * dims.channels();
        self.run(
            |s| AttentionGrads { dq: s.zeros(len), dk: s.zeros(len), dv: s.zeros(len) },
            |b| b.attention_backward_saved(dout, q, k, v, saved, dims),
        )
    }
    fn cross_entropy(
        &self,
        logits: &Self::Storage,
        targets: &Self::Indices,
        rows: usize,
        vocab: usize,
    ) -> Self::Storage {
        self.run(|s| s.zeros(1), |b| b.cross_entropy(logits, targets, rows, vocab))
    }
    fn cross_entropy_backward(
        &self,
        logits: &Self::Storage,
        targets: &Self::Indices,
        dloss: &Self::Storage,
        rows: usize,
        vocab: usize,
    ) -> Self::Storage {
        self.run(|s| s.zeros(rows * vocab), |b| b.cross_entropy_backward(logits, targets, dloss, rows, vocab))
    }
    fn cross_entropy_for_training(
        &self,
        logits: &Self::Storage,
        targets: &Self::Indices,
        rows: usize,
        vocab: usize,
    ) -> CrossEntropySaved<Self::Storage> {
        self.run(
            |s| CrossEntropySaved { loss: s.zeros(1), saved: None },
            |b| b.cross_entropy_for_training(logits, targets, rows, vocab),
        )
    }
    #[allow(clippy::too_many_arguments)]
    fn cross_entropy_backward_saved(
        &self,
        logits: &Self::Storage,
        targets: &Self::Indices,
        saved: Option<&Self::Storage>,
        dloss: &Self::Storage,
        rows: usize,
        vocab: usize,
    ) -> Self::Storage {
        self.run(
            |s| s.zeros(rows * vocab),
            |b| b.cross_entropy_backward_saved(logits, targets, saved, dloss, rows, vocab),
        )
    }
}

/// LayerNorm's gradients of a step given up: zeros, never read.
fn zero_layer_norm_grads<B: Backend>(s: &B, rows: usize, dim: usize) -> LayerNormGrads<B::Storage> {
    LayerNormGrads { dx: s.zeros(rows * dim), dgamma: s.zeros(dim), dbeta: s.zeros(dim) }
}

#[cfg(test)]
mod tests {
    use tinygpt_tensor::conformance::forwarding::methods_left_to_defaults;

    /// A default left in place would run its composition of ops instead of `B`'s own fast path.
    #[test]
    fn every_backend_method_is_implemented_here() {
        assert_eq!(methods_left_to_defaults(include_str!("backend.rs")), Vec::<&str>::new());
    }
}

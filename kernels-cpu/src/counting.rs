//! A backend that counts the calls it forwards to the CPU backend, by op name, so tests
//! can show how many device calls a piece of training code makes (optimizer calls per
//! step, readbacks per tick). Test support: behind the `counting` feature.

use std::collections::BTreeMap;
use std::future::Future;
use std::sync::{Arc, Mutex};

use crate::CpuBackend;
use tinygpt_tensor::{
    AdamWStep, AttentionDims, AttentionGrads, AttentionOut, AttentionSaved, Backend, CachedAttentionDims,
    CrossEntropySaved, DropoutMask, LayerNormGrads, LayerNormOut, MatmulDims, TensorError,
};

/// The CPU backend, counting every call. Clones share the counts.
#[derive(Clone, Debug, Default)]
pub struct Counting {
    inner: CpuBackend,
    calls: Arc<Mutex<BTreeMap<&'static str, usize>>>,
}

impl Counting {
    /// Counts the calls `inner` receives.
    pub fn new(inner: CpuBackend) -> Self {
        Counting { inner, calls: Arc::default() }
    }

    /// The calls of `op` made since the last `take`, leaving the counts as they are.
    pub fn count_of(&self, op: &str) -> usize {
        self.calls.lock().unwrap().get(op).copied().unwrap_or(0)
    }

    /// The calls made since the last `take`, by op name, and a fresh count.
    pub fn take(&self) -> BTreeMap<&'static str, usize> {
        std::mem::take(&mut *self.calls.lock().unwrap())
    }

    fn count(&self, op: &'static str) -> &CpuBackend {
        *self.calls.lock().unwrap().entry(op).or_default() += 1;
        &self.inner
    }
}

type S = <CpuBackend as Backend>::Storage;
type I = <CpuBackend as Backend>::Indices;

impl Backend for Counting {
    type Storage = S;
    type Indices = I;

    fn name(&self) -> String {
        "counting cpu".into()
    }
    fn zeros(&self, len: usize) -> S {
        self.count("zeros").zeros(len)
    }
    fn upload(&self, data: &[f32]) -> S {
        self.count("upload").upload(data)
    }
    fn upload_indices(&self, data: &[u32]) -> I {
        self.count("upload_indices").upload_indices(data)
    }
    fn read(&self, src: &S) -> impl Future<Output = Result<Vec<f32>, TensorError>> {
        self.count("read").read(src)
    }
    fn read_into(&self, src: &S, dst: &mut [f32]) -> impl Future<Output = Result<(), TensorError>> {
        self.count("read").read_into(src, dst)
    }
    fn copy(&self, src: &S, src_offset: usize, dst: &S, dst_offset: usize, len: usize) {
        self.count("copy").copy(src, src_offset, dst, dst_offset, len)
    }
    fn flush(&self) -> impl Future<Output = Result<(), TensorError>> {
        self.count("flush").flush()
    }
    fn add(&self, a: &S, b: &S, len: usize) -> S {
        self.count("add").add(a, b, len)
    }
    fn scale(&self, a: &S, alpha: f32, len: usize) -> S {
        self.count("scale").scale(a, alpha, len)
    }
    fn dropout(&self, x: &S, mask: &DropoutMask, len: usize) -> S {
        self.count("dropout").dropout(x, mask, len)
    }
    fn dropout_add(&self, residual: &S, x: &S, mask: &DropoutMask, len: usize) -> S {
        self.count("dropout_add").dropout_add(residual, x, mask, len)
    }
    fn sum_rows(&self, x: &S, rows: usize, cols: usize) -> S {
        self.count("sum_rows").sum_rows(x, rows, cols)
    }
    fn sum_squares(&self, x: &S, len: usize) -> S {
        self.count("sum_squares").sum_squares(x, len)
    }
    fn matmul(&self, a: &S, b: &S, bias: Option<&S>, dims: MatmulDims) -> S {
        self.count("matmul").matmul(a, b, bias, dims)
    }
    fn matmul_onto(&self, onto: &S, a: &S, b: &S, bias: Option<&S>, dims: MatmulDims) -> S {
        self.count("matmul_onto").matmul_onto(onto, a, b, bias, dims)
    }
    fn embedding(&self, table: &S, ids: &I, n: usize, dim: usize) -> S {
        self.count("embedding").embedding(table, ids, n, dim)
    }
    fn embedding_backward(&self, dout: &S, ids: &I, n: usize, table_rows: usize, dim: usize) -> S {
        self.count("embedding_backward").embedding_backward(dout, ids, n, table_rows, dim)
    }
    fn layer_norm(&self, x: &S, gamma: &S, beta: &S, rows: usize, dim: usize, eps: f32) -> LayerNormOut<S> {
        self.count("layer_norm").layer_norm(x, gamma, beta, rows, dim, eps)
    }
    fn layer_norm_backward(
        &self,
        dout: &S,
        x: &S,
        gamma: &S,
        saved: &LayerNormOut<S>,
        rows: usize,
        dim: usize,
    ) -> LayerNormGrads<S> {
        self.count("layer_norm_backward").layer_norm_backward(dout, x, gamma, saved, rows, dim)
    }
    #[allow(clippy::too_many_arguments)]
    fn layer_norm_backward_onto(
        &self,
        onto: &S,
        dout: &S,
        x: &S,
        gamma: &S,
        saved: &LayerNormOut<S>,
        rows: usize,
        dim: usize,
    ) -> LayerNormGrads<S> {
        self.count("layer_norm_backward_onto")
            .layer_norm_backward_onto(onto, dout, x, gamma, saved, rows, dim)
    }
    fn gelu(&self, x: &S, len: usize) -> S {
        self.count("gelu").gelu(x, len)
    }
    fn gelu_backward(&self, x: &S, dout: &S, len: usize) -> S {
        self.count("gelu_backward").gelu_backward(x, dout, len)
    }
    fn attention(&self, q: &S, k: &S, v: &S, dims: AttentionDims) -> AttentionOut<S> {
        self.count("attention").attention(q, k, v, dims)
    }
    fn cached_attention(&self, q: &S, k_cache: &S, v_cache: &S, dims: CachedAttentionDims) -> S {
        self.count("cached_attention").cached_attention(q, k_cache, v_cache, dims)
    }
    fn attention_backward(
        &self,
        dout: &S,
        q: &S,
        k: &S,
        v: &S,
        probs: &S,
        dims: AttentionDims,
    ) -> AttentionGrads<S> {
        self.count("attention_backward").attention_backward(dout, q, k, v, probs, dims)
    }
    fn attention_for_training(&self, q: &S, k: &S, v: &S, dims: AttentionDims) -> AttentionSaved<S> {
        self.count("attention_for_training").attention_for_training(q, k, v, dims)
    }
    fn attention_backward_saved(
        &self,
        dout: &S,
        q: &S,
        k: &S,
        v: &S,
        saved: &S,
        dims: AttentionDims,
    ) -> AttentionGrads<S> {
        self.count("attention_backward_saved").attention_backward_saved(dout, q, k, v, saved, dims)
    }
    fn cross_entropy(&self, logits: &S, targets: &I, rows: usize, vocab: usize) -> S {
        self.count("cross_entropy").cross_entropy(logits, targets, rows, vocab)
    }
    fn cross_entropy_backward(&self, logits: &S, targets: &I, dloss: &S, rows: usize, vocab: usize) -> S {
        self.count("cross_entropy_backward").cross_entropy_backward(logits, targets, dloss, rows, vocab)
    }
    fn cross_entropy_for_training(
        &self,
        logits: &S,
        targets: &I,
        rows: usize,
        vocab: usize,
    ) -> CrossEntropySaved<S> {
        self.count("cross_entropy_for_training").cross_entropy_for_training(logits, targets, rows, vocab)
    }
    fn cross_entropy_backward_saved(
        &self,
        logits: &S,
        targets: &I,
        saved: Option<&S>,
        dloss: &S,
        rows: usize,
        vocab: usize,
    ) -> S {
        let inner = self.count("cross_entropy_backward_saved");
        inner.cross_entropy_backward_saved(logits, targets, saved, dloss, rows, vocab)
    }
    fn adamw(&self, param: &S, grad: &S, m: &S, v: &S, grad_sumsq: &S, hp: &AdamWStep, len: usize) {
        self.count("adamw").adamw(param, grad, m, v, grad_sumsq, hp, len)
    }
}

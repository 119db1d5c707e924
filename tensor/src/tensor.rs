use crate::backend::{read_vec, Backend};
use crate::dims::{
    AttentionCache, AttentionDims, AttentionGrads, AttentionKeep, AttentionOut, CopyRange, CrossEntropyOut,
    LayerNormGrads, LayerNormOut, MatmulDims, MatmulFused,
};
use crate::dropout::DropoutMask;
use crate::error::TensorError;
use crate::executor::block_on;
use crate::shape::Shape;

/// An f32 tensor: a backend handle, its buffer and a row-major shape.
///
/// Methods check shapes (a mismatch is a programming error and panics naming the op)
/// and forward to the backend. Cloning is cheap and shares the buffer.
#[derive(Clone, Debug)]
pub struct Tensor<B: Backend> {
    backend: B,
    storage: B::Storage,
    shape: Shape,
}

/// A u32 tensor of token ids, targets or positions, `[len]`.
#[derive(Clone, Debug)]
pub struct Indices<B: Backend> {
    storage: B::Indices,
    len: usize,
}

impl<B: Backend> Indices<B> {
    /// Uploads `ids` to `backend`.
    pub fn new(backend: &B, ids: &[u32]) -> Self {
        Indices { storage: backend.upload_indices(ids), len: ids.len() }
    }

    /// The number of indices.
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether there are no indices.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// The backend's index buffer.
    pub fn storage(&self) -> &B::Indices {
        &self.storage
    }
}

fn check(op: &str, ok: bool, detail: impl FnOnce() -> String) {
    assert!(ok, "{op}: shape mismatch: {}", detail());
}

/// A matmul's bias, if any, must be `[n]`.
fn check_bias<B: Backend>(op: &str, bias: Option<&Tensor<B>>, n: usize) {
    if let Some(b) = bias {
        check(op, b.dims() == [n], || format!("bias {} for {n} columns", b.shape));
    }
}

impl<B: Backend> Tensor<B> {
    /// Wraps a backend buffer; `storage` must hold `shape.numel()` values.
    pub fn from_storage(backend: &B, storage: B::Storage, shape: impl Into<Shape>) -> Self {
        Tensor { backend: backend.clone(), storage, shape: shape.into() }
    }

    /// A tensor of zeros.
    pub fn zeros(backend: &B, shape: impl Into<Shape>) -> Self {
        let shape = shape.into();
        Self::from_storage(backend, backend.zeros(shape.numel()), shape)
    }

    /// A tensor holding a copy of `data` (whose length must match `shape`).
    pub fn from_slice(backend: &B, data: &[f32], shape: impl Into<Shape>) -> Self {
        let shape = shape.into();
        check("from_slice", data.len() == shape.numel(), || {
            format!("{} values for shape {shape}", data.len())
        });
        Self::from_storage(backend, backend.upload(data), shape)
    }

    /// The backend the tensor lives on.
    pub fn backend(&self) -> &B {
        &self.backend
    }

    /// The backend's buffer.
    pub fn storage(&self) -> &B::Storage {
        &self.storage
    }

    /// The tensor's shape.
    pub fn shape(&self) -> &Shape {
        &self.shape
    }

    /// The shape's dimensions.
    pub fn dims(&self) -> &[usize] {
        self.shape.dims()
    }

    /// The number of elements.
    pub fn numel(&self) -> usize {
        self.shape.numel()
    }

    /// The same buffer seen with another shape of equal size.
    pub fn reshape(&self, shape: impl Into<Shape>) -> Self {
        let shape = shape.into();
        check("reshape", shape.numel() == self.numel(), || format!("{} to {shape}", self.shape));
        Tensor { backend: self.backend.clone(), storage: self.storage.clone(), shape }
    }

    fn wrap(&self, storage: B::Storage, shape: impl Into<Shape>) -> Self {
        Self::from_storage(&self.backend, storage, shape)
    }

    /// Copies the values to the host (waits for the device). See [`Backend::read`].
    pub async fn read(&self) -> Result<Vec<f32>, TensorError> {
        read_vec(&self.backend, &self.storage).await
    }

    /// [`Tensor::read`] into `dst`, whose values it replaces: a caller that reads every step
    /// keeps `dst`, so the read allocates nothing once it has held as many values.
    pub async fn read_into(&self, dst: &mut Vec<f32>) -> Result<(), TensorError> {
        self.backend.read(&self.storage, dst).await
    }

    /// Copies `len` values of `self` from `offset` into `dst` from `dst_offset`, in place
    /// (shapes aside: offsets count elements): [`Backend::copy`] of one range.
    pub fn copy_into(&self, offset: usize, dst: &Self, dst_offset: usize, len: usize) {
        self.backend.copy(&[CopyRange::new(&self.storage, offset, &dst.storage, dst_offset, len)]);
    }

    /// Rows `start .. start + n` of `self` seen as `[rows, last]`, copied into a fresh
    /// `[n, last]` tensor (a snapshot, as [`Backend::copy`] makes): a part of a batch that the
    /// ops after it take on their own, as the tied head's row chunks do.
    pub fn rows(&self, start: usize, n: usize) -> Self {
        let width = self.shape.last();
        check("rows", start + n <= self.shape.rows(), || {
            format!("rows {start}..{} of {}", start + n, self.shape)
        });
        let part = Tensor::zeros(&self.backend, [n, width]);
        self.copy_into(start * width, &part, 0, n * width);
        part
    }

    /// [`Tensor::read`] for synchronous callers; see [`block_on`] for where that is valid.
    pub fn to_vec(&self) -> Result<Vec<f32>, TensorError> {
        block_on(self.read())
    }

    /// The single value of a one-element tensor, read synchronously.
    pub fn to_scalar(&self) -> Result<f32, TensorError> {
        check("to_scalar", self.numel() == 1, || format!("shape {}", self.shape));
        Ok(self.to_vec()?[0])
    }

    /// Elementwise sum (same shapes).
    pub fn add(&self, rhs: &Self) -> Self {
        check("add", self.shape == rhs.shape, || format!("{} + {}", self.shape, rhs.shape));
        self.wrap(self.backend.add(&self.storage, &rhs.storage, self.numel()), self.shape.clone())
    }

    /// Dropout with `mask` (see [`crate::dropout`]); also its own backward.
    pub fn dropout(&self, mask: &DropoutMask) -> Self {
        self.wrap(self.backend.dropout(&self.storage, mask, self.numel(), None), self.shape.clone())
    }

    /// `self + dropout(x)` in one pass (a residual add after a dropped-out block output).
    pub fn dropout_add(&self, x: &Self, mask: &DropoutMask) -> Self {
        check("dropout_add", self.shape == x.shape, || format!("{} + dropout({})", self.shape, x.shape));
        let out = self.backend.dropout(&x.storage, mask, self.numel(), Some(&self.storage));
        self.wrap(out, self.shape.clone())
    }

    /// Every element times `alpha`.
    pub fn scale(&self, alpha: f32) -> Self {
        self.wrap(self.backend.scale(&self.storage, alpha, self.numel()), self.shape.clone())
    }

    /// Column sums over all leading dimensions → `[last]`.
    pub fn sum_rows(&self) -> Self {
        let (rows, cols) = (self.shape.rows(), self.shape.last());
        self.wrap(self.backend.sum_rows(&self.storage, rows, cols), [cols])
    }

    /// `Σ x²` → `[1]`.
    pub fn sum_squares(&self) -> Self {
        self.wrap(self.backend.sum_squares(&self.storage, self.numel()), [1])
    }

    /// `op(self) · op(rhs) (+ bias)` on the last two dimensions; `self` may have leading
    /// dimensions when `trans_a` is false (they fold into rows). See [`MatmulDims`].
    pub fn matmul(&self, rhs: &Self, bias: Option<&Self>, trans_a: bool, trans_b: bool) -> Self {
        let (dims, shape) = self.matmul_dims("matmul", rhs, trans_a, trans_b);
        check_bias("matmul", bias, dims.n);
        let fused = MatmulFused::bias(bias.map(|b| &b.storage));
        let out = self.backend.matmul(&self.storage, &rhs.storage, dims, fused).out;
        self.wrap(out, shape)
    }

    /// `onto + (op(self) · op(rhs) + bias)` ([`MatmulFused::onto`]), shaped as
    /// [`Tensor::matmul`]'s result; `onto` holds its m·n values in any shape.
    pub fn matmul_onto(
        &self,
        rhs: &Self,
        bias: Option<&Self>,
        trans_a: bool,
        trans_b: bool,
        onto: &Self,
    ) -> Self {
        let (dims, shape) = self.matmul_dims("matmul_onto", rhs, trans_a, trans_b);
        check_bias("matmul_onto", bias, dims.n);
        check("matmul_onto", onto.numel() == dims.m * dims.n, || {
            format!("onto {} for a [{}, {}] product", onto.shape, dims.m, dims.n)
        });
        let fused = MatmulFused { onto: Some(&onto.storage), ..MatmulFused::bias(bias.map(|b| &b.storage)) };
        let out = self.backend.matmul(&self.storage, &rhs.storage, dims, fused).out;
        self.wrap(out, shape)
    }

    /// The sizes of `op(self) · op(rhs)` and its shape (`self`'s leading dims, then n),
    /// checked: `rhs` rank 2, `self` rank 2 when transposed, and the inner sizes equal.
    fn matmul_dims(&self, op: &str, rhs: &Self, trans_a: bool, trans_b: bool) -> (MatmulDims, Shape) {
        let (m, k) = if trans_a {
            check(op, self.shape.rank() == 2, || format!("trans_a needs rank 2, got {}", self.shape));
            (self.dims()[1], self.dims()[0])
        } else {
            (self.shape.rows(), self.shape.last())
        };
        check(op, rhs.shape.rank() == 2, || format!("rhs must be rank 2, got {}", rhs.shape));
        let (k2, n) = if trans_b { (rhs.dims()[1], rhs.dims()[0]) } else { (rhs.dims()[0], rhs.dims()[1]) };
        check(op, k == k2, || format!("{} (trans {trans_a}) · {} (trans {trans_b})", self.shape, rhs.shape));
        let shape = if trans_a { Shape::new(&[m, n]) } else { self.shape.with_last(n) };
        (MatmulDims { m, k, n, trans_a, trans_b }, shape)
    }

    /// `selfᵀ · op(rhs)` for `self` `[k, m]`, and `self.sum_rows()` `[m]`, in one call
    /// ([`MatmulFused::sum_rows`]): a linear's weight and bias gradients from `dY`.
    pub fn matmul_sum_rows(&self, rhs: &Self, trans_b: bool) -> (Self, Self) {
        check("matmul_sum_rows", self.shape.rank() == 2, || {
            format!("lhs must be rank 2, got {}", self.shape)
        });
        check("matmul_sum_rows", rhs.shape.rank() == 2, || format!("rhs must be rank 2, got {}", rhs.shape));
        let (k, m) = (self.dims()[0], self.dims()[1]);
        let (k2, n) = if trans_b { (rhs.dims()[1], rhs.dims()[0]) } else { (rhs.dims()[0], rhs.dims()[1]) };
        check("matmul_sum_rows", k == k2, || {
            format!("{} (trans) · {} (trans {trans_b})", self.shape, rhs.shape)
        });
        let dims = MatmulDims { m, k, n, trans_a: true, trans_b };
        let fused = MatmulFused { sum_rows: true, ..MatmulFused::none() };
        let out = self.backend.matmul(&self.storage, &rhs.storage, dims, fused);
        let sums = out.sums.expect("matmul: sum_rows asked for, none returned");
        (self.wrap(out.out, [m, n]), self.wrap(sums, [m]))
    }

    /// Rows of `self` (a `[rows, dim]` table) picked by `ids` → `[ids.len(), dim]`.
    pub fn embedding(&self, ids: &Indices<B>) -> Self {
        check("embedding", self.shape.rank() == 2, || format!("table {}", self.shape));
        let dim = self.dims()[1];
        self.wrap(self.backend.embedding(&self.storage, &ids.storage, ids.len, dim), [ids.len, dim])
    }

    /// Scatter-add of `self` (`[ids.len(), dim]`) into a zero `[table_rows, dim]`.
    pub fn embedding_backward(&self, ids: &Indices<B>, table_rows: usize) -> Self {
        let dim = self.shape.last();
        check("embedding_backward", self.shape.rows() == ids.len, || {
            format!("{} rows for {} ids", self.shape.rows(), ids.len)
        });
        let out = self.backend.embedding_backward(&self.storage, &ids.storage, ids.len, table_rows, dim);
        self.wrap(out, [table_rows, dim])
    }

    /// LayerNorm over the last dimension; returns the output and the saved statistics.
    pub fn layer_norm(&self, gamma: &Self, beta: &Self, eps: f32) -> (Self, LayerNormOut<B::Storage>) {
        let (rows, dim) = (self.shape.rows(), self.shape.last());
        check("layer_norm", gamma.dims() == [dim] && beta.dims() == [dim], || {
            format!("x {}, gamma {}, beta {}", self.shape, gamma.shape, beta.shape)
        });
        let saved = self.backend.layer_norm(&self.storage, &gamma.storage, &beta.storage, rows, dim, eps);
        (self.wrap(saved.out.clone(), self.shape.clone()), saved)
    }

    /// Backward of [`Tensor::layer_norm`]: `self` is `dout`; returns `(dx, dgamma, dbeta)`.
    pub fn layer_norm_backward(
        &self,
        x: &Self,
        gamma: &Self,
        saved: &LayerNormOut<B::Storage>,
    ) -> (Self, Self, Self) {
        self.layer_norm_backward_with(x, gamma, saved, None)
    }

    /// [`Tensor::layer_norm_backward`] with `dx` added onto `onto` (shaped as `x`), fused
    /// where the backend can.
    pub fn layer_norm_backward_onto(
        &self,
        x: &Self,
        gamma: &Self,
        saved: &LayerNormOut<B::Storage>,
        onto: &Self,
    ) -> (Self, Self, Self) {
        check("layer_norm_backward_onto", onto.shape == x.shape, || {
            format!("onto {} for x {}", onto.shape, x.shape)
        });
        self.layer_norm_backward_with(x, gamma, saved, Some(onto))
    }

    fn layer_norm_backward_with(
        &self,
        x: &Self,
        gamma: &Self,
        saved: &LayerNormOut<B::Storage>,
        onto: Option<&Self>,
    ) -> (Self, Self, Self) {
        let (rows, dim) = (x.shape.rows(), x.shape.last());
        check("layer_norm_backward", self.shape == x.shape, || {
            format!("dout {} for x {}", self.shape, x.shape)
        });
        let onto = onto.map(|o| &o.storage);
        let LayerNormGrads { dx, dgamma, dbeta } = self.backend.layer_norm_backward(
            &self.storage,
            &x.storage,
            &gamma.storage,
            saved,
            rows,
            dim,
            onto,
        );
        (self.wrap(dx, x.shape.clone()), self.wrap(dgamma, [dim]), self.wrap(dbeta, [dim]))
    }

    /// GELU (tanh approximation), elementwise.
    pub fn gelu(&self) -> Self {
        self.wrap(self.backend.gelu(&self.storage, self.numel()), self.shape.clone())
    }

    /// `self` is `dout`; `x` the forward input.
    pub fn gelu_backward(&self, x: &Self) -> Self {
        check("gelu_backward", self.shape == x.shape, || format!("dout {} for x {}", self.shape, x.shape));
        self.wrap(self.backend.gelu_backward(&x.storage, &self.storage, self.numel()), self.shape.clone())
    }

    fn attention_dims(q: &Self, heads: usize) -> AttentionDims {
        check("attention", q.shape.rank() == 3, || {
            format!("q must be [batch, seq, channels], got {}", q.shape)
        });
        let (batch, seq, channels) = (q.dims()[0], q.dims()[1], q.dims()[2]);
        check("attention", heads > 0 && channels % heads == 0, || {
            format!("{channels} channels, {heads} heads")
        });
        AttentionDims { batch, seq, heads, head_dim: channels / heads, dropout: None, cache: None }
    }

    /// Causal multi-head attention with `self` as `q`; returns the output and the saved
    /// softmax probabilities `[batch, heads, seq, seq]`.
    pub fn attention(&self, k: &Self, v: &Self, heads: usize) -> (Self, Self) {
        self.attention_with_dropout(k, v, heads, None)
    }

    /// [`Tensor::attention`] with the probabilities dropped out by `dropout` before they
    /// weight `v` (see [`AttentionDims`]); the saved probabilities are the softmax itself.
    pub fn attention_with_dropout(
        &self,
        k: &Self,
        v: &Self,
        heads: usize,
        dropout: Option<DropoutMask>,
    ) -> (Self, Self) {
        let dims = AttentionDims { dropout, ..Self::attention_dims(self, heads) };
        check("attention", k.shape == self.shape && v.shape == self.shape, || {
            format!("q {}, k {}, v {}", self.shape, k.shape, v.shape)
        });
        let out = self.backend.attention(&self.storage, &k.storage, &v.storage, dims, AttentionKeep::Probs);
        let probs_shape = [dims.batch, dims.heads, dims.seq, dims.seq];
        let probs = out.saved.expect("attention keeping its probabilities returns them");
        (self.wrap(out.out, self.shape.clone()), self.wrap(probs, probs_shape))
    }

    /// Attention of the new positions `self` (`q`, `[rows, channels]`, positions `past..past
    /// + rows`) against the key/value caches `[capacity, channels]` (see
    /// [`AttentionCache`]) → `[rows, channels]`.
    pub fn cached_attention(&self, k_cache: &Self, v_cache: &Self, past: usize, heads: usize) -> Self {
        check("cached_attention", self.shape.rank() == 2 && k_cache.shape.rank() == 2, || {
            format!("q {} and the caches {} must be [rows, channels]", self.shape, k_cache.shape)
        });
        let (rows, channels, capacity) = (self.dims()[0], self.dims()[1], k_cache.dims()[0]);
        check(
            "cached_attention",
            k_cache.shape == v_cache.shape
                && k_cache.dims()[1] == channels
                && heads > 0
                && channels % heads == 0
                && past + rows <= capacity,
            || {
                format!(
                    "q {}, k {}, v {}, past {past}, {heads} heads",
                    self.shape, k_cache.shape, v_cache.shape
                )
            },
        );
        let cache = Some(AttentionCache { past, capacity });
        let dims =
            AttentionDims { batch: 1, seq: rows, heads, head_dim: channels / heads, dropout: None, cache };
        let keep = AttentionKeep::Nothing;
        let out = self.backend.attention(&self.storage, &k_cache.storage, &v_cache.storage, dims, keep);
        self.wrap(out.out, self.shape.clone())
    }

    /// Backward of [`Tensor::attention`]: `self` is `dout`; returns `(dq, dk, dv)`.
    pub fn attention_backward(
        &self,
        q: &Self,
        k: &Self,
        v: &Self,
        probs: &Self,
        heads: usize,
    ) -> (Self, Self, Self) {
        self.attention_backward_with_dropout(q, k, v, probs, heads, None)
    }

    /// Backward of [`Tensor::attention_with_dropout`], with the same `dropout`.
    pub fn attention_backward_with_dropout(
        &self,
        q: &Self,
        k: &Self,
        v: &Self,
        probs: &Self,
        heads: usize,
        dropout: Option<DropoutMask>,
    ) -> (Self, Self, Self) {
        let dims = AttentionDims { dropout, ..Self::attention_dims(q, heads) };
        check("attention_backward", self.shape == q.shape, || {
            format!("dout {} for q {}", self.shape, q.shape)
        });
        let AttentionGrads { dq, dk, dv } = self.backend.attention_backward(
            &self.storage,
            &q.storage,
            &k.storage,
            &v.storage,
            &probs.storage,
            dims,
            AttentionKeep::Probs,
        );
        let s = self.shape.clone();
        (self.wrap(dq, s.clone()), self.wrap(dk, s.clone()), self.wrap(dv, s))
    }

    /// [`Tensor::attention_with_dropout`] for training: the output and what the backend saves
    /// for [`Tensor::attention_backward_saved`] (opaque: the probabilities, or less; see
    /// [`AttentionKeep::Backward`]).
    pub fn attention_for_training(
        &self,
        k: &Self,
        v: &Self,
        heads: usize,
        dropout: Option<DropoutMask>,
    ) -> (Self, B::Storage) {
        let dims = AttentionDims { dropout, ..Self::attention_dims(self, heads) };
        check("attention", k.shape == self.shape && v.shape == self.shape, || {
            format!("q {}, k {}, v {}", self.shape, k.shape, v.shape)
        });
        let AttentionOut { out, saved } =
            self.backend.attention(&self.storage, &k.storage, &v.storage, dims, AttentionKeep::Backward);
        (self.wrap(out, self.shape.clone()), saved.expect("attention keeping state returns it"))
    }

    /// Backward of [`Tensor::attention_for_training`] (same `heads` and `dropout`): `self`
    /// is `dout`; returns `(dq, dk, dv)`.
    pub fn attention_backward_saved(
        &self,
        q: &Self,
        k: &Self,
        v: &Self,
        saved: &B::Storage,
        heads: usize,
        dropout: Option<DropoutMask>,
    ) -> (Self, Self, Self) {
        let dims = AttentionDims { dropout, ..Self::attention_dims(q, heads) };
        check("attention_backward", self.shape == q.shape, || {
            format!("dout {} for q {}", self.shape, q.shape)
        });
        let AttentionGrads { dq, dk, dv } = self.backend.attention_backward(
            &self.storage,
            &q.storage,
            &k.storage,
            &v.storage,
            saved,
            dims,
            AttentionKeep::Backward,
        );
        let s = self.shape.clone();
        (self.wrap(dq, s.clone()), self.wrap(dk, s.clone()), self.wrap(dv, s))
    }

    /// Mean softmax cross-entropy of `self` (logits, `[..., vocab]`) against `targets` → `[1]`.
    pub fn cross_entropy(&self, targets: &Indices<B>) -> Self {
        let (rows, vocab) = (self.shape.rows(), self.shape.last());
        check("cross_entropy", rows == targets.len, || format!("{rows} rows, {} targets", targets.len));
        self.wrap(self.backend.cross_entropy(&self.storage, &targets.storage, rows, vocab, false).loss, [1])
    }

    /// Gradient of [`Tensor::cross_entropy`] with respect to `self` (the logits), scaled by `dloss` `[1]`.
    pub fn cross_entropy_backward(&self, targets: &Indices<B>, dloss: &Self) -> Self {
        let (rows, vocab) = (self.shape.rows(), self.shape.last());
        check("cross_entropy_backward", rows == targets.len && dloss.numel() == 1, || {
            format!("{rows} rows, {} targets, dloss {}", targets.len, dloss.shape)
        });
        let (logits, targets, dloss) = (&self.storage, &targets.storage, &dloss.storage);
        let out = self.backend.cross_entropy_backward(logits, targets, None, dloss, rows, vocab);
        self.wrap(out, self.shape.clone())
    }

    /// [`Tensor::cross_entropy`] for training: the loss and what the backend saves for
    /// [`Tensor::cross_entropy_backward_saved`] (opaque; see [`CrossEntropyOut`]).
    pub fn cross_entropy_for_training(&self, targets: &Indices<B>) -> (Self, Option<B::Storage>) {
        let (rows, vocab) = (self.shape.rows(), self.shape.last());
        check("cross_entropy", rows == targets.len, || format!("{rows} rows, {} targets", targets.len));
        let CrossEntropyOut { loss, saved } =
            self.backend.cross_entropy(&self.storage, &targets.storage, rows, vocab, true);
        (self.wrap(loss, [1]), saved)
    }

    /// Backward of [`Tensor::cross_entropy_for_training`]: `self` is the logits, `saved` what
    /// it returned; the gradient with respect to the logits, scaled by `dloss` `[1]`.
    pub fn cross_entropy_backward_saved(
        &self,
        targets: &Indices<B>,
        saved: Option<&B::Storage>,
        dloss: &Self,
    ) -> Self {
        let (rows, vocab) = (self.shape.rows(), self.shape.last());
        check("cross_entropy_backward", rows == targets.len && dloss.numel() == 1, || {
            format!("{rows} rows, {} targets, dloss {}", targets.len, dloss.shape)
        });
        let out = self.backend.cross_entropy_backward(
            &self.storage,
            &targets.storage,
            saved,
            &dloss.storage,
            rows,
            vocab,
        );
        self.wrap(out, self.shape.clone())
    }
}

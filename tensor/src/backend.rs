use std::fmt::Debug;
use std::future::Future;

use crate::dims::{
    AdamWStep, AttentionDims, AttentionGrads, AttentionOut, AttentionSaved, CachedAttentionDims, CopyRange,
    CrossEntropySaved, LayerNormGrads, LayerNormOut, MatmulDims,
};
use crate::dropout::DropoutMask;
use crate::error::TensorError;

/// The ops a kernel crate provides. Small on purpose: a new backend implements these and
/// nothing else, and every model in this workspace runs on it.
///
/// Contract shared by every method:
/// - Buffers are row-major f32 (`Storage`) or u32 (`Indices`) handles; cloning a handle
///   shares the buffer. Sizes are passed explicitly (llm.c style) so a GPU backend can
///   put them straight into a uniform; callers ([`crate::Tensor`]) check shapes first.
/// - Ops return new buffers, except [`Backend::copy`] and [`Backend::adamw`], which write
///   into buffers the caller passes (so an optimizer can keep flat, reused buffers).
/// - Ops run in the order they are called: a read or op sees every earlier write.
/// - No op waits for the device; only [`Backend::read`] and [`Backend::flush`] do, and they
///   are where a device failure (lost device, out of memory) comes back as an error.
/// - Ids and targets must lie inside their table or vocabulary; callers guarantee it
///   (the byte tokenizer only makes ids below 256). A backend may panic on a bad id.
/// - Results must match the scalar reference (`tinygpt-kernels-cpu`) within the
///   tolerances of the conformance kit (`tinygpt_tensor::conformance`, feature `conformance`).
/// - Determinism: a backend may offer several kernel variants (the CPU backend has the
///   scalar reference and SIMD variants per instruction set). For one variant, results are
///   bit-identical at any thread count — work is split by problem size, never by the
///   number of threads. Different variants agree within the conformance kit's tolerances,
///   not bit for bit (they sum in other orders and may fuse multiply-adds).
pub trait Backend: Clone + Debug + 'static {
    /// A handle to an f32 buffer on the device.
    type Storage: Clone + Debug;
    /// A handle to a u32 buffer on the device (token ids, targets, positions).
    type Indices: Clone + Debug;

    /// A short name for logs and benchmark lines, e.g. `"cpu"`.
    fn name(&self) -> String;

    // ---- memory -------------------------------------------------------------------

    /// The most f32 elements one buffer (one `Storage`) can hold: a GPU backend's largest
    /// storage binding over 4 (every buffer is bound whole), about `isize::MAX / 4` on the
    /// CPU. An optimizer splits its flat per-group buffers into shards no longer than this
    /// ("buffer sharding"), so a model is limited by the device's memory, not by one binding.
    /// No default: a wrapper must pass its inner backend's answer on.
    fn max_tensor_len(&self) -> usize;
    /// A buffer of `len` zeros.
    fn zeros(&self, len: usize) -> Self::Storage;
    /// A buffer holding a copy of `data`.
    fn upload(&self, data: &[f32]) -> Self::Storage;
    /// An index buffer (token ids, targets) holding a copy of `data`.
    fn upload_indices(&self, data: &[u32]) -> Self::Indices;
    /// Copies a buffer back to host memory. On a GPU this waits for queued work, so call
    /// it only where a value is needed (logging, sampling, checkpoints).
    fn read(&self, src: &Self::Storage) -> impl Future<Output = Result<Vec<f32>, TensorError>>;
    /// [`Backend::read`] into `dst`, which is as long as `src`: for a caller that reads a few
    /// values every step (a training loss) into a list it keeps, so the read allocates
    /// nothing where the backend can copy directly. By default, a read and then a copy.
    fn read_into(
        &self,
        src: &Self::Storage,
        dst: &mut [f32],
    ) -> impl Future<Output = Result<(), TensorError>> {
        async move {
            dst.copy_from_slice(&self.read(src).await?);
            Ok(())
        }
    }
    /// Copies `src[src_offset .. src_offset + len]` into `dst[dst_offset .. dst_offset + len]`
    /// bit for bit, in place: the rest of `dst` and all of `src` are left as they were, and
    /// every handle sharing `dst` sees the new values. It is a snapshot, not a view: later
    /// writes to `src` do not reach `dst`. This is how an optimizer gathers per-tensor
    /// gradients into one flat buffer and scatters updated weights back (llm.c's layout),
    /// so that clipping and AdamW are one call per parameter group instead of per tensor.
    ///
    /// `src` and `dst` must be different buffers (WebGPU forbids copying a buffer into
    /// itself), and both ranges must lie inside their buffers; `len` may be 0. A backend
    /// panics, naming the op, on either mistake, before writing anything.
    fn copy(
        &self,
        src: &Self::Storage,
        src_offset: usize,
        dst: &Self::Storage,
        dst_offset: usize,
        len: usize,
    );
    /// Several [`Backend::copy`]s, with the same result as calling them in order, in as
    /// few device operations as the backend can: an optimizer gathers ~100 gradients into
    /// its flat buffer and scatters the updated weights back every step, and on a GPU each
    /// separate copy is a dispatch behind a barrier. No copy may read or write a range that
    /// another copy in `copies` writes (the gather's and the scatter's destinations are
    /// disjoint), so the order within the list does not matter. Each copy's own rules are
    /// [`Backend::copy`]'s.
    fn copy_many(&self, copies: &[CopyRange<'_, Self::Storage>]) {
        for c in copies {
            self.copy(c.src, c.src_offset, c.dst, c.dst_offset, c.len);
        }
    }
    /// Waits until every op called so far has finished on the device, and reports a device
    /// failure (lost device, out of memory) as an error instead of a panic. Callers use it
    /// where they must know the work is done or failed (before timing a step, before saving)
    /// without reading anything back; a training step itself never waits. On a backend that
    /// runs ops as they are called (the CPU one) it is ready at once.
    fn flush(&self) -> impl Future<Output = Result<(), TensorError>>;

    // ---- elementwise and reductions ------------------------------------------------

    /// `a + b`, both `[len]`.
    fn add(&self, a: &Self::Storage, b: &Self::Storage, len: usize) -> Self::Storage;
    /// `alpha * a`, `[len]`.
    fn scale(&self, a: &Self::Storage, alpha: f32, len: usize) -> Self::Storage;
    /// Column sums of `x` `[rows, cols]` → `[cols]` (a bias gradient).
    fn sum_rows(&self, x: &Self::Storage, rows: usize, cols: usize) -> Self::Storage;
    /// `Σ x²` over `[len]` → `[1]` (for the global gradient norm).
    fn sum_squares(&self, x: &Self::Storage, len: usize) -> Self::Storage;

    /// Dropout: `x[i] * mask.factor(i)` over `[len]` (kept values times `mask.scale()`,
    /// dropped ones 0; the rule in [`crate::dropout`]). Its own backward: the gradient is
    /// `dropout(dout)` with the same mask, redrawn rather than stored.
    fn dropout(&self, x: &Self::Storage, mask: &DropoutMask, len: usize) -> Self::Storage;
    /// `residual + dropout(x)` over `[len]` in one pass: dropout on a block's output fused
    /// into the residual add that follows it (its backward: `dout` to `residual`,
    /// `dropout(dout)` to `x`).
    fn dropout_add(
        &self,
        residual: &Self::Storage,
        x: &Self::Storage,
        mask: &DropoutMask,
        len: usize,
    ) -> Self::Storage;

    // ---- dense -----------------------------------------------------------------------

    /// See [`MatmulDims`].
    fn matmul(
        &self,
        a: &Self::Storage,
        b: &Self::Storage,
        bias: Option<&Self::Storage>,
        dims: MatmulDims,
    ) -> Self::Storage;

    /// `op(A) · op(B)` for `A` stored transposed (`dims.trans_a`: `a` is `[k, m]`), and
    /// `a`'s column sums `[m]` (`sum_rows(a, k, m)`): a linear's weight gradient `dYᵀ · X`
    /// and its bias gradient from one pass over `dY`, where a backend fuses them (the
    /// default: `matmul`, then `sum_rows`).
    fn matmul_sum_rows(
        &self,
        a: &Self::Storage,
        b: &Self::Storage,
        dims: MatmulDims,
    ) -> (Self::Storage, Self::Storage) {
        assert!(dims.trans_a, "matmul_sum_rows: A must be stored transposed ([k, m])");
        (self.matmul(a, b, None, dims), self.sum_rows(a, dims.k, dims.m))
    }

    /// `onto + (op(A) · op(B) + bias)` for `onto` `[m, n]`: a product added to a gradient its
    /// input already has (the input gradient of a linear whose input feeds others too), or a
    /// linear's output added to the residual stream, in the product's last pass where a
    /// backend fuses it. The default, `matmul` then `add`, makes the same sums in the same
    /// order ([`matmul_then_add`]).
    fn matmul_onto(
        &self,
        onto: &Self::Storage,
        a: &Self::Storage,
        b: &Self::Storage,
        bias: Option<&Self::Storage>,
        dims: MatmulDims,
    ) -> Self::Storage {
        matmul_then_add(self, onto, a, b, bias, dims)
    }

    /// Rows of `table` `[table_rows, dim]` picked by `ids` `[n]` → `[n, dim]`.
    fn embedding(&self, table: &Self::Storage, ids: &Self::Indices, n: usize, dim: usize) -> Self::Storage;
    /// Scatter-add of `dout` `[n, dim]` into a zero `[table_rows, dim]` at rows `ids`.
    fn embedding_backward(
        &self,
        dout: &Self::Storage,
        ids: &Self::Indices,
        n: usize,
        table_rows: usize,
        dim: usize,
    ) -> Self::Storage;

    // ---- fused layers ----------------------------------------------------------------

    /// LayerNorm of each row of `x` `[rows, dim]` with gain `gamma` and shift `beta` `[dim]`;
    /// variance is the biased (1/dim) one.
    #[allow(clippy::too_many_arguments)]
    fn layer_norm(
        &self,
        x: &Self::Storage,
        gamma: &Self::Storage,
        beta: &Self::Storage,
        rows: usize,
        dim: usize,
        eps: f32,
    ) -> LayerNormOut<Self::Storage>;
    /// LayerNorm's backward: `dx`, `dgamma`, `dbeta` from `dout` and the forward's saved mean and rstd.
    #[allow(clippy::too_many_arguments)]
    fn layer_norm_backward(
        &self,
        dout: &Self::Storage,
        x: &Self::Storage,
        gamma: &Self::Storage,
        saved: &LayerNormOut<Self::Storage>,
        rows: usize,
        dim: usize,
    ) -> LayerNormGrads<Self::Storage>;
    /// [`Backend::layer_norm_backward`] with `dx` added onto `onto` `[rows, dim]`
    /// (`onto + dx`: a residual stream's gradient meeting its LayerNorm branch's), fused
    /// where a backend can. The default, `layer_norm_backward` then `add`, makes the same
    /// sums in the same order.
    #[allow(clippy::too_many_arguments)]
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
        let grads = self.layer_norm_backward(dout, x, gamma, saved, rows, dim);
        LayerNormGrads { dx: self.add(onto, &grads.dx, rows * dim), ..grads }
    }

    /// GELU, tanh form: `0.5 x (1 + tanh(sqrt(2/π) (x + 0.044715 x³)))`.
    fn gelu(&self, x: &Self::Storage, len: usize) -> Self::Storage;
    /// `dout * gelu'(x)`.
    fn gelu_backward(&self, x: &Self::Storage, dout: &Self::Storage, len: usize) -> Self::Storage;

    /// See [`AttentionDims`].
    fn attention(
        &self,
        q: &Self::Storage,
        k: &Self::Storage,
        v: &Self::Storage,
        dims: AttentionDims,
    ) -> AttentionOut<Self::Storage>;
    /// See [`CachedAttentionDims`]: `[rows, channels]` out.
    fn cached_attention(
        &self,
        q: &Self::Storage,
        k_cache: &Self::Storage,
        v_cache: &Self::Storage,
        dims: CachedAttentionDims,
    ) -> Self::Storage;
    /// Attention's backward: `dq`, `dk`, `dv` from `dout` and the forward's saved probabilities.
    fn attention_backward(
        &self,
        dout: &Self::Storage,
        q: &Self::Storage,
        k: &Self::Storage,
        v: &Self::Storage,
        probs: &Self::Storage,
        dims: AttentionDims,
    ) -> AttentionGrads<Self::Storage>;

    /// Attention for training: the output of [`Backend::attention`] and what its backward
    /// needs, in a form of the backend's choosing (see [`AttentionSaved`]); training code
    /// calls this pair so a backend can avoid storing the `[seq, seq]` probabilities. The
    /// default keeps the probabilities of [`Backend::attention`].
    fn attention_for_training(
        &self,
        q: &Self::Storage,
        k: &Self::Storage,
        v: &Self::Storage,
        dims: AttentionDims,
    ) -> AttentionSaved<Self::Storage> {
        let AttentionOut { out, probs } = self.attention(q, k, v, dims);
        AttentionSaved { out, saved: probs }
    }

    /// Gradients of [`Backend::attention_for_training`], given the `saved` it returned
    /// (same `dims`). The default is [`Backend::attention_backward`] on the probabilities.
    fn attention_backward_saved(
        &self,
        dout: &Self::Storage,
        q: &Self::Storage,
        k: &Self::Storage,
        v: &Self::Storage,
        saved: &Self::Storage,
        dims: AttentionDims,
    ) -> AttentionGrads<Self::Storage> {
        self.attention_backward(dout, q, k, v, saved, dims)
    }

    /// Mean over rows of `-log softmax(logits[r])[targets[r]]`; `logits` `[rows, vocab]`,
    /// `targets` `[rows]` → `[1]`.
    fn cross_entropy(
        &self,
        logits: &Self::Storage,
        targets: &Self::Indices,
        rows: usize,
        vocab: usize,
    ) -> Self::Storage;
    /// `dlogits = dloss * (softmax(logits) - onehot(targets)) / rows`; `dloss` is `[1]`.
    fn cross_entropy_backward(
        &self,
        logits: &Self::Storage,
        targets: &Self::Indices,
        dloss: &Self::Storage,
        rows: usize,
        vocab: usize,
    ) -> Self::Storage;

    /// Cross-entropy for training: the loss of [`Backend::cross_entropy`] and what its
    /// backward needs (see [`CrossEntropySaved`]); training code calls this pair so a backend
    /// can find each row's softmax normaliser once instead of in both directions. The
    /// default saves nothing.
    fn cross_entropy_for_training(
        &self,
        logits: &Self::Storage,
        targets: &Self::Indices,
        rows: usize,
        vocab: usize,
    ) -> CrossEntropySaved<Self::Storage> {
        CrossEntropySaved { loss: self.cross_entropy(logits, targets, rows, vocab), saved: None }
    }

    /// [`Backend::cross_entropy_backward`] given the `saved` of
    /// [`Backend::cross_entropy_for_training`] (same logits, targets and sizes). The
    /// default ignores `saved`.
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
        let _ = saved;
        self.cross_entropy_backward(logits, targets, dloss, rows, vocab)
    }

    // ---- optimizer -------------------------------------------------------------------

    /// One AdamW step over `[len]`, in place on `param`, `m` and `v`. `grad_sumsq` `[1]` is
    /// the squared global gradient norm (all parameters), so clipping needs no host sync.
    /// `param`, `grad`, `m` and `v` are four distinct buffers.
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
    );
}

/// [`Backend::matmul_onto`] unfused: `matmul` (with the bias), then `add` onto `onto`. The
/// default, and what a backend that fuses only some cases does for the others.
pub fn matmul_then_add<B: Backend>(
    backend: &B,
    onto: &B::Storage,
    a: &B::Storage,
    b: &B::Storage,
    bias: Option<&B::Storage>,
    dims: MatmulDims,
) -> B::Storage {
    let product = backend.matmul(a, b, bias, dims);
    backend.add(onto, &product, dims.m * dims.n)
}

/// The bounds rule of [`Backend::copy`], written once so every backend refuses the same
/// mistakes with the same words: panics, naming the side, when `src_offset + len` or
/// `dst_offset + len` lies past the end of its buffer (`src_len`, `dst_len` values) or
/// overflows.
pub fn assert_copy_in_bounds(
    src_len: usize,
    src_offset: usize,
    dst_len: usize,
    dst_offset: usize,
    len: usize,
) {
    for (what, offset, held) in [("src", src_offset, src_len), ("dst", dst_offset, dst_len)] {
        let end = offset.checked_add(len);
        assert!(
            end.is_some_and(|end| end <= held),
            "copy: {what} range {offset}..{offset}+{len} lies outside its {held} values"
        );
    }
}

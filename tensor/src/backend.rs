use std::fmt::Debug;
use std::future::Future;

use crate::dims::{
    AdamWStep, AttentionDims, AttentionGrads, AttentionKeep, AttentionOut, CopyRange, CrossEntropyOut,
    LayerNormGrads, LayerNormOut, MatmulDims, MatmulFused, MatmulOut,
};
use crate::dropout::DropoutMask;
use crate::error::TensorError;

/// The ops a kernel crate provides. Small on purpose: a new backend implements these and
/// nothing else, and every model in this workspace runs on it.
///
/// One method per operation, none with a default body. The work fused into an op (a bias,
/// a sum added `onto`, a second output, what to keep for the backward pass) is an optional
/// operand of that op, not another method: a backend with a fused kernel for some operand
/// combination runs it, and composes the others from the helpers in this module
/// ([`matmul_unfused`], [`layer_norm_backward_unfused`]), which make the same sums in the same order as calling the plain ops one after another. An `onto`
/// operand is always the last argument (or a field of the op's descriptor).
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
    fn max_tensor_len(&self) -> usize;
    /// A buffer of `len` zeros.
    fn zeros(&self, len: usize) -> Self::Storage;
    /// A buffer holding a copy of `data`.
    fn upload(&self, data: &[f32]) -> Self::Storage;
    /// An index buffer (token ids, targets) holding a copy of `data`.
    fn upload_indices(&self, data: &[u32]) -> Self::Indices;
    /// Copies a buffer back to host memory, into `dst`, whose contents it replaces (it
    /// ends as long as `src`). On a GPU this waits for queued work, so call it only where
    /// a value is needed (logging, sampling, checkpoints). `dst` is the caller's so that a
    /// read every step (a training loss) allocates nothing where the backend can copy
    /// straight into it (the CPU), while a backend whose read makes a fresh list anyway (a
    /// mapped GPU buffer) moves that list in without a second copy; [`read_vec`] reads
    /// into a new list.
    fn read(&self, src: &Self::Storage, dst: &mut Vec<f32>) -> impl Future<Output = Result<(), TensorError>>;
    /// For each range of `copies`, copies `src[src_offset .. src_offset + len]` into
    /// `dst[dst_offset .. dst_offset + len]` bit for bit, in place: the rest of `dst` and
    /// all of `src` are left as they were, and every handle sharing `dst` sees the new
    /// values. It is a snapshot, not a view: later writes to `src` do not reach `dst`. This
    /// is how an optimizer gathers per-tensor gradients into one flat buffer and scatters
    /// updated weights back (llm.c's layout), so that clipping and AdamW are one call per
    /// parameter group instead of per tensor.
    ///
    /// A list, because that is the optimizer's shape: ~100 ranges gathered and scattered
    /// every step, which a GPU can move in a few dispatches where separate copies would each
    /// be one behind a barrier; a single copy is a list of one
    /// ([`crate::Tensor::copy_into`]). The result is that of copying the ranges one by one:
    /// no range may read or write a range that another in `copies` writes, so their order
    /// does not matter.
    ///
    /// A range's `src` and `dst` must be different buffers (WebGPU forbids copying a buffer
    /// into itself), and both its ranges must lie inside their buffers; `len` may be 0. A
    /// backend panics, naming the op, on either mistake, before writing anything.
    fn copy(&self, copies: &[CopyRange<'_, Self::Storage>]);
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
    /// dropped ones 0; the rule in [`crate::dropout`]), added onto `onto` `[len]` when given
    /// (`onto + dropout(x)`: dropout on a block's output fused into the residual add that
    /// follows it). Its own backward: the gradient is `dropout(dout)` with the same mask,
    /// redrawn rather than stored (and `dout` itself to `onto`).
    fn dropout(
        &self,
        x: &Self::Storage,
        mask: &DropoutMask,
        len: usize,
        onto: Option<&Self::Storage>,
    ) -> Self::Storage;

    // ---- dense -----------------------------------------------------------------------

    /// `op(A) · op(B)` (see [`MatmulDims`]) with the work of `fused` in it: a bias added to
    /// every row, the product added `onto` a buffer, `A`'s column sums as a second output
    /// (see [`MatmulFused`]). [`matmul_unfused`] composes what a backend does not fuse from
    /// the plain product (with or without a bias), which every backend computes itself.
    fn matmul(
        &self,
        a: &Self::Storage,
        b: &Self::Storage,
        dims: MatmulDims,
        fused: MatmulFused<'_, Self::Storage>,
    ) -> MatmulOut<Self::Storage>;

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
    /// LayerNorm's backward: `dx`, `dgamma`, `dbeta` from `dout` and the forward's saved mean
    /// and rstd; with `onto` `[rows, dim]`, `dx` is added onto it (`onto + dx`: a residual
    /// stream's gradient meeting its LayerNorm branch's). [`layer_norm_backward_unfused`]
    /// composes the `onto` case where a backend does not fuse it.
    #[allow(clippy::too_many_arguments)]
    fn layer_norm_backward(
        &self,
        dout: &Self::Storage,
        x: &Self::Storage,
        gamma: &Self::Storage,
        saved: &LayerNormOut<Self::Storage>,
        rows: usize,
        dim: usize,
        onto: Option<&Self::Storage>,
    ) -> LayerNormGrads<Self::Storage>;

    /// GELU, tanh form: `0.5 x (1 + tanh(sqrt(2/π) (x + 0.044715 x³)))`.
    fn gelu(&self, x: &Self::Storage, len: usize) -> Self::Storage;
    /// `dout * gelu'(x)`.
    fn gelu_backward(&self, x: &Self::Storage, dout: &Self::Storage, len: usize) -> Self::Storage;

    /// See [`AttentionDims`]: the output, and what `keep` asks to be kept (see
    /// [`AttentionKeep`]): the softmax probabilities, or whatever this backend's backward
    /// needs (training asks for that, so a backend can avoid storing `[seq, seq]` scores),
    /// or nothing. With [`AttentionDims::cache`], `k` and `v` are a key/value cache and `q`
    /// the new positions (incremental decoding; [`AttentionDims::cached`] checks the call
    /// and gives the sizes), so generation runs the same op as training.
    fn attention(
        &self,
        q: &Self::Storage,
        k: &Self::Storage,
        v: &Self::Storage,
        dims: AttentionDims,
        keep: AttentionKeep,
    ) -> AttentionOut<Self::Storage>;
    /// Attention's backward: `dq`, `dk`, `dv` from `dout` and the `saved` of the forward
    /// [`Backend::attention`] call with the same `dims` and `keep` (which kept something;
    /// no cache).
    #[allow(clippy::too_many_arguments)]
    fn attention_backward(
        &self,
        dout: &Self::Storage,
        q: &Self::Storage,
        k: &Self::Storage,
        v: &Self::Storage,
        saved: &Self::Storage,
        dims: AttentionDims,
        keep: AttentionKeep,
    ) -> AttentionGrads<Self::Storage>;

    /// Mean over rows of `-log softmax(logits[r])[targets[r]]`; `logits` `[rows, vocab]`,
    /// `targets` `[rows]` → `[1]`; with `save`, also what the backward needs, if this
    /// backend keeps anything (see [`CrossEntropyOut`]): training asks, so a backend can
    /// find each row's softmax normaliser once instead of in both directions.
    fn cross_entropy(
        &self,
        logits: &Self::Storage,
        targets: &Self::Indices,
        rows: usize,
        vocab: usize,
        save: bool,
    ) -> CrossEntropyOut<Self::Storage>;
    /// `dlogits = dloss * (softmax(logits) - onehot(targets)) / rows`; `dloss` is `[1]`;
    /// `saved` is [`CrossEntropyOut::saved`] of the forward (same logits, targets and
    /// sizes), or `None`.
    #[allow(clippy::too_many_arguments)]
    fn cross_entropy_backward(
        &self,
        logits: &Self::Storage,
        targets: &Self::Indices,
        saved: Option<&Self::Storage>,
        dloss: &Self::Storage,
        rows: usize,
        vocab: usize,
    ) -> Self::Storage;

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

/// [`Backend::read`] into a new list, for a caller that reads a buffer once.
pub async fn read_vec<B: Backend>(backend: &B, src: &B::Storage) -> Result<Vec<f32>, TensorError> {
    let mut values = Vec::new();
    backend.read(src, &mut values).await?;
    Ok(values)
}

/// [`Backend::matmul`] for a backend without a fused kernel for some of `fused`: the plain
/// product (with the bias, which every backend computes itself), then `add` onto `onto`,
/// then `sum_rows` of `a` (stored `[k, m]`) for the sums. The same sums in the same order
/// as calling those ops one after another.
pub fn matmul_unfused<B: Backend>(
    backend: &B,
    a: &B::Storage,
    b: &B::Storage,
    dims: MatmulDims,
    fused: MatmulFused<'_, B::Storage>,
) -> MatmulOut<B::Storage> {
    let MatmulOut { out, .. } = backend.matmul(a, b, dims, MatmulFused::bias(fused.bias));
    let out = match fused.onto {
        Some(onto) => backend.add(onto, &out, dims.m * dims.n),
        None => out,
    };
    let sums = fused.sum_rows.then(|| {
        assert!(dims.trans_a, "matmul: sum_rows needs A stored transposed ([k, m])");
        backend.sum_rows(a, dims.k, dims.m)
    });
    MatmulOut { out, sums }
}

/// [`Backend::layer_norm_backward`] with `onto` for a backend that does not fuse it: the
/// backward without `onto`, then `add`.
#[allow(clippy::too_many_arguments)]
pub fn layer_norm_backward_unfused<B: Backend>(
    backend: &B,
    dout: &B::Storage,
    x: &B::Storage,
    gamma: &B::Storage,
    saved: &LayerNormOut<B::Storage>,
    rows: usize,
    dim: usize,
    onto: &B::Storage,
) -> LayerNormGrads<B::Storage> {
    let grads = backend.layer_norm_backward(dout, x, gamma, saved, rows, dim, None);
    LayerNormGrads { dx: backend.add(onto, &grads.dx, rows * dim), ..grads }
}

/// The bounds rule of each range of [`Backend::copy`], written once so every backend
/// refuses the same mistakes with the same words: panics, naming the side, when
/// `src_offset + len` or `dst_offset + len` lies past the end of its buffer (`src_len`,
/// `dst_len` values) or overflows.
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

//! Plain-data descriptions of the fused ops' shapes and results. They are what a GPU
//! backend puts in a uniform buffer, so they hold sizes, never data.

use crate::dropout::DropoutMask;

/// One range of [`crate::Backend::copy`]: `src[src_offset..][..len]` into
/// `dst[dst_offset..][..len]`.
#[derive(Debug)]
pub struct CopyRange<'a, S> {
    /// The buffer read.
    pub src: &'a S,
    /// First value read.
    pub src_offset: usize,
    /// The buffer written (another buffer than `src`).
    pub dst: &'a S,
    /// First value written.
    pub dst_offset: usize,
    /// Values copied (may be 0).
    pub len: usize,
}

// (By hand: derived impls would ask `S: Copy`, and a range holds only references.)
impl<S> Clone for CopyRange<'_, S> {
    fn clone(&self) -> Self {
        *self
    }
}
impl<S> Copy for CopyRange<'_, S> {}

impl<'a, S> CopyRange<'a, S> {
    /// `src[src_offset..][..len]` into `dst[dst_offset..][..len]`, in the order the fields
    /// read (a literal names each one; this keeps a one-range call on one line).
    pub fn new(src: &'a S, src_offset: usize, dst: &'a S, dst_offset: usize, len: usize) -> Self {
        CopyRange { src, src_offset, dst, dst_offset, len }
    }
}

/// `C = op(A) · op(B) (+ bias)`, all row-major, where `op(A)` is `[m, k]` and `op(B)` is
/// `[k, n]`. With `trans_a`, `A` is stored `[k, m]`; with `trans_b`, `B` is stored `[n, k]`.
/// `bias`, when given, is `[n]` and added to every row of `C` (`[m, n]`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct MatmulDims {
    /// Rows of the output (and of `a`).
    pub m: usize,
    /// The shared (reduced) dimension.
    pub k: usize,
    /// Columns of the output (and of `b`).
    pub n: usize,
    /// `a` is stored `[k, m]` and read transposed.
    pub trans_a: bool,
    /// `b` is stored `[n, k]` and read transposed.
    pub trans_b: bool,
}

/// Reads `MxNxK` with an optional `:layout` (`nn`, `nt`, `tn`, `tt`: which operand is
/// transposed; default `nn`), the shape syntax of the matmul benchmarks, e.g. `2048x256x1024:nt`.
impl std::str::FromStr for MatmulDims {
    type Err = String;

    fn from_str(shape: &str) -> Result<Self, String> {
        let (sizes, layout) = shape.split_once(':').unwrap_or((shape, "nn"));
        let v: Vec<usize> = sizes
            .split('x')
            .map(|s| s.parse().map_err(|_| format!("bad size in {shape:?}")))
            .collect::<Result<_, _>>()?;
        let [m, n, k] = v[..] else { return Err(format!("{shape:?}: want MxNxK")) };
        let (trans_a, trans_b) = match layout {
            "nn" => (false, false),
            "nt" => (false, true),
            "tn" => (true, false),
            "tt" => (true, true),
            _ => return Err(format!("{shape:?}: layout must be nn, nt, tn or tt")),
        };
        Ok(MatmulDims { m, k, n, trans_a, trans_b })
    }
}

/// The work fused into one [`crate::Backend::matmul`], beside `op(A) · op(B)`:
/// `onto + (op(A) · op(B) + bias)`, and with `sum_rows` also `A`'s column sums (a linear's
/// weight gradient `dYᵀ · X` and its bias gradient from one pass over `dY`). Where a
/// backend fuses it, the extra work happens in the product's last pass.
#[derive(Debug)]
pub struct MatmulFused<'a, S> {
    /// `[n]`, added to every row of the product.
    pub bias: Option<&'a S>,
    /// `[m, n]`, which the product (with its bias) is added onto: a gradient its input
    /// already has, or the residual stream a linear's output joins.
    pub onto: Option<&'a S>,
    /// Also return the column sums `[m]` of `A`, which must be stored transposed
    /// (`trans_a`: `a` is `[k, m]`): `sum_rows(a, k, m)`.
    pub sum_rows: bool,
}

impl<'a, S> MatmulFused<'a, S> {
    /// Nothing fused: the plain product.
    pub fn none() -> Self {
        MatmulFused { bias: None, onto: None, sum_rows: false }
    }

    /// The product plus `bias`, if given.
    pub fn bias(bias: Option<&'a S>) -> Self {
        MatmulFused { bias, ..Self::none() }
    }
}

// (By hand: derived impls would ask `S: Clone`, and the operands are references.)
impl<S> Clone for MatmulFused<'_, S> {
    fn clone(&self) -> Self {
        *self
    }
}
impl<S> Copy for MatmulFused<'_, S> {}

/// What [`crate::Backend::matmul`] returns: the product `[m, n]`, and `A`'s column sums `[m]`
/// when [`MatmulFused::sum_rows`] asked for them.
#[derive(Clone, Debug)]
pub struct MatmulOut<S> {
    /// The product (with its bias, onto `onto`).
    pub out: S,
    /// `A`'s column sums, if asked for.
    pub sums: Option<S>,
}

/// A key/value cache as [`AttentionDims::cache`] (incremental decoding): `k` and `v` are
/// the cache buffers `[capacity, heads * head_dim]` of one sequence, holding positions
/// `0 .. past + seq`, and `q` `[seq, heads * head_dim]` holds the new positions
/// `past .. past + seq`. Row `r` of `q` attends to cache rows `0..=past + r`; rows from
/// `past + seq` on are never read. The math is uncached attention's, so the output rows
/// are those full causal attention over the cached positions gives.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct AttentionCache {
    /// Positions already in the cache before this call's.
    pub past: usize,
    /// Positions the cache buffers hold room for (`past + seq <= capacity`).
    pub capacity: usize,
}

/// A cached [`crate::Backend::attention`]'s sizes in one place, as its kernels read them
/// (see [`AttentionCache`]; [`AttentionDims::cached`] makes them).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct CachedAttentionDims {
    /// New positions in this call.
    pub rows: usize,
    /// Positions already in the cache.
    pub past: usize,
    /// Positions the cache buffers hold room for.
    pub capacity: usize,
    /// Attention heads.
    pub heads: usize,
    /// Channels per head.
    pub head_dim: usize,
}

impl CachedAttentionDims {
    /// `heads * head_dim`, the model width.
    pub fn channels(&self) -> usize {
        self.heads * self.head_dim
    }
}

/// Causal multi-head self-attention over `q`, `k`, `v`, each `[batch, seq, heads * head_dim]`;
/// head `h` owns columns `h*head_dim .. (h+1)*head_dim`. Scores are scaled by
/// `1/sqrt(head_dim)` and position `t` attends to positions `0..=t`.
///
/// With `dropout`, the probabilities are dropped out before they weight `v`:
/// `out_t = Σ_u P[t,u] · mask.factor((b·heads + h)·seq² + t·seq + u) · v_u` (the index is
/// the element's in the softmax `[batch, heads, seq, seq]`); kept probabilities
/// ([`AttentionKeep::Probs`]) stay the softmax itself, and the backward redraws the mask
/// from the same dims.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct AttentionDims {
    /// Sequences in the batch.
    pub batch: usize,
    /// Positions per sequence.
    pub seq: usize,
    /// Attention heads.
    pub heads: usize,
    /// Channels per head.
    pub head_dim: usize,
    /// Dropout on the attention probabilities, if training with it.
    pub dropout: Option<DropoutMask>,
    /// Attend over a key/value cache instead of `k` and `v` of the same positions: `seq` new
    /// positions of one sequence (see [`AttentionCache`]).
    pub cache: Option<AttentionCache>,
}

impl AttentionDims {
    /// `heads * head_dim`, the model width.
    pub fn channels(&self) -> usize {
        self.heads * self.head_dim
    }

    /// The cached call's sizes, when [`AttentionDims::cache`] is set. Panics when the call
    /// asks what a cache cannot give (checked here so every backend refuses the same
    /// mistakes with the same words): a batch of several sequences (a cache holds one),
    /// dropout or kept state (a cached call is inference: nothing trains through it), or
    /// positions past the cache's capacity.
    pub fn cached(&self, keep: AttentionKeep) -> Option<CachedAttentionDims> {
        let cache = self.cache?;
        assert!(
            self.batch == 1 && self.dropout.is_none() && keep == AttentionKeep::Nothing,
            "attention: a cached call is one sequence, without dropout, keeping nothing ({self:?}, {keep:?})"
        );
        assert!(
            cache.past + self.seq <= cache.capacity,
            "attention: {} new positions after {} reach past the cache's {}",
            self.seq,
            cache.past,
            cache.capacity
        );
        let AttentionDims { seq: rows, heads, head_dim, .. } = *self;
        Some(CachedAttentionDims { rows, past: cache.past, capacity: cache.capacity, heads, head_dim })
    }
}

/// What [`crate::Backend::attention`] keeps for the backward pass, and so what
/// [`AttentionOut::saved`] holds.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum AttentionKeep {
    /// The softmax `[batch, heads, seq, seq]`, zero above the diagonal: values a caller may
    /// read (the conformance kit compares them with the reference).
    Probs,
    /// Whatever this backend's backward pass needs, in a form of its choosing: opaque to
    /// callers, handed back unchanged to [`crate::Backend::attention_backward`] of the same
    /// backend. The softmax by default; a flash-style backend keeps each score row's
    /// log-sum-exp `[batch, heads, seq]` instead and recomputes the probabilities a row at
    /// a time in the backward pass. Training asks for this.
    Backward,
    /// Nothing: no backward pass follows (inference, and every cached call), so a backend
    /// need not write what it would keep.
    Nothing,
}

/// Forward result of attention: `out` `[batch, seq, channels]`, and `saved`, what the
/// [`AttentionKeep`] of the call asked for (`None` for [`AttentionKeep::Nothing`]).
#[derive(Clone, Debug)]
pub struct AttentionOut<S> {
    /// The attention output.
    pub out: S,
    /// The softmax probabilities, or the backend's own saved state (see [`AttentionKeep`]).
    pub saved: Option<S>,
}

impl<S> AttentionOut<S> {
    /// What a call that kept something kept: for callers that asked, so that `None` would be
    /// a backend's bug. Panics on `None`.
    pub fn kept(&self) -> &S {
        self.saved.as_ref().expect("attention returned nothing of what it was asked to keep")
    }
}

/// Forward result of [`crate::Backend::cross_entropy`]: the mean `loss` `[1]`, and `saved`,
/// whatever this backend's backward pass needs when the call asked to save, handed back
/// unchanged to [`crate::Backend::cross_entropy_backward`] of the same backend. `None` when
/// not asked, or when the backend keeps nothing (its backward recomputes each row's softmax
/// normaliser from the logits); a fused backend keeps each row's normaliser, so its
/// backward is one `exp` per logit.
#[derive(Clone, Debug)]
pub struct CrossEntropyOut<S> {
    /// The mean loss `[1]`.
    pub loss: S,
    /// What the fused backward needs (e.g. the softmax's row statistics).
    pub saved: Option<S>,
}

/// Gradients of attention with respect to `q`, `k` and `v`.
#[derive(Clone, Debug)]
pub struct AttentionGrads<S> {
    /// Gradient of the queries.
    pub dq: S,
    /// Gradient of the keys.
    pub dk: S,
    /// Gradient of the values.
    pub dv: S,
}

/// Forward result of LayerNorm over rows of length `dim`: `out` `[rows, dim]`, and per row
/// the `mean` and reciprocal standard deviation `rstd = 1/sqrt(var + eps)` (`[rows]` each)
/// that the backward pass reuses.
#[derive(Clone, Debug)]
pub struct LayerNormOut<S> {
    /// The normalised, scaled and shifted rows.
    pub out: S,
    /// Each row's mean, saved for the backward.
    pub mean: S,
    /// Each row's reciprocal standard deviation, saved for the backward.
    pub rstd: S,
}

/// Gradients of LayerNorm: `dx` `[rows, dim]`, `dgamma` and `dbeta` `[dim]`.
#[derive(Clone, Debug)]
pub struct LayerNormGrads<S> {
    /// Gradient of the input.
    pub dx: S,
    /// Gradient of the scale.
    pub dgamma: S,
    /// Gradient of the shift.
    pub dbeta: S,
}

/// One AdamW update's hyper-parameters (decoupled weight decay, Loshchilov & Hutter).
///
/// With `g = grad * clip` where `clip = min(1, max_grad_norm / (sqrt(grad_sumsq) + 1e-6))`
/// (no clipping when `max_grad_norm` is `None`), and `t = step` (1-based):
/// `m = b1*m + (1-b1)*g`, `v = b2*v + (1-b2)*g²`,
/// `p -= lr * (m/(1-b1^t) / (sqrt(v/(1-b2^t)) + eps) + weight_decay * p)`.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct AdamWStep {
    /// This step's learning rate.
    pub lr: f32,
    /// First-moment decay.
    pub beta1: f32,
    /// Second-moment decay.
    pub beta2: f32,
    /// Denominator epsilon.
    pub eps: f32,
    /// Decoupled weight decay (0 for biases and LayerNorm).
    pub weight_decay: f32,
    /// 1-based step number, for bias correction.
    pub step: u32,
    /// Global-norm clipping threshold; `None` disables clipping.
    pub max_grad_norm: Option<f32>,
}

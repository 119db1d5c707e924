//! The fast kernel variants (see `crate::variant`): one generic implementation per op
//! (`gemm.rs`, `gelu.rs`, `attention.rs`, `layernorm.rs`, `cross_entropy.rs`, `sum_rows.rs`), instantiated per instruction set in `x86.rs` and `wasm.rs`
//! behind the matching target features. What an ISA adds is its [`Simd`](simd::Simd)
//! impl, its tile size and a table of entry points, never a copy of a kernel.

// A target without a SIMD variant (wasm32 without simd128; aarch64 until NEON comes)
// compiles the shared kernels but instantiates none of them.
#![cfg_attr(
    not(any(target_arch = "x86_64", all(target_arch = "wasm32", target_feature = "simd128"))),
    allow(dead_code)
)]

mod attention;
mod cached_attention;
mod cross_entropy;
mod gelu;
pub(crate) mod gemm;
pub(crate) mod gemv;
mod layernorm;
mod math;
pub(crate) mod peak;
mod shared_out;
mod simd;
mod sum_rows;
mod transpose;
#[cfg(all(target_arch = "wasm32", target_feature = "simd128"))]
mod wasm;
#[cfg(target_arch = "x86_64")]
mod x86;

use tinygpt_tensor::{AttentionDims, CachedAttentionDims, MatmulDims};

use attention::{HeadBackward, HeadForward};
use cached_attention::CachedHeads;
use shared_out::SharedOut;

use crate::kernels::elementwise::ELEMENTWISE_CHUNK;
use crate::parallel::Parallel;
use crate::KernelVariant;

/// One variant's entry points.
///
/// # Safety
/// Each function needs the variant's instructions: call them only for a variant whose
/// [`KernelVariant::is_supported`] is true (the backend checks it once, when built).
pub(crate) struct FastKernels {
    pub matmul: gemm::Microkernel,
    /// A few rows against a transposed weight (decoding): see `gemv.rs`.
    pub gemv: unsafe fn(&gemv::Columns<'_>),
    pub gelu: unsafe fn(&mut [f32], &[f32]),
    pub gelu_backward: unsafe fn(&mut [f32], &[f32], &[f32]),
    pub attention: unsafe fn(&HeadForward<'_>),
    pub attention_backward: unsafe fn(&HeadBackward<'_>),
    pub cached_attention: unsafe fn(&CachedHeads<'_>),
    pub layer_norm: unsafe fn(LayerNormRows<'_>),
    pub layer_norm_backward: unsafe fn(LayerNormBackwardRows<'_>),
    pub sum_rows: unsafe fn(&mut [f32], &[f32]),
    /// Fills a block's saved normalisers and returns the sum of its losses.
    pub cross_entropy: unsafe fn(cross_entropy::Rows<'_>, &mut [f32]) -> f64,
    /// A block's `dlogits` from its saved normalisers and `dloss / rows`.
    pub cross_entropy_backward: unsafe fn(cross_entropy::Rows<'_>, &mut [f32], &[f32], f32),
    /// f32 lanes of one vector register.
    pub lanes: usize,
    /// The peak probe's loop (`peak.rs`).
    pub multiply_adds: unsafe fn(usize) -> f32,
}

/// A block of rows for [`FastKernels::layer_norm`] (see `layernorm::forward_rows`).
pub(crate) struct LayerNormRows<'a> {
    pub out: &'a mut [f32],
    pub mean: &'a mut [f32],
    pub rstd: &'a mut [f32],
    pub x: &'a [f32],
    pub gamma: &'a [f32],
    pub beta: &'a [f32],
    pub eps: f32,
}

/// A block of rows for [`FastKernels::layer_norm_backward`] (see `layernorm::backward_rows`).
pub(crate) struct LayerNormBackwardRows<'a> {
    pub dx: &'a mut [f32],
    pub partial: &'a mut [f32],
    pub dout: &'a [f32],
    pub x: &'a [f32],
    pub gamma: &'a [f32],
    pub mean: &'a [f32],
    pub rstd: &'a [f32],
    /// Added onto `dx` as it is written (`layer_norm_backward`'s `onto`).
    pub onto: Option<&'a [f32]>,
}

impl LayerNormRows<'_> {
    #[inline(always)]
    pub(crate) fn run(self) {
        layernorm::forward_rows(self.out, self.mean, self.rstd, self.x, self.gamma, self.beta, self.eps)
    }
}

impl LayerNormBackwardRows<'_> {
    /// # Safety
    /// `S`'s instructions are available (see [`simd::Simd`]).
    #[inline(always)]
    pub(crate) unsafe fn run<S: simd::Simd>(self) {
        let Self { dx, partial, dout, x, gamma, mean, rstd, onto } = self;
        layernorm::backward_rows::<S>(dx, partial, dout, x, gamma, mean, rstd, onto)
    }
}

/// The entry points of `variant`, or `None` for the reference (and for a variant this
/// target cannot have).
pub(crate) fn kernels_for(variant: KernelVariant) -> Option<&'static FastKernels> {
    match variant {
        #[cfg(target_arch = "x86_64")]
        KernelVariant::Avx2Fma => Some(&x86::AVX2_FMA),
        #[cfg(target_arch = "x86_64")]
        KernelVariant::Avx512 => Some(&x86::AVX512),
        #[cfg(all(target_arch = "wasm32", target_feature = "simd128"))]
        KernelVariant::Simd128 => Some(&wasm::SIMD128),
        #[cfg(all(target_arch = "wasm32", target_feature = "simd128", target_feature = "relaxed-simd"))]
        KernelVariant::Simd128Relaxed => Some(&wasm::SIMD128_RELAXED),
        _ => None,
    }
}

/// `C = [onto +] op(A)·op(B) [+ bias]`: a few rows against a linear layer's weight (one
/// decoded token) stream the weight as it lies (`gemv.rs`); everything else goes through
/// packed panels (`gemm.rs`), which add `onto` as they store C. Which one is decided by the
/// shape alone.
#[allow(clippy::too_many_arguments)]
pub(crate) fn matmul(
    kernels: &FastKernels,
    par: &Parallel,
    c: &mut [f32],
    a: &[f32],
    b: &[f32],
    bias: Option<&[f32]>,
    onto: Option<&[f32]>,
    dims: MatmulDims,
) {
    if gemv::applies(dims) {
        gemv::matmul(kernels.gemv, par, c, a, b, bias, dims);
        if let Some(onto) = onto {
            // A few rows: the separate pass costs nothing worth fusing.
            c.iter_mut().zip(onto).for_each(|(c, &o)| *c += o);
        }
    } else {
        gemm::matmul(&kernels.matmul, par, c, a, b, bias, onto, dims)
    }
}

/// GELU in the same fixed-size chunks as the reference's, so the split is by size alone.
pub(crate) fn gelu_forward(kernels: &FastKernels, par: &Parallel, out: &mut [f32], x: &[f32]) {
    par.chunks_mut(out, ELEMENTWISE_CHUNK, |i, out| {
        let x = &x[i * ELEMENTWISE_CHUNK..][..out.len()];
        // SAFETY: `kernels` is a supported variant's (see `FastKernels`).
        unsafe { (kernels.gelu)(out, x) }
    });
}

pub(crate) fn gelu_backward(kernels: &FastKernels, par: &Parallel, dx: &mut [f32], x: &[f32], dout: &[f32]) {
    par.chunks_mut(dx, ELEMENTWISE_CHUNK, |i, dx| {
        let start = i * ELEMENTWISE_CHUNK;
        let (x, dout) = (&x[start..start + dx.len()], &dout[start..start + dx.len()]);
        // SAFETY: as in `gelu_forward`.
        unsafe { (kernels.gelu_backward)(dx, x, dout) }
    });
}

/// Flash-style attention (see `attention.rs`): `out` `[B, T, C]` and the log-sum-exp of
/// every score row, `lse` `[B, H, T]`; one parallel piece per (batch, head) pair.
#[allow(clippy::too_many_arguments)]
pub(crate) fn attention_forward(
    kernels: &FastKernels,
    par: &Parallel,
    out: &mut [f32],
    lse: &mut [f32],
    q: &[f32],
    k: &[f32],
    v: &[f32],
    dims: AttentionDims,
) {
    let len = dims.batch * dims.seq * dims.channels();
    assert!(out.len() == len && q.len() == len && k.len() == len && v.len() == len);
    assert_eq!(lse.len(), dims.batch * dims.heads * dims.seq, "attention: lse length");
    let (out, lse) = (SharedOut(out.as_mut_ptr()), SharedOut(lse.as_mut_ptr()));
    par.map(dims.batch * dims.heads, |i| {
        let bh = head_of_item(i, dims);
        // SAFETY: pair `bh` writes only its head's columns of `out` and its `seq` values of
        // `lse` (both sized as asserted); `kernels` is a supported variant's.
        unsafe {
            let lse = lse.offset(bh * dims.seq);
            (kernels.attention)(&HeadForward { q, k, v, dims, bh, out, lse })
        }
    });
}

/// The (batch, head) pair `b · heads + h` that parallel item `i` computes: batch-major
/// order, so items that run at the same time are usually in different batch rows and do not
/// write neighbouring columns of the same rows of `out`, `dq`, `dk` and `dv` (cache lines
/// two threads would share).
fn head_of_item(i: usize, dims: AttentionDims) -> usize {
    (i % dims.batch) * dims.heads + i / dims.batch
}

/// Gradients of [`attention_forward`] from its saved `lse`, into `dq`, `dk`, `dv`
/// (`[B, T, C]` each).
#[allow(clippy::too_many_arguments)]
pub(crate) fn attention_backward(
    kernels: &FastKernels,
    par: &Parallel,
    [dq, dk, dv]: [&mut [f32]; 3],
    dout: &[f32],
    q: &[f32],
    k: &[f32],
    v: &[f32],
    lse: &[f32],
    dims: AttentionDims,
) {
    let len = dims.batch * dims.seq * dims.channels();
    for buf in [&dq[..], &dk[..], &dv[..], dout, q, k, v] {
        assert_eq!(buf.len(), len, "attention_backward: buffer length");
    }
    assert_eq!(lse.len(), dims.batch * dims.heads * dims.seq, "attention_backward: lse length");
    let [dq, dk, dv] = [dq, dk, dv].map(|b| SharedOut(b.as_mut_ptr()));
    par.map(dims.batch * dims.heads, |i| {
        let bh = head_of_item(i, dims);
        let lse = &lse[bh * dims.seq..][..dims.seq];
        let job = HeadBackward { dout, q, k, v, lse, dims, bh, dq, dk, dv };
        // SAFETY: as in `attention_forward`: pair `bh` writes only its head's columns.
        unsafe { (kernels.attention_backward)(&job) }
    });
}

/// Attention of `dims.rows` new positions against the cache (see `cached_attention.rs`):
/// `out` `[rows, C]`; one parallel piece per run of heads worth about
/// `cached_attention::PIECE_WORK` multiply-adds.
pub(crate) fn cached_attention(
    kernels: &FastKernels,
    par: &Parallel,
    out: &mut [f32],
    q: &[f32],
    k: &[f32],
    v: &[f32],
    dims: CachedAttentionDims,
) {
    let c = dims.channels();
    assert!(dims.past + dims.rows <= dims.capacity, "cached_attention: {dims:?} reaches past the cache");
    assert!(out.len() == dims.rows * c && q.len() == dims.rows * c, "cached_attention: q or out length");
    assert!(k.len() == dims.capacity * c && v.len() == dims.capacity * c, "cached_attention: cache length");
    // Multiply-adds per head: two per key and channel for every new row.
    let per_head = 2 * dims.rows * (dims.past + dims.rows) * dims.head_dim;
    let heads_per_piece = (cached_attention::PIECE_WORK / per_head.max(1)).clamp(1, dims.heads.max(1));
    let out = SharedOut(out.as_mut_ptr());
    par.map(dims.heads.div_ceil(heads_per_piece), |piece| {
        let heads = piece * heads_per_piece..((piece + 1) * heads_per_piece).min(dims.heads);
        // SAFETY: piece `piece` writes only its heads' columns of `out` (`[rows, C]`, as
        // asserted); `kernels` is a supported variant's.
        unsafe { (kernels.cached_attention)(&CachedHeads { q, k, v, dims, heads, out }) }
    });
}

/// LayerNorm forward over `mean.len()` rows of `gamma.len()` values, in blocks of
/// `layernorm::ROWS_PER_PIECE` rows.
#[allow(clippy::too_many_arguments)]
pub(crate) fn layer_norm_forward(
    kernels: &FastKernels,
    par: &Parallel,
    out: &mut [f32],
    mean: &mut [f32],
    rstd: &mut [f32],
    x: &[f32],
    gamma: &[f32],
    beta: &[f32],
    eps: f32,
) {
    let (rows, dim) = (mean.len(), gamma.len());
    assert!(out.len() == rows * dim && x.len() == rows * dim && rstd.len() == rows && beta.len() == dim);
    if out.is_empty() {
        return;
    }
    let block = layernorm::ROWS_PER_PIECE;
    let (mean, rstd) = (SharedOut(mean.as_mut_ptr()), SharedOut(rstd.as_mut_ptr()));
    par.chunks_mut(out, block * dim, |i, out| {
        let n = out.len() / dim;
        let x = &x[i * block * dim..][..out.len()];
        // SAFETY: block `i` writes only its own `n` rows' statistics (inside `[rows]`, as
        // asserted); `kernels` is a supported variant's.
        unsafe {
            let (mean, rstd) = (mean.slice(i * block, n), rstd.slice(i * block, n));
            (kernels.layer_norm)(LayerNormRows { out, mean, rstd, x, gamma, beta, eps })
        }
    });
}

/// LayerNorm backward: `dx` (or `onto + dx`), and `dgamma`/`dbeta` as the sum, in block
/// order, of each row block's partials (`partials` is scratch of [`layer_norm_partials_len`]
/// values).
#[allow(clippy::too_many_arguments)]
pub(crate) fn layer_norm_backward(
    kernels: &FastKernels,
    par: &Parallel,
    [dx, dgamma, dbeta, partials]: [&mut [f32]; 4],
    dout: &[f32],
    x: &[f32],
    gamma: &[f32],
    mean: &[f32],
    rstd: &[f32],
    onto: Option<&[f32]>,
) {
    let (rows, dim) = (mean.len(), gamma.len());
    assert!(dx.len() == rows * dim && dout.len() == rows * dim && x.len() == rows * dim);
    assert!(onto.is_none_or(|onto| onto.len() == rows * dim));
    assert!(rstd.len() == rows && dgamma.len() == dim && dbeta.len() == dim);
    assert_eq!(partials.len(), layer_norm_partials_len(rows, dim));
    dgamma.fill(0.0);
    dbeta.fill(0.0);
    if dx.is_empty() {
        return;
    }
    let block = layernorm::ROWS_PER_PIECE;
    let dx = SharedOut(dx.as_mut_ptr());
    par.chunks_mut(partials, 2 * dim, |i, partial| {
        let (r0, n) = (i * block, block.min(rows - i * block));
        let (dout, x) = (&dout[r0 * dim..][..n * dim], &x[r0 * dim..][..n * dim]);
        let (mean, rstd) = (&mean[r0..][..n], &rstd[r0..][..n]);
        let onto = onto.map(|onto| &onto[r0 * dim..][..n * dim]);
        // SAFETY: block `i` writes only its own rows of `dx` (`[rows, dim]`, as asserted).
        unsafe {
            let dx = dx.slice(r0 * dim, n * dim);
            let rows = LayerNormBackwardRows { dx, partial, dout, x, gamma, mean, rstd, onto };
            (kernels.layer_norm_backward)(rows)
        }
    });
    for partial in partials.chunks_exact(2 * dim) {
        let (dg, db) = partial.split_at(dim);
        dgamma.iter_mut().zip(dg).for_each(|(o, &p)| *o += p);
        dbeta.iter_mut().zip(db).for_each(|(o, &p)| *o += p);
    }
}

/// Scratch values [`layer_norm_backward`] needs for `rows` rows of `dim`.
pub(crate) fn layer_norm_partials_len(rows: usize, dim: usize) -> usize {
    rows.div_ceil(layernorm::ROWS_PER_PIECE) * 2 * dim
}

/// Column sums of `x` `[rows, out.len()]` into `out`, through per-block partials
/// (`partials`: [`sum_rows_partials_len`] values of scratch).
pub(crate) fn sum_rows(
    kernels: &FastKernels,
    par: &Parallel,
    out: &mut [f32],
    partials: &mut [f32],
    x: &[f32],
) {
    let cols = out.len();
    out.fill(0.0);
    if cols == 0 || x.is_empty() {
        return;
    }
    let rows = x.len() / cols;
    assert_eq!(partials.len(), sum_rows_partials_len(rows, cols));
    let block = sum_rows::ROWS_PER_PIECE;
    par.chunks_mut(partials, cols, |i, partial| {
        let x = &x[i * block * cols..][..block.min(rows - i * block) * cols];
        // SAFETY: `kernels` is a supported variant's.
        unsafe { (kernels.sum_rows)(partial, x) }
    });
    for partial in partials.chunks_exact(cols) {
        out.iter_mut().zip(partial).for_each(|(o, &p)| *o += p);
    }
}

/// Scratch values [`sum_rows`] needs for `rows` rows of `cols`.
pub(crate) fn sum_rows_partials_len(rows: usize, cols: usize) -> usize {
    rows.div_ceil(sum_rows::ROWS_PER_PIECE) * cols
}

/// The row blocks [`cross_entropy`] sums separately, for `rows` rows.
pub(crate) fn cross_entropy_blocks(rows: usize) -> usize {
    rows.div_ceil(cross_entropy::ROWS_PER_PIECE)
}

/// Mean softmax cross-entropy of `logits` `[rows, vocab]` against `targets` `[rows]`, filling
/// `saved` `[rows, 2]` for [`cross_entropy_backward`]. The blocks' loss sums (in `sums`,
/// [`cross_entropy_blocks`] long, the caller's scratch) are added in block order, so the
/// split is by size alone.
pub(crate) fn cross_entropy(
    kernels: &FastKernels,
    par: &Parallel,
    saved: &mut [f32],
    sums: &mut [f64],
    logits: &[f32],
    targets: &[u32],
    vocab: usize,
) -> f32 {
    let rows = targets.len();
    assert!(saved.len() == 2 * rows && logits.len() == rows * vocab);
    let block = cross_entropy::ROWS_PER_PIECE;
    par.map_chunks_mut_into(saved, 2 * block, sums, |i, saved| {
        let (r0, n) = (i * block, saved.len() / 2);
        let rows = cross_entropy::Rows {
            logits: &logits[r0 * vocab..][..n * vocab],
            targets: &targets[r0..][..n],
            vocab,
        };
        // SAFETY: `kernels` is a supported variant's.
        unsafe { (kernels.cross_entropy)(rows, saved) }
    });
    (sums.iter().sum::<f64>() / rows as f64) as f32
}

/// `dlogits = dloss · (softmax(logits) - onehot(targets)) / rows` from the `saved` of
/// [`cross_entropy`].
#[allow(clippy::too_many_arguments)]
pub(crate) fn cross_entropy_backward(
    kernels: &FastKernels,
    par: &Parallel,
    dlogits: &mut [f32],
    logits: &[f32],
    targets: &[u32],
    saved: &[f32],
    dloss: f32,
    vocab: usize,
) {
    let rows = targets.len();
    assert!(saved.len() == 2 * rows && logits.len() == rows * vocab && dlogits.len() == rows * vocab);
    let scale = dloss / rows as f32;
    let block = cross_entropy::ROWS_PER_PIECE;
    par.chunks_mut(dlogits, (block * vocab).max(1), |i, dlogits| {
        let r0 = i * block;
        let n = block.min(rows - r0);
        let rows = cross_entropy::Rows {
            logits: &logits[r0 * vocab..][..n * vocab],
            targets: &targets[r0..][..n],
            vocab,
        };
        // SAFETY: `kernels` is a supported variant's.
        unsafe { (kernels.cross_entropy_backward)(rows, dlogits, &saved[2 * r0..][..2 * n], scale) }
    });
}

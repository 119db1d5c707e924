//! The fast kernel variants (see `crate::variant`): one generic implementation per op
//! (`gemm.rs`, `gelu.rs`), instantiated per instruction set in `x86.rs` and `wasm.rs`
//! behind the matching target features. What an ISA adds is its [`Simd`](simd::Simd)
//! impl, its tile size and a table of entry points, never a copy of a kernel.

// A target without a SIMD variant (wasm32 without simd128; aarch64 until NEON comes)
// compiles the shared kernels but instantiates none of them.
#![cfg_attr(
    not(any(target_arch = "x86_64", all(target_arch = "wasm32", target_feature = "simd128"))),
    allow(dead_code)
)]

mod attention;
mod gelu;
pub(crate) mod gemm;
mod math;
mod simd;
#[cfg(all(target_arch = "wasm32", target_feature = "simd128"))]
mod wasm;
#[cfg(target_arch = "x86_64")]
mod x86;

use tinygpt_tensor::AttentionDims;

use attention::{HeadBackward, HeadForward, SharedOut};

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
    pub gelu: unsafe fn(&mut [f32], &[f32]),
    pub gelu_backward: unsafe fn(&mut [f32], &[f32], &[f32]),
    pub attention: unsafe fn(&HeadForward<'_>),
    pub attention_backward: unsafe fn(&HeadBackward<'_>),
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
        _ => None,
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
    par.map(dims.batch * dims.heads, |bh| {
        // SAFETY: pair `bh` writes only its head's columns of `out` and its `seq` values of
        // `lse` (both sized as asserted); `kernels` is a supported variant's.
        unsafe {
            let lse = lse.offset(bh * dims.seq);
            (kernels.attention)(&HeadForward { q, k, v, dims, bh, out, lse })
        }
    });
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
    par.map(dims.batch * dims.heads, |bh| {
        let lse = &lse[bh * dims.seq..][..dims.seq];
        let job = HeadBackward { dout, q, k, v, lse, dims, bh, dq, dk, dv };
        // SAFETY: as in `attention_forward`: pair `bh` writes only its head's columns.
        unsafe { (kernels.attention_backward)(&job) }
    });
}

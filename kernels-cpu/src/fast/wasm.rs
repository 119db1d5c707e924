//! wasm32 `simd128` variant. WebAssembly has no run-time feature probe: this file is
//! compiled only into a build made with `-C target-feature=+simd128` (the page's SIMD
//! build), where every function may use the instructions.

use core::arch::wasm32::*;

use crate::fast::attention::{self, HeadBackward, HeadForward};
use crate::fast::cached_attention::{self, CachedHeads};
use crate::fast::cross_entropy;
use crate::fast::gemm::{self, Microkernel, Piece};
use crate::fast::gemv::{self, Columns};
use crate::fast::simd::Simd;
use crate::fast::{gelu, peak, sum_rows, FastKernels, LayerNormBackwardRows, LayerNormRows};

#[derive(Clone, Copy)]
pub(crate) struct Simd128;

// SAFETY: the whole build has simd128 enabled (this module's cfg).
unsafe impl Simd for Simd128 {
    const LANES: usize = 4;
    type V = v128;

    #[inline(always)]
    unsafe fn zero() -> v128 {
        f32x4_splat(0.0)
    }
    #[inline(always)]
    unsafe fn splat(x: f32) -> v128 {
        f32x4_splat(x)
    }
    #[inline(always)]
    unsafe fn load(p: *const f32) -> v128 {
        v128_load(p as *const v128)
    }
    #[inline(always)]
    unsafe fn store(p: *mut f32, v: v128) {
        v128_store(p as *mut v128, v)
    }
    /// simd128 has no fused multiply-add (relaxed-SIMD's is not probed yet): two roundings.
    #[inline(always)]
    unsafe fn mul_add(a: v128, b: v128, c: v128) -> v128 {
        f32x4_add(f32x4_mul(a, b), c)
    }
    #[inline(always)]
    fn fma(a: f32, b: f32, c: f32) -> f32 {
        a * b + c
    }
}

/// 4 × 8: the tile that ran at 38–41 GFLOP/s per core in Chromium (issue 9).
unsafe fn simd128_piece(job: &Piece<'_>) {
    gemm::piece::<Simd128, 4, 2>(job)
}

/// 2 weight rows × up to 4 rows of A: 8 accumulators, as on AVX2.
unsafe fn simd128_gemv(job: &Columns<'_>) {
    gemv::columns::<Simd128, 2>(job)
}

unsafe fn simd128_gelu(out: &mut [f32], x: &[f32]) {
    gelu::forward::<Simd128>(out, x)
}

unsafe fn simd128_gelu_backward(dx: &mut [f32], x: &[f32], dout: &[f32]) {
    gelu::backward::<Simd128>(dx, x, dout)
}

/// 4 query rows × 8 columns: 8 accumulators, as the matmul tile.
unsafe fn simd128_attention(job: &HeadForward<'_>) {
    attention::forward_head::<Simd128, 4, 2>(job)
}

unsafe fn simd128_attention_backward(job: &HeadBackward<'_>) {
    attention::backward_head::<Simd128, 4, 2>(job)
}

unsafe fn simd128_cached_attention(job: &CachedHeads<'_>) {
    cached_attention::heads::<Simd128>(job)
}

unsafe fn simd128_layer_norm(rows: LayerNormRows<'_>) {
    rows.run()
}

unsafe fn simd128_layer_norm_backward(rows: LayerNormBackwardRows<'_>) {
    rows.run()
}

unsafe fn simd128_multiply_adds(iters: usize) -> f32 {
    peak::multiply_adds::<Simd128>(iters)
}

unsafe fn simd128_sum_rows(partial: &mut [f32], x: &[f32]) {
    sum_rows::block_sums(partial, x)
}

unsafe fn simd128_cross_entropy(rows: cross_entropy::Rows<'_>, saved: &mut [f32]) -> f64 {
    cross_entropy::forward_rows::<Simd128>(rows, saved)
}

unsafe fn simd128_cross_entropy_backward(
    rows: cross_entropy::Rows<'_>,
    d: &mut [f32],
    saved: &[f32],
    scale: f32,
) {
    cross_entropy::backward_rows::<Simd128>(rows, d, saved, scale)
}

pub(crate) static SIMD128: FastKernels = FastKernels {
    matmul: Microkernel { mr: 4, nr: 8, piece: simd128_piece },
    gemv: simd128_gemv,
    gelu: simd128_gelu,
    gelu_backward: simd128_gelu_backward,
    attention: simd128_attention,
    attention_backward: simd128_attention_backward,
    cached_attention: simd128_cached_attention,
    layer_norm: simd128_layer_norm,
    layer_norm_backward: simd128_layer_norm_backward,
    sum_rows: simd128_sum_rows,
    cross_entropy: simd128_cross_entropy,
    cross_entropy_backward: simd128_cross_entropy_backward,
    lanes: 4,
    multiply_adds: simd128_multiply_adds,
};

//! wasm32 variants: `simd128`, and `simd128-relaxed` where the build also enables
//! relaxed SIMD. WebAssembly has no run-time feature probe: this file is compiled only into
//! a build made with `-C target-feature=+simd128` (the page's SIMD builds), where every
//! function may use the instructions; the relaxed variant exists only in a build made with
//! `+relaxed-simd` too (the page loads such a build after www/simd.js's probe). The two
//! differ in one instruction, the vector multiply-add, so every entry point is generic over
//! the [`Simd`] type and each variant's table instantiates them.

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
    /// simd128 has no fused multiply-add: two roundings.
    #[inline(always)]
    unsafe fn mul_add(a: v128, b: v128, c: v128) -> v128 {
        f32x4_add(f32x4_mul(a, b), c)
    }
    #[inline(always)]
    unsafe fn add(a: v128, b: v128) -> v128 {
        f32x4_add(a, b)
    }
    #[inline(always)]
    unsafe fn sub(a: v128, b: v128) -> v128 {
        f32x4_sub(a, b)
    }
    #[inline(always)]
    unsafe fn mul(a: v128, b: v128) -> v128 {
        f32x4_mul(a, b)
    }
    /// `pmax(b, a)` is `b < a ? a : b`.
    #[inline(always)]
    unsafe fn max(a: v128, b: v128) -> v128 {
        f32x4_pmax(b, a)
    }
    #[inline(always)]
    fn fma(a: f32, b: f32, c: f32) -> f32 {
        a * b + c
    }
}

/// simd128 with relaxed SIMD's `f32x4.relaxed_madd`: one fused instruction where the
/// machine has FMA (every x86-64 with AVX2, every aarch64), a multiply and an add where it
/// has not. Which of the two is the engine's choice, fixed for the machine, so a run is
/// still identical at any thread count on one machine; across machines it may differ in
/// the last bits, as the variants do.
#[cfg(target_feature = "relaxed-simd")]
#[derive(Clone, Copy)]
pub(crate) struct Simd128Relaxed;

// SAFETY: the whole build has simd128 and relaxed-simd enabled (the cfgs).
#[cfg(target_feature = "relaxed-simd")]
unsafe impl Simd for Simd128Relaxed {
    const LANES: usize = 4;
    type V = v128;

    #[inline(always)]
    unsafe fn zero() -> v128 {
        Simd128::zero()
    }
    #[inline(always)]
    unsafe fn splat(x: f32) -> v128 {
        Simd128::splat(x)
    }
    #[inline(always)]
    unsafe fn load(p: *const f32) -> v128 {
        Simd128::load(p)
    }
    #[inline(always)]
    unsafe fn store(p: *mut f32, v: v128) {
        Simd128::store(p, v)
    }
    #[inline(always)]
    unsafe fn mul_add(a: v128, b: v128, c: v128) -> v128 {
        f32x4_relaxed_madd(a, b, c)
    }
    #[inline(always)]
    unsafe fn add(a: v128, b: v128) -> v128 {
        Simd128::add(a, b)
    }
    #[inline(always)]
    unsafe fn sub(a: v128, b: v128) -> v128 {
        Simd128::sub(a, b)
    }
    #[inline(always)]
    unsafe fn mul(a: v128, b: v128) -> v128 {
        Simd128::mul(a, b)
    }
    #[inline(always)]
    unsafe fn max(a: v128, b: v128) -> v128 {
        Simd128::max(a, b)
    }
    /// The scalar loops the compiler vectorises keep two roundings: relaxed SIMD has no
    /// scalar multiply-add, and its vector one would not be what the compiler emits.
    #[inline(always)]
    fn fma(a: f32, b: f32, c: f32) -> f32 {
        a * b + c
    }
}

/// 4 × 8: the tile that ran at 38–41 GFLOP/s per core in Chromium (44–50 with relaxed
/// SIMD's multiply-add; issue 9).
unsafe fn simd128_piece<S: Simd>(job: &Piece<'_>) {
    gemm::piece::<S, 4, 2>(job)
}

/// 2 weight rows × up to 4 rows of A: 8 accumulators, as on AVX2.
unsafe fn simd128_gemv<S: Simd>(job: &Columns<'_>) {
    gemv::columns::<S, 2>(job)
}

unsafe fn simd128_gelu<S: Simd>(out: &mut [f32], x: &[f32]) {
    gelu::forward::<S>(out, x)
}

unsafe fn simd128_gelu_backward<S: Simd>(dx: &mut [f32], x: &[f32], dout: &[f32]) {
    gelu::backward::<S>(dx, x, dout)
}

/// 4 query rows × 8 columns: 8 accumulators, as the matmul tile.
unsafe fn simd128_attention<S: Simd>(job: &HeadForward<'_>) {
    attention::forward_head::<S, 4, 2>(job)
}

unsafe fn simd128_attention_backward<S: Simd>(job: &HeadBackward<'_>) {
    attention::backward_head::<S, 4, 2>(job)
}

unsafe fn simd128_cached_attention<S: Simd>(job: &CachedHeads<'_>) {
    cached_attention::heads::<S>(job)
}

unsafe fn simd128_layer_norm(rows: LayerNormRows<'_>) {
    rows.run()
}

unsafe fn simd128_layer_norm_backward<S: Simd>(rows: LayerNormBackwardRows<'_>) {
    rows.run::<S>()
}

unsafe fn simd128_multiply_adds<S: Simd>(iters: usize) -> f32 {
    peak::multiply_adds::<S>(iters)
}

unsafe fn simd128_sum_rows(partial: &mut [f32], x: &[f32]) {
    sum_rows::block_sums(partial, x)
}

unsafe fn simd128_cross_entropy<S: Simd>(rows: cross_entropy::Rows<'_>, saved: &mut [f32]) -> f64 {
    cross_entropy::forward_rows::<S>(rows, saved)
}

unsafe fn simd128_cross_entropy_backward<S: Simd>(
    rows: cross_entropy::Rows<'_>,
    d: &mut [f32],
    saved: &[f32],
    scale: f32,
) {
    cross_entropy::backward_rows::<S>(rows, d, saved, scale)
}

/// The table of one wasm variant: every entry point instantiated for `S`.
const fn kernels<S: Simd>() -> FastKernels {
    FastKernels {
        matmul: Microkernel { mr: 4, nr: 8, piece: simd128_piece::<S> },
        gemv: simd128_gemv::<S>,
        gelu: simd128_gelu::<S>,
        gelu_backward: simd128_gelu_backward::<S>,
        attention: simd128_attention::<S>,
        attention_backward: simd128_attention_backward::<S>,
        cached_attention: simd128_cached_attention::<S>,
        layer_norm: simd128_layer_norm,
        layer_norm_backward: simd128_layer_norm_backward::<S>,
        sum_rows: simd128_sum_rows,
        cross_entropy: simd128_cross_entropy::<S>,
        cross_entropy_backward: simd128_cross_entropy_backward::<S>,
        lanes: 4,
        multiply_adds: simd128_multiply_adds::<S>,
    }
}

pub(crate) static SIMD128: FastKernels = kernels::<Simd128>();

#[cfg(target_feature = "relaxed-simd")]
pub(crate) static SIMD128_RELAXED: FastKernels = kernels::<Simd128Relaxed>();

//! x86-64 variants: AVX2+FMA and AVX-512F. The intrinsics wrappers implement [`Simd`]; the
//! `#[target_feature]` functions below are the only places the shared generic kernels are
//! instantiated with those instructions enabled, so the binary itself needs no
//! `target-cpu` flag and runs on any x86-64.

use std::arch::x86_64::*;

use crate::fast::attention::{self, HeadBackward, HeadForward};
use crate::fast::cached_attention::{self, CachedHeads};
use crate::fast::cross_entropy;
use crate::fast::gemm::{self, Microkernel, Piece};
use crate::fast::gemv::{self, Columns};
use crate::fast::simd::Simd;
use crate::fast::{gelu, peak, sum_rows, FastKernels, LayerNormBackwardRows, LayerNormRows};

/// Implements [`Simd`] for `$isa` over the register `$v` of `$lanes` lanes: every method is
/// the one intrinsic of that width (`$zero`, `$splat`, ...), which the two x86 variants name
/// alike but for their prefix. (`maxps` returns its second operand unless the first is
/// greater, as `Simd::max` asks.)
macro_rules! x86_simd {
    ($isa:ident, $v:ty, $lanes:expr, $zero:ident, $splat:ident, $load:ident, $store:ident,
     $fmadd:ident, $add:ident, $sub:ident, $mul:ident, $max:ident) => {
        #[derive(Clone, Copy)]
        pub(crate) struct $isa;

        // SAFETY: every method is one instruction of the variant's width; used only under
        // that variant's `#[target_feature]` entry points below.
        unsafe impl Simd for $isa {
            const LANES: usize = $lanes;
            type V = $v;

            #[inline(always)]
            unsafe fn zero() -> $v {
                $zero()
            }
            #[inline(always)]
            unsafe fn splat(x: f32) -> $v {
                $splat(x)
            }
            #[inline(always)]
            unsafe fn load(p: *const f32) -> $v {
                $load(p)
            }
            #[inline(always)]
            unsafe fn store(p: *mut f32, v: $v) {
                $store(p, v)
            }
            #[inline(always)]
            unsafe fn mul_add(a: $v, b: $v, c: $v) -> $v {
                $fmadd(a, b, c)
            }
            #[inline(always)]
            unsafe fn add(a: $v, b: $v) -> $v {
                $add(a, b)
            }
            #[inline(always)]
            unsafe fn sub(a: $v, b: $v) -> $v {
                $sub(a, b)
            }
            #[inline(always)]
            unsafe fn mul(a: $v, b: $v) -> $v {
                $mul(a, b)
            }
            #[inline(always)]
            unsafe fn max(a: $v, b: $v) -> $v {
                $max(a, b)
            }
            #[inline(always)]
            fn fma(a: f32, b: f32, c: f32) -> f32 {
                a.mul_add(b, c)
            }
        }
    };
}

x86_simd!(
    Avx2,
    __m256,
    8,
    _mm256_setzero_ps,
    _mm256_set1_ps,
    _mm256_loadu_ps,
    _mm256_storeu_ps,
    _mm256_fmadd_ps,
    _mm256_add_ps,
    _mm256_sub_ps,
    _mm256_mul_ps,
    _mm256_max_ps
);
x86_simd!(
    Avx512,
    __m512,
    16,
    _mm512_setzero_ps,
    _mm512_set1_ps,
    _mm512_loadu_ps,
    _mm512_storeu_ps,
    _mm512_fmadd_ps,
    _mm512_add_ps,
    _mm512_sub_ps,
    _mm512_mul_ps,
    _mm512_max_ps
);

/// 6 × 16: 12 accumulators + 2 B vectors + 1 broadcast of the 16 ymm registers.
#[target_feature(enable = "avx2,fma")]
unsafe fn avx2_piece(job: &Piece<'_>) {
    gemm::piece::<Avx2, 6, 2>(job)
}

/// 2 weight rows × up to 4 rows of A: 8 accumulators + 4 rows + 1 weight vector.
#[target_feature(enable = "avx2,fma")]
unsafe fn avx2_gemv(job: &Columns<'_>) {
    gemv::columns::<Avx2, 2>(job)
}

#[target_feature(enable = "avx2,fma")]
unsafe fn avx2_gelu(out: &mut [f32], x: &[f32]) {
    gelu::forward::<Avx2>(out, x)
}

#[target_feature(enable = "avx2,fma")]
unsafe fn avx2_gelu_backward(dx: &mut [f32], x: &[f32], dout: &[f32]) {
    gelu::backward::<Avx2>(dx, x, dout)
}

/// 4 query rows × 16 columns: 8 accumulators + 2 loads + 1 broadcast of the 16 ymm registers.
#[target_feature(enable = "avx2,fma")]
unsafe fn avx2_attention(job: &HeadForward<'_>) {
    attention::forward_head::<Avx2, 4, 2>(job)
}

#[target_feature(enable = "avx2,fma")]
unsafe fn avx2_attention_backward(job: &HeadBackward<'_>) {
    attention::backward_head::<Avx2, 4, 2>(job)
}

#[target_feature(enable = "avx2,fma")]
unsafe fn avx2_cached_attention(job: &CachedHeads<'_>) {
    cached_attention::heads::<Avx2>(job)
}

#[target_feature(enable = "avx2,fma")]
unsafe fn avx2_layer_norm(rows: LayerNormRows<'_>) {
    rows.run()
}

#[target_feature(enable = "avx2,fma")]
unsafe fn avx2_layer_norm_backward(rows: LayerNormBackwardRows<'_>) {
    rows.run::<Avx2>()
}

#[target_feature(enable = "avx2,fma")]
unsafe fn avx2_multiply_adds(iters: usize) -> f32 {
    peak::multiply_adds::<Avx2>(iters)
}

#[target_feature(enable = "avx2,fma")]
unsafe fn avx2_sum_rows(partial: &mut [f32], x: &[f32]) {
    sum_rows::block_sums(partial, x)
}

#[target_feature(enable = "avx2,fma")]
unsafe fn avx2_cross_entropy(rows: cross_entropy::Rows<'_>, saved: &mut [f32]) -> f64 {
    cross_entropy::forward_rows::<Avx2>(rows, saved)
}

#[target_feature(enable = "avx2,fma")]
unsafe fn avx2_cross_entropy_backward(
    rows: cross_entropy::Rows<'_>,
    d: &mut [f32],
    saved: &[f32],
    scale: f32,
) {
    cross_entropy::backward_rows::<Avx2>(rows, d, saved, scale)
}

/// 12 × 32: 24 accumulators + 2 B vectors + 1 broadcast of the 32 zmm registers.
#[target_feature(enable = "avx512f")]
unsafe fn avx512_piece(job: &Piece<'_>) {
    gemm::piece::<Avx512, 12, 2>(job)
}

/// 4 weight rows × up to 4 rows of A: 16 accumulators + 4 rows + 1 weight vector.
#[target_feature(enable = "avx512f")]
unsafe fn avx512_gemv(job: &Columns<'_>) {
    gemv::columns::<Avx512, 4>(job)
}

#[target_feature(enable = "avx512f")]
unsafe fn avx512_gelu(out: &mut [f32], x: &[f32]) {
    gelu::forward::<Avx512>(out, x)
}

#[target_feature(enable = "avx512f")]
unsafe fn avx512_gelu_backward(dx: &mut [f32], x: &[f32], dout: &[f32]) {
    gelu::backward::<Avx512>(dx, x, dout)
}

/// 8 query rows × 16 columns: 8 accumulators, one key/value load per 8 multiply-adds.
#[target_feature(enable = "avx512f")]
unsafe fn avx512_attention(job: &HeadForward<'_>) {
    attention::forward_head::<Avx512, 8, 1>(job)
}

#[target_feature(enable = "avx512f")]
unsafe fn avx512_attention_backward(job: &HeadBackward<'_>) {
    attention::backward_head::<Avx512, 8, 1>(job)
}

#[target_feature(enable = "avx512f")]
unsafe fn avx512_cached_attention(job: &CachedHeads<'_>) {
    cached_attention::heads::<Avx512>(job)
}

#[target_feature(enable = "avx512f")]
unsafe fn avx512_layer_norm(rows: LayerNormRows<'_>) {
    rows.run()
}

#[target_feature(enable = "avx512f")]
unsafe fn avx512_layer_norm_backward(rows: LayerNormBackwardRows<'_>) {
    rows.run::<Avx512>()
}

#[target_feature(enable = "avx512f")]
unsafe fn avx512_multiply_adds(iters: usize) -> f32 {
    peak::multiply_adds::<Avx512>(iters)
}

#[target_feature(enable = "avx512f")]
unsafe fn avx512_sum_rows(partial: &mut [f32], x: &[f32]) {
    sum_rows::block_sums(partial, x)
}

#[target_feature(enable = "avx512f")]
unsafe fn avx512_cross_entropy(rows: cross_entropy::Rows<'_>, saved: &mut [f32]) -> f64 {
    cross_entropy::forward_rows::<Avx512>(rows, saved)
}

#[target_feature(enable = "avx512f")]
unsafe fn avx512_cross_entropy_backward(
    rows: cross_entropy::Rows<'_>,
    d: &mut [f32],
    saved: &[f32],
    scale: f32,
) {
    cross_entropy::backward_rows::<Avx512>(rows, d, saved, scale)
}

pub(crate) static AVX2_FMA: FastKernels = FastKernels {
    matmul: Microkernel { mr: 6, nr: 16, piece: avx2_piece },
    gemv: avx2_gemv,
    gelu: avx2_gelu,
    gelu_backward: avx2_gelu_backward,
    attention: avx2_attention,
    attention_backward: avx2_attention_backward,
    cached_attention: avx2_cached_attention,
    layer_norm: avx2_layer_norm,
    layer_norm_backward: avx2_layer_norm_backward,
    sum_rows: avx2_sum_rows,
    cross_entropy: avx2_cross_entropy,
    cross_entropy_backward: avx2_cross_entropy_backward,
    lanes: 8,
    multiply_adds: avx2_multiply_adds,
};

pub(crate) static AVX512: FastKernels = FastKernels {
    matmul: Microkernel { mr: 12, nr: 32, piece: avx512_piece },
    gemv: avx512_gemv,
    gelu: avx512_gelu,
    gelu_backward: avx512_gelu_backward,
    attention: avx512_attention,
    attention_backward: avx512_attention_backward,
    cached_attention: avx512_cached_attention,
    layer_norm: avx512_layer_norm,
    layer_norm_backward: avx512_layer_norm_backward,
    sum_rows: avx512_sum_rows,
    cross_entropy: avx512_cross_entropy,
    cross_entropy_backward: avx512_cross_entropy_backward,
    lanes: 16,
    multiply_adds: avx512_multiply_adds,
};

//! A 4 × 4 block transpose in 128-bit registers, for the copies that turn rows into columns:
//! an attention head's keys and values into panels (`attention.rs`) and a linear layer's
//! weights into a matmul's B panels (`gemm.rs`). Element by element, each such copy stores
//! every value a whole row away from the last; in blocks, four loads, eight shuffles and
//! four stores move sixteen values. SSE is part of every x86-64 and `simd128` of the wasm
//! SIMD builds, so no variant's `#[target_feature]` is needed.

/// The 4 × 4 block at `src` (rows `ld_src` apart), transposed, at `dst` (rows `ld_dst` apart).
///
/// # Safety
/// Both blocks lie in their buffers.
#[cfg(target_arch = "x86_64")]
#[inline(always)]
pub(crate) unsafe fn transpose4x4(dst: *mut f32, ld_dst: usize, src: *const f32, ld_src: usize) {
    use std::arch::x86_64::*;
    let row = |i: usize| _mm_loadu_ps(src.add(i * ld_src));
    let (r0, r1, r2, r3) = (row(0), row(1), row(2), row(3));
    let (lo01, lo23) = (_mm_unpacklo_ps(r0, r1), _mm_unpacklo_ps(r2, r3));
    let (hi01, hi23) = (_mm_unpackhi_ps(r0, r1), _mm_unpackhi_ps(r2, r3));
    _mm_storeu_ps(dst, _mm_movelh_ps(lo01, lo23));
    _mm_storeu_ps(dst.add(ld_dst), _mm_movehl_ps(lo23, lo01));
    _mm_storeu_ps(dst.add(2 * ld_dst), _mm_movelh_ps(hi01, hi23));
    _mm_storeu_ps(dst.add(3 * ld_dst), _mm_movehl_ps(hi23, hi01));
}

/// [`transpose4x4`] in `simd128` shuffles.
///
/// # Safety
/// Both blocks lie in their buffers.
#[cfg(all(target_arch = "wasm32", target_feature = "simd128"))]
#[inline(always)]
pub(crate) unsafe fn transpose4x4(dst: *mut f32, ld_dst: usize, src: *const f32, ld_src: usize) {
    use std::arch::wasm32::*;
    let row = |i: usize| v128_load(src.add(i * ld_src).cast());
    let (r0, r1, r2, r3) = (row(0), row(1), row(2), row(3));
    let (lo01, lo23) = (i32x4_shuffle::<0, 4, 1, 5>(r0, r1), i32x4_shuffle::<0, 4, 1, 5>(r2, r3));
    let (hi01, hi23) = (i32x4_shuffle::<2, 6, 3, 7>(r0, r1), i32x4_shuffle::<2, 6, 3, 7>(r2, r3));
    v128_store(dst.cast(), i64x2_shuffle::<0, 2>(lo01, lo23));
    v128_store(dst.add(ld_dst).cast(), i64x2_shuffle::<1, 3>(lo01, lo23));
    v128_store(dst.add(2 * ld_dst).cast(), i64x2_shuffle::<0, 2>(hi01, hi23));
    v128_store(dst.add(3 * ld_dst).cast(), i64x2_shuffle::<1, 3>(hi01, hi23));
}

/// [`transpose4x4`] value by value, for a target without a SIMD variant (which compiles the
/// shared kernels but never runs them).
///
/// # Safety
/// Both blocks lie in their buffers.
#[cfg(not(any(target_arch = "x86_64", all(target_arch = "wasm32", target_feature = "simd128"))))]
#[inline(always)]
pub(crate) unsafe fn transpose4x4(dst: *mut f32, ld_dst: usize, src: *const f32, ld_src: usize) {
    for i in 0..4 {
        for j in 0..4 {
            *dst.add(j * ld_dst + i) = *src.add(i * ld_src + j);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::transpose4x4;

    #[test]
    fn a_block_lands_transposed_and_nothing_else_moves() {
        let (ld_src, ld_dst) = (7, 5);
        let src: Vec<f32> = (0..4 * ld_src).map(|i| i as f32).collect();
        let mut dst = vec![-1.0; 4 * ld_dst];
        // SAFETY: 4 rows of `ld_src` and of `ld_dst` values, each at least 4 wide.
        unsafe { transpose4x4(dst.as_mut_ptr(), ld_dst, src.as_ptr(), ld_src) };
        for (at, &x) in dst.iter().enumerate() {
            let (j, i) = (at / ld_dst, at % ld_dst);
            let want = if i < 4 { src[i * ld_src + j] } else { -1.0 };
            assert_eq!(x, want, "dst[{j}][{i}]");
        }
    }
}

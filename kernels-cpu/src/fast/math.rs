//! Scalar math written for the auto-vectoriser: plain arithmetic and bit casts, no libm
//! calls, so a loop over slices that calls these compiles to vector code at the width of
//! the `#[target_feature]` entry point it is inlined into.

use crate::fast::simd::Simd;

/// Lanes of the partial sums below: one AVX-512 register (two AVX2, four simd128). The
/// order of the additions is fixed by this constant alone, never by the ISA or threads.
pub(crate) const BLOCK: usize = 16;

/// Room for `BLOCK` lanes in vectors of the narrowest ISA (4 lanes): for partials kept in
/// explicit vectors, lane `l` of them being partial `l` (see [`block_vectors`]).
pub(crate) const MAX_BLOCK_VECTORS: usize = BLOCK / 4;

/// How many `S` vectors hold `BLOCK` lanes (the first ones of a `[_; MAX_BLOCK_VECTORS]`).
#[inline(always)]
pub(crate) fn block_vectors<S: Simd>() -> usize {
    let vectors = BLOCK / S::LANES;
    assert!(vectors <= MAX_BLOCK_VECTORS && vectors * S::LANES == BLOCK);
    vectors
}

/// The `BLOCK` lanes of the first [`block_vectors`] of `v`, in order.
///
/// # Safety
/// `S`'s instructions are available (see [`Simd`]).
#[inline(always)]
pub(crate) unsafe fn block_lanes<S: Simd>(v: &[S::V; MAX_BLOCK_VECTORS]) -> [f32; BLOCK] {
    let mut lanes = [0f32; BLOCK];
    for (j, &x) in v.iter().enumerate().take(block_vectors::<S>()) {
        S::store(lanes.as_mut_ptr().add(j * S::LANES), x);
    }
    lanes
}

/// `e^x` for `x` clamped to [-87, 88] (so `2^n` stays a normal f32): `x = n ln2 + r`,
/// `|r| <= ln2/2`, `e^r` by its degree-6 Taylor polynomial in Horner form (error < 1.3e-7
/// relative). Every multiply-add goes through `S::fma`: one FMA instruction each where the
/// ISA has it (AVX2, AVX-512), so about half the instructions of the unfused chain there.
#[inline(always)]
pub(crate) fn exp<S: Simd>(x: f32) -> f32 {
    const LOG2_E: f32 = std::f32::consts::LOG2_E;
    const LN2_HI: f32 = 0.693_145_75;
    const LN2_LO: f32 = 1.428_606_8e-6;
    /// 1.5 · 2^23: adding it rounds to an integer held in the low mantissa bits.
    const ROUNDER: f32 = 12_582_912.0;
    let x = x.clamp(-87.0, 88.0);
    let shifted = S::fma(x, LOG2_E, ROUNDER);
    let n = shifted - ROUNDER;
    let r = S::fma(n, -LN2_LO, S::fma(n, -LN2_HI, x));
    let mut p = 1.0 / 720.0;
    for c in [1.0 / 120.0, 1.0 / 24.0, 1.0 / 6.0, 0.5, 1.0, 1.0] {
        p = S::fma(p, r, c);
    }
    let n_int = (shifted.to_bits() as i32).wrapping_sub(ROUNDER.to_bits() as i32);
    p * f32::from_bits(((n_int + 127) << 23) as u32)
}

/// `Σ x[i] · y[i]` in `BLOCK` interleaved partial sums (a fixed order, vectorisable).
#[inline(always)]
pub(crate) fn dot_blocked(x: &[f32], y: &[f32]) -> f32 {
    let mut acc = [0f32; BLOCK];
    let (xc, yc) = (x.chunks_exact(BLOCK), y.chunks_exact(BLOCK));
    let (xr, yr) = (xc.remainder(), yc.remainder());
    for (xs, ys) in xc.zip(yc) {
        for ((a, &p), &q) in acc.iter_mut().zip(xs).zip(ys) {
            *a += p * q;
        }
    }
    for ((a, &p), &q) in acc.iter_mut().zip(xr).zip(yr) {
        *a += p * q;
    }
    acc.iter().sum()
}

/// `x` folded into `BLOCK` interleaved partials, `acc[i % BLOCK] = step(acc[i % BLOCK], x[i])`
/// from `init`, in ascending `i`: a fixed order that vectorises; callers combine the partials.
#[inline(always)]
pub(crate) fn partials_blocked(x: &[f32], init: f32, step: impl Fn(f32, f32) -> f32) -> [f32; BLOCK] {
    let mut acc = [init; BLOCK];
    let chunks = x.chunks_exact(BLOCK);
    let rest = chunks.remainder();
    for xs in chunks {
        for (a, &v) in acc.iter_mut().zip(xs) {
            *a = step(*a, v);
        }
    }
    for (a, &v) in acc.iter_mut().zip(rest) {
        *a = step(*a, v);
    }
    acc
}

/// `Σ x[i]` in `BLOCK` interleaved partial sums.
#[inline(always)]
pub(crate) fn sum_blocked(x: &[f32]) -> f32 {
    partials_blocked(x, 0.0, |a, v| a + v).iter().sum()
}

//! The few vector operations a matmul microkernel needs, so one generic kernel
//! (`gemm::piece`) serves every instruction set; each ISA file implements this trait over
//! its own register type and instantiates the kernel behind its `#[target_feature]`.

/// `LANES` f32 lanes of one vector register. Implementors are zero-sized markers.
///
/// # Safety
/// The methods use instructions the CPU may lack: call them only from code compiled with
/// the implementor's target features (the ISA file's `#[target_feature]` entry points, which
/// are reached only after [`crate::KernelVariant::is_supported`] said yes). Methods are
/// `#[inline(always)]` so they inline into those entry points and compile to single
/// instructions there.
pub(crate) unsafe trait Simd: Copy {
    const LANES: usize;
    type V: Copy;

    unsafe fn zero() -> Self::V;
    unsafe fn splat(x: f32) -> Self::V;
    /// Loads `LANES` values from `p` (no alignment needed).
    unsafe fn load(p: *const f32) -> Self::V;
    /// Stores `LANES` values to `p` (no alignment needed).
    unsafe fn store(p: *mut f32, v: Self::V);
    /// `a · b + c`, fused (one rounding) where the ISA has FMA.
    unsafe fn mul_add(a: Self::V, b: Self::V, c: Self::V) -> Self::V;
    /// `a + b`, `a - b` and `a · b` lane by lane, each rounded once as the scalar operation
    /// is: for sums whose order must match scalar code exactly (`layernorm.rs`).
    unsafe fn add(a: Self::V, b: Self::V) -> Self::V;
    unsafe fn sub(a: Self::V, b: Self::V) -> Self::V;
    unsafe fn mul(a: Self::V, b: Self::V) -> Self::V;
    /// `a` where `a > b`, else `b`, lane by lane: `if a > b { a } else { b }` (so `b` where
    /// they are equal or either is NaN).
    unsafe fn max(a: Self::V, b: Self::V) -> Self::V;
    /// Scalar `a · b + c` for code the compiler vectorises (`math::exp`, GELU): fused
    /// (`f32::mul_add`, one instruction under the entry point's `fma`) where the ISA has
    /// FMA, two roundings where it has none (a libm `fmaf` call there would be slow).
    fn fma(a: f32, b: f32, c: f32) -> f32;
}

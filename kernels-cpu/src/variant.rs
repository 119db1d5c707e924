//! Which kernels a [`crate::CpuBackend`] runs: the scalar reference, or a fast variant for
//! an instruction set the CPU has — found at run time on x86-64 (`is_x86_feature_detected!`,
//! so one release binary runs on any x86-64 and still uses AVX-512 where it exists), fixed
//! at compile time on wasm32 (`simd128` is a build flag there, not a probe).
//!
//! A fast variant replaces only the kernels it has a fast version of (today matmul, GELU,
//! the flash-style training attention pair, cached attention, LayerNorm and `sum_rows`);
//! every other op runs the reference kernel.

use std::fmt;
use std::str::FromStr;

use crate::fast::FastKernels;

/// What a caller asks for (`--kernels reference|fast`); [`Kernels::variant`] turns it into
/// the variant this CPU runs.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum Kernels {
    /// The scalar reference kernels, the yardstick every other kernel is checked against.
    Reference,
    /// The fastest variant this CPU supports (the reference where none is).
    #[default]
    Fast,
}

impl Kernels {
    /// The variant this choice resolves to on this CPU.
    pub fn variant(self) -> KernelVariant {
        match self {
            Kernels::Reference => KernelVariant::Reference,
            Kernels::Fast => KernelVariant::best_available(),
        }
    }
}

impl FromStr for Kernels {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "reference" => Ok(Kernels::Reference),
            "fast" => Ok(Kernels::Fast),
            other => Err(format!("unknown kernels '{other}': use reference or fast")),
        }
    }
}

/// One concrete set of kernels. For one variant, results are bit-identical at any thread
/// count; different variants agree within the conformance kit's tolerances, not bit for bit
/// (they sum in other orders and fuse multiply-adds).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum KernelVariant {
    /// The scalar kernels in `kernels/`.
    Reference,
    /// x86-64 with AVX2 and FMA: 256-bit vectors, 6×16 matmul tiles.
    Avx2Fma,
    /// x86-64 with AVX-512F: 512-bit vectors, 12×32 matmul tiles.
    Avx512,
    /// wasm32 built with `+simd128`: 128-bit vectors, 4×8 matmul tiles.
    Simd128,
    /// wasm32 built with `+simd128,+relaxed-simd`: `simd128` whose vector multiply-add is
    /// relaxed SIMD's `f32x4.relaxed_madd` (fused where the machine has FMA).
    Simd128Relaxed,
}

impl KernelVariant {
    /// Every variant, reference first.
    pub const ALL: [KernelVariant; 5] = [
        KernelVariant::Reference,
        KernelVariant::Avx2Fma,
        KernelVariant::Avx512,
        KernelVariant::Simd128,
        KernelVariant::Simd128Relaxed,
    ];

    /// The name used in benchmark lines and on the page.
    pub fn name(self) -> &'static str {
        match self {
            KernelVariant::Reference => "reference",
            KernelVariant::Avx2Fma => "avx2-fma",
            KernelVariant::Avx512 => "avx512",
            KernelVariant::Simd128 => "simd128",
            KernelVariant::Simd128Relaxed => "simd128-relaxed",
        }
    }

    /// Whether this CPU (or, on wasm32, this build) can run the variant.
    pub fn is_supported(self) -> bool {
        match self {
            KernelVariant::Reference => true,
            #[cfg(target_arch = "x86_64")]
            KernelVariant::Avx2Fma => is_x86_feature_detected!("avx2") && is_x86_feature_detected!("fma"),
            #[cfg(target_arch = "x86_64")]
            KernelVariant::Avx512 => is_x86_feature_detected!("avx512f"),
            #[cfg(all(target_arch = "wasm32", target_feature = "simd128"))]
            KernelVariant::Simd128 => true,
            #[cfg(all(target_arch = "wasm32", target_feature = "simd128", target_feature = "relaxed-simd"))]
            KernelVariant::Simd128Relaxed => true,
            #[allow(unreachable_patterns)]
            _ => false,
        }
    }

    /// The fastest supported variant: AVX-512, then AVX2+FMA, then simd128 (relaxed first),
    /// else the reference.
    pub fn best_available() -> KernelVariant {
        [KernelVariant::Avx512, KernelVariant::Avx2Fma, KernelVariant::Simd128Relaxed, KernelVariant::Simd128]
            .into_iter()
            .find(|v| v.is_supported())
            .unwrap_or(KernelVariant::Reference)
    }

    /// The f32 multiply-add peak (GFLOP/s, a multiply-add counted as 2) of `threads` threads
    /// running this variant's vector instructions, measured now: the fastest of 40 bursts
    /// of about 5 ms, so on a shared machine it is what the cores do while they run the loop
    /// (the yardstick for its matmul's fastest call), not how much of them it got.
    /// `None` for the reference (it has no vector loop of its own) and where unsupported.
    pub fn measured_fma_peak_gflops(self, threads: usize) -> Option<f64> {
        if !self.is_supported() {
            return None;
        }
        self.fast_kernels().map(|kernels| crate::fast::peak::gflops(kernels, threads.max(1)))
    }

    /// The fast kernels of a supported non-reference variant; `None` for the reference.
    pub(crate) fn fast_kernels(self) -> Option<&'static FastKernels> {
        debug_assert!(self.is_supported(), "{self} is not supported here");
        crate::fast::kernels_for(self)
    }
}

impl fmt::Display for KernelVariant {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

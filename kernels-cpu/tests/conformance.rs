//! The backend conformance kit (`tinygpt_tensor::conformance`) run once per kernel variant
//! of the CPU backend, each inline on one thread and on a pool of three (an odd count, so
//! work splits unevenly).
//!
//! The count says what ran: the x86-64 variants' tests are compiled only for x86-64 and are
//! ignored where the CPU lacks the instructions (found by `build.rs` when building, since a
//! test cannot mark itself ignored at run time); the wasm32 variants' are compiled only into
//! a wasm32 build with the matching target features (run under Node's WASI by `cargo xtask
//! test`: see tests/wasi/run.mjs).

use tinygpt_kernels_cpu::{CpuBackend, KernelVariant};

/// `variant` on `threads` threads. Panics where this CPU cannot run it: only a test that
/// should have been ignored gets here (a target dir built on another CPU: `cargo clean -p
/// tinygpt-kernels-cpu` finds this CPU's variants again).
fn backend(threads: usize, variant: KernelVariant) -> CpuBackend {
    CpuBackend::new(threads).with_variant(variant).unwrap_or_else(|e| {
        panic!("{e}: kernels-cpu/build.rs found {variant} on the CPU that built these tests")
    })
}

macro_rules! variant_conformance {
    ($module:ident, $variant:expr, [$(#[$attr:meta])*]) => {
        mod $module {
            mod one_thread {
                tinygpt_tensor::backend_conformance_tests!(
                    $(#[$attr])* => crate::backend(1, $variant)
                );
            }
            mod three_threads {
                tinygpt_tensor::backend_conformance_tests!(
                    $(#[$attr])* => crate::backend(3, $variant)
                );
            }
        }
    };
}

variant_conformance!(reference, tinygpt_kernels_cpu::KernelVariant::Reference, []);
#[cfg(target_arch = "x86_64")]
variant_conformance!(avx2_fma, tinygpt_kernels_cpu::KernelVariant::Avx2Fma, [
    #[cfg_attr(not(tinygpt_cpu_avx2_fma), ignore = "this CPU has no AVX2+FMA")]
]);
#[cfg(target_arch = "x86_64")]
variant_conformance!(avx512, tinygpt_kernels_cpu::KernelVariant::Avx512, [
    #[cfg_attr(not(tinygpt_cpu_avx512), ignore = "this CPU has no AVX-512F")]
]);
#[cfg(all(target_arch = "wasm32", target_feature = "simd128"))]
variant_conformance!(simd128, tinygpt_kernels_cpu::KernelVariant::Simd128, []);
#[cfg(all(target_arch = "wasm32", target_feature = "simd128", target_feature = "relaxed-simd"))]
variant_conformance!(simd128_relaxed, tinygpt_kernels_cpu::KernelVariant::Simd128Relaxed, []);

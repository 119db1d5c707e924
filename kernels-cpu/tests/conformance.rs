//! The backend conformance kit (`tinygpt_tensor::conformance`) run once per kernel variant
//! of the CPU backend, each inline on one thread and on a pool of three (an odd count, so
//! work splits unevenly). A variant this CPU lacks passes with a note on stderr.

use tinygpt_kernels_cpu::{CpuBackend, KernelVariant};

/// `variant` on `threads` threads, or `None` (with a note) where this CPU cannot run it.
fn backend(threads: usize, variant: KernelVariant) -> Option<CpuBackend> {
    let backend = CpuBackend::new(threads).with_variant(variant);
    if backend.is_err() {
        eprintln!("skipped: this CPU has no {variant} kernels");
    }
    backend.ok()
}

macro_rules! variant_conformance {
    ($module:ident, $variant:expr) => {
        mod $module {
            mod one_thread {
                tinygpt_tensor::backend_conformance_tests!(match crate::backend(1, $variant) {
                    Some(backend) => backend,
                    None => return,
                });
            }
            mod three_threads {
                tinygpt_tensor::backend_conformance_tests!(match crate::backend(3, $variant) {
                    Some(backend) => backend,
                    None => return,
                });
            }
        }
    };
}

variant_conformance!(reference, tinygpt_kernels_cpu::KernelVariant::Reference);
variant_conformance!(avx2_fma, tinygpt_kernels_cpu::KernelVariant::Avx2Fma);
variant_conformance!(avx512, tinygpt_kernels_cpu::KernelVariant::Avx512);
// Run in a wasm32 build with +simd128 (under Node: see tests/wasi/run.mjs), the relaxed
// one only in a build with +relaxed-simd too; skipped natively.
variant_conformance!(simd128, tinygpt_kernels_cpu::KernelVariant::Simd128);
variant_conformance!(simd128_relaxed, tinygpt_kernels_cpu::KernelVariant::Simd128Relaxed);

//! The conformance kit on the checked backend wrapping the CPU backend's scalar reference
//! kernels (chosen explicitly: `CpuBackend::new` picks the fast variant, which
//! kernels-cpu's own conformance tests cover): a wrapper that changed a value, or refused a
//! legitimate one, fails here.

tinygpt_tensor::backend_conformance_tests!(tinygpt_kernels_checked::Checked::new(
    tinygpt_kernels_cpu::CpuBackend::new(1).with_kernels(tinygpt_kernels_cpu::Kernels::Reference)
));

/// Checking changes no result, so the wrapped CPU backend's promise holds: the same bits at
/// any thread count.
mod determinism {
    use tinygpt_kernels_checked::Checked;
    use tinygpt_kernels_cpu::{CpuBackend, Kernels};

    tinygpt_tensor::backend_determinism_tests!(
        |threads| Checked::new(CpuBackend::new(threads).with_kernels(Kernels::Reference)),
        [1, 2, 3]
    );
}

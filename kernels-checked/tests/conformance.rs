//! The conformance kit on the checked backend wrapping the CPU reference: a wrapper that
//! changed a value, or refused a legitimate one, fails here.

tinygpt_tensor::backend_conformance_tests!(tinygpt_kernels_checked::Checked::new(
    tinygpt_kernels_cpu::CpuBackend::new(1)
));

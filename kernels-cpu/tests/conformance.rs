//! The backend conformance kit (`tinygpt_tensor::conformance`) run on the CPU backend,
//! inline on one thread and on a pool of three (an odd count, so work splits unevenly).

mod one_thread {
    tinygpt_tensor::backend_conformance_tests!(tinygpt_kernels_cpu::CpuBackend::new(1));
}

mod three_threads {
    tinygpt_tensor::backend_conformance_tests!(tinygpt_kernels_cpu::CpuBackend::new(3));
}

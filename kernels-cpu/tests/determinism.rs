//! Each kernel variant of the CPU backend gives the same bits on any number of threads (the
//! training loop's "same seed and thread count → same losses" promise rests on this, and in
//! fact holds across thread counts), and its constructor rejects bad thread counts and
//! variants this CPU lacks with an error.

use tinygpt_kernels_cpu::{CpuBackend, CpuBackendError, KernelVariant, Kernels};
use tinygpt_tensor::conformance::determinism::{assert_same_bits, op_results, same_bits_across_threads};
use tinygpt_tensor::{block_on, Backend};

#[test]
fn each_variant_is_bit_identical_for_1_2_and_3_threads() {
    let supported = KernelVariant::ALL.into_iter().filter(|v| v.is_supported());
    for variant in supported {
        let on = |threads| CpuBackend::new(threads).with_variant(variant).unwrap();
        block_on(same_bits_across_threads(on, &[1, 2, 3]));
    }
}

/// The global pool (how the threaded browser build runs: wasm-bindgen-rayon starts only
/// rayon's global pool) gives the same bits as one thread. This test binary's global pool
/// is sized here, before any other test can start it.
#[test]
fn the_global_pool_is_bit_identical_to_one_thread() {
    let _ = rayon::ThreadPoolBuilder::new().num_threads(3).build_global();
    let global = CpuBackend::on_global_pool();
    assert_eq!(global.threads(), rayon::current_num_threads());
    for variant in KernelVariant::ALL.into_iter().filter(|v| v.is_supported()) {
        let one = block_on(op_results(&CpuBackend::new(1).with_variant(variant).unwrap()));
        let other = block_on(op_results(&global.clone().with_variant(variant).unwrap()));
        assert_same_bits(&one, &other, &format!("{variant}: the global pool and 1 thread"));
    }
}

/// A pool whose callers run pieces too (`try_new_on_this_thread`, the CLI's: a spin pool up
/// to the machine's core count, a rayon pool past it) gives the same bits as one thread, used
/// from that thread and from another, and so does a second one made on the same thread.
#[test]
fn a_pool_joined_by_the_calling_thread_is_bit_identical_to_one_thread() {
    std::thread::spawn(|| {
        let joined = CpuBackend::try_new_on_this_thread(2).unwrap();
        assert_eq!(joined.threads(), 2);
        let again = CpuBackend::try_new_on_this_thread(3).unwrap();
        assert_eq!(again.threads(), 3);
        for variant in KernelVariant::ALL.into_iter().filter(|v| v.is_supported()) {
            let one = block_on(op_results(&CpuBackend::new(1).with_variant(variant).unwrap()));
            for (what, backend) in [("joined", &joined), ("second", &again)] {
                let here = block_on(op_results(&backend.clone().with_variant(variant).unwrap()));
                assert_same_bits(&one, &here, &format!("{variant}: {what} pool and 1 thread"));
            }
            let elsewhere = joined.clone().with_variant(variant).unwrap();
            let there = std::thread::spawn(move || block_on(op_results(&elsewhere))).join().unwrap();
            assert_same_bits(&one, &there, &format!("{variant}: joined pool used from another thread"));
        }
    })
    .join()
    .unwrap();
}

#[test]
fn fast_is_the_best_supported_variant_and_unsupported_ones_are_refused() {
    assert_eq!(CpuBackend::new(2).variant(), KernelVariant::best_available());
    assert_eq!(CpuBackend::default().with_kernels(Kernels::Reference).variant(), KernelVariant::Reference);
    assert_eq!("fast".parse::<Kernels>(), Ok(Kernels::Fast));
    assert!("simd".parse::<Kernels>().unwrap_err().contains("reference or fast"));
    // simd128 exists only in a wasm32 build.
    let err = CpuBackend::new(1).with_variant(KernelVariant::Simd128).unwrap_err();
    assert!(matches!(err, CpuBackendError::Unsupported { variant: "simd128" }), "{err}");
}

#[test]
fn thread_counts_are_validated() {
    assert!(matches!(CpuBackend::try_new(0), Err(CpuBackendError::ZeroThreads)));
    assert_eq!(CpuBackend::default().threads(), 1);
    assert_eq!(CpuBackend::new(3).threads(), 3);
    assert_eq!(CpuBackend::new(1).name(), "cpu");
}

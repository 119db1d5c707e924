//! The cooperative-matrix matmul (issue 34) where no driver offers cooperative matrices:
//! - with its built-ins emulated (`TINYGPT_WGPU_COOP=emulate`, `emulate-large`), everything
//!   else of the kernel (staging f32 → f16 tiles in both stored orientations, fragment
//!   addresses, subgroups' parts of the tile, write-out with bias, prior and bounds, slices
//!   of k) runs on the device and must match the definition, op(A) and op(B) rounded to
//!   the nearest f16 and the products summed in f64, within f32's accumulation error
//!   (`Tolerance::ACCUMULATED`, as `mixed_matmul.rs` holds the shader-f16 path to);
//! - forced onto an adapter without cooperative matrices (`TINYGPT_WGPU_COOP=force`), its
//!   start-up self-test fails (the kernel does not compile) and the backend falls back to
//!   shader-f16, saying why, on a device that still works.
//!
//! On an adapter that offers them (an NVIDIA H200) `mixed_matmul.rs` and the kit check the
//! real kernel, which the start-up self-test has compared with f32 first.

mod f16_emulation;

use std::sync::Mutex;

use f16_emulation::{emulated, normal, read};

use tinygpt_kernels_wgsl::testing::prefer_lavapipe;
use tinygpt_kernels_wgsl::{MatmulKernels, WgpuBackend};
use tinygpt_tensor::conformance::Tolerance;
use tinygpt_tensor::{AttentionDims, AttentionKeep, Backend, MatmulDims, MatmulFused, Precision, Rng};

/// A mixed backend opened with `TINYGPT_WGPU_COOP=setting` (read only while it opens;
/// the lock keeps the tests of this binary from opening theirs at the same time).
fn mixed_with(setting: &str) -> Option<WgpuBackend> {
    static OPENING: Mutex<()> = Mutex::new(());
    let _guard = OPENING.lock().unwrap_or_else(|e| e.into_inner());
    prefer_lavapipe();
    std::env::set_var("TINYGPT_WGPU_COOP", setting);
    let made = WgpuBackend::new_with_precision(Precision::Mixed);
    std::env::remove_var("TINYGPT_WGPU_COOP");
    let backend = made.expect("an adapter (the wgpu tests need lavapipe at least)");
    let adapter = backend.adapter();
    if !adapter.shader_f16 || !adapter.subgroups {
        eprintln!("skipped: {} lacks shader-f16 or subgroups", adapter.name);
        return None;
    }
    Some(backend)
}

/// Every layout on whole tiles (vec4 stages) and awkward sizes, plain, with a bias and
/// onto a prior, unsplit and (the long k) split over k, on the small tile (`emulate`) and
/// the large one (`emulate-large`); then attention (batched products; its causal ones stay
/// on matmul.wgsl) within the kit's reach of f32. (Opening each backend also ran its
/// start-up self-test on the emulated kernel.)
#[test]
fn the_kernel_with_emulated_cooperative_matrices_computes_the_mixed_products() {
    for setting in ["emulate", "emulate-large"] {
        let Some(x) = mixed_with(setting) else { return };
        let report = x.matmul_precision();
        eprintln!("{setting} on {}: {report}", x.adapter().name);
        assert_eq!(report.kernels, MatmulKernels::CooperativeMatrix, "{report}");
        assert!(report.reason.contains("EMULATED"), "{report}");
        let tol = Tolerance::ACCUMULATED;
        let mut rng = Rng::new(0xC00B);
        // (Each variant compiles on lavapipe in about a second: few shapes, every layout.)
        for (m, k, n) in [(128, 64, 128), (33, 70, 9), (5, 300, 17)] {
            for (trans_a, trans_b) in [(false, false), (false, true), (true, false), (true, true)] {
                let dims = MatmulDims { m, k, n, trans_a, trans_b };
                let (a, b) = (normal(&mut rng, m * k), normal(&mut rng, k * n));
                let (bias, onto) = (normal(&mut rng, n), normal(&mut rng, m * n));
                let want = emulated(&a, &b, None, dims);
                let want_bias: Vec<f64> =
                    want.iter().enumerate().map(|(i, w)| w + bias[i % n] as f64).collect();
                let want_onto: Vec<f64> = want.iter().zip(&onto).map(|(w, &o)| w + o as f64).collect();
                // Split over k: the long k only.
                for split in if k == 300 { vec![Some(3)] } else { vec![None] } {
                    let what = format!("{setting} {dims:?} split {split:?}");
                    let x = x.with_matmul_split_k(split);
                    let (ua, ub, ubias, uonto) =
                        (x.upload(&a), x.upload(&b), x.upload(&bias), x.upload(&onto));
                    tol.assert_close(
                        &what,
                        &read(&x, &x.matmul(&ua, &ub, dims, MatmulFused::none()).out),
                        &want,
                    );
                    let with_bias = read(&x, &x.matmul(&ua, &ub, dims, MatmulFused::bias(Some(&ubias))).out);
                    tol.assert_close(&format!("{what} with bias"), &with_bias, &want_bias);
                    let on = read(
                        &x,
                        &x.matmul(
                            &ua,
                            &ub,
                            dims,
                            MatmulFused { onto: Some(&uonto), ..MatmulFused::bias(None) },
                        )
                        .out,
                    );
                    tol.assert_close(&format!("{what} onto"), &on, &want_onto);
                }
            }
        }
        if setting != "emulate" {
            continue;
        }
        let dims = AttentionDims { batch: 2, seq: 17, heads: 2, head_dim: 8, dropout: None, cache: None };
        let len = dims.batch * dims.seq * dims.channels();
        let (q, k, v) = (normal(&mut rng, len), normal(&mut rng, len), normal(&mut rng, len));
        let f32 = WgpuBackend::new().unwrap();
        let out = |be: &WgpuBackend| {
            read(
                be,
                &be.attention(&be.upload(&q), &be.upload(&k), &be.upload(&v), dims, AttentionKeep::Probs).out,
            )
        };
        let (got, f) = (out(&x), out(&f32));
        let worst = got.iter().zip(&f).map(|(a, b)| (a - b).abs()).fold(0f32, f32::max);
        assert!(worst < 1e-2, "{setting}: attention differs from f32 by {worst}");
    }
}

/// Forced where the adapter has no cooperative matrices, the kernel fails to compile; the
/// start-up self-test catches it and the backend runs shader-f16, saying why, and its
/// device has no error left over.
#[test]
fn a_cooperative_matrix_kernel_that_fails_its_self_test_falls_back_to_shader_f16() {
    let Some(x) = mixed_with("force") else { return };
    let report = x.matmul_precision();
    eprintln!("force on {}: {report}", x.adapter().name);
    if report.kernels == MatmulKernels::CooperativeMatrix {
        eprintln!("skipped: {} runs cooperative matrices (its self-test passed)", x.adapter().name);
        return;
    }
    assert_eq!(report.kernels, MatmulKernels::ShaderF16, "{report}");
    assert!(
        report.reason.contains("the cooperative-matrix matmul failed its start-up self-test (a GPU error"),
        "{report}"
    );
    let dims = MatmulDims { m: 3, k: 2, n: 2, trans_a: false, trans_b: false };
    let (a, b) = (x.upload(&[1.0, 2.0, 3.0, 4.0, 5.0, 6.0]), x.upload(&[1.0, 0.0, 0.0, 1.0]));
    assert_eq!(
        read(&x, &x.matmul(&a, &b, dims, MatmulFused::none()).out),
        vec![1.0, 2.0, 3.0, 4.0, 5.0, 6.0]
    );
}

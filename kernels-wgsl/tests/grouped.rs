//! The conformance checks of `matmul_many` and `matmul_sum` with groups launched as one
//! dispatch (`WgpuBackend::with_grouped_matmuls`, off by default), on each matmul kernel:
//! tiled, direct, and tiled with every product split over k.

use tinygpt_kernels_wgsl::testing::shared_backend;
use tinygpt_kernels_wgsl::{MatmulPath, WgpuBackend};
use tinygpt_tensor::{block_on, conformance::checks};

fn each_path(check: impl Fn(&WgpuBackend)) {
    let Some(backend) = shared_backend() else { return };
    let grouped = backend.with_grouped_matmuls(true);
    check(&grouped.with_matmul_path(MatmulPath::Tiled));
    check(&grouped.with_matmul_path(MatmulPath::Direct));
    check(&grouped.with_matmul_path(MatmulPath::Tiled).with_matmul_split_k(Some(3)));
}

#[test]
fn matmul_many_grouped() {
    each_path(|b| block_on(checks::matmul_many(b)));
}

#[test]
fn matmul_sum_grouped() {
    each_path(|b| block_on(checks::matmul_sum(b)));
}

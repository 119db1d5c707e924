//! The backend conformance kit (`tinygpt_tensor::conformance`) on the wgpu backend, on
//! whatever adapter the machine has (Mesa's lavapipe in CI; see `testing.rs`), with the
//! adapter's default matmul kernel, with each one forced, with every tiled product
//! split over k (see `with_matmul_split_k`). Each test returns early,
//! passing, only when there is no adapter and `TINYGPT_ALLOW_NO_GPU=1`.

use tinygpt_kernels_wgsl::testing::shared_backend;
use tinygpt_kernels_wgsl::MatmulPath;

mod default_matmul {
    use super::*;
    tinygpt_tensor::backend_conformance_tests!(match shared_backend() {
        Some(backend) => backend,
        None => return,
    });
}

mod tiled_matmul {
    use super::*;
    tinygpt_tensor::backend_conformance_tests!(match shared_backend() {
        Some(backend) => backend.with_matmul_path(MatmulPath::Tiled),
        None => return,
    });
}

mod direct_matmul {
    use super::*;
    tinygpt_tensor::backend_conformance_tests!(match shared_backend() {
        Some(backend) => backend.with_matmul_path(MatmulPath::Direct),
        None => return,
    });
}

mod split_matmul {
    use super::*;
    tinygpt_tensor::backend_conformance_tests!(match shared_backend() {
        Some(backend) => backend.with_matmul_path(MatmulPath::Tiled).with_matmul_split_k(Some(3)),
        None => return,
    });
}

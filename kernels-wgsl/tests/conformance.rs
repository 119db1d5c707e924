//! The backend conformance kit (`tinygpt_tensor::conformance`) on the wgpu backend, on
//! whatever adapter the machine has (Mesa's lavapipe in CI; see `testing.rs`), with the
//! adapter's default matmul kernel, with each one forced, with every tiled product
//! split over k (see `with_matmul_split_k`); then all of that again on `mixed` precision
//! (the matmul's inputs rounded to f16). Each test returns early,
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

/// The whole kit on `mixed` (f16 inputs, f32 accumulation) with the adapter's default
/// matmul kernel, within the kit's mixed tolerances (`Tolerance::products`). On lavapipe,
/// which offers `shader-f16`, the mixed matmul must have been chosen: a fallback to f32
/// would pass the kit without testing it. Where the adapter offers subgroups (lavapipe:
/// subgroups of 8) the row reductions (softmax, LayerNorm, cross-entropy) must run on them,
/// for the same reason. They add the same terms in another order (a butterfly within each
/// subgroup, then the subgroups' sums), which moves a sum by a few ulps of its terms'
/// magnitudes: far inside the mixed tolerances, which the f16 products set, so the kit's
/// own tolerances stand.
mod mixed {
    use tinygpt_kernels_wgsl::{MatmulKernels, RowReductions};

    pub(super) fn mixed_backend() -> Option<tinygpt_kernels_wgsl::WgpuBackend> {
        let backend = tinygpt_kernels_wgsl::testing::shared_backend_with(tinygpt_tensor::Precision::Mixed)?;
        if backend.adapter().shader_f16 {
            let chosen = backend.matmul_precision();
            // (shader-f16, or cooperative matrices where the adapter offers them.)
            assert_ne!(chosen.kernels, MatmulKernels::F32, "{chosen}");
            if backend.adapter().subgroups {
                assert_eq!(backend.row_reductions(), RowReductions::Subgroup);
            }
        }
        Some(backend)
    }

    tinygpt_tensor::backend_conformance_tests!(precision: Mixed => match mixed_backend() {
        Some(backend) => backend,
        None => return,
    });
}

/// The kit on `mixed` with the tiled kernel (vec4 stages, causal skips, row sums), and
/// flash attention for every training attention pair (by default it runs only where the
/// unfused pair cannot, so the `mixed` kit above checks the unfused one).
mod mixed_tiled {
    use super::*;
    use tinygpt_kernels_wgsl::FlashAttention;
    tinygpt_tensor::backend_conformance_tests!(precision: Mixed => match mixed::mixed_backend() {
        Some(backend) => backend.with_matmul_path(MatmulPath::Tiled).with_flash_attention(FlashAttention::Always),
        None => return,
    });
}

/// The kit on `mixed` with every tiled product split over k.
mod mixed_split {
    use super::*;
    tinygpt_tensor::backend_conformance_tests!(precision: Mixed => match mixed::mixed_backend() {
        Some(backend) => backend.with_matmul_path(MatmulPath::Tiled).with_matmul_split_k(Some(3)),
        None => return,
    });
}

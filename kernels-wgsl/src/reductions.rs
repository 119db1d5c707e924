//! The row reductions of the softmax, LayerNorm and cross-entropy kernels, in one of two
//! implementations chosen when the backend opens and spliced in front of those kernels
//! as their defines (see `pipelines.rs`):
//!
//! - [`RowReductions::Workgroup`]: workgroup memory (`block_reduce.wgsl`,
//!   `lane_reduce.wgsl`). Always on `f32`, whose results it pins bit for bit, and in the
//!   browser, where wgpu does not map subgroups yet.
//! - [`RowReductions::Subgroup`]: subgroup shuffles within a subgroup, then one barrier
//!   across the subgroups (`subgroup_reduce.wgsl`). Natively, on `mixed` precision, where
//!   the device has `subgroups` and the adapter's subgroup sizes lie in 4..=128.
//!
//! Both keep one contract per shape (`block_sum`/`block_max` over a 64-invocation row,
//! `lane_sum`/`lane_sums2` over LayerNorm's 32-lane rows); the kernels do not know which
//! one they get. They differ only in the order of the additions.
//!
//! The subgroup kernels number their invocations by subgroup (`subgroup_id` ·
//! `subgroup_size` + `subgroup_invocation_id`), not by `local_invocation_index`, so they do
//! not depend on how a driver forms subgroups; they do assume full subgroups, which
//! workgroups of 64 and 256 (multiples of every size in 4..=128) get on the drivers we
//! know. Tested against the workgroup path in `tests/subgroup_rows.rs` and by the
//! conformance kit on `mixed`, on lavapipe's subgroups of 8; sizes above a row's width
//! (LayerNorm's 32 lanes on subgroups of 64 or 128) have not run on a device here.

/// Which implementation the row reductions (softmax, LayerNorm, cross-entropy) run.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RowReductions {
    /// Workgroup memory and barriers.
    Workgroup,
    /// Subgroup operations, then a workgroup array with a slot per subgroup.
    Subgroup,
}

const WORKGROUP_BLOCK: &str =
    concat!(include_str!("shaders/lanes.wgsl"), include_str!("shaders/block_reduce.wgsl"));
const WORKGROUP_LANES: &str =
    concat!(include_str!("shaders/lanes.wgsl"), include_str!("shaders/lane_reduce.wgsl"));
const SUBGROUP_BLOCK: &str =
    concat!(include_str!("shaders/subgroup_reduce.wgsl"), include_str!("shaders/subgroup_block.wgsl"));
const SUBGROUP_LANES: &str =
    concat!(include_str!("shaders/subgroup_reduce.wgsl"), include_str!("shaders/subgroup_lanes.wgsl"));

/// Subgroup sizes `subgroup_reduce.wgsl` handles: its slot array holds 256 / 4 subgroups,
/// and 128 is wgpu's largest.
const SUBGROUP_SIZES: std::ops::RangeInclusive<u32> = 4..=128;

impl RowReductions {
    /// Whether a device opened for `precision` on this adapter should ask for `subgroups`
    /// for the row reductions: natively, for mixed precision, where the adapter offers
    /// them at sizes `subgroup_reduce.wgsl` handles.
    pub(crate) fn wanted(precision: tinygpt_tensor::Precision, adapter: &wgpu::Adapter) -> bool {
        let info = adapter.get_info();
        cfg!(not(target_arch = "wasm32"))
            && precision == tinygpt_tensor::Precision::Mixed
            && adapter.features().contains(wgpu::Features::SUBGROUP)
            && SUBGROUP_SIZES.contains(&info.subgroup_min_size)
            && SUBGROUP_SIZES.contains(&info.subgroup_max_size)
    }

    /// `block_sum` and `block_max` (`BLOCK` = 64 invocations, one row per workgroup), with
    /// the `Lanes` that the kernel's entry point takes.
    pub(crate) fn block(self) -> &'static str {
        match self {
            RowReductions::Workgroup => WORKGROUP_BLOCK,
            RowReductions::Subgroup => SUBGROUP_BLOCK,
        }
    }

    /// `lane_sum` and `lane_sums2` (`LANES` invocations per row, `ROWS` rows per
    /// workgroup), with `Lanes`.
    pub(crate) fn lanes(self) -> &'static str {
        match self {
            RowReductions::Workgroup => WORKGROUP_LANES,
            RowReductions::Subgroup => SUBGROUP_LANES,
        }
    }
}

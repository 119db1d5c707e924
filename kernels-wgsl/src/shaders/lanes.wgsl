// How the row kernels number their invocations, for the workgroup-memory reductions
// (block_reduce.wgsl, lane_reduce.wgsl): by `local_invocation_index`. The subgroup
// reductions (subgroup_reduce.wgsl) declare the same `Lanes` and `lane_index` with a
// numbering of their own. A row kernel's entry point takes `Lanes` and calls `lane_index`
// once, first.
struct Lanes {
    @builtin(local_invocation_index) lid: u32,
}

fn lane_index(l: Lanes) -> u32 {
    return l.lid;
}

// block_reduce.wgsl's contract (one BLOCK-invocation row per workgroup) on
// subgroup_reduce.wgsl.
const BLOCK: u32 = 64u;

fn block_sum(lid: u32, v: f32) -> f32 {
    return group_sum(BLOCK, v);
}

fn block_max(lid: u32, v: f32) -> f32 {
    return group_max(BLOCK, v);
}

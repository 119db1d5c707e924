// lane_reduce.wgsl's contract (rows of LANES invocations) on subgroup_reduce.wgsl.
fn lane_sum(half: u32, row_in_group: u32, lane: u32, v: f32) -> f32 {
    return group_sum(LANES, v);
}

fn lane_sums2(row_in_group: u32, lane: u32, v: f32, w: f32) -> vec2<f32> {
    return group_sum2(LANES, vec2<f32>(v, w));
}

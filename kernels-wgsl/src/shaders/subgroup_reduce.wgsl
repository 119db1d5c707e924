// The row reductions on subgroups: `block_sum`/`block_max` (block_reduce.wgsl's contract)
// and `lane_sum`/`lane_sums2` (lane_reduce.wgsl's), chosen for Precision::Mixed on native
// devices with `subgroups` (see reductions.rs); f32 keeps the workgroup-memory ones, whose
// order of additions it is pinned to. Every invocation of the workgroup calls them in
// uniform control flow, after `lane_index`. (Naga, which compiles them natively, takes the
// subgroup builtins without WGSL's `enable subgroups;`, and refuses that directive.)
//
// Lanes are numbered subgroup by subgroup (subgroup_id · subgroup_size +
// subgroup_invocation_id), so a group of `width` consecutive lanes is whole subgroups or
// lies inside one whatever order the driver forms subgroups in. The subgroup size is known
// only when the kernel runs: a power of two from 4 to 128 (the host checks the adapter's
// range); widths are powers of two. Within a subgroup an xor butterfly (every lane ends
// with the same value: each step adds the same two numbers on both sides); across the
// subgroups of a group one barrier, through one slot per subgroup.

struct Lanes {
    @builtin(subgroup_invocation_id) sg_lane: u32,
    @builtin(subgroup_size) sg_size: u32,
    @builtin(subgroup_id) sg_id: u32,
}

var<private> lanes: Lanes;

fn lane_index(l: Lanes) -> u32 {
    lanes = l;
    return l.sg_id * l.sg_size + l.sg_lane;
}

// One slot per subgroup: 256-invocation workgroups of subgroups of 4 or more.
var<workgroup> subgroup_parts: array<vec2<f32>, 64>;

// v summed over each aligned group of `width` lanes; every lane of the group gets it.
fn group_sum2(width: u32, v: vec2<f32>) -> vec2<f32> {
    var s = v;
    for (var o = 1u; o < min(width, lanes.sg_size); o <<= 1u) {
        s += subgroupShuffleXor(s, o);
    }
    if (lanes.sg_lane == 0u) {
        subgroup_parts[lanes.sg_id] = s;
    }
    workgroupBarrier();
    let per = max(width / lanes.sg_size, 1u);
    let first = lanes.sg_id / per * per;
    var acc = vec2<f32>(0.0);
    for (var i = 0u; i < per; i++) {
        acc += subgroup_parts[first + i];
    }
    workgroupBarrier();
    return select(acc, s, width < lanes.sg_size);
}

fn group_sum(width: u32, v: f32) -> f32 {
    return group_sum2(width, vec2<f32>(v, 0.0)).x;
}

fn group_max(width: u32, v: f32) -> f32 {
    var m = v;
    for (var o = 1u; o < min(width, lanes.sg_size); o <<= 1u) {
        m = max(m, subgroupShuffleXor(m, o));
    }
    if (lanes.sg_lane == 0u) {
        subgroup_parts[lanes.sg_id] = vec2<f32>(m, 0.0);
    }
    workgroupBarrier();
    let per = max(width / lanes.sg_size, 1u);
    let first = lanes.sg_id / per * per;
    var acc = subgroup_parts[first].x;
    for (var i = 1u; i < per; i++) {
        acc = max(acc, subgroup_parts[first + i].x);
    }
    workgroupBarrier();
    return select(acc, m, width < lanes.sg_size);
}

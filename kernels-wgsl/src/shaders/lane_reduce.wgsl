// Sums over each row's LANES invocations for the kernels that give a workgroup ROWS rows
// (layernorm.wgsl), in workgroup memory; subgroup_reduce.wgsl has the other implementation
// of `lane_sum` and `lane_sums2`.
//
// Each row's LANES invocations share out a sum by writing their parts to half `half` of
// row_scratch and, after one barrier, each reading all of its row's parts (the same address
// across the row: a broadcast) and adding them in lane order, so every invocation holds
// the same sum. Every invocation of the workgroup calls these in uniform control flow; a
// kernel's second sum uses the other half.

// Two halves, so that a kernel's second sum needs no barrier after its first.
var<workgroup> row_scratch: array<f32, 512>;

fn lane_sum(half: u32, row_in_group: u32, lane: u32, v: f32) -> f32 {
    let base = half * 256u + row_in_group * LANES;
    row_scratch[base + lane] = v;
    workgroupBarrier();
    var s = 0.0;
    for (var i = 0u; i < LANES; i++) {
        s += row_scratch[base + i];
    }
    return s;
}

// Two such sums behind one barrier, v's in half 0 and w's in half 1.
fn lane_sums2(row_in_group: u32, lane: u32, v: f32, w: f32) -> vec2<f32> {
    let base = row_in_group * LANES;
    row_scratch[base + lane] = v;
    row_scratch[256u + base + lane] = w;
    workgroupBarrier();
    var s = vec2<f32>(0.0);
    for (var i = 0u; i < LANES; i++) {
        s += vec2<f32>(row_scratch[base + i], row_scratch[256u + base + i]);
    }
    return s;
}

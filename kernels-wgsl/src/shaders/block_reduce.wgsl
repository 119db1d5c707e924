// Workgroup-wide reductions for BLOCK-invocation workgroups. Every invocation of the
// workgroup must call them, in uniform control flow; each gets the result.
//
// Invocation 0 combines the BLOCK values in index order: three barriers in all, where a
// tree needs two per level. Barriers are what a software adapter (lavapipe) pays for
// most, and a 64-value serial sum costs a GPU well under a microsecond.

const BLOCK: u32 = 64u;
var<workgroup> block_scratch: array<f32, 64>;

fn block_sum(lid: u32, v: f32) -> f32 {
    block_scratch[lid] = v;
    workgroupBarrier();
    if (lid == 0u) {
        var acc = 0.0;
        for (var i = 0u; i < BLOCK; i++) {
            acc += block_scratch[i];
        }
        block_scratch[0] = acc;
    }
    workgroupBarrier();
    let r = block_scratch[0];
    workgroupBarrier();
    return r;
}

fn block_max(lid: u32, v: f32) -> f32 {
    block_scratch[lid] = v;
    workgroupBarrier();
    if (lid == 0u) {
        var acc = block_scratch[0];
        for (var i = 1u; i < BLOCK; i++) {
            acc = max(acc, block_scratch[i]);
        }
        block_scratch[0] = acc;
    }
    workgroupBarrier();
    let r = block_scratch[0];
    workgroupBarrier();
    return r;
}

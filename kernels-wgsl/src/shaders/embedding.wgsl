// Embedding lookup and its scatter-add backward.
//
// embedding:          table [table_rows, dim], ids [n] -> out [n, dim]
// embedding_backward: dout [n, dim], ids [n] -> dtable [table_rows, dim]
//
// The backward pass is deterministic without atomics, in two launches: one workgroup per
// table row lists the positions i with ids[i] == r in ascending order (a scratch
// [table_rows, n + 1] u32 buffer), then 16 invocations per table element (r, j) add
// dout[i, j] over its row's list (see embedding_backward): n·dim loads in all.

struct Params {
    n: u32,
    dim: u32,
    table_rows: u32,
}

@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<storage, read> table: array<f32>;
@group(0) @binding(2) var<storage, read> ids: array<u32>;
@group(0) @binding(3) var<storage, read_write> out: array<f32>;
@group(0) @binding(4) var<storage, read> dout: array<f32>;
@group(0) @binding(5) var<storage, read_write> lists: array<u32>;

const WG: u32 = 256u;

@compute @workgroup_size(256)
fn embedding(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
             @builtin(local_invocation_index) lid: u32) {
    let idx = flat_group(wid, nwg) * WG + lid;
    if (idx < p.n * p.dim) {
        let i = idx / p.dim;
        let j = idx % p.dim;
        out[idx] = table[ids[i] * p.dim + j];
    }
}

// For table row r: lists[r·(n+1)] = how many ids equal r, then their positions, ascending.
// One 64-invocation workgroup per table row: invocation l scans the l-th of 64 equal
// segments of ids and counts its matches; the counts of the invocations before it (summed
// in order) give its first slot, and it writes its matches from there in ascending order.
var<workgroup> counts: array<u32, 64>;

@compute @workgroup_size(64)
fn embedding_positions(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
                       @builtin(local_invocation_index) lid: u32) {
    let r = flat_group(wid, nwg);
    let live = r < p.table_rows;
    let segment = (p.n + 63u) / 64u;
    let begin = min(lid * segment, p.n);
    let end = min(begin + segment, p.n);
    var count = 0u;
    if (live) {
        for (var i = begin; i < end; i++) {
            if (ids[i] == r) {
                count++;
            }
        }
    }
    counts[lid] = count;
    workgroupBarrier();
    var before = 0u;
    for (var j = 0u; j < lid; j++) {
        before += counts[j];
    }
    if (live) {
        let base = r * (p.n + 1u);
        var slot = base + 1u + before;
        for (var i = begin; i < end; i++) {
            if (ids[i] == r) {
                lists[slot] = i;
                slot++;
            }
        }
        if (lid == 63u) {
            lists[base] = before + count;
        }
    }
}

// A workgroup owns 16 columns of one table row; its 16 lanes of 16 invocations each add
// every 16th entry of the row's list (ascending), then the lane sums are added in lane
// order: a frequent byte (a space: thousands of positions) is not one long dependent loop.
const LANES: u32 = 16u;

var<workgroup> lane_sums: array<f32, 256>;

@compute @workgroup_size(16, 16)
fn embedding_backward(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
                      @builtin(local_invocation_id) l: vec3<u32>) {
    let blocks = (p.dim + 15u) / 16u;
    let g = flat_group(wid, nwg);
    let r = g / blocks;
    let j = (g % blocks) * 16u + l.x;
    let live = r < p.table_rows && j < p.dim;
    var acc = 0.0;
    if (live) {
        let base = r * (p.n + 1u);
        for (var t = 1u + l.y; t <= lists[base]; t += LANES) {
            acc += dout[lists[base + t] * p.dim + j];
        }
    }
    lane_sums[l.y * 16u + l.x] = acc;
    workgroupBarrier();
    if (live && l.y == 0u) {
        var sum = lane_sums[l.x];
        for (var lane = 1u; lane < LANES; lane++) {
            sum += lane_sums[lane * 16u + l.x];
        }
        out[r * p.dim + j] = sum;
    }
}

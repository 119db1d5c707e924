// Embedding lookup and its scatter-add backward.
//
// embedding:          table [table_rows, dim], ids [n] -> out [n, dim]
// embedding_backward: dout [n, dim], ids [n] -> dtable [table_rows, dim]
//
// The backward pass is deterministic without atomics, in two launches: one invocation per
// table row lists the positions i with ids[i] == r in ascending order (a scratch
// [table_rows, n + 1] u32 buffer), then one invocation per table element (r, j) adds
// dout[i, j] over its row's list: the CPU reference's order, and n·dim loads in all.

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
@compute @workgroup_size(64)
fn embedding_positions(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
                       @builtin(local_invocation_index) lid: u32) {
    let r = flat_group(wid, nwg) * 64u + lid;
    if (r >= p.table_rows) {
        return;
    }
    let base = r * (p.n + 1u);
    var count = 0u;
    for (var i = 0u; i < p.n; i++) {
        if (ids[i] == r) {
            count++;
            lists[base + count] = i;
        }
    }
    lists[base] = count;
}

@compute @workgroup_size(256)
fn embedding_backward(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
                      @builtin(local_invocation_index) lid: u32) {
    let idx = flat_group(wid, nwg) * WG + lid;
    if (idx >= p.table_rows * p.dim) {
        return;
    }
    let r = idx / p.dim;
    let j = idx % p.dim;
    let base = r * (p.n + 1u);
    var acc = 0.0;
    for (var t = 1u; t <= lists[base]; t++) {
        acc += dout[lists[base + t] * p.dim + j];
    }
    out[idx] = acc;
}

// Sums for the global gradient norm and the mean cross-entropy.
//
// sum_chunks: x [len] -> out [ceil(len / chunk)], out[g] = scale · Σ f(x[i]) over
//             chunk g, where f(v) = v² with `square` set, else v.
//
// Each workgroup owns one fixed chunk; its invocations stride through it and their
// partial sums are combined in order (see block_reduce.wgsl). Chunks depend on `len` alone, so
// the order of additions never changes. Long inputs take two launches: chunk sums, then
// the sum of those.

struct Params {
    len: u32,
    chunk: u32,
    square: u32,
    scale: f32,
}

@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<storage, read> x: array<f32>;
@group(0) @binding(2) var<storage, read_write> out: array<f32>;

@compute @workgroup_size(64)
fn sum_chunks(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
              @builtin(local_invocation_index) lid: u32) {
    let g = flat_group(wid, nwg);
    let start = g * p.chunk;
    let end = min(start + p.chunk, p.len);
    var acc = 0.0;
    for (var i = start + lid; i < end; i += BLOCK) {
        let v = x[i];
        acc += select(v, v * v, p.square != 0u);
    }
    let total = block_sum(lid, acc);
    if (lid == 0u && start < p.len) {
        out[g] = p.scale * total;
    }
}

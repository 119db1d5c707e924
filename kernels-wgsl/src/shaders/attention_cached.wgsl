// Attention of new positions against a key/value cache (incremental decoding).
//
// attention_cached: q [rows, C], k_cache, v_cache [capacity, C] -> out [rows, C];
//                   scores [rows·H, capacity] is scratch.
//
// One 64-invocation workgroup per (row r, head h) (flat group g = r·H + h). Row r is
// position t = past + r and attends to cache rows u <= t:
//   s_u = scale · q_r·k_u (head h's columns), P_u = exp(s_u − max) / Σ_{u' <= t} exp(s_u' − max),
//   out[r, h] = Σ_u P_u · v_u.
// The scores are written once (invocations stride over u), the max and the sum combined
// in invocation order (block_reduce.wgsl), then each invocation owns output columns
// d = lid, lid + 64, … and sums over u in ascending order.

struct Params {
    rows: u32,
    past: u32,
    heads: u32,
    head_dim: u32,
    capacity: u32,
    scale: f32,
}

@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<storage, read> q: array<f32>;
@group(0) @binding(2) var<storage, read> k_cache: array<f32>;
@group(0) @binding(3) var<storage, read> v_cache: array<f32>;
@group(0) @binding(4) var<storage, read_write> out: array<f32>;
@group(0) @binding(5) var<storage, read_write> scores: array<f32>;

@compute @workgroup_size(64)
fn attention_cached(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
                    @builtin(local_invocation_index) lid: u32) {
    let g = flat_group(wid, nwg);
    let live = g < p.rows * p.heads;
    let r = g / p.heads;
    let c = p.heads * p.head_dim;
    let col = (g % p.heads) * p.head_dim;
    let t = p.past + r;
    let base = g * p.capacity;

    var mx = -3.4e38;
    if (live) {
        for (var u = lid; u <= t; u += BLOCK) {
            var s = 0.0;
            for (var d = 0u; d < p.head_dim; d++) {
                s += q[r * c + col + d] * k_cache[u * c + col + d];
            }
            s *= p.scale;
            scores[base + u] = s;
            mx = max(mx, s);
        }
    }
    mx = block_max(lid, mx);
    var sum = 0.0;
    if (live) {
        for (var u = lid; u <= t; u += BLOCK) {
            let e = exp(scores[base + u] - mx);
            scores[base + u] = e;
            sum += e;
        }
    }
    let inv = 1.0 / block_sum(lid, sum);
    storageBarrier();
    if (live) {
        for (var d = lid; d < p.head_dim; d += BLOCK) {
            var acc = 0.0;
            for (var u = 0u; u <= t; u++) {
                acc += scores[base + u] * inv * v_cache[u * c + col + d];
            }
            out[r * c + col + d] = acc;
        }
    }
}

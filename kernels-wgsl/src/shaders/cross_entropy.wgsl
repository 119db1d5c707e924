// Softmax cross-entropy.
//
// cross_entropy_rows:     logits [rows, V], targets [rows] -> losses [rows]
//                         (their mean is taken by reduce.wgsl)
// cross_entropy_backward: logits, targets, dloss [1] -> dlogits [rows, V]
//
// loss_r = log Σ exp(x - max) - (x[target] - max);
// dlogits[r] = dloss (softmax(logits[r]) - onehot(targets[r])) / rows.
// One workgroup per row. `block_sum`/`block_max` and the `Lanes` the entry points take come
// from the host's defines: block_reduce.wgsl, or subgroup_reduce.wgsl for mixed precision
// (see reductions.rs).

struct Params {
    rows: u32,
    vocab: u32,
}

@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<storage, read> logits: array<f32>;
@group(0) @binding(2) var<storage, read> targets: array<u32>;
@group(0) @binding(3) var<storage, read_write> out: array<f32>;
@group(0) @binding(4) var<storage, read> dloss: array<f32>;

struct RowNorm {
    max: f32,
    sum: f32,
}

fn row_norm(lid: u32, base: u32, live: bool) -> RowNorm {
    var mx = -3.4e38;
    if (live) {
        for (var j = lid; j < p.vocab; j += BLOCK) {
            mx = max(mx, logits[base + j]);
        }
    }
    mx = block_max(lid, mx);
    var sum = 0.0;
    if (live) {
        for (var j = lid; j < p.vocab; j += BLOCK) {
            sum += exp(logits[base + j] - mx);
        }
    }
    return RowNorm(mx, block_sum(lid, sum));
}

@compute @workgroup_size(64)
fn cross_entropy_rows(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
                      inv: Lanes) {
    let lid = lane_index(inv);
    let r = flat_group(wid, nwg);
    let live = r < p.rows;
    let base = r * p.vocab;
    let norm = row_norm(lid, base, live);
    if (live && lid == 0u) {
        out[r] = log(norm.sum) - (logits[base + targets[r]] - norm.max);
    }
}

@compute @workgroup_size(64)
fn cross_entropy_backward(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
                          inv: Lanes) {
    let lid = lane_index(inv);
    let r = flat_group(wid, nwg);
    let live = r < p.rows;
    let base = r * p.vocab;
    let norm = row_norm(lid, base, live);
    if (live) {
        let scale = dloss[0] / f32(p.rows);
        let inv_sum = 1.0 / norm.sum;
        let tgt = targets[r];
        for (var j = lid; j < p.vocab; j += BLOCK) {
            let g = exp(logits[base + j] - norm.max) * inv_sum * scale;
            out[base + j] = select(g, g - scale, j == tgt);
        }
    }
}

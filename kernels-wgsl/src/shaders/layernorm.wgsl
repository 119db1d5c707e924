// LayerNorm over the last dimension.
//
// layer_norm:          x [rows, dim], gamma, beta [dim] -> out [rows, dim], mean, rstd [rows]
// layer_norm_dx:       dout, x [rows, dim], gamma, mean, rstd (, onto) -> dx [rows, dim]
// layer_norm_dparams:  dout, x, mean, rstd -> dgamma, dbeta [chunks, dim] (chunk sums)
//
// The row passes take ROWS rows per workgroup, LANES invocations per row (two-pass
// statistics: the mean, then the biased variance around it; each sum is LANES
// per-invocation sums, of every LANES-th column, added in lane order on f32; on subgroups
// for mixed precision, see reductions.rs). xhat =
// (x - mean) · rstd always uses the saved f32 mean and rstd. With dxhat = dout · gamma:
// dx = rstd (dxhat - mean(dxhat) - xhat · mean(dxhat · xhat)).
// The host's last part gives `dx_onto(i, v)`: v, or onto[i] + v (binding 11) for
// layer_norm_backward with onto (dx added onto the gradient x already has, as `add` would).
// dgamma and dbeta are column sums made like sum_rows.wgsl's: per chunk of CHUNK rows
// (64 columns × 4 row lanes per workgroup), then, when there are several chunks, added up
// by its sum_row_chunks.

struct Params {
    rows: u32,
    dim: u32,
    eps: f32,
}

@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<storage, read> x: array<f32>;
@group(0) @binding(2) var<storage, read> gamma: array<f32>;
@group(0) @binding(3) var<storage, read> beta: array<f32>;
@group(0) @binding(4) var<storage, read_write> out: array<f32>;
@group(0) @binding(5) var<storage, read_write> mean: array<f32>;
@group(0) @binding(6) var<storage, read_write> rstd: array<f32>;
@group(0) @binding(7) var<storage, read> dout: array<f32>;
@group(0) @binding(8) var<storage, read> saved_mean: array<f32>;
@group(0) @binding(9) var<storage, read> saved_rstd: array<f32>;
@group(0) @binding(10) var<storage, read_write> dbeta: array<f32>;

// Rows per workgroup in the row passes, and invocations per row (a warp on most GPUs).
// Their sums, `lane_sum` and `lane_sums2`, come from the host's defines: lane_reduce.wgsl
// (workgroup memory) or subgroup_reduce.wgsl (see reductions.rs).
const ROWS: u32 = 8u;
const LANES: u32 = 32u;
// ROWS rows per workgroup, LANES invocations per row; lane l sums columns l, l + LANES, …
// in order, then the lanes' sums are added in lane order.
@compute @workgroup_size(256)
fn layer_norm(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
              inv: Lanes) {
    let lid = lane_index(inv);
    let in_group = lid / LANES;
    let lane = lid % LANES;
    let row = flat_group(wid, nwg) * ROWS + in_group;
    let live = row < p.rows;
    let base = row * p.dim;
    var s = 0.0;
    if (live) {
        for (var j = lane; j < p.dim; j += LANES) {
            s += x[base + j];
        }
    }
    let mu = lane_sum(0u, in_group, lane, s) / f32(p.dim);
    var s2 = 0.0;
    if (live) {
        for (var j = lane; j < p.dim; j += LANES) {
            let d = x[base + j] - mu;
            s2 += d * d;
        }
    }
    let var_ = lane_sum(1u, in_group, lane, s2) / f32(p.dim);
    let r = 1.0 / sqrt(var_ + p.eps);
    if (live) {
        for (var j = lane; j < p.dim; j += LANES) {
            out[base + j] = (x[base + j] - mu) * r * gamma[j] + beta[j];
        }
        if (lane == 0u) {
            mean[row] = mu;
            rstd[row] = r;
        }
    }
}

@compute @workgroup_size(256)
fn layer_norm_dx(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
                 inv: Lanes) {
    let lid = lane_index(inv);
    let in_group = lid / LANES;
    let lane = lid % LANES;
    let row = flat_group(wid, nwg) * ROWS + in_group;
    let live = row < p.rows;
    let base = row * p.dim;
    var mu = 0.0;
    var r = 0.0;
    if (live) {
        mu = saved_mean[row];
        r = saved_rstd[row];
    }
    var s = 0.0;
    var sx = 0.0;
    if (live) {
        for (var j = lane; j < p.dim; j += LANES) {
            let dxhat = dout[base + j] * gamma[j];
            s += dxhat;
            sx += dxhat * (x[base + j] - mu) * r;
        }
    }
    let sums = lane_sums2(in_group, lane, s, sx) / f32(p.dim);
    let mean_dxhat = sums.x;
    let mean_dxhat_xhat = sums.y;
    if (live) {
        for (var j = lane; j < p.dim; j += LANES) {
            let xhat = (x[base + j] - mu) * r;
            out[base + j] = dx_onto(base + j, r * (dout[base + j] * gamma[j] - mean_dxhat - xhat * mean_dxhat_xhat));
        }
    }
}

const CHUNK: u32 = 64u;
var<workgroup> partial_g: array<f32, 256>;
var<workgroup> partial_b: array<f32, 256>;

// dgamma's chunk sums go to `out`, dbeta's to `dbeta`; grid [columns / 64, chunks].
@compute @workgroup_size(64, 4)
fn layer_norm_dparams(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_id) l: vec3<u32>) {
    let col = wid.x * 64u + l.x;
    let chunk = wid.y;
    let end = min((chunk + 1u) * CHUNK, p.rows);
    var g = 0.0;
    var bsum = 0.0;
    if (col < p.dim) {
        for (var r = chunk * CHUNK + l.y; r < end; r += 4u) {
            let d = dout[r * p.dim + col];
            g += d * ((x[r * p.dim + col] - saved_mean[r]) * saved_rstd[r]);
            bsum += d;
        }
    }
    partial_g[l.y * 64u + l.x] = g;
    partial_b[l.y * 64u + l.x] = bsum;
    workgroupBarrier();
    if (l.y == 0u && col < p.dim) {
        let at = chunk * p.dim + col;
        out[at] = partial_g[l.x] + partial_g[64u + l.x] + partial_g[128u + l.x] + partial_g[192u + l.x];
        dbeta[at] = partial_b[l.x] + partial_b[64u + l.x] + partial_b[128u + l.x] + partial_b[192u + l.x];
    }
}

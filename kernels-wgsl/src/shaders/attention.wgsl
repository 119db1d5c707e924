// Causal multi-head self-attention: the row-wise parts. The products around them are
// batched matmuls (one batch per (batch, head); see `attention` in ops.rs and CAUSAL in
// matmul.wgsl):
//
//   forward:  S = q·kᵀ (per head, into probs)  ->  attention_softmax  ->  out = W·v
//   backward: dP' = dout·vᵀ (into ds)  ->  attention_softmax_backward  ->
//             dq = dS·k,  dk = dSᵀ·q,  dv = Wᵀ·dout
//
// attention_softmax:                  scores [B·H·T, T] -> probs (in place)
// attention_softmax_dropout:          the same, and dropped = P ⊙ D [B·H·T, T]
// attention_softmax_backward:         probs, dp [B·H·T, T] -> ds (in place over dp)
// attention_softmax_backward_dropout: the same, and dropped = P ⊙ D (for dv)
//
// Row t of a head (flat row g = (b·H + h)·T + t), scale = 1/sqrt(hd), element
// i = g·T + u (its index in probs):
//   P[t, u] = exp(scale·S[t, u] − max) / Σ_{u' ≤ t} exp(scale·S[t, u'] − max) for u ≤ t,
//             0 above the diagonal (u > t; S there may be unwritten);
//   D[t, u] = dropout_factor(mask, i) (dropout_mask.wgsl; 1 without dropout), and the
//             weights W = P ⊙ D (W = P, probs itself, without dropout);
//   dP[t, u] = dP'[t, u] · D[t, u];
//   dS[t, u] = P[t, u] (dP[t, u] − Σ_{u' ≤ t} P[t, u'] dP[t, u']) · scale for u ≤ t, else 0.
// Zeros above the diagonal are written up to the end of the `block`-position block holding
// t (block = T: the whole row): the products after these kernels read no further (see
// `causal_block` in matmul.rs), and the rest of the row is left as it was.
// One 64-invocation workgroup per row; each invocation strides through the row, keeping
// its first CACHED values in registers between the passes, and the partial max and sums
// are combined in invocation order (block_reduce.wgsl), or on subgroups for mixed
// precision (subgroup_reduce.wgsl): the host's defines give `block_sum`/`block_max` and the
// `Lanes` the entry points take (see reductions.rs).

struct Params {
    rows: u32,
    seq: u32,
    scale: f32,
    drop_key0: u32,
    drop_key1: u32,
    drop_threshold: u32,
    drop_offset: u32,
    drop_scale: f32,
    drop_on: u32,
    block: u32,
}

@group(0) @binding(0) var<uniform> p: Params;
// Scores in, probabilities out (forward); dP' in, dS out (backward).
@group(0) @binding(1) var<storage, read_write> rows: array<f32>;
@group(0) @binding(2) var<storage, read> probs: array<f32>;
// P ⊙ D out (the dropout kernels): `store_dropped(i, v)` writes dropped[i] (binding 3)
// there and nothing in the others, whose layouts have no binding 3 (see ops.rs).

fn drop_mask() -> DropoutMask {
    return DropoutMask(p.drop_key0, p.drop_key1, p.drop_threshold, p.drop_offset, p.drop_scale, p.drop_on);
}

// Which row workgroup `wid` owns: its first element, its position t, whether it exists and
// the end of the values it writes (see `block` above).
struct Row {
    base: u32,
    t: u32,
    live: bool,
    end: u32,
}

fn row_of(wid: vec3<u32>, nwg: vec3<u32>) -> Row {
    let g = flat_group(wid, nwg);
    let t = g % p.seq;
    return Row(g * p.seq, t, g < p.rows, min(p.seq, (t / p.block + 1u) * p.block));
}

// Values per invocation kept in registers between a row's passes: rows of up to
// CACHED · BLOCK positions are read once; longer ones read the rest again per pass (`tail`).
const CACHED: u32 = 4u;

// The position of this invocation's cached value i.
fn cached_u(lid: u32, i: u32) -> u32 {
    return lid + i * BLOCK;
}

// Where the positions past the cached ones start (plus the invocation's index).
const TAIL: u32 = CACHED * BLOCK;

// Softmax of row r in place: P over u <= t, zeros after it (to r.end); with `drop`, also
// dropped = P ⊙ D. Every invocation calls it. Each invocation sums its positions in
// ascending order (cached ones, then the tail), as one strided loop would.
fn softmax_row(r: Row, lid: u32, drop: bool) {
    var x: array<f32, CACHED>;
    var mx = -3.4e38;
    for (var i = 0u; i < CACHED; i++) {
        let u = cached_u(lid, i);
        x[i] = -3.4e38;
        if (r.live && u <= r.t) {
            x[i] = rows[r.base + u] * p.scale;
        }
        mx = max(mx, x[i]);
    }
    if (r.live) {
        for (var u = lid + TAIL; u <= r.t; u += BLOCK) {
            mx = max(mx, rows[r.base + u] * p.scale);
        }
    }
    mx = block_max(lid, mx);
    var sum = 0.0;
    for (var i = 0u; i < CACHED; i++) {
        if (r.live && cached_u(lid, i) <= r.t) {
            x[i] = exp(x[i] - mx);
            sum += x[i];
        }
    }
    if (r.live) {
        for (var u = lid + TAIL; u <= r.t; u += BLOCK) {
            sum += exp(rows[r.base + u] * p.scale - mx);
        }
    }
    let inv = 1.0 / block_sum(lid, sum);
    if (!r.live) {
        return;
    }
    for (var i = 0u; i < CACHED; i++) {
        let u = cached_u(lid, i);
        if (u < r.end) {
            let pv = select(0.0, x[i] * inv, u <= r.t);
            rows[r.base + u] = pv;
            if (drop) {
                store_dropped(r.base + u, pv * dropout_factor(drop_mask(), r.base + u));
            }
        }
    }
    for (var u = lid + TAIL; u < r.end; u += BLOCK) {
        var pv = 0.0;
        if (u <= r.t) {
            pv = exp(rows[r.base + u] * p.scale - mx) * inv;
        }
        rows[r.base + u] = pv;
        if (drop) {
            store_dropped(r.base + u, pv * dropout_factor(drop_mask(), r.base + u));
        }
    }
}

// dS of row r in place over dP' (to r.end); with `drop`, D applied to dP' and dropped =
// P ⊙ D. Every invocation calls it; sums in the order of softmax_row.
fn softmax_backward_row(r: Row, lid: u32, drop: bool) {
    var dp: array<f32, CACHED>;
    var pr: array<f32, CACHED>;
    var f: array<f32, CACHED>;
    var weighted = 0.0;
    for (var i = 0u; i < CACHED; i++) {
        let u = cached_u(lid, i);
        dp[i] = 0.0;
        pr[i] = 0.0;
        f[i] = 1.0;
        if (r.live && u <= r.t) {
            if (drop) {
                f[i] = dropout_factor(drop_mask(), r.base + u);
            }
            dp[i] = rows[r.base + u] * f[i];
            pr[i] = probs[r.base + u];
            weighted += pr[i] * dp[i];
        }
    }
    if (r.live) {
        for (var u = lid + TAIL; u <= r.t; u += BLOCK) {
            var d = rows[r.base + u];
            if (drop) {
                d *= dropout_factor(drop_mask(), r.base + u);
            }
            weighted += probs[r.base + u] * d;
        }
    }
    weighted = block_sum(lid, weighted);
    if (!r.live) {
        return;
    }
    for (var i = 0u; i < CACHED; i++) {
        let u = cached_u(lid, i);
        if (u < r.end) {
            rows[r.base + u] = select(0.0, pr[i] * (dp[i] - weighted) * p.scale, u <= r.t);
            if (drop) {
                store_dropped(r.base + u, pr[i] * f[i]);
            }
        }
    }
    for (var u = lid + TAIL; u < r.end; u += BLOCK) {
        var d = 0.0;
        var w = 0.0;
        if (u <= r.t) {
            var factor = 1.0;
            if (drop) {
                factor = dropout_factor(drop_mask(), r.base + u);
            }
            let pu = probs[r.base + u];
            d = pu * (rows[r.base + u] * factor - weighted) * p.scale;
            w = pu * factor;
        }
        rows[r.base + u] = d;
        if (drop) {
            store_dropped(r.base + u, w);
        }
    }
}

@compute @workgroup_size(64)
fn attention_softmax(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
                     inv: Lanes) {
    let lid = lane_index(inv);
    softmax_row(row_of(wid, nwg), lid, false);
}

@compute @workgroup_size(64)
fn attention_softmax_dropout(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
                             inv: Lanes) {
    let lid = lane_index(inv);
    softmax_row(row_of(wid, nwg), lid, true);
}

@compute @workgroup_size(64)
fn attention_softmax_backward(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
                              inv: Lanes) {
    let lid = lane_index(inv);
    softmax_backward_row(row_of(wid, nwg), lid, false);
}

@compute @workgroup_size(64)
fn attention_softmax_backward_dropout(@builtin(workgroup_id) wid: vec3<u32>,
                                      @builtin(num_workgroups) nwg: vec3<u32>,
                                      inv: Lanes) {
    let lid = lane_index(inv);
    softmax_backward_row(row_of(wid, nwg), lid, true);
}
